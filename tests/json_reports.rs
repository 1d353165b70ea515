//! Every command's `--json` document, as insta snapshots, on a temporary
//! copy of `tests/fixtures/ops/basic` (dummy runtime). Ids, run ids,
//! fingerprints, times and the tree's path are redacted; what remains is
//! the stable shape each command promises (README, "JSON output").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops/basic"),
            &root,
        );
        Tree { _tmp: tmp, root }
    }

    /// Run csis; the exit code and stdout.
    fn csis(&self, args: &[&str]) -> (i32, String) {
        let out = Command::cargo_bin("csis")
            .unwrap()
            .arg("-C")
            .arg(&self.root)
            .args(args)
            .env_remove("CSIS_DUMMY_FAIL")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// One JSON document on stdout, redacted, with the exit code.
    fn json(&self, args: &[&str]) -> (i32, Value) {
        let (code, out) = self.csis(args);
        let v: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("csis {args:?}: not one JSON document: {e}\n{out}"));
        (code, Redact::new(&self.root).value(v))
    }

    /// JSON lines on stdout (build), redacted. Parallel nodes finish in
    /// any order: the events are sorted by label and event (the summary
    /// stays last; the order itself is the build tests' business).
    fn json_lines(&self, args: &[&str]) -> (i32, Value) {
        let (code, out) = self.csis(args);
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

/// Redactions: build ids become `[build-N]` in order of appearance; run
/// ids `[run]`; 64-hex fingerprints (and their 16/12-hex prefixes under
/// fingerprint keys) `[fingerprint]`; the tree's path `[root]`; times 0.
struct Redact {
    root: String,
    ids: BTreeMap<String, String>,
}

fn is_run_id(s: &str) -> bool {
    // 2026_12_01t10_10_03_123456
    let b = s.as_bytes();
    b.len() >= 19 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'_' && b[10] == b't'
}

/// `dddd-dd-dd-dddddd` -> `[time]`.
fn redact_times(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let shape = "dddd-dd-dd-dddddd";
    let fits = |i: usize| {
        i + shape.len() <= b.len()
            && shape.chars().zip(&b[i..]).all(|(p, c)| {
                if p == 'd' {
                    c.is_ascii_digit()
                } else {
                    *c == p
                }
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if fits(i) {
            out.push_str("[time]");
            i += shape.len();
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

impl Redact {
    fn new(root: &Path) -> Redact {
        Redact {
            root: root.display().to_string(),
            ids: BTreeMap::new(),
        }
    }

    fn text(&mut self, s: &str) -> String {
        let mut s = s.replace(&self.root, "[root]");
        // Build ids inside strings (`dummy-<hex>-<n>`).
        let mut out = String::new();
        while let Some(i) = s.find("dummy-") {
            out.push_str(&s[..i]);
            let rest = &s[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(rest.len());
            let id = &rest[..end];
            let n = self.ids.len() + 1;
            let name = self
                .ids
                .entry(id.to_string())
                .or_insert_with(|| {
                    if id.starts_with("dummy-vendor-") {
                        "[vendor-image]".to_string()
                    } else {
                        format!("[build-{n}]")
                    }
                })
                .clone();
            out.push_str(&name);
            s = rest[end..].to_string();
        }
        out.push_str(&s);
        // Times in names (`web-sim-bake-2026-12-01-114805`).
        let out = redact_times(&out);
        // Run ids anywhere in the string.
        let mut res = String::new();
        let chars: Vec<char> = out.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let tail: String = chars[i..].iter().take(26).collect();
            if is_run_id(&tail) && (i == 0 || !chars[i - 1].is_ascii_digit()) {
                let mut j = i;
                while j < chars.len()
                    && (chars[j].is_ascii_digit() || chars[j] == '_' || chars[j] == 't')
                {
                    j += 1;
                }
                res.push_str("[run]");
                i = j;
            } else {
                res.push(chars[i]);
                i += 1;
            }
        }
        res
    }

    fn value(&mut self, v: Value) -> Value {
        match v {
            Value::String(s) => {
                if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Value::String("[fingerprint]".into());
                }
                Value::String(self.text(&s))
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|x| self.value(x)).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, x)| {
                        let x = match k.as_str() {
                            "elapsed_ms" | "created" | "age_days" => Value::from(0),
                            "time" if x.is_string() => Value::String("[time]".into()),
                            // `csis-test-<runtime>-<series>-<pid>`
                            "instance"
                                if x.as_str().is_some_and(|s| s.starts_with("csis-test-")) =>
                            {
                                Value::String("[test-machine]".into())
                            }
                            "previous" | "current" | "csis_fingerprint" | "fingerprint"
                                if x.is_string() =>
                            {
                                Value::String("[fingerprint]".into())
                            }
                            _ => self.value(x),
                        };
                        (self.text(&k), x)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

#[test]
fn build_validate_plan_and_runtime_json() {
    let t = Tree::new();
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
    let t = Tree::new();
    let (code, _) = t.csis(&["build", "--json"]);
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
    assert_eq!(code, 0);
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
    let head = t.csis(&["state", "query", "--json"]).1;
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
    let t = Tree::new();
    let (code, _) = t.csis(&["build", "--json"]);
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
    let (code, _) = t.csis(&["build", "--json", "--force-bake", "web"]);
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
