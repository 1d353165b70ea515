//! `csis state query` and `csis state import`.

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::drift;
use csis_cache::MetaState;
use csis_ops::state::{load_tree, records, settle_journal, state_report, write_report};

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
}

pub fn run(global: &GlobalArgs, cmd: StateCommand) -> Result<ExitCode> {
    match cmd {
        StateCommand::Query(a) => query(global, a),
        StateCommand::Import(a) => import(global, a),
    }
}

fn query(global: &GlobalArgs, args: QueryArgs) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let meta = MetaState::of_tree(tree.root());
    let (report, _) = state_report(&tree, &meta)?;
    let path = write_report(&tree, &report)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for l in report.lines() {
            println!("{l}");
        }
        eprintln!("report: {}", path.display());
    }
    let fail = if args.strict {
        report.strict_fails()
    } else {
        report.has_hard()
    };
    Ok(if fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn import(global: &GlobalArgs, args: ImportArgs) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let _lock = if args.dry_run {
        None
    } else {
        let l = crate::cmd::take_lock(tree.root())?;
        settle_journal(tree.root())?;
        Some(l)
    };
    let meta = MetaState::of_tree(tree.root());
    let (_, views) = state_report(&tree, &meta)?;
    let mut lineage = records(tree.root())?.0;
    let run = csis_cache::run_id_now();
    let mut adopted = 0usize;
    for v in &views {
        let Ok(images) = &v.images else { continue };
        for img in images {
            if lineage.find(&img.build_id).is_some() {
                continue;
            }
            let Some(rec) = drift::record_from_tags(img, &v.runtime, &run) else {
                continue;
            };
            let verb = if args.dry_run {
                "would adopt"
            } else {
                "adopted"
            };
            println!(
                "{verb} {} ({} on {}, parent {}, from its tags; not verified: verify before releasing)",
                rec.build_id,
                rec.series,
                v.runtime,
                rec.parent.as_deref().unwrap_or("unknown")
            );
            lineage.add_build(rec);
            adopted += 1;
        }
    }
    if adopted == 0 {
        println!("nothing to import: no foreign images");
    }
    if !args.dry_run && adopted > 0 {
        meta.save_lineage(&lineage)?;
        let (report, _) = state_report(&tree, &meta)?;
        write_report(&tree, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

