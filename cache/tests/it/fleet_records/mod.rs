//! The fleet's records (docs/fleet.md §2): the storage state machine, the
//! generation ledger and canonical hostnames, the original's shapes read
//! and written back, the Recorder's fleet operations replayed after a kill
//! between the journal and the files, and the shared store carrying them.

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

// ---- the original's shapes -----------------------------------------------------------

const LAUNCH_YAML: &str = "\
instances:
  lab-node:
    alias: otter
    build: unbound
    enrollment:
      enrollment: a-token
      server_label: x.group=lab
    ephemeral: false
    group: lab
    hostname: lab-node-001
    identity_type: okta
    image: lab-image
    launched: false
    machine_type: m.small
    mounts:
    - builder: ebs-b
      device: /dev/xvdf
      group: lab
      mount_point: /mnt/data
      public_read: false
      share_mode: '2770'
      storage: data
      type: ebs
      future_key: 7
    run: 2026_01_02t03_04_05_000006
    session: ssm
    user_data_sha256: 9f86d081884c7d65
written_by: someone
";

const INSTANCE_YAML: &str = "\
instances:
  lab-node:
    generation:
      durable: 2
      ephemeral: 1
    current:
      number: 2
      kind: durable
      how: observed
      opened_run: r2
      opened_at: '2026-01-02T03:04:05Z'
      instance_id: i-2
      provider_hostname: ip-10-0-0-2
      launch_params:
        build: b2
    history:
    - number: 1
      kind: durable
      how: adopted
      opened_run: r0
      opened_at: '2026-01-01T00:00:00Z'
      closed_run: r2
      closed_at: '2026-01-02T03:04:05Z'
      why: replaced-out-of-band
    - event: resized
      run: r1
      machine_type: m.large
";

const STORAGE_YAML: &str = "\
storages:
  arch:
    state: active
    generation: 1
    facts:
      builder: ebs-b
      type: ebs
      archive:
        snapshot: true
    history:
      - from: null
        to: active
        run: r0
  bucket:
    state: archived
    generation: 3
    note: kept
    facts:
      builder: s3-b
      type: s3
      bucket_name: some-bucket
    history:
      - from: null
        to: active
        run: r0
      - from: active
        to: archived
        run: r1
        generation: 3
        action: archive
        plugin_step: snapshot
";

fn parse(text: &str) -> serde_json::Value {
    csis_schema::yaml::from_str("t", text).unwrap()
}

#[test]
fn the_originals_shapes_round_trip_with_unknown_keys() {
    let t = tree();
    std::fs::create_dir_all(t.meta.dir()).unwrap();
    for (file, text) in [
        (LAUNCH_PARAMS_FILE, LAUNCH_YAML),
        (INSTANCE_STATE_FILE, INSTANCE_YAML),
        (STORAGE_STATE_FILE, STORAGE_YAML),
    ] {
        std::fs::write(t.meta.dir().join(file), text).unwrap();
    }
    let f = t.meta.fleet().unwrap();
    let lp = f.launch_record("lab-node").unwrap();
    assert_eq!((lp.build.as_str(), lp.bound_build()), ("unbound", None));
    assert_eq!(lp.mounts[0].share_mode, "2770");
    assert_eq!(lp.mounts[0].device.as_deref(), Some("/dev/xvdf"));
    assert!(lp.extra.contains_key("enrollment") && lp.extra.contains_key("alias"));
    let g = f.current_generation("lab-node").unwrap();
    assert_eq!((g.number, g.how), (2, How::Observed));
    let l = &f.instances.instances["lab-node"];
    assert_eq!(l.closed().next().unwrap().why, CloseWhy::ReplacedOutOfBand);
    assert_eq!(l.history.len(), 2, "the resized event is kept");
    assert_eq!(f.storage_state("bucket"), Some(StorageState::Archived));
    // Written back: the same documents (unknown keys kept), keys sorted.
    t.meta.save_fleet(&FleetRecords::default()).unwrap();
    t.meta.save_fleet(&f).unwrap();
    for (file, text) in [
        (LAUNCH_PARAMS_FILE, LAUNCH_YAML),
        (INSTANCE_STATE_FILE, INSTANCE_YAML),
        (STORAGE_STATE_FILE, STORAGE_YAML),
    ] {
        let out = std::fs::read_to_string(t.meta.dir().join(file)).unwrap();
        assert_eq!(parse(&out), parse(text), "{file}:\n{out}");
        assert!(out.contains("from: null") || file != STORAGE_STATE_FILE);
    }
    let out = std::fs::read_to_string(t.meta.dir().join(LAUNCH_PARAMS_FILE)).unwrap();
    let keys: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     ") && !l.starts_with("    -"))
        .map(|l| l.trim().split(':').next().unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted keys");
    let v = parse(&out);
    assert_eq!(
        v["instances"]["lab-node"]["mounts"][0]["share_mode"],
        serde_json::json!("2770"),
        "a string stays a string"
    );
}

#[test]
fn bad_records_are_refused_at_their_line() {
    let t = tree();
    std::fs::create_dir_all(t.meta.dir()).unwrap();
    std::fs::write(
        t.meta.dir().join(STORAGE_STATE_FILE),
        "storages:\n  s:\n    state: melted\n",
    )
    .unwrap();
    let e = t.meta.fleet().unwrap_err().to_string();
    assert!(e.contains("storage-state.yaml") && e.contains(":3"), "{e}");
    std::fs::write(
        t.meta.dir().join(LAUNCH_PARAMS_FILE),
        "instances:\n  a:\n    launched: 'yes'\n",
    )
    .unwrap();
    let e = LaunchParams::load(&t.meta).unwrap_err().to_string();
    assert!(e.contains("launch-params.yaml") && e.contains(":3"), "{e}");
}

// ---- replay after a kill ------------------------------------------------------------

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

// ---- the shared store ---------------------------------------------------------------

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
