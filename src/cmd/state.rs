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
    /// Also adopt the machines labelled as this tree's declared instances
    /// that the records do not hold (`csis_instance`, `csis_build`, `csis_generation`).
    #[arg(long)]
    pub instances: bool,
    /// Also adopt the volumes labelled as this tree's declared storages
    /// that the records do not hold (`csis_storage`).
    #[arg(long)]
    pub storages: bool,
    /// Print what would be adopted; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{dry_run, adopted: [{build_id, series, runtime, parent}], fleet?: {instances, storages, skipped}}`).
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
            let parts = csis_ops::fleet::import::Parts {
                instances: a.instances,
                storages: a.storages,
            };
            let r = csis_ops::state::import(&cx, a.dry_run, parts)?;
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
            if let Some(f) = &r.fleet {
                for s in &f.storages {
                    println!(
                        "{verb} storage {} ({} on {}, active)",
                        s.name, s.id, s.runtime
                    );
                }
                for i in &f.instances {
                    println!(
                        "{verb} instance {} ({} on {}, generation {}, build {})",
                        i.name, i.hostname, i.runtime, i.generation, i.build
                    );
                }
                for l in &f.skipped {
                    println!("not adopted: {l}");
                }
            }
            let fleet_empty = r
                .fleet
                .as_ref()
                .is_none_or(|f| f.instances.is_empty() && f.storages.is_empty());
            if r.adopted.is_empty() && fleet_empty {
                println!(
                    "nothing to import: no foreign images{}",
                    if r.fleet.is_some() {
                        ", instances or storages"
                    } else {
                        ""
                    }
                );
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
