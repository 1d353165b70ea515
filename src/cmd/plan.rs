//! `csis plan [PATTERNS] [--json] [--explain] [--force-bake X]`: say, for
//! every selected node, whether it is due and why. Changes nothing.

use std::process::ExitCode;

use csis_engine::{Plan, PlannedNode};
use csis_rules::compile::ForceBake;
use serde_json::json;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns (`//...`, `//images/...`, `//images/dask@rt`, `@rt`); default `//...`.
    pub patterns: Vec<String>,
    /// Print `{"nodes":[{label, kind, series, runtime, fingerprint, due, reason, code, deps}]}`.
    #[arg(long)]
    pub json: bool,
    /// For a due bake, show which inputs changed, field by field.
    #[arg(long)]
    pub explain: bool,
    /// Plan as if these were forced: `SERIES`, `SERIES@RUNTIME` or `all` (repeatable).
    #[arg(long = "force-bake", value_name = "SERIES[@RT]|all")]
    pub force_bake: Vec<String>,
    /// Show every node (resolve, emit, retag...), not only bakes and due nodes.
    #[arg(long)]
    pub all: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let s = crate::session::open(global)?;
    let sel = s.select(&args.patterns)?;
    let plan = s.plan(&sel, &ForceBake::parse(&args.force_bake))?;
    if args.json {
        println!("{}", plan_json(&plan, args.explain));
    } else {
        for w in &s.compiled.warnings {
            eprintln!("warning: {w}");
        }
        print!("{}", plan_text(&plan, args.explain, args.all));
    }
    // The process ends here: leave the tree and graph to the exit rather
    // than free them piece by piece.
    std::mem::forget((s, sel, plan));
    Ok(ExitCode::SUCCESS)
}

/// The plan as the stable JSON document.
pub fn plan_json(plan: &Plan, explain: bool) -> String {
    let nodes: Vec<serde_json::Value> = plan
        .nodes
        .iter()
        .map(|n| {
            let mut v = json!({
                "label": n.label.to_string(),
                "kind": n.kind,
                "series": n.series,
                "runtime": n.runtime,
                "fingerprint": n.fingerprint.to_hex(),
                "due": n.due,
                "reason": n.reason,
                "code": n.code,
                "deps": n.deps.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            });
            if explain && !n.changes.is_empty() {
                v["changes"] = serde_json::to_value(&n.changes).unwrap_or_default();
            }
            v
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "nodes": nodes })).unwrap_or_default()
}

fn shown(n: &PlannedNode, all: bool) -> bool {
    all || n.kind == "bake" || (n.due && n.kind != "emit" && n.kind != "retag")
}

/// The plan for people: one line per bake (and per due release/dispose).
pub fn plan_text(plan: &Plan, explain: bool, all: bool) -> String {
    let mut out = String::new();
    let width = plan
        .nodes
        .iter()
        .filter(|n| shown(n, all))
        .map(|n| n.label.to_string().len())
        .max()
        .unwrap_or(0);
    for n in plan.nodes.iter().filter(|n| shown(n, all)) {
        let mark = if n.due { "bake" } else { "skip" };
        let mark = if n.kind == "bake" {
            mark.to_string()
        } else if n.due {
            "run ".into()
        } else {
            "-   ".into()
        };
        out.push_str(&format!(
            "{mark}  {:width$}  {}  {}\n",
            n.label.to_string(),
            n.fingerprint.prefix(12),
            n.reason
        ));
        if explain && n.due && n.kind == "bake" {
            if n.changes.is_empty() {
                if n.code == "inputs-changed" {
                    out.push_str(
                        "        (the head record holds no canonical inputs to compare)\n",
                    );
                }
            } else {
                for c in &n.changes {
                    out.push_str(&format!("        {c}\n"));
                }
            }
        }
    }
    let bakes = plan.nodes.iter().filter(|n| n.kind == "bake").count();
    let due = plan.due_count("bake");
    out.push_str(&format!("{due} of {bakes} bake(s) due\n"));
    out
}
