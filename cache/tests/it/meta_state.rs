//! `meta-state/` read and written: heads per runtime, pins and the journal,
//! unknown fields kept, the original's meta-state, the lock, the parse cache.

use std::path::Path;

use csis_cache::{BuildRecord, CacheError, LocalDir, MetaState, PinBinding, Recorder};

fn rec(id: &str, series: &str, rt: &str, parent: Option<&str>) -> BuildRecord {
    let mut r = BuildRecord::new(id, series, rt);
    r.parent = parent.map(str::to_string);
    r.input_fingerprint = Some("a".repeat(64));
    r.run = Some("2026_11_30t07_00_00_000000".into());
    r
}

#[test]
fn absent_files_are_empty() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    assert!(m.lineage().unwrap().builds.is_empty());
    assert!(m.pins().unwrap().images.is_empty());
    assert!(m.releases().unwrap().releases.is_empty());
}

#[test]
fn head_is_last_appended_on_runtime() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let r = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    r.record(rec("b1", "base", "rt1", Some("vendor")), None)
        .unwrap();
    r.record(rec("b2", "base", "rt2", Some("vendor")), None)
        .unwrap();
    r.record(rec("b3", "base", "rt1", Some("vendor")), None)
        .unwrap();
    // duplicate ignored
    r.record(rec("b1", "base", "rt1", Some("vendor")), None)
        .unwrap();
    // durable at once in the journal; in lineage.yaml after a flush
    let j = t.path().join(".csis/lineage.journal");
    assert_eq!(m.load_with_journal(&j).unwrap().0.builds.len(), 3);
    r.flush().unwrap();
    let l = m.lineage().unwrap();
    assert_eq!(l.builds.len(), 3);
    assert_eq!(l.head("base", "rt1").unwrap().build_id, "b3");
    assert_eq!(l.head("base", "rt2").unwrap().build_id, "b2");
    assert!(l.head("base", "rt3").is_none());
    assert!(l.head("other", "rt1").is_none());
}

#[test]
fn pins_bind_then_follow_with_journal() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let r = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    let pin = |b: &str| {
        Some(PinBinding {
            image: "app".into(),
            runtime: "rt".into(),
            parent_build: b.into(),
        })
    };
    assert_eq!(
        r.record(rec("c1", "app", "rt", Some("p1")), pin("p1"))
            .unwrap(),
        Some("bind")
    );
    assert_eq!(
        r.record(rec("c2", "app", "rt", Some("p1")), pin("p1"))
            .unwrap(),
        None
    );
    assert_eq!(
        r.record(rec("c3", "app", "rt", Some("p2")), pin("p2"))
            .unwrap(),
        Some("follow")
    );
    r.flush().unwrap();
    let p = m.pins().unwrap();
    assert_eq!(p.image_pin("app", "rt"), Some("p2"));
    assert_eq!(p.upgrades.len(), 2);
    assert_eq!(p.upgrades[0].op, "bind");
    assert_eq!(p.upgrades[1].from.as_deref(), Some("p1"));
    // a fresh recorder sees what was written
    let r2 = Recorder::open(m, t.path().join(".csis/lineage.journal")).unwrap();
    assert_eq!(r2.lineage().builds.len(), 3);
}

#[test]
fn unknown_fields_survive_a_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    std::fs::create_dir_all(m.dir()).unwrap();
    let text = r#"{"builds": [{"build_id": "ami-1", "series": "s", "runtime": null, "input_fingerprint": "ff",
      "mods": null, "tests": {"in_bake": true, "assertions": 3}, "chain": [], "future_field": {"x": 1}}],
      "schema": 2}"#;
    std::fs::write(m.dir().join("lineage.yaml"), text).unwrap();
    let l = m.lineage().unwrap();
    assert_eq!(l.builds[0].extra["future_field"]["x"], 1);
    assert_eq!(l.builds[0].tests.assertions, 3);
    // a record without a runtime counts on any runtime
    assert_eq!(l.head("s", "anything").unwrap().build_id, "ami-1");
    m.save_lineage(&l).unwrap();
    let again = m.lineage().unwrap();
    assert_eq!(again, l);
    assert_eq!(again.extra["schema"], 2);
    // keys are written sorted
    let written = std::fs::read_to_string(m.dir().join("lineage.yaml")).unwrap();
    let b = written.find("build_id").unwrap();
    let s = written
        .find("\"series\"")
        .or_else(|| written.find("series:"))
        .unwrap();
    assert!(b < s);
    // writing an unchanged file does nothing
    assert!(!m.save_lineage(&again).unwrap());
}

#[test]
fn reference_meta_state_dirs_load() {
    let refs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference");
    if !refs.exists() {
        return;
    }
    for d in [
        "cs-image-system-0.1.1-starters/complete/meta-state",
        "cs-image-system-0.1.1-emission/standard-aws-on-moto/meta-state",
        "cs-image-system-3/tests/fixtures/v2_golden/meta-state",
    ] {
        let m = MetaState::at(refs.join(d));
        m.lineage().unwrap();
        m.pins().unwrap();
        m.releases().unwrap();
    }
}

#[test]
fn second_lock_fails_fast_or_waits() {
    let t = tempfile::tempdir().unwrap();
    let local = LocalDir::of_tree(t.path());
    let held = local.lock(false, |_| {}).unwrap();
    assert!(std::fs::read_to_string(t.path().join(".csis/.gitignore"))
        .unwrap()
        .contains("*"));
    // Another process (a child re-running this test binary's helper is
    // overkill): flock locks are per open file description, so a second
    // open in this process conflicts too.
    match local.lock(false, |_| {}) {
        Err(CacheError::Locked { holder, .. }) => {
            assert!(holder.contains(&std::process::id().to_string()))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let path = held.path().to_path_buf();
    let waiter = std::thread::spawn(move || {
        let mut told = false;
        let l = LocalDir::of_tree(path.parent().unwrap().parent().unwrap())
            .lock(true, |_| told = true)
            .unwrap();
        drop(l);
        told
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(held);
    assert!(waiter.join().unwrap(), "the waiter was told it waits");
    // free again
    local.lock(false, |_| {}).unwrap();
}

#[test]
fn recorder_writes_the_same_text_as_a_full_save() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let r = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    for i in 0..5 {
        let mut b = rec(&format!("b{i}"), "s", "rt", Some("vendor"));
        b.inputs = Some(
            serde_json::json!({"deps": {}, "inputs": {"series": "s", "n": i, "nested": {"a": [1, 2]}}, "kind": "bake"}),
        );
        b.mods = vec![serde_json::json!({"name": "m", "content_hash": "x", "run": "r"})];
        r.record(b, None).unwrap();
    }
    r.flush().unwrap();
    let written = std::fs::read_to_string(m.dir().join("lineage.yaml")).unwrap();
    let l = m.lineage().unwrap();
    assert_eq!(l.builds.len(), 5);
    assert_eq!(l.builds[3].inputs.as_ref().unwrap()["inputs"]["n"], 3);
    // a full save of what was read gives the very same bytes
    assert!(!m.save_lineage(&l).unwrap(), "unchanged");
    assert_eq!(
        std::fs::read_to_string(m.dir().join("lineage.yaml")).unwrap(),
        written
    );
    // and a reopened recorder appends to it
    let r2 = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    r2.record(rec("b9", "s", "rt", Some("vendor")), None)
        .unwrap();
    assert_eq!(r2.head_build("s", "rt").as_deref(), Some("b9"));
    assert_eq!(m.lineage().unwrap().builds.len(), 6);
}

#[test]
fn journal_replays_after_a_kill() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let j = t.path().join(".csis/lineage.journal");
    {
        let r = Recorder::open(m.clone(), &j).unwrap();
        r.record(rec("b1", "s", "rt", Some("vendor")), None)
            .unwrap();
        // dropped normally: flushed, journal empty
    }
    assert_eq!(std::fs::metadata(&j).unwrap().len(), 0);
    // a journal left by a killed build (one full line and a torn one)
    let entry = serde_json::json!({"record": rec("b2", "app", "rt", Some("b1")), "pin": {"image": "app", "runtime": "rt", "parent_build": "b1"}});
    std::fs::write(&j, format!("{entry}\n{{\"record\": {{\"build_id\": \"b3")).unwrap();
    let (l, p) = m.load_with_journal(&j).unwrap();
    assert_eq!(l.builds.len(), 2);
    assert_eq!(p.image_pin("app", "rt"), Some("b1"));
    assert_eq!(
        m.lineage().unwrap().builds.len(),
        1,
        "reading changes nothing"
    );
    // the next recorder writes it out and empties the journal
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert_eq!(m.lineage().unwrap().builds.len(), 2);
    assert_eq!(m.pins().unwrap().image_pin("app", "rt"), Some("b1"));
    assert_eq!(std::fs::metadata(&j).unwrap().len(), 0);
    drop(r);
}

#[test]
fn parsed_cache_is_keyed_by_content() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let r = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    r.record(rec("b1", "s", "rt", Some("vendor")), None)
        .unwrap();
    r.flush().unwrap();
    let cache = t.path().join(".csis/parsed/lineage.yaml.json");
    assert!(cache.exists());
    assert_eq!(m.lineage().unwrap().builds[0].build_id, "b1");
    // an edit of the YAML (git pull, hand edit) is seen, not the stale cache
    let p = m.dir().join("lineage.yaml");
    let text = std::fs::read_to_string(&p).unwrap().replace("b1", "b7");
    std::fs::write(&p, text).unwrap();
    assert_eq!(m.lineage().unwrap().builds[0].build_id, "b7");
    // a corrupt cache is ignored
    std::fs::write(&cache, "garbage").unwrap();
    assert_eq!(m.lineage().unwrap().builds[0].build_id, "b7");
    drop(r);
}
