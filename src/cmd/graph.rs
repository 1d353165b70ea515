//! `csis graph [PATTERNS] --format dot|mermaid|json|html`: draw the selected
//! part of the build graph, with due nodes marked. The html is one
//! self-contained page (inline SVG and CSS, no script, no network).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use csis_engine::Plan;
use csis_rules::compile::ForceBake;
use serde_json::json;

use crate::GlobalArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
    Json,
    Html,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns; default `//...`.
    pub patterns: Vec<String>,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: Format,
    /// Draw bakes only (edges follow the chains), not resolve/emit/retag/...
    #[arg(long)]
    pub bakes_only: bool,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

/// The drawn graph: nodes (in plan order) and edges (dependency -> dependent).
pub struct Drawn {
    pub nodes: Vec<DrawnNode>,
    pub edges: Vec<(usize, usize)>,
}

pub struct DrawnNode {
    pub label: String,
    pub kind: String,
    pub due: bool,
    pub reason: String,
    pub fingerprint: String,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let s = crate::session::open(global)?;
    let sel = s.select(&args.patterns)?;
    let plan = s.plan(&sel, &ForceBake::default())?;
    let d = drawn(&plan, args.bakes_only);
    let text = match args.format {
        Format::Dot => dot(&d),
        Format::Mermaid => mermaid(&d),
        Format::Json => json_doc(&d),
        Format::Html => html(&d),
    };
    match &args.output {
        Some(p) => std::fs::write(p, text)?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The plan as nodes and edges. With `bakes_only`, an edge joins two bakes
/// when one depends on the other.
pub fn drawn(plan: &Plan, bakes_only: bool) -> Drawn {
    let keep: Vec<&csis_engine::PlannedNode> = plan
        .nodes
        .iter()
        .filter(|n| !bakes_only || n.kind == "bake")
        .collect();
    let index: HashMap<String, usize> = keep
        .iter()
        .enumerate()
        .map(|(i, n)| (n.label.to_string(), i))
        .collect();
    let mut edges = Vec::new();
    for (i, n) in keep.iter().enumerate() {
        for d in &n.deps {
            if let Some(&j) = index.get(&d.to_string()) {
                edges.push((j, i));
            }
        }
    }
    Drawn {
        nodes: keep
            .iter()
            .map(|n| DrawnNode {
                label: n.label.to_string(),
                kind: n.kind.clone(),
                due: n.due,
                reason: n.reason.clone(),
                fingerprint: n.fingerprint.prefix(12),
            })
            .collect(),
        edges,
    }
}

fn esc_dot(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

pub fn dot(d: &Drawn) -> String {
    let mut o = String::from("digraph csis {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\"];\n");
    for (i, n) in d.nodes.iter().enumerate() {
        let fill = if n.due { "#ffd27f" } else { "#e8e8e8" };
        let _ = writeln!(
            o,
            "  n{i} [label=\"{}\", fillcolor=\"{fill}\", tooltip=\"{}\"];",
            esc_dot(&n.label),
            esc_dot(&n.reason)
        );
    }
    for (a, b) in &d.edges {
        let _ = writeln!(o, "  n{a} -> n{b};");
    }
    o.push_str("}\n");
    o
}

pub fn mermaid(d: &Drawn) -> String {
    let mut o = String::from("flowchart LR\n");
    for (i, n) in d.nodes.iter().enumerate() {
        let _ = writeln!(o, "  n{i}[\"{}\"]", n.label.replace('"', "#quot;"));
    }
    for (a, b) in &d.edges {
        let _ = writeln!(o, "  n{a} --> n{b}");
    }
    o.push_str("  classDef due fill:#ffd27f,stroke:#c77800;\n");
    let due: Vec<String> = d
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.due)
        .map(|(i, _)| format!("n{i}"))
        .collect();
    if !due.is_empty() {
        let _ = writeln!(o, "  class {} due;", due.join(","));
    }
    o
}

pub fn json_doc(d: &Drawn) -> String {
    let nodes: Vec<_> = d
        .nodes
        .iter()
        .map(|n| json!({"label": n.label, "kind": n.kind, "due": n.due, "reason": n.reason, "fingerprint": n.fingerprint}))
        .collect();
    let edges: Vec<_> = d
        .edges
        .iter()
        .map(|(a, b)| json!({"from": d.nodes[*a].label, "to": d.nodes[*b].label}))
        .collect();
    let mut s =
        serde_json::to_string_pretty(&json!({"nodes": nodes, "edges": edges})).unwrap_or_default();
    s.push('\n');
    s
}

fn esc_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One page, inline SVG: columns by depth (longest path from a root), rows
/// in plan order; due nodes filled orange.
pub fn html(d: &Drawn) -> String {
    let n = d.nodes.len();
    let mut depth = vec![0usize; n];
    // nodes are in topological order (plan order), edges go forward
    let mut incoming: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &d.edges {
        incoming[b].push(a);
    }
    for i in 0..n {
        depth[i] = incoming[i].iter().map(|&a| depth[a] + 1).max().unwrap_or(0);
    }
    // Sources (emit, resolve) sit just before their first dependent.
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &d.edges {
        outgoing[a].push(b);
    }
    for i in (0..n).rev() {
        if incoming[i].is_empty() {
            if let Some(m) = outgoing[i].iter().map(|&b| depth[b]).min() {
                depth[i] = m.saturating_sub(1);
            }
        }
    }
    let cols = depth.iter().copied().max().map_or(0, |m| m + 1);
    let mut row_of = vec![0usize; n];
    let mut rows_in = vec![0usize; cols.max(1)];
    for i in 0..n {
        row_of[i] = rows_in[depth[i]];
        rows_in[depth[i]] += 1;
    }
    let (bw, bh, gx, gy, pad) = (300.0, 34.0, 70.0, 14.0, 20.0);
    let x = |i: usize| pad + depth[i] as f64 * (bw + gx);
    let y = |i: usize| pad + row_of[i] as f64 * (bh + gy);
    let width = pad * 2.0 + cols as f64 * (bw + gx);
    let height = pad * 2.0 + rows_in.iter().copied().max().unwrap_or(0) as f64 * (bh + gy);
    let due_count = d.nodes.iter().filter(|n| n.due).count();

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}">"#
    );
    svg.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#888"/></marker></defs>"##);
    svg.push('\n');
    for &(a, b) in &d.edges {
        let (x1, y1) = (x(a) + bw, y(a) + bh / 2.0);
        let (x2, y2) = (x(b), y(b) + bh / 2.0);
        let mx = (x1 + x2) / 2.0;
        let _ = writeln!(
            svg,
            r#"<path class="edge" data-from="{}" data-to="{}" d="M {x1:.1} {y1:.1} C {mx:.1} {y1:.1}, {mx:.1} {y2:.1}, {x2:.1} {y2:.1}" marker-end="url(#arrow)"/>"#,
            esc_html(&d.nodes[a].label),
            esc_html(&d.nodes[b].label)
        );
    }
    for (i, nd) in d.nodes.iter().enumerate() {
        let class = if nd.due { "node due" } else { "node current" };
        let _ = writeln!(
            svg,
            r#"<g class="{class}" data-label="{l}" data-kind="{k}" data-due="{due}"><title>{l}&#10;{r}&#10;fingerprint {f}</title><rect x="{x:.1}" y="{y:.1}" width="{bw}" height="{bh}" rx="6"/><text x="{tx:.1}" y="{ty:.1}">{l}</text></g>"#,
            l = esc_html(&nd.label),
            k = esc_html(&nd.kind),
            due = nd.due,
            r = esc_html(&nd.reason),
            f = nd.fingerprint,
            x = x(i),
            y = y(i),
            tx = x(i) + 8.0,
            ty = y(i) + bh / 2.0 + 4.0,
        );
    }
    svg.push_str("</svg>\n");

    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>csis build graph</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1em; }}
.legend span {{ display: inline-block; padding: 2px 8px; margin-right: 8px; border-radius: 4px; border: 1px solid #999; }}
.node rect {{ fill: #eeeeee; stroke: #999; }}
.node.due rect {{ fill: #ffd27f; stroke: #c77800; stroke-width: 2; }}
.node text {{ font: 12px monospace; fill: #222; }}
.edge {{ fill: none; stroke: #888; stroke-width: 1.2; }}
</style>
</head>
<body>
<h1>csis build graph</h1>
<p class="legend"><span style="background:#ffd27f">due</span><span style="background:#eeeeee">current / not needed</span> {n} node(s), {due_count} due. Hover a node for its reason.</p>
<div id="graph">
{svg}</div>
</body>
</html>
"#
    )
}
