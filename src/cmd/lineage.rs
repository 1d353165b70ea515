//! `csis lineage relabel --runtime RT [--build ID]... [--dry-run] [--json]`
//! and `csis lineage restamp --runtime RT [--series S]... [--dry-run] [--json]`.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::{exit, Access};

use crate::render::lineage::{relabel_line, restamp_line};
use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum LineageCommand {
    /// Re-tag builds whose tags disagree with their lineage record.
    Relabel(RelabelArgs),
    /// Record a fingerprint recipe change without re-baking.
    Restamp(RestampArgs),
}

#[derive(Debug, clap::Args)]
pub struct RelabelArgs {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
    /// Only these builds (repeatable).
    #[arg(long = "build", value_name = "ID")]
    pub builds: Vec<String>,
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{runtime, dry_run, events: [{event, ...}]}`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RestampArgs {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
    /// Only these series (repeatable).
    #[arg(long = "series", value_name = "S")]
    pub series: Vec<String>,
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{runtime, dry_run, events: [{event, ...}]}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, cmd: LineageCommand) -> Result<ExitCode> {
    let (runtime, access) = match &cmd {
        LineageCommand::Relabel(a) => (&a.runtime, Access::Read),
        LineageCommand::Restamp(a) => (&a.runtime, Access::writing_unless(a.dry_run)),
    };
    let cx = super::open(global, access)?;
    let Some(rt) = cx.runtime_name(runtime) else {
        eprintln!("error: runtime {runtime} is not declared in this tree");
        return Ok(ExitCode::from(exit::FAILURE));
    };
    let say = |problem: bool, line: String| {
        if problem {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    match cmd {
        LineageCommand::Relabel(a) => {
            let mut builds = Vec::with_capacity(a.builds.len());
            for b in &a.builds {
                match super::build_id(&cx, b, Some(&rt))? {
                    Ok(id) => builds.push(id),
                    Err(code) => return Ok(code),
                }
            }
            let r = csis_ops::lineage::relabel(&cx, &rt, &builds, a.dry_run)?;
            if a.json {
                crate::render::json(&r)?;
            } else {
                r.events
                    .iter()
                    .for_each(|e| say(e.is_problem(), relabel_line(e, a.dry_run)));
            }
            Ok(ExitCode::from(r.exit_code()))
        }
        LineageCommand::Restamp(a) => {
            let r = csis_ops::lineage::restamp(&cx, &rt, &a.series, a.dry_run)?;
            if a.json {
                crate::render::json(&r)?;
            } else {
                r.events
                    .iter()
                    .for_each(|e| say(e.is_problem(), restamp_line(e, a.dry_run)));
            }
            Ok(ExitCode::from(r.exit_code()))
        }
    }
}
