//! A card per node (its lines, classes and marks) and the scene: the laid-out
//! cards and their routed edges as SVG elements, which the page and the
//! standalone SVG share.

use super::*;

pub(super) struct Card {
    h: f64,
    body: String,
    title: String,
}

/// Does the node stand for builds (a series, or a bake step)?
pub(super) fn has_builds(n: &Node) -> bool {
    n.is_series() || n.kind == "bake"
}

pub(super) fn build_line(n: &Node, now: Option<i64>) -> String {
    if n.is_fleet() {
        // a storage or an instance: what the plan does with it
        if let Some(s) = n.steps.first() {
            return s.reason.split(':').next().unwrap_or(&s.reason).to_string();
        }
    }
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

pub(super) fn card(n: &Node, now: Option<i64>, folded: bool) -> Card {
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

pub(super) fn node_classes(n: &Node) -> String {
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

pub(super) fn edge_class(kind: EdgeKind, behind: bool) -> &'static str {
    match (kind, behind) {
        (EdgeKind::Pinned, true) => "pinned behind",
        (EdgeKind::Pinned, false) => "pinned",
        (EdgeKind::Follow, _) => "follow",
        (EdgeKind::Other, _) => "other",
    }
}

/// An orthogonal polyline as a path with rounded corners.
pub(super) fn rounded(pts: &[(f64, f64)], dx: f64, dy: f64) -> String {
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
pub(super) struct Scene {
    pub(super) body: String,
    pub(super) width: f64,
    pub(super) height: f64,
}

pub(super) fn scene(g: &Graph) -> Scene {
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
