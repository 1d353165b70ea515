//! "every CLI test runs csis through testkit": the `csis` binary is made in
//! one place, `csis_testkit` (`Tree::csis` for a tree, `csis()` for the
//! commands on none), so that every test gets the same environment (no
//! injected dummy failure, the tree's variables) and names its tree one way:
//!
//! - no package but csis-testkit depends on `assert_cmd` (nor calls
//!   `cargo_bin`): no second way to find the binary;
//! - a `csis_testkit::csis()` command names no tree (`-C`, `--directory`):
//!   a command on a tree is its `Tree`'s.

use serde_json::Value;

use super::{cargo_metadata, deps, packages, rust, rust_files, synthetic, workspace};

/// "P depends on assert_cmd": every package but csis-testkit that does.
fn assert_cmd_outside_testkit(meta: &Value) -> Vec<String> {
    packages(meta)
        .filter(|p| p["name"] != "csis-testkit")
        .filter(|p| deps(p).iter().any(|(d, _)| d == "assert_cmd"))
        .map(|p| {
            format!(
                "{} depends on assert_cmd: run csis through csis_testkit::Tree",
                p["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// Each place of `text` that makes the csis binary itself (`cargo_bin`,
/// `assert_cmd`), or names a tree on `csis_testkit::csis()` (in its
/// statement, or in a statement on the variable it is bound to), as
/// `file:line: what`.
fn csis_outside_testkit(rel: &str, text: &str) -> Vec<String> {
    let code: Vec<char> = rust::code(text).chars().collect();
    let orig: Vec<char> = text.chars().collect();
    let line_of = |i: usize| code[..i].iter().filter(|c| **c == '\n').count() + 1;
    let s: String = code.iter().collect();
    let mut out = Vec::new();
    for word in ["cargo_bin", "assert_cmd"] {
        for (b, _) in s.match_indices(word) {
            let i = s[..b].chars().count();
            let ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
            if !ident(code.get(i.wrapping_sub(1))) && !ident(code.get(i + word.chars().count())) {
                out.push(format!(
                    "{rel}:{}: `{word}`: run csis through csis_testkit::Tree",
                    line_of(i)
                ));
            }
        }
    }
    // the statement (to its `;`) holding char `i`, in the original text
    let stmt_end = |i: usize| {
        (i..code.len())
            .find(|&j| code[j] == ';')
            .unwrap_or(code.len())
    };
    let stmt_start = |i: usize| {
        (0..i)
            .rev()
            .find(|&j| matches!(code[j], ';' | '{' | '}'))
            .map_or(0, |j| j + 1)
    };
    let names_a_tree = |a: usize, b: usize| {
        let t: String = orig[a..b].iter().collect();
        t.contains("\"-C\"") || t.contains("\"--directory\"")
    };
    let call = "csis_testkit::csis()";
    for (b, _) in s.match_indices(call) {
        let i = s[..b].chars().count();
        let (a, e) = (stmt_start(i), stmt_end(i));
        let head: String = code[a..i].iter().collect();
        let mut hit = names_a_tree(a, e);
        // `let [mut] c[: T] = csis_testkit::csis();`: the statements on `c`
        let bound = head
            .trim()
            .strip_prefix("let ")
            .map(|h| h.trim_start_matches("mut ").trim())
            .and_then(|h| h.split([':', '=', ' ']).next())
            .filter(|n| !n.is_empty());
        if let Some(name) = bound {
            let mut j = e;
            while let Some(k) = (j + 1..code.len()).find(|&k| !code[k].is_whitespace()) {
                let rest: String = code[k..(k + name.len() + 1).min(code.len())]
                    .iter()
                    .collect();
                if rest != format!("{name}.") {
                    break;
                }
                let end = stmt_end(k);
                hit |= names_a_tree(k, end);
                j = end;
            }
        }
        if hit {
            out.push(format!(
                "{rel}:{}: csis_testkit::csis() on a tree: use its Tree's csis()",
                line_of(i)
            ));
        }
    }
    out
}

#[test]
fn every_cli_test_runs_csis_through_testkit() {
    let mut v = assert_cmd_outside_testkit(&cargo_metadata());
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut seen = 0;
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        if rel.starts_with("testkit/") || rel.starts_with("tests/cli/tidy") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        seen += usize::from(text.contains("csis_testkit::"));
        v.extend(csis_outside_testkit(&rel, &text));
    }
    assert!(seen > 20, "found the tests using testkit: {seen}");
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn testkit_rule_fails_on_a_csis_made_or_pointed_at_a_tree_by_hand() {
    let meta = synthetic(serde_json::json!([
        {"name": "csis-testkit", "dependencies": [{"name": "assert_cmd", "kind": "normal"}]},
        {"name": "csis", "dependencies": [{"name": "assert_cmd", "kind": "dev"}]}
    ]));
    assert_eq!(
        assert_cmd_outside_testkit(&meta),
        ["csis depends on assert_cmd: run csis through csis_testkit::Tree"]
    );
    let file = "//! x\n\
        use assert_cmd::prelude::*;\n\
        fn a() { Command::cargo_bin(\"csis\").unwrap(); }\n\
        // cargo_bin in a comment, \"assert_cmd\" said\n\
        fn b(d: &Path) {\n    let out = csis_testkit::output(csis_testkit::csis().arg(\"-C\").arg(d));\n}\n\
        fn c(d: &Path) {\n    let mut c = csis_testkit::csis();\n    c.env(\"A\", \"1\");\n    c.arg(\"--directory\").arg(d);\n}\n\
        fn d() {\n    let mut c = csis_testkit::csis();\n    c.arg(\"init\");\n    git.arg(\"-C\");\n}\n";
    assert_eq!(
        csis_outside_testkit("tests/cli/x.rs", file),
        [
            "tests/cli/x.rs:3: `cargo_bin`: run csis through csis_testkit::Tree",
            "tests/cli/x.rs:2: `assert_cmd`: run csis through csis_testkit::Tree",
            "tests/cli/x.rs:6: csis_testkit::csis() on a tree: use its Tree's csis()",
            "tests/cli/x.rs:9: csis_testkit::csis() on a tree: use its Tree's csis()",
        ]
    );
}
