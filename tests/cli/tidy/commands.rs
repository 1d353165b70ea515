//! No command imports another: each `src/cmd/<command>.rs` reaches the
//! house through ops, never through a sibling command (read through
//! `use`s to their `;` and `cmd/mod.rs`'s re-exports, `loops::Crate`).

use std::collections::BTreeMap;

use super::{files_under, loops, workspace};

/// "src/cmd/A.rs names the command B (line: path)": `files` are the
/// binary's source folder (relative path -> text); a name reaches a command
/// through a `use` read to its `;` (a group, over lines) or a path in code,
/// and through what `cmd/mod.rs` re-exports.
pub(super) fn command_imports(files: &BTreeMap<String, String>) -> Vec<String> {
    let command = |rel: &str| -> Option<String> {
        let m = loops::module_path(rel);
        (m.len() >= 2 && m[0] == "cmd").then(|| m[1].clone())
    };
    let c = loops::Crate::new(files);
    let mut out = Vec::new();
    for e in c.edges() {
        if let (Some(a), Some(b)) = (command(e.from), command(e.to)) {
            if a != b {
                out.push(format!(
                    "src/{}:{} imports the command {b} ({})",
                    e.from, e.line, e.named
                ));
            }
        }
    }
    out
}

#[test]
fn no_command_imports_another() {
    let files = files_under(&workspace().join("src"));
    let commands = files.keys().filter(|f| f.starts_with("cmd/")).count();
    assert!(commands > 10, "found the commands: {commands}");
    let v = command_imports(&files);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn command_rule_fails_on_a_command_importing_another() {
    let files = |build: &str| -> BTreeMap<String, String> {
        [
            ("main.rs", "mod cmd;"),
            (
                "cmd/mod.rs",
                "mod build; mod release; mod state;\npub use state::open;\npub fn session() {}",
            ),
            ("cmd/build.rs", build),
            ("cmd/release.rs", "pub fn run() {}"),
            ("cmd/state.rs", "pub fn open() {}"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    };
    assert_eq!(
        command_imports(&files(
            "use super::state;\nfn f() { crate::cmd::release::run() }"
        )),
        [
            "src/cmd/build.rs:2 imports the command release (crate::cmd::release::run)",
            "src/cmd/build.rs:1 imports the command state (super::state)"
        ]
    );
    // a group, rustfmt's multi-line form, a re-export through cmd/mod.rs
    assert_eq!(
        command_imports(&files("use super::{release, session};")),
        ["src/cmd/build.rs:1 imports the command release (super::release)"]
    );
    assert_eq!(
        command_imports(&files(
            "use crate::cmd::{\n    session,\n    state::open,\n};"
        )),
        ["src/cmd/build.rs:3 imports the command state (crate::cmd::state::open)"]
    );
    assert_eq!(
        command_imports(&files("fn f() { super::open() }")),
        ["src/cmd/build.rs:1 imports the command state (super::open)"]
    );
    assert!(command_imports(&files("fn f() { super::session(); }")).is_empty());
}
