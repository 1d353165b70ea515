//! The retention and disposal plans' unit tests, with the property test of their invariants.

use super::*;
use std::time::{Duration, UNIX_EPOCH};

fn rec(id: &str, series: &str, rt: &str, parent: &str, run: &str) -> BuildRecord {
    let mut r = BuildRecord::new(id, series, rt);
    r.parent = Some(parent.into());
    r.run = Some(run.into());
    r
}

fn now() -> SystemTime {
    crate::parse_run_id("2026_11_30t00_00_00_000000").unwrap()
}

fn lineage() -> Lineage {
    let mut l = Lineage::default();
    l.add_build(rec(
        "b1",
        "base",
        "rt",
        "vendor",
        "2026_11_01t00_00_00_000000",
    ));
    l.add_build(rec(
        "b2",
        "base",
        "rt",
        "vendor",
        "2026_11_02t00_00_00_000000",
    ));
    l.add_build(rec(
        "b3",
        "base",
        "rt",
        "vendor",
        "2026_11_03t00_00_00_000000",
    ));
    l.add_build(rec(
        "b4",
        "base",
        "rt",
        "vendor",
        "2026_11_29t00_00_00_000000",
    ));
    l.add_build(rec("w1", "web", "rt", "b1", "2026_11_01t01_00_00_000000"));
    l.add_build(rec("w2", "web", "rt", "b2", "2026_11_02t01_00_00_000000"));
    l.add_build(rec(
        "x1",
        "base",
        "other",
        "vendor",
        "2026_11_01t00_00_00_000000",
    ));
    l
}

fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

fn rts() -> BTreeSet<String> {
    ["rt".to_string(), "other".to_string()].into()
}

#[test]
fn keep_order() {
    assert_eq!(keep_for(true, Some(3), Some(5)), Some(0));
    assert_eq!(keep_for(false, Some(3), Some(5)), Some(3));
    assert_eq!(keep_for(false, None, Some(5)), Some(5));
    assert_eq!(keep_for(false, None, None), None);
}

#[test]
fn retention_keeps_newest_and_protects() {
    let l = lineage();
    let mut pins = Pins::default();
    pins.instances.insert("vm".into(), "b2".into());
    let mut rel = Releases::default();
    rel.current
        .entry("prod".into())
        .or_default()
        .insert("base".into(), "b1".into());
    let p = Protections::from_records(&pins, &rel, &LaunchParams::default());
    let inp = PlanInputs {
        lineage: &l,
        protections: &p,
        configured_runtimes: &rts(),
        revoked: &none(),
        now: now(),
    };
    // keep 1 of base on rt: b1 (released), b2 (pinned) debt; b3 disposable
    let plan = retention_plan(inp, Some("rt"), None, &|s, _| (s == "base").then_some(1));
    assert_eq!(
        plan.items
            .iter()
            .map(|i| i.build_id.as_str())
            .collect::<Vec<_>>(),
        ["b3"]
    );
    assert_eq!(plan.debt.len(), 2);
    assert_eq!(
        plan.debt[0].reason,
        "released on model prod: release another build there first"
    );
    assert_eq!(
        plan.debt[1].reason,
        "pinned by instance vm: decommission first"
    );
    // runtime filter excludes `other`
    assert!(plan.items.iter().all(|i| i.runtime == "rt"));
    // min-age keeps young builds
    let plan = retention_plan(inp, None, Some(30), &|_, _| Some(0));
    assert!(plan.items.is_empty());
    let free = Protections::default();
    let inp_free = PlanInputs {
        protections: &free,
        ..inp
    };
    let plan = retention_plan(inp_free, None, Some(20), &|_, _| Some(0));
    let ids: Vec<_> = plan.items.iter().map(|i| i.build_id.as_str()).collect();
    // b4 is 1 day old: kept; w1/w2 come before their parents
    assert!(!ids.contains(&"b4"));
    let pos = |x: &str| ids.iter().position(|i| *i == x).unwrap();
    assert!(pos("w1") < pos("b1"));
    assert!(pos("w2") < pos("b2"));
    // ephemeral: keep 0
    let plan = retention_plan(inp, Some("other"), None, &|_, _| keep_for(true, None, None));
    assert_eq!(plan.items.len(), 1);
}

#[test]
fn refusals_come_before_anything() {
    let l = lineage();
    let mut pins = Pins::default();
    pins.instances.insert("vm".into(), "b2".into());
    let mut launches = LaunchParams::default();
    launches.instances.insert(
        "vm2".into(),
        crate::LaunchRecord {
            build: "b3".into(),
            launched: true,
            ..Default::default()
        },
    );
    let p = Protections::from_records(&pins, &Releases::default(), &launches);
    let only_rt: BTreeSet<String> = ["rt".to_string()].into();
    let inp = PlanInputs {
        lineage: &l,
        protections: &p,
        configured_runtimes: &only_rt,
        revoked: &none(),
        now: now(),
    };
    let req = |sel: Selection, rt: Option<&str>| DisposeRequest {
        selection: sel,
        runtime: rt.map(str::to_string),
        min_age_days: None,
    };
    let err = plan_dispose(
        inp,
        &req(
            Selection::Ids(vec![
                "b1".into(),
                "zz".into(),
                "b2".into(),
                "b3".into(),
                "x1".into(),
            ]),
            None,
        ),
        &|_, _| None,
    )
    .unwrap_err();
    let text: Vec<_> = err.iter().map(|r| r.0.clone()).collect();
    assert_eq!(text.len(), 4, "{text:?}");
    assert!(text[0].contains("zz") && text[0].contains("state import"));
    assert!(text[1].contains("b2") && text[1].contains("instance vm"));
    assert!(text[2].contains("b3") && text[2].contains("launched"));
    assert!(text[3].contains("x1") && text[3].contains("not configured"));
    let err = plan_dispose(inp, &req(Selection::All, None), &|_, _| None).unwrap_err();
    assert!(err[0].0.contains("--all needs --runtime"));
    let err = plan_dispose(
        inp,
        &req(Selection::Ids(vec!["w1".into()]), Some("other")),
        &|_, _| None,
    )
    .unwrap_err();
    assert!(err
        .iter()
        .any(|r| r.0.contains("not rt") || r.0.contains("not other")));
    // explicit ok, children first; a pin of an image the tree no longer
    // declares is listed (removed with the build); a needed one refuses
    let mut pins2 = Pins::default();
    pins2.images.insert("web@rt".into(), "b1".into());
    let p2 = Protections::from_records(&pins2, &Releases::default(), &LaunchParams::default())
        .needing(&|_| false);
    let inp2 = PlanInputs {
        protections: &p2,
        ..inp
    };
    let plan = plan_dispose(
        inp2,
        &req(Selection::Ids(vec!["b1".into(), "w1".into()]), None),
        &|_, _| None,
    )
    .unwrap();
    assert_eq!(plan.items[0].build_id, "w1");
    assert_eq!(plan.items[1].build_id, "b1");
    assert_eq!(plan.items[1].image_pins, vec!["web@rt"]);
    let p3 = Protections::from_records(&pins2, &Releases::default(), &LaunchParams::default())
        .needing(&|k| k == "web@rt");
    let inp3 = PlanInputs {
        protections: &p3,
        ..inp
    };
    let err = plan_dispose(
        inp3,
        &req(Selection::Ids(vec!["b1".into(), "w1".into()]), None),
        &|_, _| None,
    )
    .unwrap_err();
    assert_eq!(
        err.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["build b1 (base) is pinned by image web@rt (its parent build): move the pin first (`csis upgrade image web`)"]
    );
    // --all on rt refused because b2 pinned and b3 launched
    assert!(plan_dispose(inp, &req(Selection::All, Some("rt")), &|_, _| None).is_err());
    // min-age refuses an explicit young build
    let young = DisposeRequest {
        min_age_days: Some(5),
        ..req(Selection::Ids(vec!["b4".into()]), None)
    };
    let err = plan_dispose(inp, &young, &|_, _| None).unwrap_err();
    assert!(err[0].0.contains("younger than --min-age 5"));
}

#[test]
fn explicit_ids_and_all_refuse_a_released_build() {
    let l = lineage();
    let mut rel = Releases::default();
    for model in ["prod", "staging"] {
        rel.current
            .entry(model.into())
            .or_default()
            .insert("web".into(), "w2".into());
    }
    let p = Protections::from_records(&Pins::default(), &rel, &LaunchParams::default());
    let inp = PlanInputs {
        lineage: &l,
        protections: &p,
        configured_runtimes: &rts(),
        revoked: &none(),
        now: now(),
    };
    let why =
        "build w2 (web) is released on models prod, staging: release another build there first";
    for selection in [
        Selection::All,
        Selection::Ids(vec!["w1".into(), "w2".into()]),
    ] {
        let req = DisposeRequest {
            selection,
            runtime: Some("rt".into()),
            min_age_days: None,
        };
        let err = plan_dispose(inp, &req, &|_, _| None).unwrap_err();
        assert_eq!(err.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), [why]);
    }
    // retention keeps it as debt, with the same reason
    let plan = retention_plan(inp, Some("rt"), None, &|_, _| Some(0));
    assert!(plan.items.iter().all(|i| i.build_id != "w2"));
    let d: Vec<_> = plan
        .debt
        .iter()
        .map(|d| (d.build_id.as_str(), d.reason.as_str()))
        .collect();
    assert_eq!(
        d,
        [(
            "w2",
            "released on models prod, staging: release another build there first"
        )]
    );
}

#[test]
fn retention_never_keeps_a_revoked_build_in_place_of_a_good_one() {
    let l = lineage();
    let p = Protections::default();
    // base on rt: b1, b2, b3, b4 (newest); b4 revoked
    let revoked: BTreeSet<String> = ["b4".to_string()].into();
    let inp = PlanInputs {
        lineage: &l,
        protections: &p,
        configured_runtimes: &rts(),
        revoked: &revoked,
        now: now(),
    };
    let keep = |s: &str, _: &str| (s == "base").then_some(2);
    let plan = retention_plan(inp, Some("rt"), None, &keep);
    let mut ids: Vec<_> = plan.items.iter().map(|i| i.build_id.as_str()).collect();
    ids.sort();
    // b2, b3 are the two newest good builds: kept; b1 and the revoked b4 go
    assert_eq!(ids, ["b1", "b4"]);
    // without the revocation, b3 and b4 are kept
    let inp = PlanInputs {
        revoked: &none(),
        ..inp
    };
    let mut ids: Vec<_> = retention_plan(inp, Some("rt"), None, &keep)
        .items
        .iter()
        .map(|i| i.build_id.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, ["b1", "b2"]);
}

#[test]
fn forget_removes_the_record_and_only_the_pins_it_is_told() {
    let mut l = lineage();
    let mut pins = Pins::default();
    pins.images.insert("web@rt".into(), "b1".into());
    pins.images.insert("old@rt".into(), "b1".into());
    pins.images.insert("app@rt".into(), "w1".into());
    let removed = forget_build(&mut l, &mut pins, "b1", &["old@rt".into()], Some("r"));
    assert_eq!(removed, vec!["old@rt"]);
    assert!(l.find("b1").is_none());
    assert_eq!(pins.images.len(), 2);
    assert_eq!(pins.images["web@rt"], "b1");
    let j = pins.upgrades.last().unwrap();
    assert_eq!(
        (j.op.as_str(), j.name.as_str(), j.from.as_deref()),
        ("dispose", "old", Some("b1"))
    );
}

#[test]
fn launch_params_read() {
    let t = tempfile::tempdir().unwrap();
    let m = crate::MetaState::of_tree(t.path());
    std::fs::create_dir_all(m.dir()).unwrap();
    std::fs::write(
        m.dir().join(LAUNCH_PARAMS_FILE),
        r#"{"instances": {"a": {"build": "b1"}, "b": {"build": "unbound"}, "c": {}}}"#,
    )
    .unwrap();
    let lp = LaunchParams::load(&m).unwrap();
    assert_eq!(
        lp.launched(),
        BTreeMap::from([("b1".to_string(), vec!["a".to_string()])])
    );
    let _ = UNIX_EPOCH + Duration::from_secs(1);
}
