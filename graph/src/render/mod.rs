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
mod card;
mod html;
mod svg;
#[cfg(test)]
mod tests;
mod text;

pub use html::html;
pub use svg::svg;
pub use text::{dot, json, mermaid};
