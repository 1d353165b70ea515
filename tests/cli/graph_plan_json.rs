//! The `csis plan --json` document (stable interface), as an insta snapshot.

use crate::build_support;
use build_support::*;

use serde_json::Value;

/// Fingerprints move with the recipe and the fixture's contents: the
/// snapshot checks shape, labels, reasons and deps; fingerprints are
/// checked for form here.
fn redact(mut v: Value) -> Value {
    for n in v["nodes"].as_array_mut().unwrap() {
        let fp = n["fingerprint"].as_str().unwrap();
        assert_eq!(fp.len(), 64);
        assert!(fp.chars().all(|c| c.is_ascii_hexdigit()));
        n["fingerprint"] = Value::String("[fingerprint]".into());
    }
    v
}

#[test]
fn plan_json_snapshot() {
    let t = tree("basic");
    let out = t.csis().args(["plan", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("plan_basic_fresh", redact(v));
}

#[test]
fn plan_json_after_build_and_selection() {
    let t = tree("basic");
    assert_eq!(build(&t, &[]).0, 0);
    let out = t
        .csis()
        .args(["plan", "--json", "//images/tools"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // build ids in "current (build ...)" carry fingerprint prefixes
    for n in v["nodes"].as_array_mut().unwrap() {
        if n["code"] == "current" && n["kind"] == "bake" {
            assert!(n["reason"]
                .as_str()
                .unwrap()
                .starts_with("current (build dummy-"));
            n["reason"] = Value::String("current (build [id])".into());
        }
    }
    insta::assert_json_snapshot!("plan_basic_tools_converged", redact(v));
}
