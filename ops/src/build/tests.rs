//! The executor without the CLI: a build of the dummy fixture tree.

use std::sync::{Arc, Mutex};

use csis_engine::{Event, Plan};

use super::*;
use crate::test_tree::ops_basic;

#[derive(Default)]
struct Seen {
    events: Mutex<Vec<Event>>,
    logs: Mutex<Vec<(String, PathBuf)>>,
}

impl Reporter for Seen {
    fn note(&self, _notice: &Notice) {}
    fn words(&self, notice: &Notice) -> Vec<String> {
        vec![format!("{notice:?}")]
    }
    fn event(&self, e: &Event) {
        self.events.lock().unwrap().push(e.clone());
    }
    fn log_line(&self, _label: &str, _line: &str) {}
    fn dry_run_plan(&self, _plan: &Plan) {}
    fn bake_log(&self, label: &str, path: &std::path::Path) {
        self.logs
            .lock()
            .unwrap()
            .push((label.to_string(), path.to_path_buf()));
    }
}

#[test]
fn a_build_bakes_records_and_logs_per_run_then_replays_its_stamp() {
    let (_t, tree) = ops_basic();
    let seen = Arc::new(Seen::default());
    let out = run(&tree, &BuildOptions::default(), |_| {}, seen.clone()).unwrap();
    assert_eq!(out.exit_code(), exit::SUCCESS);
    let BuildOutcome::Ran { summary, .. } = &out else {
        panic!("a fresh tree runs");
    };
    assert!(summary.baked > 0);
    // Every finished bake is recorded, with the build id it answered.
    let lineage = csis_cache::MetaState::of_tree(&tree.dir).lineage().unwrap();
    let finished: Vec<String> = seen
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::Finished { kind, output, .. } if kind == "bake" => {
                Some(output["build_id"].as_str().unwrap().to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), summary.baked);
    for id in &finished {
        assert!(lineage.find(id).is_some(), "{id} is recorded");
    }
    // One log per bake, all in this run's directory.
    let logs = seen.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), summary.baked);
    let run_dir = logs[0].1.parent().unwrap().to_path_buf();
    assert!(logs.iter().all(|(_, p)| p.parent() == Some(&run_dir)));
    assert!(csis_cache::parse_run_id(run_dir.file_name().unwrap().to_str().unwrap()).is_some());
    for (_, p) in &logs {
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.contains("recorded dummy-"), "{text}");
    }
    // Nothing is due now: the stamp answers, nothing runs.
    let again = Arc::new(Seen::default());
    match run(&tree, &BuildOptions::default(), |_| {}, again.clone()).unwrap() {
        BuildOutcome::Replayed(r) => assert_eq!(r.summary.baked, 0),
        BuildOutcome::Ran { summary, .. } => assert_eq!(summary.baked, 0),
        BuildOutcome::HardDrift(h) => panic!("{h:?}"),
        BuildOutcome::Locked(l) => panic!("{l}"),
    }
    assert!(again.logs.lock().unwrap().is_empty());
}

#[test]
fn a_failed_bake_fails_the_outcome_and_keeps_its_log() {
    let (_t, tree) = ops_basic();
    let p = tree.dir.join("cfg/runtime-builders.yml");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("type: dummy"), "{text}");
    std::fs::write(&p, format!("{text}    fail: [web]\n")).unwrap();
    let seen = Arc::new(Seen::default());
    let out = run(&tree, &BuildOptions::default(), |_| {}, seen.clone()).unwrap();
    assert_eq!(out.exit_code(), exit::FAILURE);
    let logs = seen.logs.lock().unwrap().clone();
    let (_, web) = logs
        .iter()
        .find(|(l, _)| l == "//images/web@sim:bake")
        .expect("the web bake had a log");
    let text = std::fs::read_to_string(web).unwrap();
    assert!(text.contains("bake failed"), "{text}");
}

#[test]
fn old_run_logs_are_pruned_to_the_last_few() {
    let tmp = tempfile::tempdir().unwrap();
    let local = LocalDir::of_tree(tmp.path());
    let mut runs = Vec::new();
    for i in 0..7 {
        let id = format!("2026_10_0{}t00_00_00_000000", i + 1);
        std::fs::create_dir_all(local.logs().join(&id)).unwrap();
        runs.push(id);
    }
    std::fs::write(local.logs().join("loose.log"), "kept").unwrap();
    std::fs::create_dir_all(local.logs().join("not-a-run")).unwrap();
    prune_run_logs(&local, KEPT_RUN_LOGS);
    let mut left: Vec<String> = std::fs::read_dir(local.logs())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want: Vec<String> = runs[7 - (KEPT_RUN_LOGS - 1)..].to_vec();
    want.extend(["loose.log".to_string(), "not-a-run".to_string()]);
    want.sort();
    assert_eq!(left, want);
}

#[test]
fn a_failed_bakes_error_names_no_secret_nor_a_printed_piece_of_one() {
    let key = csis_schema::secret::default_key();
    csis_schema::secret::register("curl -H token=ErrSecretWord77 https://x", &key).unwrap();
    // a script echoes a word of its secret line; the runtime's error ends
    // with the last lines of the bake's output
    let e = rt_err(RuntimeError::Failed(
        "bake failed (exit 1): last lines:\n+ curl -H token=ErrSecretWord77 https://x\nErrSecretWord77 rejected".into(),
    ));
    assert!(!e.message.contains("ErrSecretWord77"), "{}", e.message);
    assert!(e.message.contains("bake failed (exit 1)"), "{}", e.message);
    assert!(e.message.contains("rejected"), "{}", e.message);
}
