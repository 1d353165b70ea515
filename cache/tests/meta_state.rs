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
    let r = Recorder::open(m.clone()).unwrap();
    r.record(rec("b1", "base", "rt1", Some("vendor")), None)
        .unwrap();
    r.record(rec("b2", "base", "rt2", Some("vendor")), None)
        .unwrap();
    r.record(rec("b3", "base", "rt1", Some("vendor")), None)
        .unwrap();
    // duplicate ignored
    r.record(rec("b1", "base", "rt1", Some("vendor")), None)
        .unwrap();
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
    let r = Recorder::open(m.clone()).unwrap();
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
    let p = m.pins().unwrap();
    assert_eq!(p.image_pin("app", "rt"), Some("p2"));
    assert_eq!(p.upgrades.len(), 2);
    assert_eq!(p.upgrades[0].op, "bind");
    assert_eq!(p.upgrades[1].from.as_deref(), Some("p1"));
    // a fresh recorder sees what was written
    let r2 = Recorder::open(m).unwrap();
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
