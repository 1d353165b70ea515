//! kill -9, Ctrl-C and the tree lock.

use crate::build_support;
use build_support::*;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Start `csis build --json`, read events until `stop(events)` is true.
fn start_until(
    d: &Tree,
    extra: &[&str],
    stop: impl Fn(&[serde_json::Value]) -> bool,
) -> (std::process::Child, Vec<serde_json::Value>) {
    let mut child = d
        .csis()
        .args(["build", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut ev = Vec::new();
    let mut line = String::new();
    while !stop(&ev) {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("csis ended before the condition: {ev:#?}");
        }
        ev.push(serde_json::from_str(line.trim()).unwrap());
    }
    // keep draining in the background so the child never blocks on a full pipe
    std::thread::spawn(move || {
        let mut s = String::new();
        while reader.read_line(&mut s).map(|n| n > 0).unwrap_or(false) {
            s.clear();
        }
    });
    (child, ev)
}

fn finished_bakes(ev: &[serde_json::Value]) -> usize {
    ev.iter()
        .filter(|e| e["event"] == "finished" && e["kind"] == "bake")
        .count()
}

#[test]
fn kill_9_loses_no_record_and_bakes_nothing_twice() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 1.0);
    let (mut child, ev) = start_until(d, &["-j", "2"], |ev| finished_bakes(ev) >= 3);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let finished: Vec<String> = labels(&ev, "finished", "bake");
    let l = lineage(d);
    // every bake reported finished is recorded
    for f in &finished {
        let series = f
            .trim_start_matches("//")
            .split('/')
            .nth(1)
            .unwrap()
            .split('@')
            .next()
            .unwrap();
        assert!(
            l.head(series, "sim").is_some(),
            "{f} finished but is not recorded"
        );
    }
    let recorded = l.builds.len();
    assert!(recorded >= finished.len());
    assert!(recorded < 7, "the kill came in the middle");

    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0, "{ev:#?}");
    assert_eq!(
        summary(&ev)["baked"].as_u64().unwrap() as usize,
        7 - recorded
    );
    // nothing baked twice: one successful bake per series in the runtime's store
    // (a bake killed half-way never completed, so it is not in the store)
    for (series, n) in bake_counts(d) {
        assert_eq!(n, 1, "{series} baked {n} times");
    }
    assert_eq!(lineage(d).builds.len(), 7);
    // everything is in meta-state itself now, the journal is empty
    assert_eq!(
        csis_cache::MetaState::of_tree(d)
            .lineage()
            .unwrap()
            .builds
            .len(),
        7
    );
    let j = csis_cache::LocalDir::of_tree(d).journal();
    assert_eq!(std::fs::metadata(j).map(|m| m.len()).unwrap_or(0), 0);
    assert_eq!(summary(&build(d, &[]).1)["baked"], 0);
}

#[test]
fn ctrl_c_stops_cleanly_and_says_what_did_not_run() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 30.0);
    let (mut child, _) = start_until(d, &["-j", "2"], |ev| {
        ev.iter()
            .filter(|e| e["event"] == "started" && e["kind"] == "bake")
            .count()
            >= 2
    });
    let t0 = Instant::now();
    let st = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "stopped without waiting for the 30 s bakes"
    );
    assert_eq!(status.code(), Some(130));
    assert!(lineage(d).builds.is_empty());
}

#[test]
fn ctrl_c_summary_lists_not_run() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 30.0);
    let child = d
        .csis()
        .args(["build", "--json", "-j", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let ev = events(&out.stdout);
    let s = summary(&ev);
    assert_eq!(s["interrupted"], true);
    assert!(s["not_run"].as_u64().unwrap() >= 5, "{s}");
    assert!(s["cancelled"].as_u64().unwrap() >= 1, "{s}");
}

#[test]
fn second_build_waits_or_exits_75() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 1.5);
    let (mut child, _) = start_until(d, &["-j", "1"], |ev| {
        ev.iter().any(|e| e["event"] == "started")
    });
    let out = d
        .csis()
        .args(["build", "--json", "--no-wait"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked"));
    // without --no-wait it waits for the first build, then finds nothing to do
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    assert_eq!(summary(&ev)["baked"], 0);
    assert!(child.wait().unwrap().success());
}
