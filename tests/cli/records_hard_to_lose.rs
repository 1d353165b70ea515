//! Records that survive damage and kills: an adopted build keeps the run
//! that baked it; a journal that cannot be written stops the build.

use crate::build_support;

use build_support::{build, lineage, tree};

#[test]
fn an_adopted_build_keeps_the_run_id_of_the_run_that_baked_it() {
    let t = tree("basic");
    let d = &t;
    let (code, _) = build(d, &[]);
    assert_eq!(code, 0);
    let before = lineage(d);
    let worker = before.head("worker", "sim").unwrap().clone();
    let baked_by = worker.run.clone().unwrap();
    // A kill between the finished bake and its journal line: the record
    // is gone, the image (with its lineage tags) is still in the runtime.
    let mut l = before.clone();
    l.builds.retain(|b| b.build_id != worker.build_id);
    let meta = csis_cache::MetaState::of_tree(d);
    meta.save_lineage(&l).unwrap();
    let _ = std::fs::remove_dir_all(d.join(".csis/cache"));
    let _ = std::fs::remove_dir_all(d.join(".csis/parsed"));
    // A second later: a new run id.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0, "{ev:?}");
    let after = lineage(d);
    let adopted = after.head("worker", "sim").unwrap();
    assert_eq!(
        adopted.build_id, worker.build_id,
        "adopted, not baked again"
    );
    assert_eq!(
        adopted.run.as_deref(),
        Some(baked_by.as_str()),
        "the record names the run that baked it"
    );
    // So the state query sees no `changed` drift.
    let out = d
        .csis()
        .args(["state", "query", "--json"])
        .output()
        .unwrap();
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["summary"]["changed"], 0, "{rep}");
}

#[test]
fn a_journal_that_cannot_be_written_stops_the_build_at_the_first_record() {
    let t = tree("basic");
    let d = &t;
    std::fs::create_dir_all(d.join(".csis/lineage.journal")).unwrap();
    let (code, ev) = build(d, &["-j", "1"]);
    assert_ne!(code, 0);
    let baked: usize = build_support::bake_counts(d).values().sum();
    let refused = ev
        .iter()
        .filter(|e| e.to_string().contains("records cannot be written"))
        .count();
    assert!(refused > 0, "the later bakes are refused: {ev:?}");
    assert_eq!(
        baked, 1,
        "one bake ran (and could not be recorded), no more"
    );
}

/// A record written twice is read once, and the binary says so on stderr
/// (the cache says it through the `log` facade, `src/say.rs` prints it):
/// `warning: <meta-state>: lineage.yaml records build ... more than once`.
#[test]
fn a_record_written_twice_is_read_once_and_said() {
    let t = tree("basic");
    let d = &t;
    let (code, _) = build(d, &[]);
    assert_eq!(code, 0);
    let path = d.join("meta-state/lineage.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let l = lineage(d);
    let first = l.builds[0].clone();
    let mut twice = l.clone();
    twice.builds.push(first.clone());
    csis_cache::MetaState::of_tree(d)
        .save_lineage(&twice)
        .unwrap();
    assert_ne!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "written twice"
    );
    let out = d.csis().args(["builds", "--json"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let said = format!(
        "lineage.yaml records build {} ({}) more than once",
        first.build_id, first.series
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning: ") && l.contains(&said)),
        "{err}"
    );
    let _: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout stays one JSON document");
}
