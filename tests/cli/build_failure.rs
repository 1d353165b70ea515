//! A failed bake stops only its descendants; independent branches go on.

use crate::build_support;
use build_support::*;

#[test]
fn failure_stops_only_descendants() {
    let t = tree("basic");
    let d = &t;
    let out = d
        .csis()
        .args(["build", "--json"])
        .env("CSIS_DUMMY_FAIL", "web")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out.stdout);
    assert_eq!(labels(&ev, "failed", "bake"), vec!["//images/web@sim:bake"]);
    let mut not_run = labels(&ev, "not_run", "bake");
    not_run.sort();
    assert_eq!(
        not_run,
        vec![
            "//images/app-pinned@sim:bake",
            "//images/app@sim:bake",
            "//images/tools@sim:bake"
        ]
    );
    let baked = finished_bakes(&ev);
    assert_eq!(
        baked,
        vec![
            "//images/worker@sim:bake",
            "//os/alma9@sim:bake",
            "//os/deb12@sim:bake"
        ]
    );
    let s = summary(&ev);
    assert_eq!(s["failed"], 1);
    assert_eq!(s["baked"], 3);
    // The failed event names the bake's log, kept under the run's directory.
    let failed = ev
        .iter()
        .find(|e| e["event"] == "failed" && e["label"] == "//images/web@sim:bake")
        .unwrap();
    let log = std::path::PathBuf::from(failed["log"].as_str().expect("a log path"));
    assert!(log.starts_with(d.join(".csis/logs")), "{log:?}");
    assert_eq!(log.file_name().unwrap(), "images_web@sim_bake.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("bake failed"), "{text}");
    // only successful bakes are recorded
    let l = lineage(d);
    assert_eq!(l.builds.len(), 3);
    assert!(l.head("web", "sim").is_none());

    // the next build bakes exactly what is missing
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    assert_eq!(summary(&ev)["baked"], 4);
}

#[test]
fn fail_fast_stops_everything() {
    let t = tree("basic");
    let d = &t;
    set_bake_seconds(d, 0.3);
    let out = d
        .csis()
        .args(["build", "--json", "--fail-fast", "-j", "1"])
        .env("CSIS_DUMMY_FAIL", "deb12")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let ev = events(&out.stdout);
    let s = summary(&ev);
    assert_eq!(s["failed"], 1);
    // worker (independent of deb12) did not get to run after the failure
    assert!(labels(&ev, "finished", "bake").len() <= 1, "{ev:#?}");
    assert!(s["not_run"].as_u64().unwrap() >= 5);
}
