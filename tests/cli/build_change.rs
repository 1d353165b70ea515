//! A changed playbook makes exactly that image and its `follow`
//! descendants bake, while `pinned` children keep their pin. What the plan
//! says of it (`plan --explain`) is the case `tests/cli_cases/plan-explain.case`.

use crate::build_support;
use build_support::*;

#[test]
fn changed_playbook_rebakes_image_and_follow_descendants_only() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    let web_before = lineage(d).head("web", "sim").unwrap().build_id.clone();
    let pinned_pin = pins(d).image_pin("app-pinned", "sim").unwrap().to_string();
    assert_eq!(pinned_pin, web_before);

    // A comment in the playbook is a content change.
    let pb = d.join("playbooks/web.yml");
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, format!("{text}# a comment\n")).unwrap();

    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    let baked = finished_bakes(&ev);
    assert_eq!(
        baked,
        vec![
            "//images/app@sim:bake",
            "//images/tools@sim:bake",
            "//images/web@sim:bake"
        ]
    );

    // follow moved the pin; pinned kept it
    let web_after = lineage(d).head("web", "sim").unwrap().build_id.clone();
    assert_ne!(web_after, web_before);
    let p = pins(d);
    assert_eq!(p.image_pin("app", "sim"), Some(web_after.as_str()));
    assert_eq!(p.image_pin("app-pinned", "sim"), Some(web_before.as_str()));
    assert!(p
        .upgrades
        .iter()
        .any(|u| u.name == "app" && u.op == "follow"));
    // app's record says which parent it baked from, and its canonical inputs
    let l = lineage(d);
    let app = l.head("app", "sim").unwrap();
    assert_eq!(app.parent.as_deref(), Some(web_after.as_str()));
    assert_eq!(app.input_fingerprint.as_ref().unwrap().len(), 64);
    assert!(app.inputs.is_some());
    assert_eq!(summary(&build(d, &[]).1)["baked"], 0, "converged");
}

#[test]
fn parent_moved_under_follow_after_a_partial_build() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    // Force web only (its follow child is not selected: nothing selects descendants).
    let (code, _) = build(d, &["//images/web", "--force-bake", "web"]);
    assert_eq!(code, 0);
    let nodes = plan(d, &[]);
    let app = nodes
        .iter()
        .find(|n| n["label"] == "//images/app@sim:bake")
        .unwrap();
    assert_eq!(app["code"], "dep-moved", "{app}");
    assert!(app["reason"].as_str().unwrap().starts_with("parent moved"));
    let pinned = nodes
        .iter()
        .find(|n| n["label"] == "//images/app-pinned@sim:bake")
        .unwrap();
    assert_eq!(pinned["due"], false);
}

/// Nothing is baked twice (issue 25, records): an input changed and then
/// changed back takes the builds of those inputs as the heads again, the
/// image's and its follow descendants', without a bake; the plan says so
/// first, the records order them by the run that reinstated them, and the
/// next build is current.
#[test]
fn an_input_changed_back_reinstates_the_builds_of_those_inputs() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    let heads = |d: &std::path::Path| {
        let l = lineage(d);
        ["web", "app", "tools", "app-pinned"].map(|s| l.head(s, "sim").unwrap().build_id.clone())
    };
    let first = heads(d);
    let pb = d.join("playbooks/web.yml");
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, format!("{text}# a comment\n")).unwrap();
    assert_eq!(build(d, &[]).0, 0);
    let second = heads(d);
    assert_ne!(second[0], first[0]);
    let records = lineage(d).builds.len();

    // Back to the first inputs.
    std::fs::write(&pb, &text).unwrap();
    let nodes = plan(d, &[]);
    for s in ["web", "app", "tools"] {
        let n = nodes
            .iter()
            .find(|n| n["label"] == format!("//images/{s}@sim:bake"))
            .unwrap();
        assert_eq!(n["code"], "reinstate", "{n}");
        assert!(
            n["reason"].as_str().unwrap().contains("nothing bakes"),
            "{n}"
        );
    }
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0, "{ev:?}");
    let s = summary(&ev);
    assert_eq!(s["baked"], 0, "{s}");
    assert_eq!(s["reused"], 3, "{s}");
    let third = heads(d);
    assert_eq!(third, first, "the first builds are the heads again");
    let l = lineage(d);
    assert_eq!(l.builds.len(), records, "no record added");
    let web = l.find(&first[0]).unwrap();
    assert!(
        web.reinstated_by_run.as_deref() > web.run.as_deref(),
        "{web:?}"
    );
    // follow moved app's pin back; pinned kept its own
    let p = pins(d);
    assert_eq!(p.image_pin("app", "sim"), Some(first[0].as_str()));
    assert_eq!(p.image_pin("app-pinned", "sim"), Some(first[0].as_str()));
    assert_eq!(summary(&build(d, &[]).1)["baked"], 0, "converged");
    assert!(plan(d, &[]).iter().all(|n| n["due"] == false));

    // The second inputs again: their builds come back in turn.
    std::fs::write(&pb, format!("{text}# a comment\n")).unwrap();
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    assert_eq!(summary(&ev)["baked"], 0);
    assert_eq!(heads(d)[..3], second[..3]);
}

/// A revoked build with the inputs of today is never reinstated: the bake
/// makes a new one.
#[test]
fn a_revoked_build_is_not_reinstated() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    let web1 = lineage(d).head("web", "sim").unwrap().build_id.clone();
    let pb = d.join("playbooks/web.yml");
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, format!("{text}# a comment\n")).unwrap();
    assert_eq!(build(d, &[]).0, 0);
    let out = d
        .csis()
        .args(["revoke", &web1, "--reason", "bad"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&pb, &text).unwrap();
    let nodes = plan(d, &[]);
    let web = nodes
        .iter()
        .find(|n| n["label"] == "//images/web@sim:bake")
        .unwrap();
    assert_ne!(web["code"], "reinstate", "{web}");
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0);
    assert!(finished_bakes(&ev).contains(&"//images/web@sim:bake".to_string()));
    let head = lineage(d).head("web", "sim").unwrap().build_id.clone();
    assert_ne!(head, web1);
    assert!(summary(&ev)["baked"].as_u64().unwrap() >= 1);
}
