//! A first build bakes everything; a second build of the unchanged tree
//! bakes nothing and does not even construct a runtime.

use crate::build_support;
use build_support::*;

#[test]
fn second_build_bakes_nothing() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(due_bakes(&plan(d, &[])), ALL_BAKES.to_vec());

    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0, "{ev:?}");
    let s = summary(&ev);
    assert_eq!(s["baked"], 7);
    assert_eq!(s["failed"], 0);
    assert_eq!(s["not_run"], 0);
    let finished = finished_bakes(&ev);
    assert_eq!(finished, ALL_BAKES.to_vec());
    assert_eq!(lineage(d).builds.len(), 7);
    // Each finished bake says which build it made (JSON for CI).
    let mut made: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "finished" && e["kind"] == "bake")
        .map(|e| {
            e["output"]["build_id"]
                .as_str()
                .expect("a build id")
                .to_string()
        })
        .collect();
    made.sort();
    let mut recorded: Vec<String> = lineage(d)
        .builds
        .iter()
        .map(|b| b.build_id.clone())
        .collect();
    recorded.sort();
    assert_eq!(made, recorded);
    // Parents bake before children.
    let pos = |l: &str| {
        ev.iter()
            .position(|e| e["event"] == "finished" && e["label"] == l)
            .unwrap()
    };
    assert!(pos("//os/deb12@sim:bake") < pos("//images/web@sim:bake"));
    assert!(pos("//images/web@sim:bake") < pos("//images/app@sim:bake"));
    assert!(pos("//images/app@sim:bake") < pos("//images/tools@sim:bake"));
    // Each bake's log, under its run's directory.
    let runs: Vec<_> = std::fs::read_dir(d.join(".csis/logs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "one run, one log directory");
    let log = std::fs::read_to_string(runs[0].path().join("images_web@sim_bake.log")).unwrap();
    assert!(log.contains("recorded dummy-"), "{log}");

    let store_before = std::fs::read(d.join(".csis/dummy/sim.json")).unwrap();
    let lineage_before = std::fs::read(d.join("meta-state/lineage.yaml")).unwrap();
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    let s = summary(&ev);
    assert_eq!(s["baked"], 0);
    assert_eq!(s["skipped"], 7);
    assert_eq!(s["finished"], 0, "no resolve, emit or retag ran: {ev:?}");
    assert!(ev
        .iter()
        .all(|e| e["event"] == "skipped" || e["event"] == "summary"));
    // The runtime was not touched, and nothing was rewritten.
    assert_eq!(
        std::fs::read(d.join(".csis/dummy/sim.json")).unwrap(),
        store_before
    );
    assert_eq!(
        std::fs::read(d.join("meta-state/lineage.yaml")).unwrap(),
        lineage_before
    );
    assert!(due_bakes(&plan(d, &[])).is_empty());
}

#[test]
fn plan_changes_nothing_and_dry_run_records_nothing() {
    let t = tree("basic");
    let d = &t;
    let (code, out, err) = d.run(&["plan"]);
    assert_eq!(code, 0, "csis plan failed:\n{out}\n{err}");
    assert!(!d.join("meta-state").exists());
    assert!(!d.join(".csis").exists());
    let (code, ev) = build(d, &["--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(summary(&ev)["baked"], 0);
    assert!(labels(&ev, "started", "bake").is_empty());
    // a dry run resolves its vendor images (a read-only query), so that
    // what it emits names them
    let resolves = labels(&ev, "started", "resolve");
    assert!(!resolves.is_empty(), "a dry run resolves its vendor images");
    assert!(
        resolves.iter().all(|l| l.starts_with("//os/")),
        "{resolves:?}"
    );
    assert_eq!(labels(&ev, "finished", "emit").len(), 7);
    assert!(lineage(d).builds.is_empty());
    assert_eq!(due_bakes(&plan(d, &[])).len(), 7);
}

#[test]
fn force_bake_rebakes_the_series_and_its_follow_descendants() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    let before = bake_counts(d);
    let (code, ev) = build(d, &["--force-bake", "web@sim"]);
    assert_eq!(code, 0);
    let baked = finished_bakes(&ev);
    assert_eq!(
        baked,
        vec![
            "//images/app@sim:bake",
            "//images/tools@sim:bake",
            "//images/web@sim:bake"
        ]
    );
    let after = bake_counts(d);
    assert_eq!(after["web"], before["web"] + 1);
    assert_eq!(after["app-pinned"], before["app-pinned"]);
    // and it converges again
    assert_eq!(summary(&build(d, &[]).1)["baked"], 0);
}

#[test]
fn selecting_an_image_selects_its_ancestors_only() {
    let t = tree("basic");
    let d = &t;
    let (code, ev) = build(d, &["//images/app"]);
    assert_eq!(code, 0);
    let baked = finished_bakes(&ev);
    assert_eq!(
        baked,
        vec![
            "//images/app@sim:bake",
            "//images/web@sim:bake",
            "//os/deb12@sim:bake"
        ]
    );
    let out = d.csis().args(["plan", "//images/nope"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches nothing"));
}

/// An image that declares `release: {model}` is released by the build that
/// baked it (core.md §5.4), and only then: the converged build releases
/// nothing new.
#[test]
fn a_declared_release_follows_the_bake() {
    let t = tree("basic");
    let d = &t;
    let (code, _) = build(d, &[]);
    assert_eq!(code, 0);
    let releases = csis_cache::MetaState::of_tree(d).releases().unwrap();
    let tools = lineage(d).head("tools", "sim").unwrap().build_id.clone();
    assert_eq!(
        releases.current.get("stable").and_then(|m| m.get("tools")),
        Some(&tools),
        "{releases:#?}"
    );
    assert_eq!(
        releases.releases.len(),
        1,
        "only the declared image is released"
    );
    let (code, _) = build(d, &[]);
    assert_eq!(code, 0);
    let again = csis_cache::MetaState::of_tree(d).releases().unwrap();
    assert_eq!(
        again.releases.len(),
        1,
        "a converged build releases nothing new"
    );
}

/// One build constructs each runtime it asks once: the state gate, the
/// plan's vendor reads and the nodes share one set of runtimes (and the
/// tokio runtime their clients belong to). `CSIS_TIMING=1` says each
/// construction (`construct runtime NAME`).
#[test]
fn a_build_constructs_each_runtime_it_asks_once() {
    let t = tree("basic");
    let d = &t;
    let constructions = |extra: &[&str]| {
        let out = d
            .csis()
            .env("CSIS_TIMING", "1")
            .arg("build")
            .arg("--json")
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let ev = events(&out.stdout);
        let n = stderr
            .lines()
            .filter(|l| l.contains("timing: construct runtime sim:"))
            .count();
        (n, summary(&ev)["baked"].as_u64().unwrap(), stderr)
    };
    // the whole tree: the gate's query, the online checks and seven bakes
    let (n, baked, stderr) = constructions(&[]);
    assert_eq!(baked, 7);
    assert_eq!(n, 1, "{stderr}");
    // a forced rebake of one series and its follow descendants
    let (n, baked, stderr) = constructions(&["--force-bake", "web"]);
    assert!(baked >= 1, "{stderr}");
    assert_eq!(n, 1, "{stderr}");
    // a no-op asks no runtime
    let (n, baked, stderr) = constructions(&[]);
    assert_eq!(baked, 0);
    assert_eq!(n, 0, "{stderr}");
}
