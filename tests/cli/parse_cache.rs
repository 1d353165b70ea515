//! The parse cache (`.csis/cache/parse.bin`, issue 23 item 1) never
//! changes a plan: every fixture tree and a generated one planned three
//! ways (no cache: the tree has no `.csis/`; the cache made; the cache
//! read) answer the same bytes and the same diagnostics. An edited file is
//! parsed again and its change shows; a decrypted value never reaches
//! the cache.
//!
//! Which way a load went is read from `CSIS_TIMING=1` (stderr: `parse
//! cache: H of N files from the cache`).

use std::path::{Path, PathBuf};

#[path = "../../rules/benches/tree_gen/mod.rs"]
#[allow(dead_code)]
mod tree_gen;

/// `csis plan //... --json` on `dir` with timing on: (exit code, stdout,
/// stderr without the timing lines, the parse cache's line if any).
fn plan(dir: &Path, env: &[(&str, &Path)]) -> (i32, String, String, Option<String>) {
    let mut c = csis_testkit::Tree::at(dir).csis();
    c.env_remove("CSIS_CONFIG_IDENTITY")
        .env("CSIS_TIMING", "1")
        // Never a real cloud: a closed local port.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(["plan", "//...", "--json"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let (code, out, err) = csis_testkit::output(&mut c);
    let cache = err
        .lines()
        .find_map(|l| l.split_once("parse cache: ").map(|(_, r)| r.to_string()));
    let err: String = err
        .lines()
        .filter(|l| !l.contains("timing: "))
        .map(|l| format!("{l}\n"))
        .collect();
    (code, out, err, cache)
}

/// The fixture trees: every directory with a `cfg/` under `tests/fixtures/`,
/// `examples/` and the original's starters (`../shared/reference`, when
/// present; several of them refused at their lines).
fn fixture_trees() -> Vec<PathBuf> {
    let ws = csis_testkit::workspace();
    let mut out = Vec::new();
    let mut stack = vec![
        csis_testkit::fixture(""),
        ws.join("examples"),
        ws.join("../shared/reference/cs-image-system-0.1.1-starters"),
    ];
    stack.retain(|d| d.is_dir());
    while let Some(d) = stack.pop() {
        if d.join("cfg").is_dir() {
            out.push(d);
            continue;
        }
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Plan the tree at `root` three ways and compare; answers the cache's
/// line of the last plan.
fn three_ways(root: &Path) -> Option<String> {
    let name = root.display().to_string();
    let cache = root.join(".csis/cache/parse.bin");
    let _ = std::fs::remove_dir_all(root.join(".csis"));
    let none = plan(root, &[]);
    assert!(!cache.exists(), "{name}: no .csis/, no cache");
    assert_eq!(none.3, None, "{name}: no .csis/, no cache");
    std::fs::create_dir(root.join(".csis")).unwrap();
    let made = plan(root, &[]);
    let read = plan(root, &[]);
    for (way, p) in [("made", &made), ("read", &read)] {
        assert_eq!(
            (none.0, &none.1, &none.2),
            (p.0, &p.1, &p.2),
            "{name}: the plan without the cache and with it ({way}) differ"
        );
    }
    read.3
}

#[test]
fn plans_agree_with_and_without_the_parse_cache() {
    let trees = fixture_trees();
    assert!(trees.len() >= 10, "{trees:?}");
    let mut read_whole = 0;
    for t in &trees {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        csis_testkit::copy_dir(t, &root);
        let line = three_ways(&root);
        // A tree whose files all parse is read whole from the cache.
        if let Some(l) = line {
            let (hits, n) = l.split_once(" of ").unwrap();
            let n = n.split(' ').next().unwrap();
            if hits == n && hits != "0" {
                read_whole += 1;
            }
        }
    }
    assert!(
        read_whole >= 8,
        "{read_whole} of {} trees read from the cache",
        trees.len()
    );
    // A generated tree (templates, chains, two runtimes).
    let tmp = tempfile::tempdir().unwrap();
    tree_gen::generate(tmp.path(), 450);
    assert_eq!(
        three_ways(tmp.path()).as_deref(),
        Some("8 of 8 files from the cache")
    );
}

#[test]
fn an_edited_file_is_parsed_again_and_its_change_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    tree_gen::generate(root, 300);
    std::fs::create_dir(root.join(".csis")).unwrap();
    let (code, before, _, line) = plan(root, &[]);
    assert_eq!(code, 0);
    assert_eq!(line.as_deref(), Some("0 of 6 files from the cache"));
    std::fs::write(
        tree_gen::image_path(root, 1),
        tree_gen::image_file(1, 300, Some((150, "edited"))),
    )
    .unwrap();
    let (code, after, _, line) = plan(root, &[]);
    assert_eq!(code, 0);
    assert_eq!(line.as_deref(), Some("5 of 6 files from the cache"));
    assert_ne!(before, after);
    // The edit is the plan's: the same as a plan without the cache.
    std::fs::remove_dir_all(root.join(".csis")).unwrap();
    let (_, uncached, _, line) = plan(root, &[]);
    assert_eq!(line, None);
    assert_eq!(after, uncached);
    let fp = |plan: &str, label: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(plan).unwrap();
        let n = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["label"] == label)
            .unwrap_or_else(|| panic!("{label} in {plan}"));
        n["fingerprint"].as_str().unwrap().to_string()
    };
    let edited = "//images/img-150@sim:bake";
    let other = "//images/img-149@sim:bake";
    assert_ne!(fp(&before, edited), fp(&after, edited));
    assert_eq!(fp(&before, other), fp(&after, other));
}

#[test]
fn no_decrypted_value_reaches_the_parse_cache() {
    const PLAIN: &str = "plain-cached-value-5e81c2";
    let keys = tempfile::tempdir().unwrap();
    let (key_file, recipient) = csis_testkit::age_keygen(keys.path());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    tree_gen::generate(root, 10);
    let sealed = csis_testkit::age_encrypt(&recipient, PLAIN);
    let text = tree_gen::image_file(0, 10, Some((3, &sealed)));
    assert!(text.contains("ENC[age:"));
    std::fs::write(tree_gen::image_path(root, 0), text).unwrap();
    std::fs::create_dir(root.join(".csis")).unwrap();
    let env = [("CSIS_CONFIG_IDENTITY", key_file.as_path())];
    let (code, first, err, line) = plan(root, &env);
    assert_eq!(code, 0, "{err}");
    assert_eq!(line.as_deref(), Some("0 of 4 files from the cache"));
    let (_, second, _, line) = plan(root, &env);
    assert_eq!(line.as_deref(), Some("4 of 4 files from the cache"));
    assert_eq!(first, second);
    // The marker is cached as written; its plaintext is nowhere.
    let bytes = std::fs::read(root.join(".csis/cache/parse.bin")).unwrap();
    let cached = String::from_utf8_lossy(&bytes);
    assert!(
        cached.contains(&sealed),
        "the sealed value is in the cache as written"
    );
    assert!(!cached.contains(PLAIN));
}
