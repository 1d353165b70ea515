//! "a runtime type is one row": a runtime type's name (`"aws"`,
//! `"docker"`, `"dummy"`, `"gcloud"`) is a string literal only in the
//! rows (`schema/src/model/runtimes/`: each type's model and what the load
//! knows of it; `ops/src/wiring.rs`: `RUNTIME_TYPES`) and the runtime
//! crates; everywhere else code decides by a row's facts
//! (`TypeModel`, `RuntimeType`), never by comparing a type's name. A file
//! whose literal is not a runtime type (a builder type token of the
//! original's format, an executable's or a provider's name) is listed in
//! `tests/cli/tidy/allow.txt` as `PATH types -- reason`. A cargo feature
//! (`feature = "aws"`), a comment and a file's unit tests aside.

use super::size::Over;

/// The runtime types' names: those csis runs and the one it reads only.
pub const TYPES: &[&str] = &["aws", "docker", "dummy", "gcloud"];

/// Where a runtime type is named by right: the rows and the runtime
/// crates (paths from the workspace root; a folder ends with `/`).
pub const ROWS: &[&str] = &[
    "schema/src/model/runtimes/",
    "ops/src/wiring.rs",
    "runtimes/aws/",
    "runtimes/docker/",
    "runtimes/dummy/",
];

/// Whether `path` is a row or a runtime crate's.
pub fn is_row(path: &str) -> bool {
    ROWS.iter()
        .any(|r| path == *r || (r.ends_with('/') && path.starts_with(r)))
}

/// "F:L names the runtime type T": each line of product code of `path`
/// with a runtime type's name as a string literal, one [`Over`] per file
/// (`PATH types`) with every line in its words.
pub fn named_types(path: &str, text: &str) -> Option<Over> {
    let mut lines = Vec::new();
    for (n, code) in super::tags::product_lines(text) {
        let mut code = code.to_string();
        for t in TYPES {
            code = code.replace(&format!("feature = \"{t}\""), "feature");
        }
        for t in TYPES {
            if code.contains(&format!("\"{t}\"")) {
                lines.push(format!(
                    "{path}:{}: names the runtime type \"{t}\"; decide by its row (csis_schema::model::TypeModel, csis_ops::wiring::RUNTIME_TYPES)",
                    n + 1
                ));
            }
        }
    }
    (!lines.is_empty()).then(|| Over {
        path: path.to_string(),
        func: Some("types".to_string()),
        what: lines.join("\n"),
    })
}

#[test]
fn a_runtime_type_is_named_only_in_its_row() {
    let root = super::workspace();
    let mut found = Vec::new();
    let mut files = 0;
    for (name, dir) in super::source_folders(&super::cargo_metadata()) {
        if name == "csis-testkit" {
            continue;
        }
        let text = super::files_under(&dir);
        let tests = super::loops::Crate::new(&text).test_files;
        for (rel, t) in &text {
            let path = dir.join(rel);
            let shown = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if tests.contains(rel.as_str()) || rel.ends_with("tests.rs") || is_row(&shown) {
                continue;
            }
            files += 1;
            found.extend(named_types(&shown, t));
        }
    }
    assert!(files > 200, "found the product files: {files}");
    let allow = std::fs::read_to_string(root.join("tests/cli/tidy/allow.txt")).unwrap();
    let v = super::size::judge(&found, &allow, super::size::Kind::RuntimeTypes);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[cfg(test)]
mod checks {
    use super::super::size::{judge, Kind};
    use super::*;

    #[test]
    fn runtime_type_rule_fails_on_a_type_named_outside_its_row() {
        let text = "if rt.type_name() == \"docker\" {}\n#[cfg(feature = \"aws\")]\n// \"aws\" in a comment\nlet x = \"dockerfile\";\n#[cfg(test)]\nmod tests { const T: &str = \"dummy\"; }\n";
        let over = named_types("rules/src/x.rs", text).expect("a finding");
        assert_eq!(
            over.what,
            "rules/src/x.rs:1: names the runtime type \"docker\"; decide by its row (csis_schema::model::TypeModel, csis_ops::wiring::RUNTIME_TYPES)"
        );
        assert!(named_types("y.rs", "if rt.kind.model().opa_agent {}").is_none());
        assert!(is_row("schema/src/model/runtimes/docker.rs") && is_row("ops/src/wiring.rs"));
        assert!(!is_row("ops/src/wiring_more.rs") && !is_row("rules/src/tree.rs"));
        // not allowed: flagged; allowed with a reason: not; an entry that
        // allows nothing any more: flagged
        let found = [over];
        assert_eq!(
            judge(&found, "", Kind::RuntimeTypes),
            [found[0].what.clone()]
        );
        assert!(judge(
            &found,
            "rules/src/x.rs types -- a builder type token\n",
            Kind::RuntimeTypes
        )
        .is_empty());
        assert_eq!(
            judge(&[], "rules/src/x.rs types -- a builder type token\n", Kind::RuntimeTypes),
            ["tests/cli/tidy/allow.txt allows rules/src/x.rs types, which is not found now: remove the entry"]
        );
        // another rule's entries are not this rule's
        assert!(judge(&[], "a.rs fn big -- a table\n", Kind::RuntimeTypes).is_empty());
    }
}
