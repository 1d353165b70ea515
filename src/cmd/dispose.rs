//! `csis dispose image [IDS] [--runtime RT] [--all] [--retention] [--min-age DAYS] [--dry-run] [--json]`

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::dispose::Selection;
use csis_ops::dispose::{DisposeArgs, DisposeEvent};
use csis_ops::{exit, Access};

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum DisposeCommand {
    /// Delete recorded builds from their runtime and drop their records.
    Image(Args),
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Builds to dispose: full ids, unique hash prefixes (8+) or names (each recorded in lineage).
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
    /// Print the report as JSON (`{dry_run, events: [{event, ...}]}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, cmd: DisposeCommand) -> Result<ExitCode> {
    let DisposeCommand::Image(args) = cmd;
    if args.ids.is_empty() && !args.all && !args.retention {
        eprintln!("error: name build ids, or --all --runtime RT, or --retention");
        return Ok(ExitCode::from(exit::CANNOT_ANSWER));
    }
    let cx = super::open(global, Access::writing_unless(args.dry_run))?;
    let selection = if args.all {
        Selection::All
    } else if args.retention {
        Selection::Retention
    } else {
        let runtime = args
            .runtime
            .as_deref()
            .map(|r| cx.runtime_name(r).unwrap_or_else(|| r.to_string()));
        let mut ids = Vec::with_capacity(args.ids.len());
        for id in &args.ids {
            match super::build_id(&cx, id, runtime.as_deref())? {
                Ok(id) => ids.push(id),
                Err(code) => return Ok(code),
            }
        }
        Selection::Ids(ids)
    };
    let json = args.json;
    let each = |e: &DisposeEvent| {
        if json {
            return;
        }
        let to_stderr = e.is_problem() || matches!(e, DisposeEvent::CannotCheckUsers { .. });
        for l in crate::render::dispose::lines(e) {
            if to_stderr {
                eprintln!("{l}");
            } else {
                println!("{l}");
            }
        }
    };
    let d = DisposeArgs {
        selection,
        runtime: args.runtime,
        min_age_days: args.min_age,
        dry_run: args.dry_run,
    };
    let report = csis_ops::dispose::dispose(&cx, &d, &each)?;
    if json {
        crate::render::json(&report)?;
    }
    Ok(ExitCode::from(report.exit_code()))
}
