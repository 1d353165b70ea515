//! The standalone SVG: the scene with its own style sheet, arrow markers, a
//! legend and the counts line.

use super::card::scene;
use super::*;

/// Styles shared by the page and the standalone SVG.
pub(super) const SVG_CSS: &str = r#"
.card { fill: #ffffff; stroke: #cdd5de; stroke-width: 1; }
.stripe { fill: #3aa57a; }
.node.unbuilt .stripe { fill: #aab4bf; }
.node.due .card { stroke: #e0962a; stroke-width: 1.6; }
.node.due .stripe { fill: #e0962a; }
.node.revoked .stripe { fill: #c83a2e; }
.node.os .card { fill: #f4f6f9; }
.band { fill: #fff1d6; }
.name { font: 600 15px var(--sans); fill: #17202a; }
.build { font: 11.5px var(--mono); fill: #55616e; }
.build.none { font-style: italic; fill: #8a95a1; }
.chip { fill: #eef1f5; }
.chip-t { font: 10px var(--sans); fill: #4b5663; text-anchor: middle; }
.reason { font: 600 11.5px var(--sans); fill: #8a4b00; }
.changed { font: 11px var(--mono); fill: #5b3a0c; }
.changed.more { font-style: italic; }
.mark rect { fill: #eef1f5; }
.mark text { font: 600 10px var(--sans); fill: #3d4752; }
.mark.released rect { fill: #dff3e8; } .mark.released text { fill: #17683f; }
.mark.pins rect { fill: #e1ebfa; } .mark.pins text { fill: #2a5aa6; }
.mark.behind rect { fill: #fde3d8; } .mark.behind text { fill: #b33e12; }
.mark.revoked rect { fill: #f9dcd9; } .mark.revoked text { fill: #a8261b; }
.mark.tested rect { fill: #dff3e8; } .mark.tested text { fill: #17683f; }
.mark.failed rect { fill: #f9dcd9; } .mark.failed text { fill: #a8261b; }
.edge { fill: none; stroke-linejoin: round; }
.edge.follow { stroke: #6b7785; stroke-width: 1.6; }
.edge.pinned { stroke: #3568c0; stroke-width: 1.7; stroke-dasharray: 7 4; }
.edge.pinned.behind { stroke: #d4572a; }
.edge.other { stroke: #aeb7c1; stroke-width: 1.1; }
"#;

pub(super) const FONTS: &str = r#"--sans: "Inter", "Segoe UI", "Helvetica Neue", Arial, "Liberation Sans", "DejaVu Sans", sans-serif; --mono: "JetBrains Mono", "SF Mono", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;"#;

pub(super) fn markers() -> String {
    let mut d = String::from("<defs>");
    for (id, color) in [
        ("follow", "#6b7785"),
        ("pinned", "#3568c0"),
        ("behind", "#d4572a"),
        ("other", "#aeb7c1"),
    ] {
        let _ = write!(
            d,
            r#"<marker id="arr-{id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0 1 L9 5 L0 9 z" fill="{color}"/></marker>"#
        );
    }
    d.push_str("</defs>");
    d
}

pub(super) struct Stats {
    series: usize,
    images: usize,
    due: usize,
    released: usize,
    revoked: usize,
    behind: usize,
}

pub(super) fn stats(g: &Graph) -> Stats {
    let s = |f: &dyn Fn(&Node) -> bool| g.nodes.iter().filter(|n| f(n)).count();
    Stats {
        series: g.nodes.len(),
        images: s(&|n| n.kind == "image"),
        due: s(&|n| n.due.is_some()),
        released: s(&|n| !n.released.is_empty()),
        revoked: s(&|n| !n.revoked.is_empty()),
        behind: s(&|n| n.behind.is_some()),
    }
}

pub(super) fn stats_line(g: &Graph) -> String {
    let st = stats(g);
    let what = if g.folded {
        format!("{} image(s), {} node(s)", st.images, st.series)
    } else {
        format!("{} node(s)", st.series)
    };
    let mut s = format!("{what} · {} due", st.due);
    if st.released > 0 {
        let _ = write!(s, " · {} released", st.released);
    }
    if st.behind > 0 {
        let _ = write!(s, " · {} behind", st.behind);
    }
    if st.revoked > 0 {
        let _ = write!(s, " · {} with revoked builds", st.revoked);
    }
    s
}

/// The legend as SVG, at (x, y), for the standalone picture.
fn svg_legend(x: f64, y: f64) -> String {
    let mut o = format!(r#"<g class="legend" transform="translate({x:.1},{y:.1})">"#);
    let mut cx = 0.0;
    for (class, marker, text) in [
        ("follow", "follow", "follow (re-bakes with its parent)"),
        ("pinned", "pinned", "pinned (to one parent build)"),
        ("pinned behind", "behind", "pinned behind the parent's head"),
    ] {
        let _ = write!(
            o,
            r#"<path class="edge {class}" d="M{cx:.1} 0 H{:.1}" marker-end="url(#arr-{marker})"/><text class="legend-t" x="{:.1}" y="4">{text}</text>"#,
            cx + 34.0,
            cx + 42.0
        );
        cx += 42.0 + text.chars().count() as f64 * 11.0 * SANS_EM + 22.0;
    }
    for (class, text) in [("due", "due"), ("current", "current")] {
        let _ = write!(
            o,
            r#"<g class="node {class}"><rect class="card" x="{cx:.1}" y="-7" width="22" height="14" rx="3"/><rect class="stripe" x="{cx:.1}" y="-7" width="4" height="14"/></g><text class="legend-t" x="{:.1}" y="4">{text}</text>"#,
            cx + 28.0
        );
        cx += 28.0 + text.chars().count() as f64 * 11.0 * SANS_EM + 20.0;
    }
    o.push_str("</g>");
    o
}

/// A standalone SVG: title, legend and the drawing.
pub fn svg(g: &Graph) -> String {
    let sc = scene(g);
    let head = 64.0;
    let width = sc.width.max(820.0);
    let height = sc.height + head;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}">"#
    );
    let _ = writeln!(
        o,
        "<style>svg {{ {FONTS} }}{SVG_CSS}.title {{ font: 700 16px var(--sans); fill: #17202a; }} .sub {{ font: 12px var(--sans); fill: #55616e; }} .legend-t {{ font: 11px var(--sans); fill: #3d4752; }}</style>"
    );
    o.push_str(&markers());
    let _ = writeln!(
        o,
        r##"<rect width="100%" height="100%" fill="#f7f8fa"/><text class="title" x="{MARGIN}" y="26">{}</text><text class="sub" x="{MARGIN}" y="44">{}</text>"##,
        esc(&format!("csis graph · {}", g.title)),
        esc(&stats_line(g))
    );
    o.push_str(&svg_legend(MARGIN + 4.0, 58.0));
    let _ = writeln!(o, r#"<g transform="translate(0,{head:.0})">"#);
    o.push_str(&sc.body);
    o.push_str("</g>\n</svg>\n");
    o
}
