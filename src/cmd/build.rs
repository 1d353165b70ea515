//! `csis build [PATTERNS] [-j N] [--dry-run] [--force-bake X] [--fail-fast]
//! [--json] [--no-wait] [--keep-failed]`: run the build (`csis_ops::build`,
//! which opens its context: the tree lock or the store's leases), rendering
//! its events; Ctrl-C cancels it (`crate::interrupt`).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use csis_ops::build::{BuildOptions, BuildOutcome, Event};

use crate::progress::Renderer;
use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns (`//...`, `//images/...`, `//images/dask@rt`, `@rt`); default `//...`.
    pub patterns: Vec<String>,
    /// Run at most N nodes at once (default: 4).
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Bake nothing: plan, resolve the vendor images (a read-only query) and emit every due root under generated/; no bake, retag, test, release or dispose; no record.
    #[arg(long)]
    pub dry_run: bool,
    /// Bake these even when current: `SERIES`, `SERIES@RUNTIME` or `all` (repeatable).
    #[arg(long = "force-bake", value_name = "SERIES[@RT]|all")]
    pub force_bake: Vec<String>,
    /// Stop everything at the first failure (default: independent branches go on).
    #[arg(long)]
    pub fail_fast: bool,
    /// JSON lines: `{"event":"started"|"finished"|"skipped"|"failed"|"not_run",...}`, then a summary.
    #[arg(long)]
    pub json: bool,
    /// When another csis holds the tree lock (or, on a shared store, a lease this build needs), exit 75 at once instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
    /// Do not run the state query (reality vs records) before baking.
    #[arg(long)]
    pub no_state_query: bool,
    /// Keep a failed bake's container for inspection (labelled `csis_kept_failed=<run id>`, listed by `csis empty`, removed by `csis empty --remove`); docker runtimes' native bakes only.
    #[arg(long)]
    pub keep_failed: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let renderer = Renderer::new(args.json);
    let on_ctrl_c = renderer.clone();
    let cancel = crate::interrupt::cancel_on_ctrl_c(move || {
        on_ctrl_c.note(
            "interrupted: stopping running bakes (finished ones are recorded); Ctrl-C again to quit at once",
        )
    })?;
    let opts = BuildOptions {
        patterns: args.patterns,
        jobs: args.jobs,
        dry_run: args.dry_run,
        force_bake: args.force_bake,
        fail_fast: args.fail_fast,
        no_state_query: args.no_state_query,
        no_wait: args.no_wait,
        cancel,
        keep_failed: args.keep_failed,
    };
    let outcome = csis_ops::build::run(
        &global.tree(),
        &opts,
        super::say_waiting,
        Arc::new(renderer.clone()),
    )?;
    match &outcome {
        BuildOutcome::Replayed(replay) => {
            for w in &replay.warnings {
                renderer.notice(w);
            }
            renderer.raw_json_lines(&replay.events_json);
            renderer.event(&Event::Summary(replay.summary.clone()));
        }
        BuildOutcome::Locked(why) => eprintln!("error: {why}"),
        BuildOutcome::HardDrift(hard) => {
            for l in hard {
                eprintln!("hard drift: {l}");
            }
            eprintln!("error: the records disagree with the runtimes; re-run `csis state query` after fixing");
        }
        BuildOutcome::Ran {
            interrupted: true,
            not_run,
            ..
        } if !renderer.is_json() => {
            for label in not_run {
                renderer.note(&format!("did not run: {label}"));
            }
        }
        BuildOutcome::Ran { .. } => {}
    }
    Ok(ExitCode::from(outcome.exit_code()))
}
