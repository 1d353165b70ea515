//! The drift rules' unit tests: each rule judged over records and a
//! runtime's answer built by hand.

use super::*;

fn rec(id: &str, series: &str, parent: &str) -> BuildRecord {
    let mut r = BuildRecord::new(id, series, "rt");
    r.parent = Some(parent.into());
    r.run = Some("run1".into());
    r.input_fingerprint = Some(format!("{}{}", "ab".repeat(8), "0".repeat(48)));
    r
}

fn seen(rec: &BuildRecord) -> SeenImage {
    SeenImage {
        build_id: rec.build_id.clone(),
        name: Some(format!("{}-x", rec.series)),
        created: None,
        tags: record_tags(rec),
    }
}

struct Fx {
    l: Lineage,
    p: Pins,
    r: Revocations,
    rel: Releases,
    follow: BTreeSet<String>,
    parents: BTreeMap<String, String>,
}

fn fx() -> Fx {
    let mut l = Lineage::default();
    l.add_build(rec("b1", "base", "vendor"));
    l.add_build(rec("w1", "web", "b1"));
    let mut p = Pins::default();
    p.images.insert("web@rt".into(), "b1".into());
    Fx {
        l,
        p,
        r: Revocations::default(),
        rel: Releases::default(),
        follow: BTreeSet::new(),
        parents: [("web".to_string(), "base".to_string())].into(),
    }
}

#[test]
fn a_series_tag_held_by_another_trees_build_is_soft_drift_of_its_own() {
    let f = fx();
    let mut v = view(vec![seen(&f.l.builds[0]), seen(&f.l.builds[1])]);
    let held = |tag: &str, series: &str| HeldTag {
        tag: tag.into(),
        series: series.into(),
        build_id: "sha256:other".into(),
        config: "tree-b".into(),
    };
    v.held_tags = vec![
        held("repo:web", "web"),
        held("repo:web--prod", "web"),
        // a series this tree neither declares nor built is not its business
        held("repo:db", "db"),
    ];
    let r = run(&f, vec![v]);
    let d: Vec<&Drift> = r.drift.iter().filter(|d| d.drift == "held").collect();
    assert_eq!(d.len(), 2, "{:?}", r.drift);
    assert_eq!(d[0].kind, "tag");
    assert_eq!(d[0].name, "repo:web--prod@rt");
    assert_eq!(d[1].name, "repo:web@rt");
    assert!(!d[1].hard);
    assert!(d[1].detail.contains("sha256:other"), "{}", d[1].detail);
    assert!(
        d[1].detail.contains("csis_config tree-b"),
        "{}",
        d[1].detail
    );
    assert!(
        d[1].detail.contains("`repository:` of runtime rt"),
        "{}",
        d[1].detail
    );
    assert_eq!(r.summary["held"], 2);
    assert!(!r.has_hard());
    assert!(r
        .lines()
        .iter()
        .any(|l| l.starts_with("tag repo:web@rt: held: repo:web names sha256:other")));
}

fn run(f: &Fx, views: Vec<RuntimeView>) -> StateReport {
    let recs = Records {
        lineage: &f.l,
        pins: &f.p,
        revocations: &f.r,
        releases: &f.rel,
        follow: &f.follow,
        image_parents: &f.parents,
    };
    judge(recs, &views, &["rt".to_string()].into(), Some("r"))
}

fn view(images: Vec<SeenImage>) -> RuntimeView {
    RuntimeView {
        held_tags: Vec::new(),
        runtime: "rt".into(),
        images: Ok(images),
        instances: None,
    }
}

#[test]
fn agreement() {
    let f = fx();
    let imgs = f.l.builds.iter().map(seen).collect();
    let rep = run(&f, vec![view(imgs)]);
    assert!(rep.drift.is_empty(), "{:?}", rep.drift);
    assert!(!rep.has_hard() && !rep.strict_fails());
    assert_eq!(rep.lines(), vec!["no drift: records and reality agree"]);
}

#[test]
fn missing_foreign_changed_stale_and_pins() {
    let mut f = fx();
    // b1 gone (pinned by web@rt -> hard); w1 re-tagged differently; foreign z
    let mut w = seen(f.l.find("w1").unwrap());
    w.tags.insert(tags::PARENT.into(), "series:base".into());
    w.tags.insert(tags::FINGERPRINT.into(), "ffff".into());
    w.tags.remove(tags::RUN); // never carried: not drift
    let z = SeenImage {
        build_id: "z".into(),
        name: None,
        created: None,
        tags: [(tags::SERIES.to_string(), "web".to_string())].into(),
    };
    f.p.instances.insert("vm".into(), "gone".into());
    let rep = run(&f, vec![view(vec![w, z])]);
    let kinds: Vec<_> = rep
        .drift
        .iter()
        .map(|d| (d.kind.as_str(), d.name.as_str(), d.drift.as_str(), d.hard))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("image", "b1@rt", "missing", true),
            ("image", "w1@rt", "changed", false),
            ("image", "z@rt", "foreign", false),
            ("pin", "instance vm", "missing", true),
        ]
    );
    assert!(
        rep.drift[2]
            .detail
            .starts_with("an image of web (untagged) that lineage does not record"),
        "{}",
        rep.drift[2].detail
    );
    assert!(rep.drift[1]
        .detail
        .contains("parent: lineage=b1 tag=series:base"));
    assert!(rep.drift[1].detail.contains("fingerprint"));
    assert!(!rep.drift[1].detail.contains("run:"));
    assert!(rep.has_hard());
    assert_eq!(rep.summary["missing"], 2);
    assert!(rep.lines().iter().any(|l| l.ends_with("[HARD]")));
}

#[test]
fn stale_pin_and_unpinned_missing_is_soft() {
    let mut f = fx();
    f.l.add_build(rec("b2", "base", "vendor"));
    f.l.add_build(rec("w2", "web", "b1"));
    let imgs: Vec<_> =
        f.l.builds
            .iter()
            .filter(|b| b.build_id != "w1")
            .map(seen)
            .collect();
    let rep = run(&f, vec![view(imgs)]);
    let w1 = rep.drift.iter().find(|d| d.name == "w1@rt").unwrap();
    assert_eq!((w1.drift.as_str(), w1.hard), ("missing", false));
    let st = rep.drift.iter().find(|d| d.drift == "stale").unwrap();
    assert_eq!(st.name, "web@rt");
    assert!(st.detail.contains("b2"));
    assert!(!rep.has_hard());
    assert!(rep.strict_fails());
    // stale alone does not fail --strict
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let rep = run(&f, vec![view(imgs)]);
    assert_eq!(rep.drift.len(), 1);
    assert!(!rep.strict_fails());
    // the head gone is hard: a child would bake from it
    let imgs: Vec<_> =
        f.l.builds
            .iter()
            .filter(|b| b.build_id != "w2")
            .map(seen)
            .collect();
    let rep = run(&f, vec![view(imgs)]);
    let w2 = rep.drift.iter().find(|d| d.name == "w2@rt").unwrap();
    assert_eq!((w2.drift.as_str(), w2.hard), ("missing", true));
    assert!(
        w2.detail
            .contains("the head of web on rt (a child would bake from it)"),
        "{}",
        w2.detail
    );
}

#[test]
fn releases_and_pins_on_gone_or_revoked_builds_are_hard() {
    let mut f = fx();
    f.l.add_build(rec("w2", "web", "b1"));
    f.rel
        .current
        .entry("prod".into())
        .or_default()
        .insert("web".into(), "w1".into());
    f.rel
        .current
        .entry("prod".into())
        .or_default()
        .insert("app".into(), "gone".into());
    // w1 (released, not the head) gone from the runtime: hard
    let imgs: Vec<_> =
        f.l.builds
            .iter()
            .filter(|b| b.build_id != "w1")
            .map(seen)
            .collect();
    let rep = run(&f, vec![view(imgs.clone())]);
    let got: Vec<_> = rep
        .drift
        .iter()
        .map(|d| (d.kind.as_str(), d.name.as_str(), d.drift.as_str(), d.hard))
        .collect();
    assert_eq!(
        got,
        [
            ("image", "w1@rt", "missing", true),
            ("release", "prod app", "missing", true),
        ]
    );
    assert!(rep.drift[0].detail.contains("the prod release of web"));
    assert!(rep.drift[1]
        .detail
        .contains("csis release app --model prod"));
    // a revoked release and a pin on a revoked build are hard
    f.rel.current.get_mut("prod").unwrap().remove("app");
    crate::revocations::revoke(&f.l, &mut f.r, "w1", false, Some("cve-3"), None).unwrap();
    crate::revocations::revoke(&f.l, &mut f.r, "b1", false, None, None).unwrap();
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let rep = run(&f, vec![view(imgs)]);
    let got: Vec<_> = rep
        .drift
        .iter()
        .map(|d| (d.kind.as_str(), d.name.as_str(), d.drift.as_str(), d.hard))
        .collect();
    assert_eq!(
        got,
        [
            ("pin", "web@rt", "revoked", true),
            ("release", "prod web", "revoked", true),
        ]
    );
    assert!(rep.drift[0].detail.contains("csis upgrade image web"));
    assert!(rep.drift[1].detail.contains("revoked build w1 (cve-3)"));
    assert!(rep.has_hard());
    // a follow image's pin only records its head's parent: no drift
    f.follow.insert("web".into());
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let rep = run(&f, vec![view(imgs)]);
    assert!(
        !rep.drift.iter().any(|d| d.kind == "pin"),
        "{:?}",
        rep.drift
    );
}

#[test]
fn silence_is_never_a_claim() {
    let f = fx();
    let rep = run(
        &f,
        vec![RuntimeView {
            held_tags: Vec::new(),
            runtime: "rt".into(),
            images: Err("daemon not reachable".into()),
            instances: Some(Err("no".into())),
        }],
    );
    assert!(rep.drift.is_empty());
    assert_eq!(
        rep.unavailable,
        vec!["images/rt: daemon not reachable", "instances/rt: no"]
    );
    // a runtime nobody asked
    let rep = run(&f, vec![]);
    assert_eq!(rep.unavailable, vec!["images/rt: not asked"]);
    assert!(rep.drift.is_empty());
}

#[test]
fn revoked_instances_and_notes() {
    let mut f = fx();
    crate::revocations::revoke(&f.l, &mut f.r, "w1", false, Some("cve-1"), None).unwrap();
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let rep = run(
        &f,
        vec![RuntimeView {
            held_tags: Vec::new(),
            runtime: "rt".into(),
            images: Ok(imgs),
            instances: Some(Ok(vec![
                SeenInstance {
                    id: "c1".into(),
                    name: Some("vm".into()),
                    image: Some("w1".into()),
                    power: "running".into(),
                },
                SeenInstance {
                    id: "c2".into(),
                    name: None,
                    image: Some("b1".into()),
                    power: "stopped".into(),
                },
            ])),
        }],
    );
    assert_eq!(rep.drift.len(), 1);
    assert_eq!(rep.drift[0].drift, "revoked");
    assert!(rep.drift[0].detail.contains("cve-1"));
    assert_eq!(rep.notes, vec!["instance c2@rt: switched off; not drift"]);
}

#[test]
fn pinned_instances_on_revoked_builds_and_pending_replacements() {
    let mut f = fx();
    f.p.instances.insert("vm".into(), "w1".into());
    f.p.pending_replacements.insert("vm".into(), "w1".into());
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let rep = run(&f, vec![view(imgs.clone())]);
    assert!(rep.drift.is_empty());
    assert_eq!(
        rep.notes,
        vec!["instance vm: pending replacement onto w1; not drift"]
    );
    crate::revocations::revoke(&f.l, &mut f.r, "w1", false, Some("cve-2"), None).unwrap();
    let rep = run(&f, vec![view(imgs)]);
    assert_eq!(rep.drift.len(), 1);
    assert_eq!(rep.drift[0].kind, "pin");
    assert_eq!(rep.drift[0].name, "instance vm");
    assert_eq!(rep.drift[0].drift, "revoked");
    assert!(rep.drift[0].detail.contains("cve-2"));
    assert!(rep.has_hard() && rep.strict_fails());
    assert_eq!(rep.summary["revoked"], 1);
}

#[test]
fn an_instance_booted_from_another_build_than_its_pin_is_changed() {
    let mut f = fx();
    f.p.instances.insert("vm".into(), "w1".into());
    let imgs: Vec<_> = f.l.builds.iter().map(seen).collect();
    let inst = |image: &str| RuntimeView {
        held_tags: Vec::new(),
        runtime: "rt".into(),
        images: Ok(imgs.clone()),
        instances: Some(Ok(vec![SeenInstance {
            id: "c1".into(),
            name: Some("vm".into()),
            image: Some(image.into()),
            power: "running".into(),
        }])),
    };
    assert!(run(&f, vec![inst("w1")]).drift.is_empty());
    let rep = run(&f, vec![inst("b1")]);
    assert_eq!(rep.drift.len(), 1);
    assert_eq!(
        (rep.drift[0].drift.as_str(), rep.drift[0].name.as_str()),
        ("changed", "vm@rt")
    );
    assert_eq!(rep.drift[0].detail, "booted b1, pinned to w1");
    assert!(!rep.has_hard());
    // an upgrade waiting for its replacement explains it
    f.p.pending_replacements.insert("vm".into(), "w1".into());
    let rep = run(&f, vec![inst("b1")]);
    assert!(rep.drift.is_empty());
    assert!(rep
        .notes
        .iter()
        .any(|n| n.contains("booted b1, pinned to w1: the pending replacement explains it")));
}

#[test]
fn import_record_from_tags() {
    let f = fx();
    let mut img = seen(f.l.find("w1").unwrap());
    img.tags
        .insert("csis_identity_types".into(), "posix, opa".into());
    let r = record_from_tags(&img, "rt", "run9").unwrap();
    assert_eq!(r.series, "web");
    assert_eq!(r.parent.as_deref(), Some("b1"));
    assert_eq!(r.input_fingerprint.as_deref(), Some("abababababababab"));
    assert_eq!(r.capabilities.identity_types, vec!["posix", "opa"]);
    assert!(!r.tests.in_bake);
    assert_eq!(r.imported, Some(true));
    // the imported record agrees with its image's tags
    assert!(tag_disagreements(&r, &img.tags).is_empty());
    let untagged = SeenImage {
        build_id: "q".into(),
        name: None,
        created: None,
        tags: BTreeMap::new(),
    };
    assert!(record_from_tags(&untagged, "rt", "x").is_none());
}
