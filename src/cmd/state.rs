//! `csis state query [--strict] [--json]`, `csis state import [--dry-run] [--json]`,
//! `csis state pull [--json]` and `csis state push [--json]`.

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
    /// Copy the records from the shared store (`--meta-state` / `meta_state:`) into meta-state/.
    Pull(SyncArgs),
    /// Add the records of meta-state/ to the shared store (`--meta-state` / `meta_state:`).
    Push(SyncArgs),
}

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Print the report as JSON (`{direction, store, records, added, written}`).
    #[arg(long)]
    pub json: bool,
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
        StateCommand::Pull(a) => sync(csis_ops::state::pull(&global.dir)?, a.json),
        StateCommand::Push(a) => sync(csis_ops::state::push(&global.dir)?, a.json),
        StateCommand::Query(a) => {
            let cx = super::open(global, Access::Read)?;
            let q = csis_ops::state::query(&cx)?;
            if a.json {
                crate::render::json(&q.report)?;
            } else {
                for l in q.report.lines() {
                    println!("{l}");
                }
                match &q.path {
                    Ok(p) => eprintln!("report: {}", p.display()),
                    Err(why) => eprintln!(
                        "note: the report was not written ({why}); the answer above stands"
                    ),
                }
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
                for l in &x.named {
                    println!("  {}: {l}", x.build_id);
                }
            }
            if r.adopted.is_empty() {
                println!("nothing to import: no foreign images");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn sync(r: csis_ops::state::StateSync, json: bool) -> Result<ExitCode> {
    if json {
        crate::render::json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (from, to) = match r.direction {
        "pull" => (r.store.as_str(), "meta-state/"),
        _ => ("meta-state/", r.store.as_str()),
    };
    println!(
        "{}: {} records in {from}, {} new in {to}; written: {}",
        r.direction,
        r.records,
        r.added,
        if r.written.is_empty() {
            "nothing (already the same)".to_string()
        } else {
            r.written.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}
