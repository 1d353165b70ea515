//! The fleet's records (docs/fleet.md §2): the storage state machine, the
//! generation ledger and canonical hostnames, the original's shapes read
//! and written back (`shapes`), the Recorder's fleet operations replayed
//! after a kill between the journal and the files (`replay`, and a real
//! kill -9 here), and the shared store carrying them (`store`).

mod replay;
mod shapes;
mod store;

use std::path::{Path, PathBuf};

use csis_cache::fleet::{EphemeralVerdict, FleetRecords, InstanceOp, Machine};
use csis_cache::instance_state::{CloseWhy, GenerationKind, How};
use csis_cache::storage_state::RecordedFacts;
use csis_cache::{
    canonical_hostname, transition, LaunchParams, LaunchRecord, MetaState, MountRecord, Pins,
    Recorder, StorageState, StorageStates, TransitionError, INSTANCE_STATE_FILE,
    LAUNCH_PARAMS_FILE, PINS_FILE, STORAGE_STATE_FILE,
};

// ---- the state machine ----------------------------------------------------------

/// What the spec (core.md §9.1) says of one (current, requested) pair under
/// the four combinations of (attached, supports_archive), in the order
/// (no, yes), (yes, yes), (no, no), (yes, no).
fn expected(cur: Option<StorageState>, req: StorageState) -> [&'static str; 4] {
    use StorageState::*;
    match (cur, req) {
        (None, Active) => ["create"; 4],
        (None, Archived) => ["new", "new", "no-archive", "no-archive"],
        (None, Destroyed) => ["new"; 4],
        (Some(Active), Active) => ["keep"; 4],
        (Some(Active), Archived) => ["archive", "attached", "no-archive", "no-archive"],
        (Some(Active), Destroyed) => ["destroy", "attached", "destroy", "attached"],
        (Some(Archived), Active) => ["restore"; 4],
        (Some(Archived), Archived) => ["keep", "attached-stay", "no-archive", "no-archive"],
        (Some(Archived), Destroyed) => ["destroy", "attached", "destroy", "attached"],
        (Some(Destroyed), Active) => ["regenerate"; 4],
        (Some(Destroyed), Archived) => [
            "destroyed-archived",
            "destroyed-archived",
            "no-archive",
            "no-archive",
        ],
        (Some(Destroyed), Destroyed) => ["keep", "attached-stay", "keep", "attached-stay"],
    }
}

fn outcome(r: &Result<csis_cache::Transition, TransitionError>) -> &'static str {
    match r {
        Ok(t) => t.action.as_str(),
        Err(TransitionError::NewMustStartActive { .. }) => "new",
        Err(TransitionError::LeavingActiveAttached { .. }) => "attached",
        Err(TransitionError::AttachedNotActive { .. }) => "attached-stay",
        Err(TransitionError::ArchiveUnsupported) => "no-archive",
        Err(TransitionError::DestroyedToArchived) => "destroyed-archived",
    }
}

#[test]
fn the_full_transition_table() {
    let flags = [(false, true), (true, true), (false, false), (true, false)];
    let mut seen = 0;
    for cur in [None]
        .into_iter()
        .chain(StorageState::ALL.into_iter().map(Some))
    {
        for req in StorageState::ALL {
            for (i, (attached, supports)) in flags.into_iter().enumerate() {
                let got = transition(cur, req, attached, supports);
                assert_eq!(
                    outcome(&got),
                    expected(cur, req)[i],
                    "{cur:?} -> {req:?}, attached {attached}, supports_archive {supports}: {got:?}"
                );
                if let Ok(t) = got {
                    assert_eq!((t.from, t.to), (cur, req));
                }
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 48);
}

#[test]
fn each_illegal_move_says_why() {
    use StorageState::*;
    let msg = |c, r, a, s| transition(c, r, a, s).unwrap_err().to_string();
    assert!(msg(None, Destroyed, false, true).contains("new storage must start `active`"));
    let m = msg(Some(Active), Archived, true, true);
    assert!(
        m.contains("`active` -> `archived`") && m.contains("detach"),
        "{m}"
    );
    let m = msg(Some(Archived), Archived, true, true);
    assert!(m.contains("`archived` storage is attached"), "{m}");
    assert!(msg(Some(Active), Archived, false, false).contains("not supported"));
    let m = msg(Some(Destroyed), Archived, false, true);
    assert!(
        m.contains("only as `active`") && m.contains("regeneration"),
        "{m}"
    );
}

#[test]
fn generations_of_storages_move_only_by_creation_and_regeneration() {
    use StorageState::*;
    let t = |c, r| transition(c, r, false, true).unwrap();
    assert_eq!(t(None, Active).next_generation(0), 1);
    assert_eq!(t(Some(Active), Archived).next_generation(3), 3);
    assert_eq!(t(Some(Archived), Active).next_generation(3), 3);
    assert_eq!(t(Some(Archived), Destroyed).next_generation(3), 3);
    assert_eq!(t(Some(Destroyed), Active).next_generation(3), 4);
    assert!(!t(Some(Active), Active).changes());
}

// ---- helpers ------------------------------------------------------------------------

struct Tree {
    _t: tempfile::TempDir,
    root: PathBuf,
    meta: MetaState,
    journal: PathBuf,
}

fn tree() -> Tree {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_path_buf();
    Tree {
        meta: MetaState::of_tree(&root),
        journal: root.join(".csis/lineage.journal"),
        root,
        _t: t,
    }
}

impl Tree {
    fn recorder(&self) -> Recorder {
        Recorder::open(self.meta.clone(), &self.journal).unwrap()
    }
    /// The records as the next run sees them (the journal merged in).
    fn view(&self) -> (Pins, FleetRecords) {
        self.meta.fleet_with_journal(&self.journal).unwrap()
    }
    /// The files alone.
    fn files(&self) -> (Pins, FleetRecords) {
        (self.meta.pins().unwrap(), self.meta.fleet().unwrap())
    }
    /// A directory where a file should be: its next atomic write fails
    /// (what a kill between the journal and that file leaves). The file
    /// itself is put aside, and back by [`Tree::unblock`].
    fn block(&self, file: &str) -> PathBuf {
        let p = self.meta.dir().join(file);
        let _ = std::fs::rename(&p, p.with_extension("aside"));
        std::fs::create_dir_all(p.join("in-the-way")).unwrap();
        p
    }
    fn unblock(&self, p: &Path) {
        std::fs::remove_dir_all(p).unwrap();
        let _ = std::fs::rename(p.with_extension("aside"), p);
    }
    /// A recorder with every record read, then `blocked` in the way.
    fn blocked_recorder(&self, blocked: &str) -> (Recorder, PathBuf) {
        let r = self.recorder();
        r.fleet(|_, _| ()).unwrap();
        (r, self.block(blocked))
    }
    fn journal_len(&self) -> u64 {
        std::fs::metadata(&self.journal)
            .map(|m| m.len())
            .unwrap_or(0)
    }
}

fn record(build: &str, hostname: &str, ephemeral: bool) -> LaunchRecord {
    LaunchRecord {
        image: "web-img".into(),
        build: build.into(),
        runtime: "dock".into(),
        group: "team".into(),
        mounts: vec![MountRecord {
            storage: "data".into(),
            type_: "volume".into(),
            builder: "vols".into(),
            mount_point: "/mnt/data".into(),
            group: "team".into(),
            share_mode: "2770".into(),
            public_read: false,
            device: None,
            extra: Default::default(),
        }],
        hostname: hostname.into(),
        ephemeral,
        user_data_sha256: "ab".repeat(32),
        machine_type: Some("small".into()),
        run: "r1".into(),
        ..Default::default()
    }
}

fn machine(n: u32, id: &str) -> Machine {
    Machine {
        generation: n,
        instance_id: Some(id.into()),
        provider_hostname: Some(format!("host-{id}")),
    }
}

/// The machine standing for `name`: (number, instance id), and the build
/// its launch record and pin name.
fn standing(v: &(Pins, FleetRecords), name: &str) -> Option<(u32, String, String, String)> {
    let (p, f) = v;
    let g = f.current_generation(name)?;
    Some((
        g.number,
        g.instance_id.clone().unwrap_or_default(),
        f.launch_record(name)?.build.clone(),
        p.instance_pin(name)?.to_string(),
    ))
}

// ---- generations and hostnames -------------------------------------------------------

#[test]
fn canonical_hostnames_have_three_digits() {
    assert_eq!(canonical_hostname("web", 1), "web-001");
    assert_eq!(canonical_hostname("web", 42), "web-042");
    assert_eq!(canonical_hostname("web", 1234), "web-1234");
}

#[test]
fn generations_count_apart_and_history_keeps_everything() {
    let t = tree();
    let r = t.recorder();
    let (n, host) = r.fleet(|_, f| f.next_machine("web", false)).unwrap();
    assert_eq!((n, host.as_str()), (1, "web-001"));
    r.record_launch("web", record("b1", &host, false), &machine(1, "c1"), "r1")
        .unwrap();
    r.record_replaced(
        "web",
        1,
        record("b2", "web-002", false),
        &machine(2, "c2"),
        "r2",
    )
    .unwrap();
    assert!(r.record_decommission("web", "r3").unwrap());
    assert!(!r.record_decommission("web", "r3").unwrap(), "nothing left");
    let (n, host) = r.fleet(|_, f| f.next_machine("web", false)).unwrap();
    assert_eq!(
        (n, host.as_str()),
        (3, "web-003"),
        "a number is never reused"
    );
    r.record_launch("web", record("b2", &host, false), &machine(3, "c3"), "r4")
        .unwrap();
    // an ephemeral counts on its own counter
    let (n, host) = r.fleet(|_, f| f.next_machine("probe", true)).unwrap();
    assert_eq!((n, host.as_str()), (1, "probe-001"));
    let verdict = EphemeralVerdict {
        record: record("b2", &host, true),
        machine: machine(1, "e1"),
        ok: true,
        kept: false,
    };
    r.record_ephemeral("probe", &verdict, "r4").unwrap();
    drop(r);

    let st = csis_cache::InstanceState::load(&t.meta).unwrap();
    let web = &st.instances["web"];
    assert_eq!((web.generation.durable, web.generation.ephemeral), (3, 0));
    let cur = web.current.as_ref().unwrap();
    assert_eq!(
        (cur.number, cur.how, cur.kind),
        (3, How::Observed, GenerationKind::Durable)
    );
    assert_eq!(cur.instance_id.as_deref(), Some("c3"));
    let closed: Vec<_> = web.closed().map(|c| (c.generation.number, c.why)).collect();
    assert_eq!(
        closed,
        [(1, CloseWhy::Replaced), (2, CloseWhy::Decommission)]
    );
    let probe = &st.instances["probe"];
    assert_eq!(
        (probe.generation.durable, probe.generation.ephemeral),
        (0, 1)
    );
    assert!(probe.current.is_none(), "removed in the same run");
    assert_eq!(probe.closed().next().unwrap().why, CloseWhy::Ephemeral);
    let text = std::fs::read_to_string(t.meta.dir().join(INSTANCE_STATE_FILE)).unwrap();
    assert!(
        text.contains("why: replaced") && text.contains("why: decommission"),
        "{text}"
    );
    assert!(text.contains("why: ephemeral"));

    // A number already given is refused and changes nothing.
    let before = std::fs::read(t.meta.dir().join(INSTANCE_STATE_FILE)).unwrap();
    let r = t.recorder();
    let e = r
        .record_launch(
            "web",
            record("b9", "web-002", false),
            &machine(2, "cx"),
            "r5",
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("generation 2 was given before"),
        "{e}"
    );
    let e = r
        .record_replaced(
            "web",
            1,
            record("b9", "web-004", false),
            &machine(4, "cx"),
            "r5",
        )
        .unwrap_err();
    assert!(e.to_string().contains("not the one standing (3)"), "{e}");
    drop(r);
    assert_eq!(
        std::fs::read(t.meta.dir().join(INSTANCE_STATE_FILE)).unwrap(),
        before
    );
}

#[test]
fn pins_follow_the_fleet_operations() {
    let t = tree();
    let r = t.recorder();
    assert!(r
        .bind_instance("web", "b1", InstanceOp::Bind, "r1")
        .unwrap());
    assert!(!r
        .bind_instance("web", "b1", InstanceOp::Bind, "r1")
        .unwrap());
    r.record_launch(
        "web",
        record("b1", "web-001", false),
        &machine(1, "c1"),
        "r1",
    )
    .unwrap();
    assert!(r
        .bind_instance("web", "b2", InstanceOp::Upgrade, "r2")
        .unwrap());
    r.fleet(|p, f| {
        assert_eq!(p.pending_replacements["web"], "b2");
        assert_eq!(
            f.launch_record("web").unwrap().build,
            "b1",
            "runs b1 until replaced"
        );
    })
    .unwrap();
    r.record_replaced(
        "web",
        1,
        record("b2", "web-002", false),
        &machine(2, "c2"),
        "r3",
    )
    .unwrap();
    // a follow replacement (no pending one): the pin follows the new build
    r.record_replaced(
        "web",
        2,
        record("b3", "web-003", false),
        &machine(3, "c3"),
        "r4",
    )
    .unwrap();
    r.record_decommission("web", "r5").unwrap();
    drop(r);
    let p = t.meta.pins().unwrap();
    assert!(p.instances.is_empty() && p.pending_replacements.is_empty());
    let ops: Vec<_> = p
        .upgrades
        .iter()
        .map(|m| (m.op.as_str(), m.from.as_deref(), m.to.as_str()))
        .collect();
    assert_eq!(
        ops,
        [
            ("bind", None, "b1"),
            ("upgrade", Some("b1"), "b2"),
            ("replace", Some("b1"), "b2"),
            ("follow", Some("b2"), "b3"),
            ("decommission", Some("b3"), ""),
        ]
    );
    assert!(p.upgrades.iter().all(|m| m.kind == "instance"));
    assert!(LaunchParams::load(&t.meta).unwrap().instances.is_empty());
}

#[test]
fn storages_record_transitions_and_refuse_a_wrong_from() {
    use StorageState::*;
    let t = tree();
    let r = t.recorder();
    let facts = |id: &str| RecordedFacts {
        builder: "vols".into(),
        type_: "volume".into(),
        id: Some(id.into()),
        ..Default::default()
    };
    let tr = |c, q| transition(c, q, false, true).unwrap();
    assert_eq!(
        r.record_storage("data", &tr(None, Active), facts("v1"), "r1")
            .unwrap(),
        1
    );
    let e = r
        .record_storage("data", &tr(None, Active), facts("v1"), "r2")
        .unwrap_err();
    assert!(e.to_string().contains("records say active"), "{e}");
    r.record_storage(
        "data",
        &tr(Some(Active), Archived),
        RecordedFacts {
            id: None,
            ..facts("")
        },
        "r2",
    )
    .unwrap();
    r.record_storage("data", &tr(Some(Archived), Destroyed), facts("v1"), "r3")
        .unwrap();
    assert_eq!(
        r.record_storage("data", &tr(Some(Destroyed), Active), facts("v2"), "r4")
            .unwrap(),
        2,
        "a regeneration"
    );
    r.record_storage("old", &tr(None, Active), facts("v9"), "r1")
        .unwrap();
    r.record_storage("old", &tr(Some(Active), Destroyed), facts("v9"), "r5")
        .unwrap();
    r.record_storage("gone", &tr(None, Active), facts("v8"), "r1")
        .unwrap();
    drop(r);
    let s = StorageStates::load(&t.meta).unwrap();
    let d = &s.storages["data"];
    assert_eq!((d.state, d.generation), (Active, 2));
    assert_eq!(d.facts.id.as_deref(), Some("v2"));
    let h: Vec<_> = d
        .history
        .iter()
        .map(|e| (e.from, e.to, e.generation, e.action.as_deref()))
        .collect();
    assert_eq!(
        h,
        [
            (None, Active, Some(1), Some("create")),
            (Some(Active), Archived, Some(1), Some("archive")),
            (Some(Archived), Destroyed, Some(1), Some("destroy")),
            (Some(Destroyed), Active, Some(2), Some("regenerate")),
        ]
    );
    let f = t.meta.fleet().unwrap();
    assert_eq!(
        f.storage_state("old"),
        Some(Destroyed),
        "the tombstone stays"
    );
    assert_eq!(
        f.undeclared_storages(&["data"]),
        ["gone"],
        "destroyed ones are not asked for"
    );
    let text = std::fs::read_to_string(t.meta.dir().join(STORAGE_STATE_FILE)).unwrap();
    assert!(text.contains("from: null"), "{text}");
}

#[test]
fn undeclared_instances_are_the_recorded_ones_no_longer_declared() {
    let t = tree();
    let r = t.recorder();
    r.record_launch("a", record("b1", "a-001", false), &machine(1, "c1"), "r1")
        .unwrap();
    r.record_launch("b", record("b1", "b-001", false), &machine(1, "c2"), "r1")
        .unwrap();
    r.bind_instance("c", "b1", InstanceOp::Bind, "r1").unwrap();
    r.record_launch("d", record("b1", "d-001", false), &machine(1, "c4"), "r1")
        .unwrap();
    r.record_decommission("d", "r2").unwrap();
    let got = r.fleet(|p, f| f.undeclared_instances(p, &["a"])).unwrap();
    assert_eq!(
        got,
        ["b", "c"],
        "a decommissioned one is gone from the list"
    );
    r.fleet(|p, f| {
        let a = f.instance(p, "a");
        assert_eq!((a.pin, a.pending), (Some("b1"), None));
        assert_eq!(a.launch.unwrap().hostname, "a-001");
        assert_eq!(a.current.unwrap().number, 1);
        assert!(!f.instance(p, "c").is_new(), "pinned");
        assert!(f.instance(p, "d").is_new(), "decommissioned: nothing left");
        assert!(f.instance(p, "zz").is_new());
    })
    .unwrap();
    drop(r);
    let text = std::fs::read_to_string(t.meta.dir().join(INSTANCE_STATE_FILE)).unwrap();
    assert!(text.contains("current: null"), "{text}");
}

// ---- a real kill -9 -------------------------------------------------------------------

const CHILD_TREE: &str = "CSIS_FLEET_RECORDS_CHILD_TREE";

/// Run by [`kill_9_during_replacements_leaves_exactly_one_machine_recorded`]
/// as a child process: replaces `web` again and again until killed.
#[test]
#[ignore = "a child process of the kill -9 test"]
fn replacement_child() {
    let Ok(root) = std::env::var(CHILD_TREE) else {
        return;
    };
    let root = PathBuf::from(root);
    let r = Recorder::open(
        MetaState::of_tree(&root),
        root.join(".csis/lineage.journal"),
    )
    .unwrap();
    for n in 1..100_000u32 {
        let rec = record(
            &format!("b{}", n + 1),
            &canonical_hostname("web", n + 1),
            false,
        );
        r.record_replaced("web", n, rec, &machine(n + 1, &format!("c{}", n + 1)), "rk")
            .unwrap();
    }
}

/// The invariant a kill must keep: one machine stands, the launch record
/// and the pin are its, and every earlier one is closed `replaced`.
fn one_machine_recorded(v: &(Pins, FleetRecords)) -> u32 {
    let (p, f) = v;
    let g = f.current_generation("web").expect("a machine is recorded");
    let n = g.number;
    let lr = f.launch_record("web").unwrap();
    assert_eq!(lr.hostname, canonical_hostname("web", n));
    assert_eq!(lr.build, format!("b{n}"));
    assert_eq!(p.instance_pin("web"), Some(lr.build.as_str()));
    assert_eq!(g.instance_id.as_deref(), Some(format!("c{n}").as_str()));
    let l = &f.instances.instances["web"];
    assert_eq!(l.generation.durable, n);
    let closed: Vec<_> = l.closed().map(|c| (c.generation.number, c.why)).collect();
    let want: Vec<_> = (1..n).map(|k| (k, CloseWhy::Replaced)).collect();
    assert_eq!(closed, want);
    n
}

#[test]
fn kill_9_during_replacements_leaves_exactly_one_machine_recorded() {
    for (round, delay_ms) in [15u64, 40, 90, 160].into_iter().enumerate() {
        let t = tree();
        t.recorder()
            .record_launch(
                "web",
                record("b1", "web-001", false),
                &machine(1, "c1"),
                "r0",
            )
            .unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "fleet_records::replacement_child",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_TREE, &t.root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // wait for the child's first replacement, then let it run a little
        let state = t.meta.dir().join(INSTANCE_STATE_FILE);
        let started = std::time::Instant::now();
        while !std::fs::read_to_string(&state)
            .unwrap()
            .contains("why: replaced")
        {
            assert!(
                started.elapsed().as_secs() < 120,
                "the child never replaced"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let n = one_machine_recorded(&t.view());
        assert!(n >= 2, "round {round}: at least one replacement recorded");
        eprintln!(
            "round {round}: killed at generation {n}, journal {} bytes",
            t.journal_len()
        );
        drop(t.recorder()); // the next run replays the journal
        assert_eq!(one_machine_recorded(&t.files()), n, "round {round}");
        assert_eq!(t.journal_len(), 0);
    }
}

#[test]
fn a_relaunch_closes_the_gone_generation_missing_and_keeps_the_pin() {
    let t = tree();
    let r = t.recorder();
    r.record_launch(
        "web",
        record("b1", "web-001", false),
        &machine(1, "c1"),
        "r1",
    )
    .unwrap();
    let moves = r.fleet(|p, _| p.upgrades.len()).unwrap();
    r.record_relaunched(
        "web",
        1,
        record("b1", "web-002", false),
        &machine(2, "c2"),
        "r2",
    )
    .unwrap();
    // the same machine again changes nothing (a replay)
    r.record_relaunched(
        "web",
        1,
        record("b1", "web-002", false),
        &machine(2, "c2"),
        "r2",
    )
    .unwrap();
    assert_eq!(
        r.fleet(|p, _| p.upgrades.len()).unwrap(),
        moves,
        "the pin did not move"
    );
    drop(r);
    let v = t.view();
    assert_eq!(
        standing(&v, "web"),
        Some((2, "c2".into(), "b1".into(), "b1".into()))
    );
    let closed: Vec<_> = v.1.instances.instances["web"]
        .closed()
        .map(|c| (c.generation.number, c.why))
        .collect();
    assert_eq!(closed, [(1, CloseWhy::Missing)]);
    let text = std::fs::read_to_string(t.meta.dir().join(INSTANCE_STATE_FILE)).unwrap();
    assert!(text.contains("why: missing"), "{text}");
}
