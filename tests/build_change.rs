//! A changed playbook makes exactly that image and its `follow`
//! descendants bake, while `pinned` children keep their pin. What the plan
//! says of it (`plan --explain`) is the case `tests/cli_cases/plan-explain.case`.

mod build_support;
use build_support::*;

#[test]
fn changed_playbook_rebakes_image_and_follow_descendants_only() {
    let t = tree("basic");
    let d = t.path();
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
    let d = t.path();
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
