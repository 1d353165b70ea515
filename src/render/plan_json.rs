//! `csis plan --json`: the plan as its stable JSON document, written as it
//! goes (no document in memory: a plan of 60,000 nodes is tens of
//! megabytes), byte for byte what `serde_json`'s pretty printer writes of
//! it (`the_document_is_serde_jsons_pretty_print`). The nodes are written
//! here, not through serde: a plan writes nine keys and about as many
//! strings per node, almost none needing an escape, and serde_json's
//! escaper looks at every byte through a table (most of the writing's
//! cost at 5,000 images). A string that needs an escape, a node's
//! `changes`, and the `behind` and `fleet` lists go through serde_json.

use std::io::{self, Write};

use csis_ops::build::{Plan, PlannedNode};
use serde::Serialize;

/// The plan, with the pinned images that are current but behind their
/// parent's head (a `behind` key, only when there is one) and the fleet's
/// actions (`fleet`, likewise).
pub fn write_plan_json(
    plan: &Plan,
    explain: bool,
    behind: &[csis_ops::upgrade::Behind],
    fleet: &[csis_ops::fleet::plan::FleetAction],
    out: impl Write,
) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, out);
    w.write_all(b"{\n  \"nodes\": [")?;
    for (i, n) in plan.nodes.iter().enumerate() {
        w.write_all(if i == 0 { b"\n    {" } else { b",\n    {" })?;
        node(&mut w, n, explain)?;
        w.write_all(b"\n    }")?;
    }
    w.write_all(if plan.nodes.is_empty() {
        b"]"
    } else {
        b"\n  ]"
    })?;
    if !behind.is_empty() {
        w.write_all(b",\n  \"behind\": ")?;
        nested(&mut w, behind, "\n  ")?;
    }
    if !fleet.is_empty() {
        w.write_all(b",\n  \"fleet\": ")?;
        nested(&mut w, fleet, "\n  ")?;
    }
    w.write_all(b"\n}\n")?;
    w.flush()
}

/// A node's keys, each on a line of its own at the node's depth.
fn node(w: &mut impl Write, n: &PlannedNode, explain: bool) -> io::Result<()> {
    const KEY: &[u8] = b"\n      \"";
    let key = |w: &mut dyn Write, name: &str, first: bool| -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        w.write_all(KEY)?;
        w.write_all(name.as_bytes())?;
        w.write_all(b"\": ")
    };
    key(w, "label", true)?;
    string(w, n.label.as_str())?;
    key(w, "kind", false)?;
    string(w, &n.kind)?;
    key(w, "series", false)?;
    optional(w, n.series.as_deref())?;
    key(w, "runtime", false)?;
    optional(w, n.runtime.as_deref())?;
    key(w, "fingerprint", false)?;
    w.write_all(b"\"")?;
    w.write_all(&n.fingerprint.hex_bytes())?;
    w.write_all(b"\"")?;
    key(w, "due", false)?;
    w.write_all(if n.due { b"true" } else { b"false" })?;
    key(w, "reason", false)?;
    string(w, &n.reason)?;
    key(w, "code", false)?;
    string(w, &n.code)?;
    key(w, "deps", false)?;
    if n.deps.is_empty() {
        w.write_all(b"[]")?;
    } else {
        for (i, d) in n.deps.iter().enumerate() {
            w.write_all(if i == 0 {
                b"[\n        "
            } else {
                b",\n        "
            })?;
            string(w, d.as_str())?;
        }
        w.write_all(b"\n      ]")?;
    }
    if explain && !n.changes.is_empty() {
        key(w, "changes", false)?;
        nested(w, &n.changes, "\n      ")?;
    }
    Ok(())
}

/// A JSON string: as it is when nothing in it needs an escape, else
/// serde_json's.
fn string(w: &mut (impl Write + ?Sized), s: &str) -> io::Result<()> {
    if !needs_escape(s.as_bytes()) {
        w.write_all(b"\"")?;
        w.write_all(s.as_bytes())?;
        w.write_all(b"\"")
    } else {
        serde_json::to_writer(w, s).map_err(io::Error::other)
    }
}

/// Whether a byte of `bytes` is a control byte, `"` or `\\` (one pass
/// without a branch, which the compiler vectorizes; a word at a time by
/// hand was measured no faster).
fn needs_escape(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |any, &b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

fn optional(w: &mut (impl Write + ?Sized), s: Option<&str>) -> io::Result<()> {
    match s {
        Some(s) => string(w, s),
        None => w.write_all(b"null"),
    }
}

/// `value` pretty-printed at the depth whose line break and indentation
/// is `newline` (a string never holds a raw line break: each of the
/// printout's lines moves right as a whole).
fn nested<T: Serialize + ?Sized>(
    w: &mut (impl Write + ?Sized),
    value: &T,
    newline: &str,
) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let mut lines = text.split('\n');
    w.write_all(lines.next().unwrap_or_default().as_bytes())?;
    for line in lines {
        w.write_all(newline.as_bytes())?;
        w.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use csis_ops::build::{Decision, Label};

    /// What the plan's document is: the plan serialized by serde_json's
    /// pretty printer, `changes` only with `--explain`.
    fn by_serde(plan: &Plan, explain: bool, behind: &[csis_ops::upgrade::Behind]) -> String {
        #[derive(Serialize)]
        struct Node<'a> {
            label: &'a Label,
            kind: &'a str,
            series: &'a Option<String>,
            runtime: &'a Option<String>,
            fingerprint: &'a csis_ops::build::Fingerprint,
            due: bool,
            reason: &'a str,
            code: &'a str,
            deps: &'a [Label],
            #[serde(skip_serializing_if = "Option::is_none")]
            changes: Option<&'a [csis_ops::build::FieldChange]>,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            nodes: Vec<Node<'a>>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            behind: &'a [csis_ops::upgrade::Behind],
        }
        let nodes = plan
            .nodes
            .iter()
            .map(|n| Node {
                label: &n.label,
                kind: &n.kind,
                series: &n.series,
                runtime: &n.runtime,
                fingerprint: &n.fingerprint,
                due: n.due,
                reason: &n.reason,
                code: &n.code,
                deps: &n.deps,
                changes: (explain && !n.changes.is_empty()).then_some(&n.changes[..]),
            })
            .collect();
        serde_json::to_string_pretty(&Doc { nodes, behind }).unwrap() + "\n"
    }

    fn node(label: &str, reason: &str, deps: &[&str], series: Option<&str>) -> PlannedNode {
        let label = Label::parse(label).unwrap();
        PlannedNode {
            id: csis_ops::build::NodeId::from_index(0),
            kind: label.kind().unwrap_or("bake").to_string(),
            label,
            series: series.map(str::to_string),
            runtime: None,
            fingerprint: csis_ops::build::Fingerprint::of_bytes(reason.as_bytes()),
            due: reason.starts_with("due"),
            reason: reason.to_string(),
            code: "inputs-changed".into(),
            deps: deps.iter().map(|d| Label::parse(d).unwrap()).collect(),
            changes: Vec::new(),
            decision: Decision::Current { build: None },
        }
    }

    fn ours(plan: &Plan, explain: bool, behind: &[csis_ops::upgrade::Behind]) -> String {
        let mut out = Vec::new();
        write_plan_json(plan, explain, behind, &[], &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_string_needs_an_escape_when_serde_json_escapes_it() {
        // every byte in every place of a word, and the tail
        for len in [1usize, 7, 8, 9, 16, 17] {
            for at in 0..len {
                for b in 0u8..=0x7f {
                    let mut v = vec![b'a'; len];
                    v[at] = b;
                    let s = std::str::from_utf8(&v).unwrap();
                    let escaped = serde_json::to_string(s).unwrap() != format!("\"{s}\"");
                    if escaped {
                        assert!(needs_escape(&v), "{s:?}");
                    }
                }
            }
        }
        assert!(!needs_escape("//images/web@sim:bake é ✓ \u{7f}".as_bytes()));
    }

    #[test]
    fn the_document_is_serde_jsons_pretty_print() {
        let mut plan = Plan::default();
        for explain in [false, true] {
            assert_eq!(ours(&plan, explain, &[]), by_serde(&plan, explain, &[]));
        }
        plan.nodes.push(node(
            "//images/web@sim:bake",
            "due: inputs changed",
            &[],
            Some("web"),
        ));
        let mut tricky = node(
            "//images/app@sim:bake",
            "a \"quoted\" reason\\ with a tab\t, a line\nbreak, \u{1} and é ✓ \u{7f}",
            &["//images/web@sim:bake", "//images/base@sim:resolve"],
            None,
        );
        tricky.changes = vec![csis_ops::build::FieldChange {
            path: "mods[0].files[1].blake3".into(),
            old: Some(serde_json::json!({"a": [1, 2], "b": "x\"y"})),
            new: None,
            item: Some("scripts/a.sh".into()),
        }];
        plan.nodes.push(tricky);
        let behind = [csis_ops::upgrade::Behind {
            image: "app".into(),
            runtime: "sim".into(),
            parent: "web".into(),
            pinned: "b-1".into(),
            head: "b-2".into(),
            command: "csis upgrade app --to \"b-2\"".into(),
        }];
        for explain in [false, true] {
            for behind in [&[][..], &behind[..]] {
                assert_eq!(
                    ours(&plan, explain, behind),
                    by_serde(&plan, explain, behind),
                    "explain {explain}"
                );
            }
        }
    }
}
