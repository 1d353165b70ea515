//! `csis test-mods [--image IMG]... [--force] [--strict] [-j N] [--json]`:
//! every modification applied twice in a throwaway container of its OS
//! family (apply, then idempotence), recorded in
//! `meta-state/mod-tests.yaml` by content hash (csis_ops::mod_tests).

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::mod_tests::{ModTestOptions, ModTestReport};
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the mods of these images (repeatable).
    #[arg(long = "image", value_name = "IMAGE")]
    pub images: Vec<String>,
    /// Test again the mods whose test passed.
    #[arg(long)]
    pub force: bool,
    /// Exit 1 when the tests are skipped (no Docker daemon answers).
    #[arg(long)]
    pub strict: bool,
    /// At most this many tests at once.
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = super::open(global, Access::Write)?;
    let report = csis_ops::mod_tests::test_mods(
        &cx,
        &ModTestOptions {
            images: args.images,
            force: args.force,
            jobs: args.jobs,
            cancel: Default::default(),
        },
    )?;
    if args.json {
        crate::render::json(&report)?;
    } else {
        render(&report);
    }
    Ok(ExitCode::from(report.exit_code(args.strict)))
}

fn render(r: &ModTestReport) {
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(why) = &r.skipped {
        println!("SKIPPED mod tests: no Docker daemon answers ({why})");
    }
    for l in &r.results {
        let mark = match l.status.as_str() {
            "pass" => "pass          ",
            "current" => "current       ",
            "not-idempotent" => "NOT IDEMPOTENT",
            _ => "FAIL          ",
        };
        println!("{mark} {}/{}", l.image, l.mod_name);
        if let Some(d) = &l.detail {
            println!("       {d}");
        }
        for c in &l.changes {
            println!("       second apply: {c}");
        }
    }
    if r.results.is_empty() && r.skipped.is_none() {
        println!("no modifications to test");
    } else if !r.runtime.is_empty() && r.skipped.is_none() {
        println!(
            "tested on {}; results in meta-state/mod-tests.yaml",
            r.runtime
        );
    }
}
