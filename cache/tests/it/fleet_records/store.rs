//! The shared store carrying the fleet's records, and the providers'
//! answers observing or closing a generation.

use super::*;

fn remote_tree(spec: &csis_schema::model::MetaStateSpec) -> Tree {
    let t = tree();
    csis_cache::remote::set_tree_spec(&t.root, spec.clone());
    let meta = MetaState::of_tree(&t.root);
    assert!(meta.is_remote());
    Tree { meta, ..t }
}

#[test]
fn the_store_carries_the_fleet_records() {
    let store = tempfile::tempdir().unwrap();
    let spec =
        csis_schema::model::MetaStateSpec::parse(&format!("file://{}", store.path().display()))
            .unwrap();
    let a = remote_tree(&spec);
    {
        let r = a.recorder();
        r.record_launch(
            "web",
            record("b1", "web-001", false),
            &machine(1, "c1"),
            "r1",
        )
        .unwrap();
        let tr = transition(None, StorageState::Active, false, true).unwrap();
        r.record_storage("data", &tr, RecordedFacts::default(), "r1")
            .unwrap();
    }
    for f in [LAUNCH_PARAMS_FILE, INSTANCE_STATE_FILE, STORAGE_STATE_FILE] {
        assert!(store.path().join(f).exists(), "{f} on the store");
        assert!(!a.meta.dir().join(f).exists(), "{f} not local");
    }
    // another runner's tree sees them and changes them
    let b = remote_tree(&spec);
    let v = (b.meta.pins().unwrap(), b.meta.fleet().unwrap());
    assert_eq!(
        standing(&v, "web"),
        Some((1, "c1".into(), "b1".into(), "b1".into()))
    );
    {
        let r = b.recorder();
        r.record_replaced(
            "web",
            1,
            record("b2", "web-002", false),
            &machine(2, "c2"),
            "r2",
        )
        .unwrap();
    }
    let a_again = remote_tree(&spec);
    let v = (a_again.meta.pins().unwrap(), a_again.meta.fleet().unwrap());
    assert_eq!(
        standing(&v, "web"),
        Some((2, "c2".into(), "b2".into(), "b2".into()))
    );

    // `state pull` / `push` copy them as whole files.
    let copy = tempfile::tempdir().unwrap();
    let local = MetaState::at(copy.path());
    assert!(local.save_fleet(&a_again.meta.fleet().unwrap()).unwrap());
    assert_eq!(local.fleet().unwrap(), a_again.meta.fleet().unwrap());

    // A dead run's journal with a fleet operation reaches the store.
    let local = tree();
    let (r, p) = local.blocked_recorder(LAUNCH_PARAMS_FILE);
    let _ = r.record_launch("db", record("b1", "db-001", false), &machine(1, "d1"), "r3");
    drop(r);
    local.unblock(&p);
    let line = std::fs::read(&local.journal).unwrap();
    let c = remote_tree(&spec);
    let jdir = c.root.join(".csis/lineage.journal.d");
    std::fs::create_dir_all(&jdir).unwrap();
    std::fs::write(jdir.join("999-1.journal"), &line).unwrap();
    drop(c.recorder());
    assert!(!jdir.join("999-1.journal").exists());
    let v = (c.meta.pins().unwrap(), c.meta.fleet().unwrap());
    assert_eq!(
        standing(&v, "db"),
        Some((1, "d1".into(), "b1".into(), "b1".into()))
    );
    assert_eq!(standing(&v, "web").unwrap().0, 2, "what was there stays");
}

#[test]
fn the_providers_answer_observes_or_closes_a_generation_and_silence_changes_nothing() {
    let t = tree();
    let r = t.recorder();
    let inferred = Machine {
        generation: 1,
        instance_id: None,
        provider_hostname: None,
    };
    r.record_launch("web", record("b1", "web-001", false), &inferred, "r1")
        .unwrap();
    let how = |r: &Recorder| {
        r.fleet(|_, f| f.current_generation("web").map(|g| g.how))
            .unwrap()
    };
    assert_eq!(how(&r), Some(How::Inferred));
    assert!(
        !r.observe_instance("web", None, None, "r2").unwrap(),
        "silence"
    );
    assert_eq!(how(&r), Some(How::Inferred));
    assert!(r
        .observe_instance("web", Some("c1"), Some("ip-1"), "r2")
        .unwrap());
    assert_eq!(how(&r), Some(How::Observed));
    assert!(
        !r.observe_instance("web", Some("c1"), Some("ip-1"), "r3")
            .unwrap(),
        "known"
    );
    assert!(r.observe_instance("web", Some("c9"), None, "r4").unwrap());
    assert_eq!(how(&r), None, "another machine bears the name");
    drop(r);
    let st = csis_cache::InstanceState::load(&t.meta).unwrap();
    let c = st.instances["web"].closed().next().unwrap();
    assert_eq!(c.why, CloseWhy::ReplacedOutOfBand);
    assert_eq!(c.generation.instance_id.as_deref(), Some("c1"));
    assert_eq!(c.closed_run, "r4");
}

#[test]
fn a_kept_ephemeral_stands_until_removed_and_a_standing_machine_is_not_launched_over() {
    let t = tree();
    let r = t.recorder();
    let mut v = EphemeralVerdict {
        record: record("b1", "probe-001", true),
        machine: machine(1, "e1"),
        ok: false,
        kept: true,
    };
    r.record_ephemeral("probe", &v, "r1").unwrap();
    let standing = |r: &Recorder| {
        r.fleet(|_, f| {
            (
                f.current_generation("probe").map(|g| g.number),
                f.launch_record("probe").map(|l| l.launched),
            )
        })
        .unwrap()
    };
    assert_eq!(
        standing(&r),
        (Some(1), Some(true)),
        "kept: it stands, labelled"
    );
    v.kept = false;
    r.record_ephemeral("probe", &v, "r2").unwrap();
    assert_eq!(standing(&r), (None, Some(false)), "removed later: closed");
    let why = r
        .fleet(|_, f| {
            f.instances.instances["probe"]
                .closed()
                .next()
                .map(|c| c.why)
        })
        .unwrap();
    assert_eq!(why, Some(CloseWhy::Ephemeral));

    r.record_launch(
        "web",
        record("b1", "web-001", false),
        &machine(1, "c1"),
        "r1",
    )
    .unwrap();
    let e = r
        .record_launch(
            "web",
            record("b1", "web-002", false),
            &machine(2, "c2"),
            "r2",
        )
        .unwrap_err();
    assert!(e.to_string().contains("generation 1 stands"), "{e}");
}
