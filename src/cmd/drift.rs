//! `csis config-drift` and `csis runtime-unchanged RT [--ref REF]`, the
//! original's commands of the same names, for teams that commit
//! `generated/`. Exit 0 current / unchanged, 1 with the diff, 2 when there
//! is no answer (not in git, nothing committed, the dry run failed, an
//! unknown runtime).

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::drift::{DriftRefusal, DriftReport};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    /// Print the answer as JSON (`{compared, files: [{path, change, diff}]}` or `{why, ...}`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct UnchangedArgs {
    /// The runtime whose roots are compared (its name or an alias).
    pub runtime: String,
    /// The git ref to compare against.
    #[arg(long = "ref", value_name = "REF", default_value = "HEAD")]
    pub rev: String,
    /// Print the answer as JSON (`{compared, files: [{path, change, diff}]}` or `{why, ...}`).
    #[arg(long)]
    pub json: bool,
}

fn render(
    r: std::result::Result<DriftReport, DriftRefusal>,
    json: bool,
    what: &str,
    ok: &str,
) -> Result<ExitCode> {
    match r {
        Err(why) => {
            if json {
                crate::render::json(&why)?;
            } else {
                eprintln!("{what}: {why}");
            }
            Ok(ExitCode::from(why.exit_code()))
        }
        Ok(r) => {
            if json {
                crate::render::json(&r)?;
            } else if r.files.is_empty() {
                println!("{what}: {ok} ({} files compared)", r.compared);
            } else {
                for f in &r.files {
                    print!("{}", f.diff);
                    if !f.diff.ends_with('\n') {
                        println!();
                    }
                }
                eprintln!("{what}: {} of {} files differ", r.files.len(), r.compared);
            }
            Ok(ExitCode::from(r.exit_code()))
        }
    }
}

pub fn config_drift(global: &GlobalArgs, args: DriftArgs) -> Result<ExitCode> {
    let r = csis_ops::drift::config_drift(&global.tree(), crate::render::notice::words)?;
    render(
        r,
        args.json,
        "config-drift",
        "the committed emission is current with the declarations",
    )
}

pub fn runtime_unchanged(global: &GlobalArgs, args: UnchangedArgs) -> Result<ExitCode> {
    let r = csis_ops::drift::runtime_unchanged(&global.tree(), &args.runtime, &args.rev)?;
    let ok = format!(
        "the emission of {} is unchanged since {}",
        args.runtime, args.rev
    );
    render(r, args.json, "runtime-unchanged", &ok)
}
