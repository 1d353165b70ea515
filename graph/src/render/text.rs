//! The text renderers: dot (graphviz), mermaid and json, with the same marks
//! as the cards.

use super::card::{build_line, edge_class, node_classes};
use super::*;

fn esc_dot(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The lines of a node for the text formats.
fn text_lines(n: &Node, now: Option<i64>) -> Vec<String> {
    let mut l = vec![n.series.clone()];
    let rt = n.runtime.clone().unwrap_or_default();
    l.push(format!("{rt} · {}", build_line(n, now)));
    let ms: Vec<String> = marks(n).into_iter().map(|m| m.1).collect();
    if !ms.is_empty() {
        l.push(ms.join("  "));
    }
    if let Some(d) = &n.due {
        l.push(format!("due: {}", d.reason));
        for c in d.changed.iter().take(2) {
            l.push(c.clone());
        }
    }
    l
}

/// Graphviz: the same marks as classes (`class="node image due released"`),
/// pinned edges dashed and blue, behind ones orange.
pub fn dot(g: &Graph) -> String {
    let mut o = String::from("digraph csis {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11, fillcolor=\"#ffffff\", color=\"#9aa5b1\"];\n  edge [color=\"#6b7785\"];\n");
    let index: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    for (i, n) in g.nodes.iter().enumerate() {
        let (fill, color) = match (&n.due, n.revoked.is_empty()) {
            (Some(_), true) => ("#fff1d6", "#e0962a"),
            (Some(_), false) => ("#fff1d6", "#c83a2e"),
            (None, false) => ("#ffffff", "#c83a2e"),
            (None, true) => ("#ffffff", "#3aa57a"),
        };
        let _ = writeln!(
            o,
            "  n{i} [id=\"{}\", class=\"{}\", label=\"{}\", fillcolor=\"{fill}\", color=\"{color}\", tooltip=\"{}\"];",
            esc_dot(&n.id),
            node_classes(n),
            esc_dot(&text_lines(n, g.now).join("\n")),
            esc_dot(&n.id)
        );
    }
    for e in &g.edges {
        let (Some(a), Some(b)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) else {
            continue;
        };
        let style = match (e.kind, e.behind) {
            (EdgeKind::Pinned, true) => {
                ", style=dashed, color=\"#d4572a\", penwidth=1.4, label=\"behind\", fontcolor=\"#d4572a\", fontsize=9"
            }
            (EdgeKind::Pinned, false) => ", style=dashed, color=\"#3568c0\", penwidth=1.4",
            (EdgeKind::Follow, _) => ", penwidth=1.4",
            (EdgeKind::Other, _) => ", color=\"#aeb7c1\"",
        };
        let _ = writeln!(
            o,
            "  n{a} -> n{b} [class=\"{}\"{style}];",
            edge_class(e.kind, e.behind)
        );
    }
    o.push_str("}\n");
    o
}

fn esc_mermaid(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

/// Mermaid: marks as classes (`classDef due`, `released`, ...), follow
/// edges `-->`, pinned ones dotted `-.->` (and styled), behind ones labelled.
pub fn mermaid(g: &Graph) -> String {
    let mut o = String::from("flowchart LR\n");
    let index: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    for (i, n) in g.nodes.iter().enumerate() {
        let lines: Vec<String> = text_lines(n, g.now)
            .iter()
            .map(|l| esc_mermaid(l))
            .collect();
        let _ = writeln!(
            o,
            "  n{i}[\"<b>{}</b><br/>{}\"]",
            lines[0],
            lines[1..].join("<br/>")
        );
    }
    let mut link = 0usize;
    let mut pinned_links = Vec::new();
    let mut behind_links = Vec::new();
    let mut other_links = Vec::new();
    for e in &g.edges {
        let (Some(a), Some(b)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) else {
            continue;
        };
        let arrow = match (e.kind, e.behind) {
            (EdgeKind::Pinned, true) => {
                behind_links.push(link);
                "-. behind .->"
            }
            (EdgeKind::Pinned, false) => {
                pinned_links.push(link);
                "-.->"
            }
            (EdgeKind::Follow, _) => "-->",
            (EdgeKind::Other, _) => {
                other_links.push(link);
                "-->"
            }
        };
        let _ = writeln!(o, "  n{a} {arrow} n{b}");
        link += 1;
    }
    o.push_str("  classDef current fill:#ffffff,stroke:#3aa57a;\n");
    o.push_str("  classDef due fill:#fff1d6,stroke:#e0962a,stroke-width:2px;\n");
    o.push_str("  classDef released stroke:#17683f,stroke-width:2px;\n");
    o.push_str("  classDef revoked stroke:#c83a2e,stroke-width:2px;\n");
    o.push_str("  classDef behind stroke:#d4572a,stroke-dasharray:4 3;\n");
    o.push_str("  classDef pins font-weight:bold;\n");
    for class in ["current", "due", "released", "revoked", "behind", "pins"] {
        let ids: Vec<String> = g
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| node_classes(n).split(' ').any(|c| c == class))
            .map(|(i, _)| format!("n{i}"))
            .collect();
        if !ids.is_empty() {
            let _ = writeln!(o, "  class {} {class};", ids.join(","));
        }
    }
    let join = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    if !pinned_links.is_empty() {
        let _ = writeln!(
            o,
            "  linkStyle {} stroke:#3568c0,stroke-dasharray:6 4;",
            join(&pinned_links)
        );
    }
    if !behind_links.is_empty() {
        let _ = writeln!(
            o,
            "  linkStyle {} stroke:#d4572a,stroke-dasharray:6 4;",
            join(&behind_links)
        );
    }
    if !other_links.is_empty() {
        let _ = writeln!(o, "  linkStyle {} stroke:#aeb7c1;", join(&other_links));
    }
    o
}

/// The model as JSON.
pub fn json(g: &Graph) -> String {
    let mut s = serde_json::to_string_pretty(g).unwrap_or_default();
    s.push('\n');
    s
}
