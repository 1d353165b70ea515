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
