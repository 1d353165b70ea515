//! `csis dispose image [IDS] [--runtime RT] [--all] [--retention] [--min-age DAYS] [--dry-run]`

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::retention::{DisposePlan, DisposeRequest, Selection};
use csis_cache::MetaState;
use csis_ops::dispose::{compute_plan, execute_async};
use csis_ops::state::{load_tree, settle_journal, tokio_rt};

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum DisposeCommand {
    /// Delete recorded builds from their runtime and drop their records.
    Image(Args),
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build ids to dispose (each must be recorded in lineage).
    pub ids: Vec<String>,
    /// Only builds on this runtime (required with --all).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Every recorded build on --runtime (current releases are kept).
    #[arg(long, conflicts_with_all = ["ids", "retention"])]
    pub all: bool,
    /// The retention plan: builds beyond each series' keep count.
    #[arg(long, conflicts_with = "ids")]
    pub retention: bool,
    /// Never dispose a build younger than DAYS days.
    #[arg(long, value_name = "DAYS")]
    pub min_age: Option<u64>,
    /// Print the plan; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(global: &GlobalArgs, cmd: DisposeCommand) -> Result<ExitCode> {
    let DisposeCommand::Image(args) = cmd;
    if args.ids.is_empty() && !args.all && !args.retention {
        eprintln!("error: name build ids, or --all --runtime RT, or --retention");
        return Ok(ExitCode::from(2));
    }
    let tree = load_tree(&global.tree())?;
    let _lock = if args.dry_run {
        None
    } else {
        let l = crate::cmd::take_lock(tree.root())?;
        settle_journal(tree.root())?;
        Some(l)
    };
    let meta = MetaState::of_tree(tree.root());
    let runtime = args.runtime.as_deref().map(|r| {
        tree.runtime(r)
            .map(|x| x.name.clone())
            .unwrap_or(r.to_string())
    });
    let selection = if args.all {
        Selection::All
    } else if args.retention {
        Selection::Retention
    } else {
        Selection::Ids(args.ids.clone())
    };
    let req = DisposeRequest {
        selection,
        runtime,
        min_age_days: args.min_age,
    };
    let plan = match compute_plan(&tree, &meta, &req)? {
        Ok(p) => p,
        Err(refusals) => {
            for r in refusals {
                eprintln!("refused: {r}");
            }
            eprintln!("nothing was deleted");
            return Ok(ExitCode::from(1));
        }
    };
    Ok(ExitCode::from(execute(&tree, &meta, &plan, args.dry_run)?))
}

/// Carry out a plan from the CLI (prints; problems go to stderr).
fn execute(
    tree: &csis_rules::Tree,
    meta: &MetaState,
    plan: &DisposePlan,
    dry_run: bool,
) -> Result<u8> {
    let out = |l: String| {
        if l.starts_with("refused:")
            || l.starts_with("error:")
            || l.starts_with("warning:")
            || l == "nothing was deleted"
        {
            eprintln!("{l}");
        } else {
            println!("{l}");
        }
    };
    tokio_rt()?.block_on(execute_async(tree, meta, plan, dry_run, &out))
}

