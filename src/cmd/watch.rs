//! `csis watch [PATTERNS]`: keep watching the tree and print the plan's
//! changes when a file changes (`csis_ops::watch`: the incremental load
//! and compile, the plan diff).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use csis_ops::watch::{PlanChange, Watcher};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns; default `//...`.
    pub patterns: Vec<String>,
    /// How often to look at the files, in milliseconds, where the OS gives
    /// no file events (they wake it at once otherwise).
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
    /// Stop after reporting this many changes (for scripts and tests).
    #[arg(long, hide = true)]
    pub exit_after: Option<usize>,
}

/// The diagnostics of a tree that does not load, for people.
fn print_diagnostics(e: &anyhow::Error) {
    if let Some(nl) = e.downcast_ref::<csis_ops::NotLoaded>() {
        crate::render::print_human(&nl.diagnostics);
    }
}

fn line(c: &PlanChange) -> String {
    match c {
        PlanChange::Added {
            label,
            fingerprint,
            reason,
        } => format!("+ {label}  {fingerprint}  {reason}"),
        PlanChange::Changed {
            label,
            due,
            old_fingerprint,
            fingerprint,
            reason,
        } => {
            let mark = if *due { "bake" } else { "skip" };
            format!("{mark} {label}  {old_fingerprint} -> {fingerprint}  {reason}")
        }
        PlanChange::Removed { label } => format!("- {label}"),
    }
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let (mut w, first) = Watcher::open(&global.tree(), args.patterns);
    let root = w.root().display().to_string();
    match first {
        Ok(s) => println!(
            "watching {root} ({} of {} bake(s) due); Ctrl-C to stop",
            s.due, s.total
        ),
        Err(e) => {
            print_diagnostics(&e);
            println!("watching {root}: the tree does not load yet: {e:#}");
        }
    }
    let _ = std::io::stdout().flush();
    let mut changes = 0usize;
    loop {
        if !w.wait(Duration::from_millis(args.interval_ms)) {
            continue;
        }
        match w.replan() {
            // only a file the tree is not read from moved (an editor's
            // temporary file): nothing to say
            Ok(None) => continue,
            Ok(Some(lines)) if lines.is_empty() => println!("changed: the plan is the same"),
            Ok(Some(lines)) => {
                println!("changed:");
                for l in &lines {
                    println!("  {}", line(l));
                }
            }
            Err(e) => {
                print_diagnostics(&e);
                println!("changed: the tree does not load: {e:#}");
            }
        }
        let _ = std::io::stdout().flush();
        changes += 1;
        if args.exit_after.is_some_and(|n| changes >= n) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}
