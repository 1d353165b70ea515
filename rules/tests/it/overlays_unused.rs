//! Overlays and --undeclare change the loaded tree for one invocation; the
//! sections csis does not implement yet are read and reported once each.

use std::collections::BTreeMap;
use std::path::PathBuf;

use csis_rules::{load, LoadOptions};

fn fixtures() -> PathBuf {
    csis_testkit::fixture("config")
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([("CSIS_TEST_USER".to_string(), "avery".to_string())])
}

fn opts(overlays: &[&str], undeclares: &[&str]) -> LoadOptions {
    LoadOptions {
        overlays: overlays
            .iter()
            .map(|o| fixtures().join("overlays").join(o))
            .collect(),
        undeclares: undeclares.iter().map(|s| s.to_string()).collect(),
        env: Some(env()),
        ..Default::default()
    }
}

#[test]
fn an_overlay_merges_adds_and_overrides_config() {
    let valid = fixtures().join("valid");
    let plain = load(&valid, &opts(&[], &[])).unwrap();
    assert_eq!(
        plain.image("app").unwrap().model.parent_policy,
        csis_schema::model::ParentPolicy::Follow
    );
    assert!(plain.image("extra").is_none());
    let t = load(&valid, &opts(&["add-and-change.yaml"], &[])).unwrap();
    let app = t.image("app").unwrap();
    assert_eq!(
        app.model.parent_policy,
        csis_schema::model::ParentPolicy::Pinned
    );
    // merged key by key: the rest of `app` is the tree's
    assert_eq!(app.model.retention.as_ref().unwrap().keep, 2);
    let extra = t.image("extra").unwrap();
    assert_eq!(
        t.chain(extra).iter().map(|l| l.name()).collect::<Vec<_>>(),
        ["extra", "rh-app", "alma-9"]
    );
    assert!(!t.config.config.require_image_tests);
    assert_eq!(
        t.config
            .config
            .extra
            .get("carried_key")
            .and_then(|v| v.as_str()),
        Some("carried")
    );
}

#[test]
fn undeclare_by_overlay_and_by_flag() {
    let valid = fixtures().join("valid");
    let t = load(&valid, &opts(&["undeclare-app.yaml"], &[])).unwrap();
    assert!(t.image("app").is_none());
    assert_eq!(t.images.len(), 2);
    let t = load(&valid, &opts(&[], &["image:app"])).unwrap();
    assert!(t.image("app").is_none());
    // an image others are built from cannot go without them
    let d = load(&valid, &opts(&[], &["images:base"])).unwrap_err();
    assert!(
        d.iter().any(|d| d.path == "images[1].source_image"
            && d.message
                .contains("source_image `base` names no OS builder or image")),
        "{d:?}"
    );
}

#[test]
fn bad_overlays_and_undeclares_are_refused() {
    let valid = fixtures().join("valid");
    let d = load(&valid, &opts(&["bad-key.yaml"], &[])).unwrap_err();
    let e = d.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(
        (
            e.file.ends_with("bad-key.yaml"),
            e.line,
            e.column,
            e.path.as_str(),
            e.message.as_str()
        ),
        (true, 2, 1, "runtime_builders", "unknown overlay key")
    );
    let d = load(&valid, &opts(&["missing.yaml"], &[])).unwrap_err();
    assert!(
        d.iter()
            .any(|d| d.file.ends_with("missing.yaml") && d.message == "overlay file not found"),
        "{d:?}"
    );
    let d = load(&valid, &opts(&[], &["image:nope"])).unwrap_err();
    assert!(
        d.iter().any(|d| d.file == "--undeclare"
            && d.message == "nothing named `nope` in images to undeclare"),
        "{d:?}"
    );
    let d = load(&valid, &opts(&[], &["widget:x"])).unwrap_err();
    assert!(
        d.iter()
            .any(|d| d.file == "--undeclare" && d.message.contains("unknown kind `widget`")),
        "{d:?}"
    );
}

#[test]
fn unused_sections_are_warned_once_each_and_never_errors() {
    let t = load(&fixtures().join("unused"), &opts(&[], &[])).expect("loads");
    let w: Vec<String> = t
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.file, w.message))
        .collect();
    assert_eq!(
        w,
        [
            "cfg/: not used by csis yet: 1 gcloud runtimes (cfg/)",
            "cfg/: not used by csis yet: 1 gcs state backends (cfg/)",
            "cfg/: not used by csis yet: 1 packer-gce image builders (cfg/)",
            "cfg/: not used by csis yet: 1 gcloud instance builders (cfg/)",
            "storages/: not used by csis yet: 5 gcloud storages (storages/)",
            "instances/: not used by csis yet: 1 gcloud instances (instances/)",
        ]
    );
    // users are csis's now (kept as declared: the name is not opened)
    assert_eq!(t.users.len(), 1);
    assert!(t.users[0].name.starts_with("ENC[age:"));
    assert!(t.instances.is_empty() && t.storages.is_empty());
    // entries bound to a builder csis does not implement stay, inactive
    let deb = t.os_builder("deb").unwrap();
    assert_eq!(deb.runtimes.len(), 2);
    assert_eq!(deb.active_runtimes().count(), 1);
    let img = t.image("img").unwrap();
    assert_eq!(
        img.active_runtimes()
            .map(|r| r.runtime.as_deref().unwrap())
            .collect::<Vec<_>>(),
        ["sim"]
    );
    assert!(img.runtimes[1].image_builder.is_none());
    // the storage overlay counts follow --undeclare
    let t = load(&fixtures().join("unused"), &opts(&[], &["storage:s1"])).unwrap();
    assert!(t
        .unused
        .iter()
        .any(|u| u.what == "gcloud storages" && u.count == 4));
}
