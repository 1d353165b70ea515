//! The Recorder's fleet operations replayed after a kill between the
//! journal and the files: each operation, a replacement, a journal line
//! of neither kind.

use super::*;

/// Run `op` on a recorder whose write of `blocked` fails after the
/// journal line was written: the journal-aware view holds the change, the
/// next recorder writes it out and empties the journal, and a second one
/// changes nothing.
fn replays(t: &Tree, blocked: &str, op: impl FnOnce(&Recorder)) {
    let (r, p) = t.blocked_recorder(blocked);
    op(&r);
    assert!(r.failure().is_some(), "the write of {blocked} failed");
    drop(r);
    assert!(t.journal_len() > 0, "the journal holds the operation");
    t.unblock(&p);
    let seen = t.view();
    drop(t.recorder());
    assert_eq!(t.journal_len(), 0, "replayed and emptied");
    assert_eq!(t.files(), seen, "the files hold what the journal said");
    let snapshot = |t: &Tree| {
        [
            LAUNCH_PARAMS_FILE,
            INSTANCE_STATE_FILE,
            STORAGE_STATE_FILE,
            PINS_FILE,
        ]
        .map(|f| std::fs::read(t.meta.dir().join(f)).unwrap_or_default())
    };
    let before = snapshot(t);
    drop(t.recorder());
    assert_eq!(snapshot(t), before, "a second replay changes nothing");
}

#[test]
fn each_operation_replays_after_a_kill() {
    for blocked in [LAUNCH_PARAMS_FILE, INSTANCE_STATE_FILE, PINS_FILE] {
        let t = tree();
        replays(&t, blocked, |r| {
            let _ = r.record_launch(
                "web",
                record("b1", "web-001", false),
                &machine(1, "c1"),
                "r1",
            );
        });
        assert_eq!(
            standing(&t.files(), "web"),
            Some((1, "c1".into(), "b1".into(), "b1".into()))
        );
        replays(&t, blocked, |r| {
            let _ = r.bind_instance("web", "b2", InstanceOp::Upgrade, "r2");
        });
        assert_eq!(t.files().0.pending_replacements["web"], "b2");
        let v = EphemeralVerdict {
            record: record("b2", "probe-001", true),
            machine: machine(1, "e1"),
            ok: true,
            kept: false,
        };
        replays(&t, blocked, |r| {
            let _ = r.record_ephemeral("probe", &v, "r3");
        });
        let (p, f) = t.files();
        assert_eq!(p.instance_pin("probe"), Some("b2"));
        let probe = &f.instances.instances["probe"];
        assert_eq!(
            (probe.generation.ephemeral, probe.current.is_none()),
            (1, true)
        );
        replays(&t, blocked, |r| {
            let _ = r.record_decommission("web", "r4");
        });
        let (p, f) = t.files();
        assert!(p.instance_pin("web").is_none() && f.launch_record("web").is_none());
        assert_eq!(f.instances.instances["web"].closed().count(), 1);
    }
    let t = tree();
    let tr = transition(None, StorageState::Active, false, true).unwrap();
    let facts = RecordedFacts {
        builder: "vols".into(),
        type_: "volume".into(),
        ..Default::default()
    };
    replays(&t, STORAGE_STATE_FILE, |r| {
        let _ = r.record_storage("data", &tr, facts.clone(), "r1");
    });
    let s = t.meta.fleet().unwrap().storages;
    assert_eq!(
        (
            s.storages["data"].generation,
            s.storages["data"].history.len()
        ),
        (1, 1)
    );
}

/// Kill -9 during a replacement: wherever the run dies, the next run sees
/// exactly one machine recorded, the old one or the new one (never none,
/// never a mix of the two).
#[test]
fn a_kill_during_a_replacement_leaves_the_old_or_the_new_recorded() {
    // (the upgrade moved the pin to b2; the old machine runs b1)
    let old = Some((1, "c1".to_string(), "b1".to_string(), "b2".to_string()));
    let new = Some((2, "c2".to_string(), "b2".to_string(), "b2".to_string()));
    for blocked in [
        LAUNCH_PARAMS_FILE,
        INSTANCE_STATE_FILE,
        PINS_FILE,
        "lineage.yaml",
    ] {
        let t = tree();
        {
            let r = t.recorder();
            r.record_launch(
                "web",
                record("b1", "web-001", false),
                &machine(1, "c1"),
                "r1",
            )
            .unwrap();
            r.bind_instance("web", "b2", InstanceOp::Upgrade, "r2")
                .unwrap();
        }
        let files_before = t.files();
        assert_eq!(standing(&t.view(), "web"), old);
        // dies after the journal line: the next run sees the new machine
        let (r, p) = t.blocked_recorder(blocked);
        let e = r.record_replaced(
            "web",
            1,
            record("b2", "web-002", false),
            &machine(2, "c2"),
            "r3",
        );
        assert!(e.is_err(), "{blocked}: the write failed");
        drop(r);
        t.unblock(&p);
        let journal = std::fs::read(&t.journal).unwrap();
        assert_eq!(standing(&t.view(), "web"), new, "{blocked}");
        // dies in the middle of the journal line: the old machine stands
        std::fs::write(&t.journal, &journal[..journal.len() / 2]).unwrap();
        t.meta.save_fleet(&files_before.1).unwrap();
        t.meta.save_pins(&files_before.0).unwrap();
        assert_eq!(standing(&t.view(), "web"), old, "{blocked}: torn line");
        drop(t.recorder());
        assert_eq!(standing(&t.files(), "web"), old);
        // and the whole line: the new one, after the next recorder
        std::fs::write(&t.journal, &journal).unwrap();
        drop(t.recorder());
        let v = t.files();
        assert_eq!(standing(&v, "web"), new, "{blocked}");
        assert!(
            v.0.pending_replacements.is_empty(),
            "the pending replacement is consumed"
        );
        let l = &v.1.instances.instances["web"];
        assert_eq!(
            l.closed().map(|c| c.generation.number).collect::<Vec<_>>(),
            [1]
        );
    }
}

#[test]
fn a_journal_line_of_neither_kind_is_rejected_and_old_lines_still_replay() {
    let t = tree();
    let old_line = serde_json::json!({
        "record": {"build_id": "b1", "series": "s", "runtime": "rt", "run": "r0"},
        "pin": null
    });
    std::fs::create_dir_all(t.journal.parent().unwrap()).unwrap();
    std::fs::write(&t.journal, format!("{{}}\n{old_line}\n")).unwrap();
    let r = t.recorder();
    assert_eq!(r.journal_problems().len(), 1, "{:?}", r.journal_problems());
    assert!(r.journal_problems()[0].contains("neither a build record nor a fleet operation"));
    assert!(r.find("b1").is_some());
}
