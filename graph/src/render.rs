//! The renderers: one picture (cards laid out by [`crate::layout`]) written
//! as a page or a standalone SVG, and the same marks as dot, mermaid and
//! json.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::layout::{self, Layout, Options};
use crate::model::{age, short_id, EdgeKind, Graph, Node};

/// Card width, inner padding.
const CARD_W: f64 = 204.0;
const PAD: f64 = 10.0;
/// Margin around the drawing.
const MARGIN: f64 = 24.0;
/// The window the drawing is fitted to: 1400 x 900 less the page's header.
const FIT: (f64, f64) = (1360.0, 800.0);

/// Estimated advance per character (DejaVu/Liberation/Helvetica are close
/// enough at these sizes), to cut text that would not fit.
const NAME_EM: f64 = 0.58;
const SANS_EM: f64 = 0.58;
const MONO_EM: f64 = 0.61;

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

/// `text` cut to `max` px at `px` per character, with an ellipsis.
fn cut(text: &str, px: f64, max: f64) -> String {
    let n = (max / px).floor().max(1.0) as usize;
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut s: String = text.chars().take(n.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The marks of a node: (css class, text).
fn marks(n: &Node) -> Vec<(&'static str, String)> {
    let mut m = Vec::new();
    for model in &n.released {
        m.push(("released", format!("★ {model}")));
    }
    if !n.pinned_children.is_empty() {
        m.push(("pins", format!("⚓ {} pinned", n.pinned_children.len())));
    }
    if let Some(b) = &n.behind {
        let _ = b;
        m.push((
            "behind",
            format!("↺ behind {}", n.parent.as_deref().unwrap_or("parent")),
        ));
    }
    match n.revoked.len() {
        0 => {}
        1 => m.push(("revoked", "⊘ revoked".into())),
        k => m.push(("revoked", format!("⊘ {k} revoked"))),
    }
    match n.tested {
        Some(true) => m.push(("tested", "✓ tested".into())),
        Some(false) => m.push(("failed", "✗ tests failed".into())),
        None => {}
    }
    m
}

/// A changed field split for two short lines: `inputs.mods[0].files[0]`
/// and `(playbooks/web.yml)`.
fn split_changed(s: &str, max_chars: usize) -> Vec<String> {
    if s.chars().count() <= max_chars {
        return vec![s.to_string()];
    }
    match s.find(" (") {
        Some(i) => vec![s[..i].to_string(), s[i + 1..].to_string()],
        None => vec![s.to_string()],
    }
}

/// `text` in lines of at most `width` characters, broken at spaces, the
/// last of `max` lines cut with an ellipsis.
fn wrap(text: &str, width: usize, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.len() > max {
        let rest = lines[max - 1..].join(" ");
        lines.truncate(max - 1);
        lines.push(rest);
    }
    lines
        .into_iter()
        .map(|l| cut(&l, 1.0, width as f64))
        .collect()
}

/// What a card shows, in lines from the top.
struct Card {
    h: f64,
    body: String,
    title: String,
}

/// Does the node stand for builds (a series, or a bake step)?
fn has_builds(n: &Node) -> bool {
    n.is_series() || n.kind == "bake"
}

fn build_line(n: &Node, now: Option<i64>) -> String {
    if !has_builds(n) {
        let fp: String = n.entry.fingerprint.chars().take(12).collect();
        return format!("fp {fp}");
    }
    match &n.build {
        Some(b) => match (now, b.at) {
            (Some(now), Some(at)) => format!("{} · {}", short_id(&b.id), age(now, at)),
            _ => short_id(&b.id),
        },
        None => "no build yet".into(),
    }
}

fn card(n: &Node, now: Option<i64>, folded: bool) -> Card {
    let inner = CARD_W - 2.0 * PAD;
    let mut b = String::new();
    // The runtime (and the step kind when not folded) as a chip, top right.
    let chip = match (&n.runtime, folded || n.is_series()) {
        (Some(rt), true) => rt.clone(),
        (Some(rt), false) => format!("{} · {rt}", n.kind),
        (None, _) => n.kind.clone(),
    };
    let chip = cut(&chip, 10.0 * SANS_EM, 96.0);
    let chip_w = chip.chars().count() as f64 * 10.0 * SANS_EM + 12.0;
    let _ = write!(
        b,
        r#"<rect class="chip" x="{:.1}" y="8" width="{chip_w:.1}" height="16" rx="8"/><text class="chip-t" x="{:.1}" y="20">{}</text>"#,
        CARD_W - PAD - chip_w,
        CARD_W - PAD - chip_w / 2.0,
        esc(&chip)
    );
    // The name is what people look for: a name a little too long is
    // condensed to fit, a much longer one cut.
    let room = inner - chip_w - 4.0;
    let want = n.series.chars().count() as f64 * 15.0 * NAME_EM;
    if want > room && want <= room * 1.3 {
        let _ = write!(
            b,
            r#"<text class="name" x="{PAD}" y="22" textLength="{room:.1}" lengthAdjust="spacingAndGlyphs">{}</text>"#,
            esc(&n.series)
        );
    } else {
        let _ = write!(
            b,
            r#"<text class="name" x="{PAD}" y="22">{}</text>"#,
            esc(&cut(&n.series, 15.0 * NAME_EM, room))
        );
    }
    let build = build_line(n, now);
    let cls = if n.build.is_some() || !has_builds(n) {
        "build"
    } else {
        "build none"
    };
    let _ = write!(
        b,
        r#"<text class="{cls}" x="{PAD}" y="40">{}</text>"#,
        esc(&cut(&build, 11.5 * MONO_EM, inner))
    );
    let mut y: f64 = 48.0;
    // Marks: pills, wrapped.
    let ms = marks(n);
    if !ms.is_empty() {
        let mut x = PAD;
        for (class, text) in &ms {
            let text = cut(text, 10.0 * SANS_EM, inner - 12.0);
            let w = text.chars().count() as f64 * 10.0 * SANS_EM + 12.0;
            if x + w > CARD_W - PAD && x > PAD {
                x = PAD;
                y += 20.0;
            }
            let _ = write!(
                b,
                r#"<g class="mark {class}"><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="16" rx="4"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                x + 6.0,
                y + 12.0,
                esc(&text)
            );
            x += w + 5.0;
        }
        y += 22.0;
    }
    let mut title = format!("{}\n{}", n.id, build);
    if let Some(d) = &n.due {
        let top = y;
        let mut inner_b = String::new();
        // the reason in words, on two lines at most
        let per_line = (inner / (11.5 * SANS_EM)).floor() as usize;
        for (i, line) in wrap(&format!("due: {}", d.reason), per_line, 2)
            .iter()
            .enumerate()
        {
            let class = if i == 0 { "reason" } else { "reason more" };
            let _ = write!(
                inner_b,
                r#"<text class="{class}" x="{PAD}" y="{:.1}">{}</text>"#,
                y + 15.0,
                esc(line)
            );
            y += 14.0;
        }
        y += 5.0;
        let per_line = (inner / (11.0 * MONO_EM)).floor() as usize;
        let shown = d.changed.len().min(2);
        for c in &d.changed[..shown] {
            for part in split_changed(c, per_line) {
                let _ = write!(
                    inner_b,
                    r#"<text class="changed" x="{PAD}" y="{:.1}">{}</text>"#,
                    y + 12.0,
                    esc(&cut(&part, 11.0 * MONO_EM, inner))
                );
                y += 14.0;
            }
        }
        if d.changed.len() > shown {
            let _ = write!(
                inner_b,
                r#"<text class="changed more" x="{PAD}" y="{:.1}">+{} more field(s)</text>"#,
                y + 12.0,
                d.changed.len() - shown
            );
            y += 14.0;
        }
        y += 8.0;
        let _ = write!(
            b,
            r#"<path class="band" d="M0 {top:.1} H{CARD_W} V{:.1} a8 8 0 0 1 -8 8 H8 a8 8 0 0 1 -8 -8 Z"/>{inner_b}"#,
            y - 8.0
        );
        let _ = write!(title, "\ndue: {}", d.reason);
        for c in &d.changed {
            let _ = write!(title, "\n  {c}");
        }
    } else {
        y += 2.0;
    }
    for (_, t) in &ms {
        let _ = write!(title, "\n{t}");
    }
    Card {
        h: y.max(50.0),
        body: b,
        title,
    }
}

fn node_classes(n: &Node) -> String {
    let mut c = vec!["node", if n.is_series() { &n.kind } else { "step" }];
    c.push(if n.due.is_some() { "due" } else { "current" });
    if n.build.is_none() && has_builds(n) {
        c.push("unbuilt");
    }
    if !n.released.is_empty() {
        c.push("released");
    }
    if !n.revoked.is_empty() {
        c.push("revoked");
    }
    if !n.pinned_children.is_empty() {
        c.push("pins");
    }
    if n.behind.is_some() {
        c.push("behind");
    }
    match n.tested {
        Some(true) => c.push("tested"),
        Some(false) => c.push("failed"),
        None => {}
    }
    c.join(" ")
}

fn edge_class(kind: EdgeKind, behind: bool) -> &'static str {
    match (kind, behind) {
        (EdgeKind::Pinned, true) => "pinned behind",
        (EdgeKind::Pinned, false) => "pinned",
        (EdgeKind::Follow, _) => "follow",
        (EdgeKind::Other, _) => "other",
    }
}

/// An orthogonal polyline as a path with rounded corners.
fn rounded(pts: &[(f64, f64)], dx: f64, dy: f64) -> String {
    let mut d = String::new();
    if pts.is_empty() {
        return d;
    }
    let p = |q: (f64, f64)| (q.0 + dx, q.1 + dy);
    let first = p(pts[0]);
    let _ = write!(d, "M{:.1} {:.1}", first.0, first.1);
    for i in 1..pts.len() {
        let c = p(pts[i]);
        if i + 1 == pts.len() {
            let _ = write!(d, " L{:.1} {:.1}", c.0, c.1);
            break;
        }
        let a = p(pts[i - 1]);
        let b = p(pts[i + 1]);
        let la = ((c.0 - a.0).abs() + (c.1 - a.1).abs()).max(0.001);
        let lb = ((b.0 - c.0).abs() + (b.1 - c.1).abs()).max(0.001);
        let r = 7.0f64.min(la / 2.0).min(lb / 2.0);
        let s = (c.0 - (c.0 - a.0) / la * r, c.1 - (c.1 - a.1) / la * r);
        let e = (c.0 + (b.0 - c.0) / lb * r, c.1 + (b.1 - c.1) / lb * r);
        let _ = write!(
            d,
            " L{:.1} {:.1} Q{:.1} {:.1} {:.1} {:.1}",
            s.0, s.1, c.0, c.1, e.0, e.1
        );
    }
    d
}

/// The drawing: edges, then cards, offset by the margin.
struct Scene {
    body: String,
    width: f64,
    height: f64,
}

fn scene(g: &Graph) -> Scene {
    let cards: Vec<Card> = g.nodes.iter().map(|n| card(n, g.now, g.folded)).collect();
    let index: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut edges = Vec::new();
    let mut kept = Vec::new();
    for e in &g.edges {
        if let (Some(&a), Some(&b)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) {
            edges.push((a, b));
            kept.push(e);
        }
    }
    let sizes: Vec<(f64, f64)> = cards.iter().map(|c| (CARD_W, c.h)).collect();
    let opt = Options {
        fit: Some((FIT.0 - 2.0 * MARGIN, FIT.1 - 2.0 * MARGIN)),
        ..Options::default()
    };
    let l: Layout = layout::layout(&sizes, &edges, &opt);
    let mut body = String::new();
    body.push_str("<g class=\"edges\">\n");
    // follow and other edges first, pinned ones over them
    let mut order: Vec<usize> = (0..kept.len()).collect();
    order.sort_by_key(|&i| match kept[i].kind {
        EdgeKind::Other => 0,
        EdgeKind::Follow => 1,
        EdgeKind::Pinned => 2 + usize::from(kept[i].behind),
    });
    for i in order {
        let e = kept[i];
        let class = edge_class(e.kind, e.behind);
        let marker = class.rsplit(' ').next().unwrap_or("other");
        let _ = writeln!(
            body,
            r#"<path class="edge {class}" data-from="{}" data-to="{}" d="{}" marker-end="url(#arr-{marker})"/>"#,
            esc(&e.from),
            esc(&e.to),
            rounded(&l.routes[i], MARGIN, MARGIN)
        );
    }
    body.push_str("</g>\n<g class=\"nodes\">\n");
    for (i, n) in g.nodes.iter().enumerate() {
        let r = l.boxes[i];
        let c = &cards[i];
        let _ = writeln!(
            body,
            r#"<g class="{}" data-id="{id}" data-series="{s}" data-kind="{k}" data-due="{due}" transform="translate({:.1},{:.1})"><title>{t}</title><rect class="card" width="{CARD_W}" height="{:.1}" rx="8"/>{}<rect class="stripe" width="5" height="{:.1}" rx="2"/></g>"#,
            node_classes(n),
            r.x + MARGIN,
            r.y + MARGIN,
            c.h,
            c.body,
            c.h,
            id = esc(&n.id),
            s = esc(&n.series),
            k = esc(&n.kind),
            due = n.due.is_some(),
            t = esc(&c.title),
        );
    }
    body.push_str("</g>\n");
    Scene {
        body,
        width: l.width + 2.0 * MARGIN,
        height: l.height + 2.0 * MARGIN,
    }
}

/// Styles shared by the page and the standalone SVG.
const SVG_CSS: &str = r#"
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

const FONTS: &str = r#"--sans: "Inter", "Segoe UI", "Helvetica Neue", Arial, "Liberation Sans", "DejaVu Sans", sans-serif; --mono: "JetBrains Mono", "SF Mono", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;"#;

fn markers() -> String {
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

struct Stats {
    series: usize,
    images: usize,
    due: usize,
    released: usize,
    revoked: usize,
    behind: usize,
}

fn stats(g: &Graph) -> Stats {
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

fn stats_line(g: &Graph) -> String {
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

const PAGE_CSS: &str = r#"
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; overflow: hidden; background: #f7f8fa; color: #17202a; font: 13px var(--sans); }
:root { FONTS }
header { height: 52px; display: flex; align-items: center; gap: 16px; padding: 0 16px; background: #ffffff; border-bottom: 1px solid #dde3ea; }
header h1 { font-size: 15px; margin: 0; white-space: nowrap; }
header h1 span { font-weight: 400; color: #55616e; }
header .stats { color: #55616e; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; flex: 1; }
header input[type=search] { width: 220px; padding: 5px 8px; border: 1px solid #c9d1da; border-radius: 6px; font: inherit; }
header label { white-space: nowrap; user-select: none; }
header button { padding: 5px 10px; border: 1px solid #c9d1da; border-radius: 6px; background: #fff; font: inherit; cursor: pointer; }
main { position: absolute; top: 52px; left: 0; right: 0; bottom: 0; }
#canvas { width: 100%; height: 100%; display: block; cursor: grab; }
#canvas.panning { cursor: grabbing; }
.node { cursor: pointer; }
.node:hover .card { stroke: #17202a; }
.node.selected .card { stroke: #2a5aa6; stroke-width: 2.5; }
.node.dim, .edge.dim { opacity: 0.12; }
.legend { position: absolute; left: 12px; bottom: 12px; background: rgba(255,255,255,0.94); border: 1px solid #dde3ea; border-radius: 8px; padding: 6px 10px; display: flex; gap: 14px; align-items: center; font-size: 12px; color: #3d4752; }
.legend svg { vertical-align: middle; }
.legend .sw { display: inline-block; width: 18px; height: 12px; border-radius: 3px; border: 1px solid #cdd5de; background: #fff; vertical-align: middle; border-left: 4px solid #3aa57a; }
.legend .sw.due { border-color: #e0962a; background: #fff1d6; border-left-color: #e0962a; }
.legend .sw.revoked { border-left-color: #c83a2e; }
.legend .hint { color: #8a95a1; }
#panel { position: absolute; top: 0; right: 0; bottom: 0; width: 400px; background: #fff; border-left: 1px solid #dde3ea; box-shadow: -4px 0 16px rgba(0,0,0,0.06); padding: 14px 18px; overflow: auto; }
#panel[hidden] { display: none; }
#panel h2 { margin: 0 0 2px; font-size: 17px; }
#panel .sub { color: #55616e; margin-bottom: 10px; }
#panel h3 { font-size: 11px; text-transform: uppercase; letter-spacing: .05em; color: #8a95a1; margin: 14px 0 4px; }
#panel code, #panel .mono { font: 12px var(--mono); word-break: break-all; }
#panel ul { margin: 0; padding-left: 16px; }
#panel .due { color: #8a4b00; font-weight: 600; }
#panel table { border-collapse: collapse; width: 100%; font-size: 12px; }
#panel td { border-top: 1px solid #eef1f5; padding: 3px 4px; vertical-align: top; }
#panel td.d { color: #8a4b00; }
#panel .close { position: absolute; top: 10px; right: 12px; border: 0; background: none; font-size: 18px; cursor: pointer; color: #55616e; }
#panel pre { background: #f4f6f9; padding: 6px 8px; border-radius: 6px; white-space: pre-wrap; }
"#;

const SCRIPT: &str = r##"
(function () {
  "use strict";
  var svg = document.getElementById("canvas");
  var W = +svg.dataset.width, H = +svg.dataset.height, now = +svg.dataset.now || 0;
  var data = JSON.parse(document.getElementById("csis-graph").textContent);
  var byId = {};
  data.nodes.forEach(function (n) { byId[n.id] = n; });
  var vb = null;
  function setVB(x, y, w, h) { vb = { x: x, y: y, w: w, h: h }; svg.setAttribute("viewBox", x + " " + y + " " + w + " " + h); }
  function fit() {
    var r = svg.getBoundingClientRect();
    // the legend keeps the bottom of the window
    var ah = Math.max(r.height - 52, r.height / 2);
    var s = Math.min(r.width / W, ah / H, 1.25);
    var w = r.width / s, h = r.height / s;
    setVB((W - w) / 2, (H - ah / s) / 2, w, h);
  }
  function toSvg(cx, cy) {
    var r = svg.getBoundingClientRect();
    return { x: vb.x + (cx - r.left) / r.width * vb.w, y: vb.y + (cy - r.top) / r.height * vb.h, r: r };
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    var f = Math.exp(e.deltaY * 0.0015), p = toSvg(e.clientX, e.clientY);
    var w = vb.w * f, h = vb.h * f;
    setVB(p.x - (e.clientX - p.r.left) / p.r.width * w, p.y - (e.clientY - p.r.top) / p.r.height * h, w, h);
  }, { passive: false });
  var drag = null;
  svg.addEventListener("pointerdown", function (e) {
    if (e.target.closest(".node")) return;
    drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y };
    svg.classList.add("panning");
    svg.setPointerCapture(e.pointerId);
  });
  svg.addEventListener("pointermove", function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    setVB(drag.vx - (e.clientX - drag.x) * vb.w / r.width, drag.vy - (e.clientY - drag.y) * vb.h / r.height, vb.w, vb.h);
  });
  function endDrag() { drag = null; svg.classList.remove("panning"); }
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);
  svg.addEventListener("dblclick", function (e) { if (!e.target.closest(".node")) fit(); });
  window.addEventListener("resize", fit);
  document.getElementById("fit").addEventListener("click", fit);

  var nodes = Array.prototype.slice.call(document.querySelectorAll("#canvas .node"));
  var edges = Array.prototype.slice.call(document.querySelectorAll("#canvas .edge"));
  var filter = document.getElementById("filter"), dueOnly = document.getElementById("dueonly");
  function apply() {
    var q = filter.value.trim().toLowerCase(), d = dueOnly.checked, shown = {};
    nodes.forEach(function (g) {
      var id = g.dataset.id, ok = (!q || id.toLowerCase().indexOf(q) >= 0 || g.dataset.series.toLowerCase().indexOf(q) >= 0) && (!d || g.dataset.due === "true");
      shown[id] = ok;
      g.classList.toggle("dim", !ok);
    });
    edges.forEach(function (p) { p.classList.toggle("dim", !(shown[p.dataset.from] && shown[p.dataset.to])); });
  }
  filter.addEventListener("input", apply);
  dueOnly.addEventListener("change", apply);

  function age(at) {
    if (!now || !at) return "";
    var s = Math.max(0, now - at);
    if (s < 60) return s + "s"; if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) return Math.floor(s / 3600) + "h"; if (s < 1209600) return Math.floor(s / 86400) + "d";
    return Math.floor(s / 604800) + "w";
  }
  var panel = document.getElementById("panel");
  function el(tag, text, cls) { var e = document.createElement(tag); if (text != null) e.textContent = text; if (cls) e.className = cls; return e; }
  function section(title) { panel.appendChild(el("h3", title)); }
  function list(items, mono) { var ul = el("ul"); items.forEach(function (t) { ul.appendChild(el("li", t, mono ? "mono" : null)); }); panel.appendChild(ul); }
  function open(id) {
    var n = byId[id]; if (!n) return;
    nodes.forEach(function (g) { g.classList.toggle("selected", g.dataset.id === id); });
    panel.textContent = "";
    var x = el("button", "×", "close"); x.title = "close (Esc)"; x.onclick = close; panel.appendChild(x);
    panel.appendChild(el("h2", n.series));
    panel.appendChild(el("div", [n.kind, n.runtime].filter(Boolean).join(" · ") + (n.parent ? " · from " + n.parent : ""), "sub"));
    panel.appendChild(el("div", n.id, "mono"));
    section("status");
    if (n.due) {
      panel.appendChild(el("div", "due: " + n.due.reason, "due"));
      if (n.due.changed && n.due.changed.length) list(n.due.changed, true);
    } else panel.appendChild(el("div", "current"));
    section("current build");
    panel.appendChild(n.build ? el("div", n.build.id + (n.build.at ? " · " + age(n.build.at) + " old" : ""), "mono") : el("div", "no build yet"));
    var m = [];
    (n.released || []).forEach(function (r) { m.push("released as " + r); });
    if (n.tested === true) m.push("post-bake tests passed"); else if (n.tested === false) m.push("post-bake tests failed");
    (n.pinned_children || []).forEach(function (c) { m.push("pinned child: " + c); });
    if (n.behind) m.push("pinned to " + n.behind.pinned + ", behind the parent's head " + n.behind.head);
    (n.revoked || []).forEach(function (r) { m.push("revoked: " + r); });
    if (m.length) { section("marks"); list(m); }
    var e = n.entry || {};
    section("fingerprint"); panel.appendChild(el("div", e.fingerprint || "", "mono"));
    if (e.inputs && e.inputs.length) { section("inputs"); list(e.inputs, true); }
    if (e.deps && e.deps.length) { section("dependencies"); list(e.deps, true); }
    if (e.command) { section("build just this"); panel.appendChild(el("pre", e.command, "mono")); }
    if (n.steps && n.steps.length) {
      section("steps (" + n.steps.length + ")");
      var t = el("table");
      n.steps.forEach(function (s) {
        var tr = el("tr"); tr.appendChild(el("td", s.kind));
        tr.appendChild(el("td", s.due ? "due: " + s.reason : s.reason, s.due ? "d" : null));
        tr.appendChild(el("td", (s.fingerprint || "").slice(0, 12), "mono"));
        tr.title = s.label; t.appendChild(tr);
      });
      panel.appendChild(t);
    }
    panel.hidden = false;
  }
  function close() { panel.hidden = true; nodes.forEach(function (g) { g.classList.remove("selected"); }); }
  nodes.forEach(function (g) { g.addEventListener("click", function (ev) { ev.stopPropagation(); open(g.dataset.id); }); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") close();
    else if (e.target === filter) return;
    else if (e.key === "f") fit();
    else if (e.key === "/") { e.preventDefault(); filter.focus(); }
  });

  fit();
  // A link can open the page filtered or on one node:
  // `#filter=TEXT`, `#due`, `#node=ID` (joined by `&`).
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("="), k = i < 0 ? kv : kv.slice(0, i), v = i < 0 ? "" : decodeURIComponent(kv.slice(i + 1));
    if (k === "filter") filter.value = v;
    else if (k === "due") dueOnly.checked = true;
    else if (k === "node") open(v);
  });
  apply();
  // What the page looks like after the fit, for tests and tools: boxes in
  // window coordinates.
  function box(e) { var r = e.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; }
  var out = { window: { w: window.innerWidth, h: window.innerHeight }, canvas: box(svg), legend: box(document.querySelector(".legend")), nodes: [], reasons: [], edges: {} };
  out.panel = panel.hidden ? null : panel.innerText;
  nodes.forEach(function (g) {
    out.nodes.push({ id: g.dataset.id, kind: g.dataset.kind, due: g.dataset.due === "true", dim: g.classList.contains("dim"), box: box(g.querySelector(".card")) });
    g.querySelectorAll(".reason, .changed").forEach(function (t) {
      var cs = getComputedStyle(t);
      out.reasons.push({ id: g.dataset.id, cls: t.getAttribute("class"), text: t.textContent, box: box(t), visible: cs.visibility !== "hidden" && cs.display !== "none" && +cs.opacity > 0, px: parseFloat(cs.fontSize) * svg.getScreenCTM().a });
    });
  });
  edges.forEach(function (p) {
    var k = p.getAttribute("class").replace("edge ", "");
    if (out.edges[k]) return;
    var cs = getComputedStyle(p);
    out.edges[k] = { stroke: cs.stroke, dash: cs.strokeDasharray, width: cs.strokeWidth };
  });
  out.scale = svg.getScreenCTM().a;
  document.getElementById("csis-measure").textContent = JSON.stringify(out);
})();
"##;

/// The page: one self-contained file (inline SVG, CSS and script; nothing
/// loaded from elsewhere), fitted to the window.
pub fn html(g: &Graph) -> String {
    let sc = scene(g);
    let data = serde_json::to_string(g)
        .unwrap_or_else(|_| "{}".into())
        // `<` appears only inside JSON strings: as an escape it cannot end
        // the script element
        .replace('<', "\\u003c");
    let legend = r#"<div class="legend"><span><svg width="40" height="10"><path class="edge follow" d="M2 5 H32" marker-end="url(#arr-follow)"/></svg> follow</span><span><svg width="40" height="10"><path class="edge pinned" d="M2 5 H32" marker-end="url(#arr-pinned)"/></svg> pinned</span><span><svg width="40" height="10"><path class="edge pinned behind" d="M2 5 H32" marker-end="url(#arr-behind)"/></svg> pinned, behind</span><span><i class="sw due"></i> due</span><span><i class="sw"></i> current</span><span><i class="sw revoked"></i> revoked</span><span class="hint">drag to pan · wheel to zoom · click a node for its plan entry</span></div>"#;
    let css = PAGE_CSS.replace("FONTS", FONTS);
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}{SVG_CSS}</style>
</head>
<body>
<header>
<h1>csis graph <span>{tree}</span></h1>
<div class="stats">{stats}</div>
<input type="search" id="filter" placeholder="filter by label (/)" aria-label="filter by label">
<label><input type="checkbox" id="dueonly"> due only</label>
<button id="fit" title="fit to the window (f)">fit</button>
</header>
<main>
<svg id="canvas" xmlns="http://www.w3.org/2000/svg" data-width="{w:.0}" data-height="{h:.0}" data-now="{now}" viewBox="0 0 {w:.0} {h:.0}" preserveAspectRatio="xMidYMid meet">
{markers}
{body}</svg>
{legend}
<aside id="panel" hidden></aside>
</main>
<pre id="csis-measure" hidden></pre>
<script type="application/json" id="csis-graph">{data}</script>
<script>{SCRIPT}</script>
</body>
</html>
"#,
        title = esc(&format!("csis graph · {}", g.title)),
        tree = esc(&g.title),
        stats = esc(&stats_line(g)),
        w = sc.width,
        h = sc.height,
        now = g.now.unwrap_or(0),
        markers = markers(),
        body = sc.body,
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Behind, Build, Due, Edge};

    fn node(id: &str, series: &str) -> Node {
        Node {
            id: id.into(),
            kind: "image".into(),
            series: series.into(),
            runtime: Some("sim".into()),
            build: Some(Build {
                id: format!("dummy-{series}0000000000-1"),
                at: Some(1000),
            }),
            ..Node::default()
        }
    }

    fn sample() -> Graph {
        let mut web = node("//images/web@sim", "web");
        web.due = Some(Due {
            code: "inputs-changed".into(),
            reason: "inputs changed".into(),
            changed: vec!["inputs.mods[0].files[0] (playbooks/web.yml)".into()],
        });
        web.released = vec!["stable".into()];
        web.pinned_children = vec!["app".into()];
        let mut app = node("//images/app<&>@sim", "app<&>\"");
        app.behind = Some(Behind {
            pinned: "a".into(),
            head: "b".into(),
        });
        app.revoked = vec!["dummy-x".into()];
        let tools = node("//images/tools@sim", "tools");
        Graph {
            title: "t".into(),
            now: Some(1000 + 3 * 86_400),
            folded: true,
            nodes: vec![web, app, tools],
            edges: vec![
                Edge {
                    from: "//images/web@sim".into(),
                    to: "//images/app<&>@sim".into(),
                    kind: EdgeKind::Pinned,
                    behind: true,
                },
                Edge {
                    from: "//images/web@sim".into(),
                    to: "//images/tools@sim".into(),
                    kind: EdgeKind::Follow,
                    behind: false,
                },
            ],
        }
    }

    #[test]
    fn svg_is_xml_with_every_label_mark_and_edge_kind() {
        let s = svg(&sample());
        let doc = roxmltree::Document::parse(&s).expect("well-formed SVG");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        let all = texts.join("\n");
        for want in [
            "web",
            "app<&>\"",
            "tools",
            "★ stable",
            "⚓ 1 pinned",
            "↺ behind parent",
            "⊘ revoked",
            "due: inputs changed",
            "inputs.mods[0].files[0]",
            "(playbooks/web.yml)",
            "dummy-web00000 · 3d",
        ] {
            assert!(all.contains(want), "{want} missing from the SVG texts");
        }
        let classes: Vec<&str> = doc
            .descendants()
            .filter_map(|n| n.attribute("class"))
            .collect();
        assert!(classes.contains(&"edge pinned behind"));
        assert!(classes.contains(&"edge follow"));
        assert!(classes.iter().any(|c| c.starts_with("node image due")));
    }

    #[test]
    fn dot_and_mermaid_carry_the_marks_and_edge_kinds() {
        let g = sample();
        let d = dot(&g);
        assert!(d.contains("class=\"node image due released pins\""), "{d}");
        assert!(d.contains("[class=\"pinned behind\", style=dashed"));
        assert!(d.contains("[class=\"follow\", penwidth=1.4]"));
        let m = mermaid(&g);
        assert!(m.contains("n0 -. behind .-> n1"), "{m}");
        assert!(m.contains("n0 --> n2"));
        assert!(m.contains("class n0 due;"));
        assert!(m.contains("#lt;&#gt;"));
    }

    #[test]
    fn html_embeds_everything_and_escapes_the_data() {
        let mut g = sample();
        g.nodes[2].series = "</script><script>alert(1)</script>".into();
        let h = html(&g);
        assert_eq!(
            h.matches("<script").count(),
            2,
            "only the data and the page script"
        );
        assert!(!h.contains("src="));
        assert!(!h.contains("https://"));
        let v: serde_json::Value = serde_json::from_str(
            h.split("id=\"csis-graph\">")
                .nth(1)
                .unwrap()
                .split("</script>")
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["nodes"].as_array().unwrap().len(), 3);
    }
}
