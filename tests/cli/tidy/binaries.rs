//! One integration-test binary per package, and no test that sets the
//! process's environment (the modules of a binary share its process).

use serde_json::{json, Value};

use super::{cargo_metadata, packages, rust_files, synthetic, workspace};

/// "P has N integration-test binaries": every package with more than one
/// target of kind `test`.
fn test_binaries_over_one(meta: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in packages(meta) {
        let tests: Vec<&str> = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "test"))
            })
            .filter_map(|t| t["name"].as_str())
            .filter(|t| {
                !OWN_PROCESS
                    .iter()
                    .any(|(pk, b, _)| p["name"] == *pk && b == t)
            })
            .collect();
        if tests.len() > 1 {
            out.push(format!(
                "{} has {} integration-test binaries ({}): make them modules of one",
                p["name"].as_str().unwrap_or("?"),
                tests.len(),
                tests.join(", ")
            ));
        }
    }
    out
}

/// "F:L sets the process's environment": a test binary's modules share
/// one process, so a `set_var`/`remove_var` in one reaches every other's
/// children.
fn test_sets_the_environment(path: &str, text: &str) -> Vec<String> {
    // a call, not a mention: outside a comment and outside a string
    let calls = |l: &str| {
        ["env::set_var(", "env::remove_var("].iter().any(|p| {
            l.match_indices(p)
                .any(|(i, _)| l[..i].matches('"').count().is_multiple_of(2))
        })
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| calls(l))
        .map(|(i, _)| format!("{path}:{} sets the process's environment", i + 1))
        .collect()
}

/// The test binaries that keep a process of their own, each with its
/// reason: `(package, binary, its file)`.
const OWN_PROCESS: &[(&str, &str, &str)] = &[
    // the starter names a profile: the SDK reads the profile files and the
    // endpoint from the process's environment, as from a user's shell
    (
        "csis-runtime-aws",
        "starter",
        "runtimes/aws/tests/starter.rs",
    ),
];

#[test]
fn each_package_has_one_integration_test_binary() {
    let meta = cargo_metadata();
    let with_tests = packages(&meta)
        .filter(|p| {
            p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["kind"][0] == "test")
        })
        .count();
    assert!(with_tests >= 5, "found the test targets: {with_tests}");
    let mut v = test_binaries_over_one(&meta);
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        if rel.split('/').any(|c| c == "tests") && !OWN_PROCESS.iter().any(|(_, _, f)| *f == rel) {
            v.extend(test_sets_the_environment(
                &rel,
                &std::fs::read_to_string(&f).unwrap(),
            ));
        }
    }
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn test_binary_rule_fails_on_a_second_binary() {
    let meta = synthetic(json!([
        {"name": "csis-cache", "targets": [
            {"name": "csis_cache", "kind": ["lib"]},
            {"name": "it", "kind": ["test"]},
            {"name": "flaky", "kind": ["test"]}
        ]},
        {"name": "csis-engine", "targets": [
            {"name": "it", "kind": ["test"]},
            {"name": "plan", "kind": ["bench"]}
        ]}
    ]));
    assert_eq!(
        test_binaries_over_one(&meta),
        ["csis-cache has 2 integration-test binaries (it, flaky): make them modules of one"]
    );
    let text = "fn t() {\n    // std::env::set_var(\"A\", \"b\") said, not done\n    std::env::set_var(\"A\", \"b\");\n}\n";
    assert_eq!(
        test_sets_the_environment("x/tests/it/a.rs", text),
        ["x/tests/it/a.rs:3 sets the process's environment"]
    );
}
