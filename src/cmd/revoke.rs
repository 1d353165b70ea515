//! `csis revoke BUILD [--descendants] [--reason T] [--dry-run]`
//!
//! Writes `meta-state/revocations.yaml`. A revoked build is never baked
//! from, released or chosen as a series head; with `--descendants` every
//! recorded build descending from it is revoked too.

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::revocations::{descendants, revoke};
use csis_cache::{MetaState, Revocations};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The build id to revoke.
    pub build: String,
    /// Also revoke every recorded build that descends from it.
    #[arg(long)]
    pub descendants: bool,
    /// Why (kept in revocations.yaml, shown by the state query).
    #[arg(long, value_name = "T")]
    pub reason: Option<String>,
    /// Print what would be revoked; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let _lock = if args.dry_run {
        None
    } else {
        let l = crate::cmd::take_lock(&global.dir)?;
        csis_ops::state::settle_journal(&global.dir)?;
        Some(l)
    };
    let meta = MetaState::of_tree(&global.dir);
    let lineage = csis_ops::state::records(&global.dir)?.0;
    let mut revs = Revocations::load(&meta)?;
    let run = csis_cache::run_id_now();
    let newly = match revoke(
        &lineage,
        &mut revs,
        &args.build,
        args.descendants,
        args.reason.as_deref(),
        Some(&run),
    ) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("refused: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let verb = if args.dry_run {
        "would revoke"
    } else {
        "revoked"
    };
    for id in &newly {
        let r = lineage.find(id);
        println!(
            "{verb} {id} ({} on {})",
            r.map(|r| r.series.as_str()).unwrap_or("?"),
            r.and_then(|r| r.runtime.as_deref())
                .unwrap_or("any runtime")
        );
    }
    if newly.is_empty() {
        println!("{} is already revoked", args.build);
    }
    if !args.descendants {
        let d = descendants(&lineage, &args.build);
        let open: Vec<&String> = d.iter().filter(|b| !revs.is_revoked(b)).collect();
        if !open.is_empty() {
            println!(
                "note: {} recorded build(s) descend from it and are not revoked ({}); --descendants revokes them",
                open.len(),
                open.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    if !args.dry_run && !newly.is_empty() {
        revs.save(&meta)?;
    }
    Ok(ExitCode::SUCCESS)
}
