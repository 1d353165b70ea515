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

/// With one slot, the bake whose series took longest last time starts
/// first: the scheduler's cost of a due bake is its series' last recorded
/// `bake_seconds` on that runtime (the records, not the runtime type's
/// constant), and swapping the records swaps the order.
#[test]
fn the_recorded_bake_seconds_order_the_bakes() {
    let t = tree("basic");
    let d = &t;
    let (code, _) = build(d, &["-j", "1", "//os/..."]);
    assert_eq!(code, 0);
    let (deb, alma) = ("//os/deb12@sim:bake", "//os/alma9@sim:bake");
    for (deb_secs, alma_secs, first) in [(1.0, 100.0, alma), (100.0, 1.0, deb)] {
        let mut l = lineage(d);
        for b in &mut l.builds {
            match b.series.as_str() {
                "deb12" => b.bake_seconds = Some(deb_secs),
                "alma9" => b.bake_seconds = Some(alma_secs),
                _ => {}
            }
        }
        csis_cache::MetaState::of_tree(d).save_lineage(&l).unwrap();
        let (code, ev) = build(d, &["-j", "1", "--force-bake", "all", "//os/..."]);
        assert_eq!(code, 0, "{ev:#?}");
        let second = if first == deb { alma } else { deb };
        assert!(
            pos(&ev, "started", first) < pos(&ev, "started", second),
            "{first} (recorded {}) starts before {second}: {ev:#?}",
            if first == deb { deb_secs } else { alma_secs }
        );
    }
}
