//! The fleet planner's decisions over records, no daemon.

use super::plan::*;
use csis_cache::launch_params::LaunchRecord;
use csis_cache::storage_state::{StorageRecord, StorageState};

fn launched(build: &str) -> LaunchRecord {
    LaunchRecord {
        image: "web".into(),
        build: build.into(),
        runtime: "rt".into(),
        hostname: "web-001".into(),
        launched: true,
        ..LaunchRecord::default()
    }
}

fn case<'a>(follow: bool, head: Option<&'a str>) -> InstanceCase<'a> {
    InstanceCase {
        name: "web",
        image: "web",
        runtime: "rt",
        follow,
        declared: true,
        head,
        ..InstanceCase::default()
    }
}

fn view_with(build: Option<&str>) -> FleetView {
    let mut v = FleetView::default();
    if let Some(b) = build {
        v.records.launch.instances.insert("web".into(), launched(b));
    }
    v
}

#[test]
fn a_first_bind_takes_the_head_the_pin_or_the_release() {
    let v = view_with(None);
    let d = decide_instance(&v, &case(false, Some("b1")));
    assert_eq!((d.action, d.build.as_deref()), (Action::Launch, Some("b1")));
    let d = decide_instance(&v, &case(false, None));
    assert_eq!(d.action, Action::Waiting);
    assert!(!d.action.changes());
    let mut c = case(true, None);
    c.bake_due = true;
    let d = decide_instance(&v, &c);
    assert_eq!((d.action, d.build), (Action::Launch, None));
    // a recorded pin wins over the head (pinned)
    let mut v2 = view_with(None);
    v2.pins.instances.insert("web".into(), "b0".into());
    let d = decide_instance(&v2, &case(false, Some("b1")));
    assert_eq!(d.build.as_deref(), Some("b0"));
    // require_released_builds: the release, else waiting
    let mut c = case(false, Some("b1"));
    c.require_released = true;
    c.release_model = Some("default");
    assert_eq!(decide_instance(&v, &c).action, Action::Waiting);
    let mut v3 = view_with(None);
    v3.releases
        .current
        .entry("default".into())
        .or_default()
        .insert("web".into(), "b0".into());
    let d = decide_instance(&v3, &c);
    assert_eq!((d.action, d.build.as_deref()), (Action::Launch, Some("b0")));
}

#[test]
fn launched_instances_replace_follow_or_fall_behind() {
    let v = view_with(Some("b1"));
    assert_eq!(
        decide_instance(&v, &case(true, Some("b1"))).action,
        Action::Current
    );
    let d = decide_instance(&v, &case(true, Some("b2")));
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Replace, Some("b2"))
    );
    let d = decide_instance(&v, &case(false, Some("b2")));
    assert_eq!(d.action, Action::Behind);
    assert!(!d.action.changes(), "behind is not due");
    assert!(
        d.reason.contains("csis upgrade instance web"),
        "{}",
        d.reason
    );
    // a pending upgrade replaces a pinned one
    let mut v = view_with(Some("b1"));
    v.pins
        .pending_replacements
        .insert("web".into(), "b2".into());
    let d = decide_instance(&v, &case(false, Some("b2")));
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Replace, Some("b2"))
    );
}

#[test]
fn undeclared_is_decommissioned_and_ephemeral_proves_once() {
    let v = view_with(Some("b1"));
    let mut c = case(false, None);
    c.declared = false;
    assert_eq!(decide_instance(&v, &c).action, Action::Decommission);
    let mut c = case(true, Some("b3"));
    c.ephemeral = true;
    let mut v = FleetView::default();
    assert_eq!(decide_instance(&v, &c).action, Action::Launch);
    v.proven.insert(("web".into(), "b3".into()));
    assert_eq!(decide_instance(&v, &c).action, Action::Current);
}

#[test]
fn storages_follow_the_state_machine() {
    let mut v = FleetView::default();
    let c = |requested, attached| StorageCase {
        name: "data",
        requested,
        attached,
        supports_archive: true,
    };
    assert_eq!(
        decide_storage(&v, &c(Some(StorageState::Active), true)).action,
        Action::Create
    );
    v.records.storages.storages.insert(
        "data".into(),
        StorageRecord {
            state: StorageState::Active,
            generation: 1,
            facts: Default::default(),
            history: Vec::new(),
            extra: Default::default(),
        },
    );
    assert_eq!(
        decide_storage(&v, &c(Some(StorageState::Active), true)).action,
        Action::Current
    );
    assert_eq!(
        decide_storage(&v, &c(Some(StorageState::Archived), false)).action,
        Action::Archive
    );
    assert_eq!(
        decide_storage(&v, &c(Some(StorageState::Archived), true)).action,
        Action::Refused
    );
    // declared no more: destroyed
    let d = decide_storage(&v, &c(None, false));
    assert_eq!(d.action, Action::Destroy);
    assert!(d.reason.contains("declared no more"), "{}", d.reason);
}

#[test]
fn a_missing_machine_is_relaunched_from_the_build_it_ran() {
    let mut v = view_with(Some("b1"));
    // current and behind become a relaunch of the running build
    v.missing.insert("web".into());
    let d = decide_instance(&v, &case(false, Some("b1")));
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Relaunch, Some("b1"))
    );
    assert!(
        d.reason.contains("web-001") && d.reason.contains("missing"),
        "{}",
        d.reason
    );
    assert!(d.action.changes());
    let d = decide_instance(&v, &case(false, Some("b2")));
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Relaunch, Some("b1"))
    );
    // a replacement repairs it as well: it stays one
    let d = decide_instance(&v, &case(true, Some("b2")));
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Replace, Some("b2"))
    );
    // an ephemeral one is never relaunched
    let mut c = case(false, Some("b1"));
    c.ephemeral = true;
    assert_ne!(decide_instance(&v, &c).action, Action::Relaunch);
}

#[test]
fn a_report_names_missing_only_the_machine_the_record_still_names() {
    use csis_cache::drift::Drift;
    let v = view_with(Some("b1"));
    let gone = |host: &str| Drift {
        kind: "instance".into(),
        name: "web".into(),
        drift: "missing".into(),
        detail: format!("{host} (build b1) is recorded launched on rt and is gone"),
        hard: true,
    };
    assert!(missing_of(&v, &[gone("web-001")]).contains("web"));
    // a report older than the relaunch names the old machine
    assert!(missing_of(&v, &[gone("web-000")]).is_empty());
    let mut foreign = gone("web-001");
    foreign.drift = "foreign".into();
    assert!(missing_of(&v, &[foreign]).is_empty());
}

#[test]
fn a_pin_alone_declared_no_more_is_decommissioned() {
    let mut v = view_with(None);
    v.pins.instances.insert("web".into(), "b0".into());
    let mut c = case(false, Some("b1"));
    c.declared = false;
    let d = decide_instance(&v, &c);
    assert_eq!(
        (d.action, d.build.as_deref()),
        (Action::Decommission, Some("b0"))
    );
    assert!(d.reason.contains("pin"), "{}", d.reason);
    // nothing recorded at all: nothing to do
    assert_eq!(
        decide_instance(&view_with(None), &c).action,
        Action::Current
    );
}

#[test]
fn the_gate_lets_through_only_the_drift_a_due_node_repairs() {
    use csis_cache::drift::Drift;
    let (_t, args) = crate::test_tree::ops_basic();
    let session = crate::session::open(&args.dir, &args.load_options()).unwrap();
    let sel = session.select(&[]).unwrap();
    let plan = session.plan(&sel, &Default::default()).unwrap();
    let hard = |kind: &str, name: &str, what: &str| Drift {
        kind: kind.into(),
        name: name.into(),
        drift: what.into(),
        detail: "gone".into(),
        hard: true,
    };
    // no instance node relaunches `web`: its missing machine refuses, as
    // does any other hard drift
    let left = unrepaired(
        &session.compiled.graph,
        &plan,
        &[
            hard("instance", "web", "missing"),
            hard("image", "base", "missing"),
        ],
    );
    assert_eq!(
        left,
        vec![
            "instance web: missing: gone".to_string(),
            "image base: missing: gone".to_string()
        ]
    );
}

/// A plan after a killed build sees what its journal holds: the launch a
/// killed run recorded in the journal, not yet in `launch-params.yaml`,
/// is a machine standing, not one to launch again.
#[test]
fn the_view_merges_the_journal_of_an_interrupted_build() {
    let t = tempfile::tempdir().unwrap();
    let meta = csis_cache::MetaState::of_tree(t.path());
    let journal = csis_cache::LocalDir::of_tree(t.path()).journal();
    let r = csis_cache::Recorder::open(meta.clone(), &journal).unwrap();
    r.fleet(|_, _| ()).unwrap();
    // the file the recorder writes next is in the way: the launch stays in the journal
    let file = meta.dir().join("launch-params.yaml");
    std::fs::create_dir_all(file.join("in-the-way")).unwrap();
    let machine = csis_cache::fleet::Machine {
        generation: 1,
        instance_id: Some("c1".into()),
        provider_hostname: None,
    };
    let _ = r.record_launch(
        "web",
        launched("b1"),
        &machine,
        "2026_12_02t00_00_00_000000",
    );
    drop(r);
    std::fs::remove_dir_all(&file).unwrap();
    assert!(
        std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0) > 0,
        "the journal holds the launch"
    );
    let v = FleetView::load(&meta).unwrap();
    assert_eq!(v.launched("web").map(|r| r.build.as_str()), Some("b1"));
}

#[test]
fn declared_tags_are_labels_beside_csis_own_and_a_secret_is_its_token() {
    use std::collections::BTreeMap;
    let key = csis_schema::secret::default_key();
    let token = csis_schema::secret::register("fleet-tag-secret-7f3a", &key).expect("a token");
    let csis = BTreeMap::from([("csis_instance".to_string(), "web".to_string())]);
    let tags = [
        ("role".to_string(), "web".to_string()),
        ("token".to_string(), "fleet-tag-secret-7f3a".to_string()),
        ("csis_instance".to_string(), "other".to_string()),
    ];
    let labels = super::apply::with_tags(csis, tags.iter().map(|(k, v)| (k, v)));
    assert_eq!(
        labels,
        BTreeMap::from([
            ("csis_instance".to_string(), "web".to_string()),
            ("role".to_string(), "web".to_string()),
            ("token".to_string(), token),
        ])
    );
}

#[test]
fn an_ephemeral_standing_after_its_proof_is_removed() {
    use csis_cache::instance_state::{GenerationKind, How, Opening};
    let mut c = case(false, Some("b3"));
    c.ephemeral = true;
    let mut v = FleetView::default();
    let mut rec = launched("b3");
    rec.ephemeral = true;
    v.records.launch.instances.insert("web".into(), rec);
    let opening = Opening {
        how: How::Observed,
        run: "r1".into(),
        at: "2026-12-04T00:00:00Z".into(),
        instance_id: Some("i-1".into()),
        provider_hostname: None,
        launch_params: None,
    };
    v.records
        .instances
        .open("web", GenerationKind::Ephemeral, opening);
    // standing, not proved (kept, or stopped mid-proof): the proof again
    assert_eq!(decide_instance(&v, &c).action, Action::Launch);
    assert!(v.standing_ephemeral("web").is_some_and(|s| !s.ok));
    // standing after a passing proof: it goes, its generation with it
    v.proven.insert(("web".into(), "b3".into()));
    let d = decide_instance(&v, &c);
    assert_eq!((d.action, d.build.as_deref()), (Action::Remove, Some("b3")));
    assert!(d.action.changes());
    assert_eq!(Action::parse("remove"), Some(Action::Remove));
    let s = v.standing_ephemeral("web").expect("standing");
    assert!(s.ok && !s.kept);
    assert_eq!(s.machine.instance_id.as_deref(), Some("i-1"));
    // gone (closed): proved, current
    v.records.instances.close(
        "web",
        "r2",
        "2026-12-04T00:00:01Z",
        csis_cache::instance_state::CloseWhy::Ephemeral,
    );
    assert_eq!(decide_instance(&v, &c).action, Action::Current);
}
