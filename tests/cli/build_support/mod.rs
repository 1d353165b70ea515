//! Helpers shared by the graph_* and build_* integration tests: temp copies
//! of the fixture trees under tests/fixtures/graph/ (testkit's [`Tree`],
//! which runs the real `csis` binary on them), JSON-lines events.
#![allow(dead_code)]

use std::path::Path;

pub use csis_testkit::Tree;

use serde_json::Value;

/// A temp copy of `tests/fixtures/graph/<name>`.
pub fn tree(name: &str) -> Tree {
    Tree::of(&format!("graph/{name}"))
}

/// Parse JSON lines.
pub fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// What a `build --json` said: its notices' lines (`{"event":"notice"}`
/// of the stream), then stderr.
pub fn said(out: &std::process::Output) -> String {
    let notices: String = events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "notice")
        .map(|e| format!("{}\n", e["message"].as_str().unwrap_or_default()))
        .collect();
    format!("{notices}{}", String::from_utf8_lossy(&out.stderr))
}

pub fn summary(ev: &[Value]) -> &Value {
    let last = ev.last().expect("at least the summary");
    assert_eq!(last["event"], "summary", "the summary comes last: {last}");
    last
}

/// Labels of the events of one type and kind, in order.
pub fn labels(ev: &[Value], event: &str, kind: &str) -> Vec<String> {
    ev.iter()
        .filter(|e| e["event"] == event && e["kind"] == kind)
        .map(|e| e["label"].as_str().unwrap().to_string())
        .collect()
}

/// The labels of the bakes that finished, sorted (parallel bakes finish in
/// any order).
pub fn finished_bakes(ev: &[Value]) -> Vec<String> {
    let mut v = labels(ev, "finished", "bake");
    v.sort();
    v
}

/// `csis build --json` (plus `extra` args); returns (exit code, events).
pub fn build(t: &Tree, extra: &[&str]) -> (i32, Vec<Value>) {
    let out = t
        .csis()
        .arg("build")
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), events(&out.stdout))
}

/// `csis plan --json`: label -> node.
pub fn plan(t: &Tree, extra: &[&str]) -> Vec<Value> {
    let out = t
        .csis()
        .arg("plan")
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["nodes"].as_array().unwrap().clone()
}

/// The due bake labels of a plan, sorted.
pub fn due_bakes(nodes: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = nodes
        .iter()
        .filter(|n| n["kind"] == "bake" && n["due"] == true)
        .map(|n| n["label"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Set the dummy runtime's `bake_seconds`.
pub fn set_bake_seconds(dir: &Path, secs: f64) {
    let p = dir.join("cfg/runtime-builders.yml");
    let s = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{s}    bake_seconds: {secs}\n")).unwrap();
}

/// The dummy runtime's store (`.csis/dummy/sim.json`).
pub fn store(dir: &Path) -> Value {
    // the snapshot with the runtime's change log replayed
    let s = csis_runtime_dummy::read_store(&dir.join(".csis/dummy/sim.json"));
    serde_json::to_value(s).unwrap()
}

/// Successful dummy bakes per series.
pub fn bake_counts(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for b in store(dir)["bakes"].as_array().unwrap() {
        if b["ok"] == true {
            *m.entry(b["series"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    m
}

/// The lineage as JSON (through the YAML reader of csis-cache).
/// (With the journal of an interrupted build merged, as csis reads it.)
pub fn lineage(dir: &Path) -> csis_cache::Lineage {
    let j = csis_cache::LocalDir::of_tree(dir).journal();
    csis_cache::MetaState::of_tree(dir)
        .load_with_journal(&j)
        .unwrap()
        .0
}

pub fn pins(dir: &Path) -> csis_cache::Pins {
    let j = csis_cache::LocalDir::of_tree(dir).journal();
    csis_cache::MetaState::of_tree(dir)
        .load_with_journal(&j)
        .unwrap()
        .1
}

pub const ALL_BAKES: [&str; 7] = [
    "//images/app-pinned@sim:bake",
    "//images/app@sim:bake",
    "//images/tools@sim:bake",
    "//images/web@sim:bake",
    "//images/worker@sim:bake",
    "//os/alma9@sim:bake",
    "//os/deb12@sim:bake",
];
