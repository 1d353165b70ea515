//! `Recorder::update`: a disposal during a build changes the records the
//! recorder holds, is written at once, and is never undone by the journal
//! or by the next record.

use csis_cache::retention::forget_build;
use csis_cache::{BuildRecord, MetaState, PinBinding, Recorder};

#[test]
fn a_forgotten_build_stays_forgotten() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let j = t.path().join(".csis/lineage.journal");
    let r = Recorder::open(m.clone(), &j).unwrap();
    r.record(BuildRecord::new("p1", "p", "rt"), None).unwrap();
    r.record(BuildRecord::new("p2", "p", "rt"), None).unwrap();
    let pin = PinBinding {
        image: "c".into(),
        runtime: "rt".into(),
        parent_build: "p1".into(),
    };
    // recorded in the journal only (a rewrite just happened)
    r.record(BuildRecord::new("c1", "c", "rt"), Some(pin))
        .unwrap();
    let removed = r
        .update(|l, p| forget_build(l, p, "p1", &["c@rt".to_string()], Some("run")))
        .unwrap();
    assert_eq!(removed, vec!["c@rt".to_string()]);
    // written at once, journal settled
    let ids = |m: &MetaState| {
        m.lineage()
            .unwrap()
            .builds
            .into_iter()
            .map(|b| b.build_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&m), ["p2", "c1"]);
    assert!(!m.pins().unwrap().images.contains_key("c@rt"));
    assert_eq!(std::fs::metadata(&j).map(|x| x.len()).unwrap_or(0), 0);
    assert!(r.find("p1").is_none());
    // the next record keeps it forgotten
    r.record(BuildRecord::new("p3", "p", "rt"), None).unwrap();
    r.flush().unwrap();
    drop(r);
    assert_eq!(ids(&m), ["p2", "c1", "p3"]);
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert!(r.find("p1").is_none());
    assert_eq!(r.head_build("p", "rt").as_deref(), Some("p3"));
}
