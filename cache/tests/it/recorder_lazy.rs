//! The recorder reads the records on first use: a build where nothing is
//! due reads no record, and a journal left by a killed build is still
//! settled at open.

use csis_cache::{BuildRecord, CacheError, MetaState, Recorder};

#[test]
fn open_reads_nothing_until_the_first_use() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    std::fs::create_dir_all(m.dir()).unwrap();
    // A file that does not parse: open does not read it...
    std::fs::write(m.dir().join("lineage.yaml"), "builds: [ {build_id: \n").unwrap();
    let r = Recorder::open(m.clone(), t.path().join(".csis/lineage.journal")).unwrap();
    // ...flushing a recorder that recorded nothing writes nothing...
    r.flush().unwrap();
    // ...and the first record reports the error, recording nothing.
    let e = r
        .record(BuildRecord::new("b1", "s", "rt"), None)
        .unwrap_err();
    assert!(matches!(e, CacheError::Parse { .. }), "{e}");
    assert!(r.head_build("s", "rt").is_none());
    drop(r);
    assert_eq!(
        std::fs::read_to_string(m.dir().join("lineage.yaml")).unwrap(),
        "builds: [ {build_id: \n"
    );
    assert!(!t.path().join(".csis/lineage.journal").exists());
}

#[test]
fn first_use_sees_the_records_and_a_left_journal_settles_at_open() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let j = t.path().join(".csis/lineage.journal");
    {
        let r = Recorder::open(m.clone(), &j).unwrap();
        r.record(BuildRecord::new("b1", "s", "rt"), None).unwrap();
    }
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert_eq!(r.head_build("s", "rt").as_deref(), Some("b1"));
    r.record(BuildRecord::new("b2", "s", "rt"), None).unwrap();
    assert_eq!(r.head_build("s", "rt").as_deref(), Some("b2"));
    drop(r);
    assert_eq!(m.lineage().unwrap().builds.len(), 2);

    // A journal line of a killed build (not in lineage.yaml yet): open
    // merges it into meta-state at once, before any use.
    let line = serde_json::json!({"record": BuildRecord::new("b3", "s", "rt")});
    std::fs::write(&j, format!("{line}\n")).unwrap();
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert_eq!(m.lineage().unwrap().builds.len(), 3);
    assert_eq!(std::fs::metadata(&j).unwrap().len(), 0);
    assert_eq!(r.head_build("s", "rt").as_deref(), Some("b3"));
}

/// A reinstatement is a journal line like a record: written through at
/// once, and a line a killed build left (the record with its newer
/// `reinstated_by_run`) makes that build the head when replayed, once.
#[test]
fn a_reinstatement_is_durable_and_replays_from_the_journal() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let j = t.path().join(".csis/lineage.journal");
    let rec = |id: &str, run: &str| {
        let mut r = BuildRecord::new(id, "s", "rt");
        r.run = Some(run.into());
        r
    };
    {
        let r = Recorder::open(m.clone(), &j).unwrap();
        r.record(rec("a", "2026_11_01t00_00_00_000000"), None)
            .unwrap();
        r.record(rec("b", "2026_11_02t00_00_00_000000"), None)
            .unwrap();
        r.reinstate("a", "2026_11_03t00_00_00_000000", None)
            .unwrap();
        assert_eq!(r.head_build("s", "rt").as_deref(), Some("a"));
        assert!(r
            .reinstate("missing", "2026_11_03t00_00_00_000000", None)
            .is_err());
    }
    let l = m.lineage().unwrap();
    assert_eq!(l.head("s", "rt").unwrap().build_id, "a");
    assert_eq!(l.builds.len(), 2);

    // A killed build's line: b reinstated by a later run.
    let mut b = rec("b", "2026_11_02t00_00_00_000000");
    b.reinstated_by_run = Some("2026_11_04t00_00_00_000000".into());
    let line = serde_json::json!({ "record": b });
    std::fs::write(&j, format!("{line}\n{line}\n")).unwrap();
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert_eq!(r.head_build("s", "rt").as_deref(), Some("b"));
    let l = m.lineage().unwrap();
    assert_eq!(l.builds.len(), 2);
    assert_eq!(l.head("s", "rt").unwrap().build_id, "b");
}
