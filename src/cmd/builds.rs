//! `csis builds [PATTERN] [--runtime RT] [--check] [--json]`
//!
//! The recorded builds per series and runtime, newest first, with their
//! short id, name, parent, age and marks (head, released, pinned, tested,
//! revoked; with `--check`, `gone` when the runtime no longer has it, asked
//! through `csis_ops::inspect::check_builds`).
//! Read-only: the listing is `csis_ops::builds::list`; this renders it.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::builds::{BuildRow, Builds, BuildsQuery};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only series whose name matches: a glob (`web*`) or a substring.
    pub pattern: Option<String>,
    /// Only builds on this runtime.
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Ask each runtime whether it still has the build (mark `gone` when not).
    #[arg(long)]
    pub check: bool,
    /// Print a JSON array, one object per build (fields in README.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let q = BuildsQuery {
        pattern: args.pattern.clone(),
        runtime: args.runtime.clone(),
        check: args.check,
    };
    let rows = match csis_ops::builds::list(&global.tree(), &q)? {
        Builds::Refused(p) => {
            eprintln!("refused: {p}");
            return Ok(ExitCode::from(2));
        }
        Builds::Listed { rows, notes } => {
            for n in notes {
                eprintln!("note: {n}");
            }
            rows
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no recorded builds{}", scope(&args));
        return Ok(ExitCode::SUCCESS);
    }
    let mut group: Option<(&str, Option<&str>)> = None;
    for r in &rows {
        let g = (r.series.as_str(), r.runtime.as_deref());
        if group != Some(g) {
            if group.is_some() {
                println!();
            }
            println!("{}@{}", r.series, r.runtime.as_deref().unwrap_or("any"));
            group = Some(g);
        }
        println!("{}", line(r));
    }
    Ok(ExitCode::SUCCESS)
}

fn scope(args: &Args) -> String {
    let mut s = String::new();
    if let Some(p) = &args.pattern {
        s.push_str(&format!(" of series matching '{p}'"));
    }
    if let Some(rt) = &args.runtime {
        s.push_str(&format!(" on {rt}"));
    }
    s
}

/// `  0123456789ab  NAME  parent 89abcdef0123  3h  head released(prod) ...`
fn line(r: &BuildRow) -> String {
    let mut marks: Vec<String> = Vec::new();
    if r.head {
        marks.push("head".into());
    }
    if !r.released.is_empty() {
        marks.push(format!("released({})", r.released.join(",")));
    }
    if !r.pinned_by.is_empty() {
        marks.push(format!("pinned({})", r.pinned_by.join(",")));
    }
    match r.tested {
        Some(true) => marks.push("tested".into()),
        Some(false) => marks.push("tested(FAILED)".into()),
        None => {}
    }
    match r.on_runtime {
        Some(Some(false)) => marks.push("gone".into()),
        Some(None) => marks.push("unchecked".into()),
        _ => {}
    }
    if r.revoked {
        marks.push(match &r.revoked_reason {
            Some(why) => format!("revoked({why})"),
            None => "revoked".into(),
        });
    }
    format!(
        "  {}  {}  parent {}  {}{}{}",
        r.short_id,
        r.name.as_deref().unwrap_or("-"),
        r.parent_short.as_deref().unwrap_or("-"),
        r.age_seconds.map(age).unwrap_or_else(|| "?".into()),
        if marks.is_empty() { "" } else { "  " },
        marks.join(" ")
    )
}

fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}
