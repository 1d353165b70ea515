//! `csis preflight [--json]`: per runtime, does the daemon or cloud answer
//! (and with what identity/version); and is every executable the tree
//! declares on PATH, new enough for its floor. Exit 0 when all answer, 2
//! otherwise (or when no runtime is declared); with `--strict` 1 when any
//! check fails or cannot be judged.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the checks as JSON (`{ok, checks: [{subject, name, status, what, detail}]}`).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when any check fails or cannot be judged (the original's `preflight --strict`).
    #[arg(long)]
    pub strict: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = super::open(global, Access::Read)?;
    let r = csis_ops::inspect::preflight(&cx)?;
    if args.json {
        crate::render::json(&r)?;
    } else {
        for c in &r.checks {
            println!("{}", crate::render::inspect::check(c));
        }
    }
    Ok(ExitCode::from(if args.strict {
        r.strict_exit_code()
    } else {
        r.exit_code()
    }))
}
