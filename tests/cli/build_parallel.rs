//! Independent bakes run at the same time (checked from event order).

use crate::build_support;
use build_support::*;
use serde_json::Value;

fn pos(ev: &[Value], event: &str, label: &str) -> usize {
    ev.iter()
        .position(|e| e["event"] == event && e["label"] == label)
        .unwrap_or_else(|| panic!("no {event} for {label}"))
}

#[test]
fn independent_bakes_overlap_and_j1_serializes() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 0.5);
    let (code, ev) = build(d, &["-j", "4", "//os/..."]);
    assert_eq!(code, 0);
    let (a, b) = ("//os/deb12@sim:bake", "//os/alma9@sim:bake");
    // each started before the other finished
    assert!(pos(&ev, "started", a) < pos(&ev, "finished", b), "{ev:#?}");
    assert!(pos(&ev, "started", b) < pos(&ev, "finished", a), "{ev:#?}");

    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 0.2);
    let (code, ev) = build(d, &["-j", "1", "//os/..."]);
    assert_eq!(code, 0);
    let (sa, fa, sb, fb) = (
        pos(&ev, "started", a),
        pos(&ev, "finished", a),
        pos(&ev, "started", b),
        pos(&ev, "finished", b),
    );
    assert!(
        fa < sb || fb < sa,
        "with -j 1 one bake ends before the other starts: {ev:#?}"
    );
}
