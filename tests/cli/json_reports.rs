//! Every command's `--json` document, as insta snapshots, on a temporary
//! copy of `tests/fixtures/ops/basic` (dummy runtime). Ids, run ids,
//! fingerprints, times and the tree's path are redacted; what remains is
//! the stable shape each command promises (README, "JSON output").

use csis_testkit::{Redact, Tree};
use serde_json::Value;

/// The JSON runs of a tree.
trait Json {
    /// One JSON document on stdout, redacted, with the exit code.
    fn json(&self, args: &[&str]) -> (i32, Value);
    /// JSON lines on stdout (build), redacted. Parallel nodes finish in
    /// any order: the events are sorted by label and event (the summary
    /// stays last; the order itself is the build tests' business).
    fn json_lines(&self, args: &[&str]) -> (i32, Value);
}

impl Json for Tree {
    fn json(&self, args: &[&str]) -> (i32, Value) {
        let (code, out, _) = self.run(args);
        let v: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("csis {args:?}: not one JSON document: {e}\n{out}"));
        (code, Redact::new(&self.root).value(v))
    }

    fn json_lines(&self, args: &[&str]) -> (i32, Value) {
        let (code, out, _) = self.run(args);
        let mut r = Redact::new(&self.root);
        let mut v: Vec<Value> = out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let key = |e: &Value| {
            (
                e["event"] == "summary",
                e["label"].as_str().unwrap_or_default().to_string(),
                e["event"].as_str().unwrap_or_default().to_string(),
            )
        };
        v.sort_by_key(key);
        let v = v.into_iter().map(|e| r.value(e)).collect();
        (code, Value::Array(v))
    }
}

fn fixture() -> Tree {
    Tree::of("ops/basic")
}

#[test]
fn build_validate_plan_and_runtime_json() {
    let t = fixture();
    let (code, v) = t.json(&["validate", "--offline", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("validate", v);
    let (code, v) = t.json_lines(&["build", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("build_fresh", v);
    let (code, v) = t.json_lines(&["build", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("build_noop", v);
    let (code, v) = t.json(&["runtime", "describe", "sim", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("runtime_describe", v);
    let (code, v) = t.json(&["runtime", "verify-instance", "sim", "vm1", "--json"]);
    assert_eq!(code, 2, "no pin for vm1: the runtime cannot answer");
    insta::assert_json_snapshot!("runtime_verify_instance_no_pin", v);
    let fresh = t.root.join("fresh");
    let (code, v) = t.json(&["init", fresh.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    assert!(fresh.join("cfg").is_dir());
    insta::assert_json_snapshot!("init", v);
}

#[test]
fn lineage_operation_json() {
    let t = fixture();
    let (code, _, _) = t.run(&["build", "--json"]);
    assert_eq!(code, 0);
    let (code, v) = t.json(&["state", "query", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("state_query", v);
    let (code, v) = t.json(&["state", "import", "--dry-run", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("state_import_nothing", v);
    let (code, v) = t.json(&["release", "web", "--dry-run", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("release_dry_run", v);
    let (code, v) = t.json(&["release", "web", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("release", v);
    let (code, v) = t.json(&["release", "nosuch", "--json"]);
    assert_eq!(code, 1);
    insta::assert_json_snapshot!("release_refused", v);
    let (code, v) = t.json(&[
        "dispose",
        "image",
        "--all",
        "--runtime",
        "sim",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(code, 1, "a released and a pinned build refuse --all");
    insta::assert_json_snapshot!("dispose_all_dry_run", v);
    let (code, v) = t.json(&["lineage", "relabel", "--runtime", "sim", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("lineage_relabel", v);
    let (code, v) = t.json(&["lineage", "restamp", "--runtime", "sim", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("lineage_restamp", v);
    let (code, v) = t.json(&["empty", "--runtime", "sim", "--json"]);
    assert_eq!(code, 1, "the builds not released are leftovers");
    insta::assert_json_snapshot!("empty_leftovers", v);
    let (code, v) = t.json(&["preflight", "--json"]);
    insta::assert_json_snapshot!("preflight", (code, v));
    let head = t.run(&["state", "query", "--json"]).1;
    let q: Value = serde_json::from_str(&head).unwrap();
    assert!(q.is_object());
    let lineage = csis_cache::MetaState::of_tree(&t.root).lineage().unwrap();
    let web = lineage
        .builds
        .iter()
        .find(|b| b.series == "web")
        .unwrap()
        .build_id
        .clone();
    let (code, v) = t.json(&["revoke", &web, "--dry-run", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("revoke_dry_run", v);
    let (code, v) = t.json(&["dispose", "image", "nosuch", "--json"]);
    assert_eq!(code, 1, "a build that is not recorded is refused");
    insta::assert_json_snapshot!("dispose_refused", v);
}

#[test]
fn after_the_bake_json() {
    let t = fixture();
    let (code, _, _) = t.run(&["build", "--json"]);
    assert_eq!(code, 0);
    let (code, v) = t.json(&["test", "tools", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("test_tested", v);
    let (code, v) = t.json(&["test", "web", "--json"]);
    assert_eq!(code, 1, "web declares no post-bake tests");
    insta::assert_json_snapshot!("test_refused", v);
    let (code, v) = t.json(&["upgrade", "image", "tools", "--json"]);
    assert_eq!(code, 1, "tools is pinned to web's head already");
    insta::assert_json_snapshot!("upgrade_already_pinned", v);
    let (code, _, _) = t.run(&["build", "--json", "--force-bake", "web"]);
    assert_eq!(code, 0);
    let (code, v) = t.json(&["plan", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("plan_behind", v["behind"]);
    let (code, v) = t.json(&["upgrade", "image", "tools", "--dry-run", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("upgrade_dry_run", v);
    let (code, v) = t.json(&["upgrade", "image", "tools", "--to", "nosuchbuild", "--json"]);
    assert_eq!(code, 1);
    insta::assert_json_snapshot!("upgrade_refused", v);
    let (code, v) = t.json(&["upgrade", "image", "tools", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("upgrade_moved", v);
    let (code, v) = t.json(&["verify", "instance", "sim", "vm1", "--json"]);
    assert_eq!(code, 2, "no pin for vm1: the runtime cannot answer");
    insta::assert_json_snapshot!("verify_instance_no_pin", v);
}

#[test]
fn builds_shards_and_store_json() {
    let t = fixture();
    let (code, _, _) = t.run(&["build", "--json"]);
    assert_eq!(code, 0);
    let (code, mut v) = t.json(&["builds", "--json"]);
    assert_eq!(code, 0);
    // short ids end in the dummy's bake counter, which parallel bakes
    // take in any order
    for row in v.as_array_mut().unwrap() {
        for k in ["short_id", "parent_short"] {
            if row[k].as_str().is_some_and(|s| s != "vendor") {
                row[k] = Value::String("[short-id]".into());
            }
        }
    }
    insta::assert_json_snapshot!("builds", v);
    let (code, v) = t.json(&["plan", "--shards", "2", "--json", "--force-bake", "web"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("plan_shards", v);
    let store = format!("file://{}", t.root.join(".store").display());
    let (code, v) = t.json(&["--meta-state", &store, "state", "push", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("state_push", v);
    let (code, v) = t.json(&["--meta-state", &store, "state", "pull", "--json"]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!("state_pull", v);
}

/// `state push` carries the fleet's records to the store and `state pull`
/// brings them back (the instance pins ride `pins.yaml`).
#[test]
fn state_push_and_pull_carry_the_fleets_records() {
    let t = fixture();
    let ms = t.root.join("meta-state");
    std::fs::create_dir_all(&ms).unwrap();
    let storages = "storages:\n  data:\n    generation: 1\n    state: active\n";
    std::fs::write(ms.join("storage-state.yaml"), storages).unwrap();
    let store = format!("file://{}", t.root.join(".store").display());
    let (code, v) = t.json(&["--meta-state", &store, "state", "push", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert!(
        v["written"].to_string().contains("storage-state.yaml"),
        "{v}"
    );
    std::fs::remove_file(ms.join("storage-state.yaml")).unwrap();
    let (code, v) = t.json(&["--meta-state", &store, "state", "pull", "--json"]);
    assert_eq!(code, 0, "{v}");
    let back = std::fs::read_to_string(ms.join("storage-state.yaml")).unwrap();
    assert!(
        back.contains("data:") && back.contains("state: active") && back.contains("generation: 1"),
        "{back}\n{v}"
    );
}
