//! A tree's `meta_state:` store that this build cannot open (a build
//! without the `store` feature and an `s3://` store) is refused at the
//! field, with the caller's words; one it can open loads.

use csis_rules::{load, LoadOptions};
use csis_schema::model::MetaStateSpec;

fn tree_with(meta_state: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(&csis_testkit::fixture("config/valid"), tmp.path());
    let cfg = tmp.path().join("cfg/_config.yml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}\nmeta_state: {meta_state}\n")).unwrap();
    tmp
}

fn no_object_stores(spec: &MetaStateSpec) -> Option<String> {
    matches!(spec, MetaStateSpec::S3 { .. } | MetaStateSpec::Gs { .. })
        .then(|| "not built in here".to_string())
}

fn opts() -> LoadOptions {
    LoadOptions {
        meta_state_check: Some(no_object_stores),
        env: Some([("CSIS_TEST_USER".to_string(), "avery".to_string())].into()),
        ..Default::default()
    }
}

#[test]
fn a_store_this_build_cannot_open_is_refused_at_its_line() {
    let tmp = tree_with("s3://team-bucket/records");
    let errs = load(tmp.path(), &opts()).expect_err("refused");
    let d = errs
        .iter()
        .find(|d| d.path == "meta_state")
        .unwrap_or_else(|| panic!("no meta_state refusal in {errs:?}"));
    assert_eq!(d.file, "cfg/_config.yml");
    assert!(d.message.contains("not built in here"), "{}", d.message);
    let text = std::fs::read_to_string(tmp.path().join("cfg/_config.yml")).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("meta_state:"))
        .unwrap();
    assert_eq!(d.line as usize, line + 1, "{d:?}");
}

#[test]
fn a_store_this_build_opens_loads() {
    let tmp = tree_with("file:///var/tmp/csis-records");
    let t = load(tmp.path(), &opts()).expect("loads");
    assert!(matches!(
        t.config.meta_state,
        Some(MetaStateSpec::File { .. })
    ));
}
