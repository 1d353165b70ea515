//! The records on an object store (a `file://` store here; the moto S3
//! runs are in the binary's tests/cli/shared_store.rs): conditional writes,
//! concurrent recorders that never lose each other's records, leases.

use std::collections::BTreeMap;
use std::sync::Arc;

use csis_cache::lease::{lease_key, LeaseDoc, LeaseEvent, Leases};
use csis_cache::objstore::{Cond, Store, StoreError};
use csis_cache::{BuildRecord, CacheError, MetaState, PinBinding, Recorder};
use csis_schema::model::MetaStateSpec;

fn file_store() -> (tempfile::TempDir, MetaStateSpec, Store) {
    let t = tempfile::tempdir().unwrap();
    let spec = MetaStateSpec::parse(&format!("file://{}", t.path().display())).unwrap();
    let s = Store::open(&spec).unwrap().unwrap();
    (t, spec, s)
}

#[test]
fn specs_parse_and_refuse() {
    assert_eq!(MetaStateSpec::parse("local").unwrap(), MetaStateSpec::Local);
    assert_eq!(
        MetaStateSpec::parse("s3://team-bucket/csis/records/").unwrap(),
        MetaStateSpec::S3 {
            bucket: "team-bucket".into(),
            prefix: "csis/records".into()
        }
    );
    assert_eq!(
        MetaStateSpec::parse("gs://b").unwrap().to_string(),
        "gs://b"
    );
    for bad in [
        "s3://",
        "s3://Bad_Bucket/x",
        "s3://b/../x",
        "file://relative",
        "ftp://x",
        "http://x",
    ] {
        assert!(MetaStateSpec::parse(bad).is_err(), "{bad} is refused");
    }
}

#[test]
fn writes_are_conditional() {
    let (_t, _, s) = file_store();
    let v1 = s.put("k.json", b"1".to_vec(), Cond::Create).unwrap();
    assert!(matches!(
        s.put("k.json", b"2".to_vec(), Cond::Create),
        Err(StoreError::Conflict)
    ));
    let v2 = s
        .put("k.json", b"2".to_vec(), Cond::Match(v1.clone()))
        .unwrap();
    // The version read before the last write no longer matches.
    assert!(matches!(
        s.put("k.json", b"3".to_vec(), Cond::Match(v1)),
        Err(StoreError::Conflict)
    ));
    s.put("k.json", b"3".to_vec(), Cond::Match(v2)).unwrap();
    assert_eq!(s.get("k.json").unwrap().unwrap().0, b"3");
    assert!(s.requests() >= 6);
}

fn rec(id: &str, series: &str, run: &str) -> BuildRecord {
    let mut r = BuildRecord::new(id, series, "sim");
    r.parent = Some("vendor".into());
    r.run = Some(run.into());
    r
}

/// Eight recorders (as eight runners would) record into the same series
/// and pin the same child at once: every record is there afterwards.
#[test]
fn concurrent_recorders_lose_nothing() {
    let (_t, spec, _) = file_store();
    let trees: Vec<tempfile::TempDir> = (0..8).map(|_| tempfile::tempdir().unwrap()).collect();
    for t in &trees {
        csis_cache::remote::set_tree_spec(t.path(), spec.clone());
    }
    std::thread::scope(|sc| {
        for (w, t) in trees.iter().enumerate() {
            sc.spawn(move || {
                let meta = MetaState::of_tree(t.path());
                assert!(meta.is_remote());
                let r = Recorder::open(meta, t.path().join(".csis/lineage.journal")).unwrap();
                for i in 0..15 {
                    let series = if i % 2 == 0 { "shared" } else { "child" };
                    let pin = (series == "child").then(|| PinBinding {
                        image: "child".into(),
                        runtime: "sim".into(),
                        parent_build: format!("p-{w}-{i}"),
                    });
                    r.record(rec(&format!("b-{w}-{i}"), series, &format!("run{w}")), pin)
                        .unwrap();
                }
            });
        }
    });
    let meta = MetaState::of_tree(trees[0].path());
    let (l, p) = meta.lineage_and_pins().unwrap();
    assert_eq!(l.builds.len(), 8 * 15, "every record of every writer");
    let moves = p.upgrades.iter().filter(|m| m.name == "child").count();
    assert!(moves >= 8, "pin moves of every writer kept: {moves}");
    assert!(p.images.contains_key("child@sim"));

    // A disposal through one recorder, while the records changed under it.
    let r = Recorder::open(meta.clone(), trees[0].path().join(".csis/lineage.journal")).unwrap();
    let _ = r.lineage();
    Recorder::open(meta.clone(), trees[1].path().join(".csis/lineage.journal"))
        .unwrap()
        .record(rec("late", "shared", "late"), None)
        .unwrap();
    r.update(|l, p| csis_cache::retention::forget_build(l, p, "b-0-0", &[], None))
        .unwrap();
    let l = meta.lineage().unwrap();
    assert!(
        l.find("late").is_some(),
        "what another runner recorded survives"
    );
    assert!(l.find("b-0-0").is_none());

    // A whole-file save from a stale read is refused, never overwrites.
    let stale = meta.lineage().unwrap();
    Recorder::open(meta.clone(), trees[2].path().join(".csis/lineage.journal"))
        .unwrap()
        .record(rec("later", "shared", "later"), None)
        .unwrap();
    let mut changed = stale.clone();
    changed.builds.retain(|b| b.build_id != "b-1-0");
    let e = meta.save_lineage(&changed).unwrap_err();
    assert!(matches!(e, CacheError::Store { .. }), "{e}");
    assert!(meta.lineage().unwrap().find("later").is_some());
}

#[test]
fn leases_exclude_wait_and_take_over() {
    let (_t, _, s) = file_store();
    let s = Arc::new(s);
    let a = Leases::new(s.clone(), "run-a");
    let b = Leases::new(s.clone(), "run-b");
    let key = ("img".to_string(), "sim".to_string());
    let covers = BTreeMap::from([(key.clone(), vec!["parent-1".to_string()])]);
    a.acquire(std::slice::from_ref(&key), &covers, false, &|_| {})
        .unwrap();
    let e = b.acquire(std::slice::from_ref(&key), &BTreeMap::new(), false, &|_| {});
    assert!(matches!(e, Err(CacheError::Locked { .. })));
    let covered = csis_cache::lease::covered_by_others(&s, "run-b").unwrap();
    assert_eq!(covered.keys().collect::<Vec<_>>(), ["parent-1"]);
    assert!(csis_cache::lease::covered_by_others(&s, "run-a")
        .unwrap()
        .is_empty());
    drop(a);
    assert!(
        s.get(&lease_key("img", "sim")).unwrap().is_none(),
        "released on drop"
    );
    b.acquire(std::slice::from_ref(&key), &BTreeMap::new(), false, &|_| {})
        .unwrap();
    drop(b);

    // A dead owner's lease whose term passed is taken over, and said so.
    let dead = LeaseDoc {
        series: "img".into(),
        runtime: "sim".into(),
        owner: "run-dead".into(),
        host: "elsewhere".into(),
        pid: 1,
        acquired: 0.0,
        expires: 1.0,
        covers: vec![],
    };
    s.put(
        &lease_key("img", "sim"),
        serde_json::to_vec(&dead).unwrap(),
        Cond::Create,
    )
    .unwrap();
    let c = Leases::new(s.clone(), "run-c");
    let events = c.acquire(&[key], &BTreeMap::new(), false, &|_| {}).unwrap();
    assert!(
        matches!(&events[..], [LeaseEvent::TakenOver { holder, .. }] if holder.contains("run-dead")),
        "{events:?}"
    );
    assert!(
        matches!(&events[0], LeaseEvent::TakenOver { key, .. } if key == "img@sim"),
        "{events:?}"
    );
}

/// A run killed after journaling a record but before writing it to the
/// store: the next recorder on that tree writes it, and removes the journal.
#[test]
fn a_dead_runs_journal_reaches_the_store() {
    let (_t, spec, _) = file_store();
    let tree = tempfile::tempdir().unwrap();
    let jdir = tree.path().join(".csis/lineage.journal.d");
    std::fs::create_dir_all(&jdir).unwrap();
    let entry = serde_json::json!({"record": rec("orphan-1", "s", "dead-run"), "pin": null});
    std::fs::write(jdir.join("999-1.journal"), format!("{entry}\n")).unwrap();
    csis_cache::remote::set_tree_spec(tree.path(), spec);
    let meta = MetaState::of_tree(tree.path());
    assert!(meta.is_remote());
    let r = Recorder::open(meta.clone(), tree.path().join(".csis/lineage.journal")).unwrap();
    assert!(meta.lineage().unwrap().find("orphan-1").is_some());
    assert!(!jdir.join("999-1.journal").exists());
    drop(r);
}

/// Two runners that start in the same microsecond get the same run id: a
/// lease of that run id held by another process (another pid, or another
/// host) is another runner's, whose covers retention keeps; this process's
/// own lease is not.
#[test]
fn a_lease_of_the_same_run_id_from_another_runner_is_another_runners() {
    let (_t, _, s) = file_store();
    let s = Arc::new(s);
    let run = "2026_12_05t18_00_00_000001";
    let mine = Leases::new(s.clone(), run);
    let key = ("img".to_string(), "sim".to_string());
    let covers = BTreeMap::from([(key.clone(), vec!["mine-parent".to_string()])]);
    mine.acquire(std::slice::from_ref(&key), &covers, false, &|_| {})
        .unwrap();
    assert!(csis_cache::lease::covered_by_others(&s, run)
        .unwrap()
        .is_empty());
    let later = unix_now() + 600.0;
    let host = csis_cache::lease::host_name();
    for (name, host, pid) in [
        ("other-pid", host.as_str(), std::process::id() + 1),
        ("other-host", "runner-7", std::process::id()),
    ] {
        let mut d = lease_doc(run, host, pid, later);
        d.series = name.into();
        d.covers = vec![format!("{name}-parent")];
        s.put(
            &lease_key(name, "sim"),
            serde_json::to_vec(&d).unwrap(),
            Cond::Create,
        )
        .unwrap();
    }
    let covered = csis_cache::lease::covered_by_others(&s, run).unwrap();
    assert_eq!(
        covered.keys().collect::<Vec<_>>(),
        ["other-host-parent", "other-pid-parent"]
    );
}

fn lease_doc(owner: &str, host: &str, pid: u32, expires: f64) -> LeaseDoc {
    LeaseDoc {
        series: "img".into(),
        runtime: "sim".into(),
        owner: owner.into(),
        host: host.into(),
        pid,
        acquired: 0.0,
        expires,
        covers: vec![],
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A runner killed with `kill -9` on this host: its pid is gone, so the
/// next runner takes its lease over at once, not after its term.
#[test]
fn a_dead_pid_on_this_host_loses_its_lease_at_once() {
    let (_t, _, s) = file_store();
    let s = Arc::new(s);
    // a pid that was this host's and is gone: a child that exited
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let host = csis_cache::lease::host_name();
    // a live lease (an hour of term left) of a dead process of this host
    let doc = lease_doc("run-killed", &host, pid, unix_now() + 3600.0);
    s.put(
        &lease_key("img", "sim"),
        serde_json::to_vec(&doc).unwrap(),
        Cond::Create,
    )
    .unwrap();
    let key = ("img".to_string(), "sim".to_string());
    let c = Leases::new(s.clone(), "run-next");
    let t0 = std::time::Instant::now();
    let events = c
        .acquire(std::slice::from_ref(&key), &BTreeMap::new(), false, &|_| {})
        .unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        matches!(&events[..], [LeaseEvent::TakenFromDead { holder, .. }] if holder.contains("run-killed")),
        "{events:?}"
    );
    assert!(
        matches!(&events[0], LeaseEvent::TakenFromDead { key, .. } if key == "img@sim"),
        "{events:?}"
    );
    drop(c);
    // a live process of this host keeps it (this test's own pid, another run)
    let doc = lease_doc("run-alive", &host, std::process::id(), unix_now() + 3600.0);
    s.put(
        &lease_key("img", "sim"),
        serde_json::to_vec(&doc).unwrap(),
        Cond::Create,
    )
    .unwrap();
    let d = Leases::new(s.clone(), "run-other");
    let e = d.acquire(&[key], &BTreeMap::new(), false, &|_| {});
    assert!(matches!(e, Err(CacheError::Locked { .. })), "{e:?}");
}

/// A lease dated far in the future (a fast clock, a bad write) ends one
/// term after the store last wrote it, by the store's own clock.
#[test]
fn a_future_dated_lease_ends_one_term_after_the_store_wrote_it() {
    let (_t, _, s) = file_store();
    let s = Arc::new(s);
    let doc = lease_doc(
        "run-fast-clock",
        "elsewhere",
        1,
        unix_now() + 365.0 * 86400.0,
    );
    s.put(
        &lease_key("img", "sim"),
        serde_json::to_vec(&doc).unwrap(),
        Cond::Create,
    )
    .unwrap();
    // the store wrote it two terms ago (the default term is 120 s)
    let path = _t.path().join(lease_key("img", "sim"));
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(240);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(then)
        .unwrap();
    let key = ("img".to_string(), "sim".to_string());
    let c = Leases::new(s.clone(), "run-next");
    let events = c.acquire(&[key], &BTreeMap::new(), false, &|_| {}).unwrap();
    assert!(
        matches!(&events[..], [LeaseEvent::TakenOver { holder, .. }] if holder.contains("run-fast-clock")),
        "{events:?}"
    );
    assert!(csis_cache::lease::covered_by_others(&s, "nobody")
        .unwrap()
        .is_empty());
}
