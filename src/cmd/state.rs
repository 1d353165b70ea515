//! `csis state query [--strict] [--json]` and `csis state import [--dry-run] [--json]`.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Compare meta-state with what every runtime holds (read-only).
    Query(QueryArgs),
    /// Adopt foreign images (tagged as csis's, not recorded) into lineage from their tags.
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Exit 1 also on any missing, foreign or changed entry (not on stale).
    #[arg(long)]
    pub strict: bool,
    /// Print the report as JSON (`{reality, drift, unavailable, notes, summary}`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Print what would be adopted; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{dry_run, adopted: [{build_id, series, runtime, parent}]}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, cmd: StateCommand) -> Result<ExitCode> {
    match cmd {
        StateCommand::Query(a) => {
            let cx = super::open(global, Access::Read)?;
            let q = csis_ops::state::query(&cx)?;
            if a.json {
                crate::render::json(&q.report)?;
            } else {
                for l in q.report.lines() {
                    println!("{l}");
                }
                eprintln!("report: {}", q.path.display());
            }
            Ok(ExitCode::from(q.exit_code(a.strict)))
        }
        StateCommand::Import(a) => {
            let cx = super::open(global, Access::writing_unless(a.dry_run))?;
            let r = csis_ops::state::import(&cx, a.dry_run)?;
            if a.json {
                crate::render::json(&r)?;
                return Ok(ExitCode::SUCCESS);
            }
            let verb = if a.dry_run { "would adopt" } else { "adopted" };
            for x in &r.adopted {
                println!(
                    "{verb} {} ({} on {}, parent {}, from its tags; not verified: verify before releasing)",
                    x.build_id,
                    x.series,
                    x.runtime,
                    x.parent.as_deref().unwrap_or("unknown")
                );
            }
            if r.adopted.is_empty() {
                println!("nothing to import: no foreign images");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
