//! The house rules that a reviewer should not have to check by eye (the
//! idea of rust-analyzer's `xtask/src/tidy.rs`), read from `cargo metadata`
//! and the source files:
//!
//! - the engine depends on no csis crate (dev-only `csis-testkit` aside);
//! - nothing but `csis-runtime-aws` depends on an AWS SDK crate
//!   (`aws-sdk-*`, `aws-config`, `aws-smithy-*`, `aws-types`,
//!   `aws-runtime`), so that its long compile happens once;
//! - every Rust source file starts with a `//!` comment saying what it is;
//! - no command (`src/cmd/<command>.rs`) imports another: what two commands
//!   share is an operation (`csis_ops`) or a helper of `src/cmd/mod.rs`
//!   (a `use` read to its `;`, groups and rustfmt's lines, and what
//!   `cmd/mod.rs` re-exports, count);
//! - the hand-kept key lists (`RUNTIME_COMMON_KEYS`, `BUILDER_COMMON_KEYS`)
//!   name exactly the fields of their structs;
//! - no runtime (`csis-runtime*`) and not `csis-cache` depends on
//!   `csis-rules` (dev-dependencies aside: a test may load a tree): they
//!   read the configuration schema (`csis-schema`), so that they compile
//!   beside the loader, not after it;
//! - no two files, and no two modules, of a crate name each other (each
//!   `use` to its `;`, each `crate::`/`super::`/`self::` path in product
//!   code, every name followed through `lib.rs`'s and each module's
//!   re-exports; a module and the modules inside it aside):
//!   `tests/cli/tidy/loops.rs` over `tests/cli/tidy/rust.rs`;
//! - a runtime type's name is a string literal only in its row and its
//!   crate: `tests/cli/tidy/runtime_types.rs`;
//! - the tag and label names csis stamps (`csis_series`, `csis.name`, ...)
//!   are spelled as strings only in `schema/src/tags.rs` (unit tests aside,
//!   which state the wire format): `tests/cli/tidy/tags.rs`;
//! - no file is over 800 lines, no product function over 150, but for the
//!   entries of `tests/cli/tidy/allow.txt`, each with its reason (which also
//!   holds today's import loops): `tests/cli/tidy/size.rs`;
//! - the binary depends on no csis crate but csis-ops, csis-schema and
//!   csis-graph (its tests aside);
//! - ARCHITECTURE.md's crate table names exactly the workspace's packages,
//!   each with its folder;
//! - csis-ops implements `Display` only for its errors: the English of a
//!   report or a notice is the binary's (`src/render/`):
//!   `tests/cli/tidy/words.rs`;
//! - no library crate prints (`println!`, `eprintln!`, `print!`, `eprint!`,
//!   `dbg!`) outside its tests: a report carries what a command found, the
//!   `log` facade what a library tells people besides (the binary's
//!   `src/say.rs` prints it), and the binary alone writes to a terminal;
//! - each package has at most one integration-test binary (its
//!   `tests/<name>/main.rs`, each test file a module): every binary links
//!   the workspace again, and one binary per crate is what keeps CI's
//!   links few;
//! - a docker-only build (the quick start's) compiles no AWS SDK crate and
//!   no `aws-lc-sys`: `tests/cli/tidy/install.rs`;
//! - every CLI test runs csis through `csis_testkit` (a tree's command is
//!   its `Tree`'s; only testkit depends on `assert_cmd`):
//!   `tests/cli/tidy/testkit.rs`.
//!
//! Each checker is a function of its input, and the unit tests at the end
//! show each one failing on synthetic input.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// checkers

/// The direct dependencies of one package: (name, kind: "normal" | "dev" |
/// "build").
fn deps(pkg: &Value) -> Vec<(String, String)> {
    pkg["dependencies"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    let name = d["name"].as_str().unwrap_or_default();
                    let kind = d["kind"].as_str().unwrap_or("normal");
                    (name.to_string(), kind.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn packages(meta: &Value) -> impl Iterator<Item = &Value> {
    meta["packages"].as_array().into_iter().flatten()
}

/// "csis-engine depends on X": every csis crate the engine depends on.
fn engine_csis_deps(meta: &Value) -> Vec<String> {
    packages(meta)
        .filter(|p| p["name"] == "csis-engine")
        .flat_map(deps)
        .filter(|(name, kind)| {
            name.starts_with("csis") && !(name == "csis-testkit" && kind == "dev")
        })
        .map(|(name, kind)| format!("csis-engine depends on {name} ({kind})"))
        .collect()
}

/// "P depends on csis-rules": every runtime crate (`csis-runtime*`) and
/// `csis-cache` that does, but for tests (a dev-dependency).
fn rules_below_the_loader(meta: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in packages(meta) {
        let name = p["name"].as_str().unwrap_or("?");
        if !(name.starts_with("csis-runtime") || name == "csis-cache") {
            continue;
        }
        for (dep, kind) in deps(p) {
            if dep == "csis-rules" && kind != "dev" {
                out.push(format!(
                    "{name} depends on csis-rules ({kind}); it reads the schema from csis-schema"
                ));
            }
        }
    }
    out
}

fn is_aws_sdk(name: &str) -> bool {
    name.starts_with("aws-sdk-")
        || name.starts_with("aws-smithy-")
        || matches!(name, "aws-config" | "aws-types" | "aws-runtime")
}

/// "P depends on the AWS SDK crate X": every package but the AWS runtime.
fn aws_sdk_outside_aws(meta: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in packages(meta).filter(|p| p["name"] != "csis-runtime-aws") {
        for (name, kind) in deps(p) {
            if is_aws_sdk(&name) {
                out.push(format!(
                    "{} depends on the AWS SDK crate {name} ({kind}); only csis-runtime-aws may",
                    p["name"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    out
}

/// "F does not start with `//!`": the first line that is not blank must be
/// a module comment.
fn lacks_module_doc(path: &str, text: &str) -> Option<String> {
    let first = text.lines().find(|l| !l.trim().is_empty());
    match first {
        Some(l) if l.trim_start().starts_with("//!") => None,
        _ => Some(format!(
            "{path}:1: does not start with a `//!` comment saying what it is"
        )),
    }
}

/// "LIST lacks F" / "LIST names G, which STRUCT does not have".
fn key_list_differs(
    list_name: &str,
    list: &[&str],
    struct_name: &str,
    fields: &[String],
) -> Vec<String> {
    let list: BTreeSet<&str> = list.iter().copied().collect();
    let fields: BTreeSet<&str> = fields.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for f in fields.difference(&list) {
        out.push(format!("{list_name} lacks `{f}`, a field of {struct_name}"));
    }
    for k in list.difference(&fields) {
        out.push(format!(
            "{list_name} names `{k}`, which {struct_name} does not have"
        ));
    }
    out
}

/// The keys a struct serializes (every field, renamed as in YAML).
fn serialized_keys(v: &impl serde::Serialize) -> Vec<String> {
    match serde_json::to_value(v).unwrap() {
        Value::Object(m) => {
            let mut keys: Vec<String> = m.keys().cloned().collect();
            keys.sort();
            keys
        }
        other => panic!("not a struct: {other}"),
    }
}

// ---------------------------------------------------------------------------
// inputs

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cargo_metadata() -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata speaks JSON")
}

/// Every `.rs` file of the workspace (not under `target/`, hidden
/// directories or test fixtures).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "fixtures") {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

// ---------------------------------------------------------------------------
// the rules, on this workspace

#[test]
fn the_binary_reaches_the_house_through_ops() {
    let v = binary::past_ops(&cargo_metadata());
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_engine_depends_on_no_csis_crate() {
    let v = engine_csis_deps(&cargo_metadata());
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn only_the_aws_runtime_depends_on_the_aws_sdk() {
    let meta = cargo_metadata();
    assert!(
        packages(&meta).any(|p| p["name"] == "csis-runtime-aws"),
        "the metadata lists the workspace"
    );
    let v = aws_sdk_outside_aws(&meta);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn no_runtime_and_not_the_cache_depends_on_the_loader() {
    let meta = cargo_metadata();
    assert!(
        packages(&meta).any(|p| p["name"] == "csis-cache"),
        "the metadata lists the workspace"
    );
    let v = rules_below_the_loader(&meta);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn every_source_file_says_what_it_is() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 50, "found the sources: {}", files.len());
    let v: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&root).unwrap().display().to_string();
            lacks_module_doc(&rel, &std::fs::read_to_string(p).unwrap())
        })
        .collect();
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_common_key_lists_name_their_structs_fields() {
    use csis_schema::model::{
        BuilderCommon, RuntimeCommon, BUILDER_COMMON_KEYS, RUNTIME_COMMON_KEYS,
    };
    // The smallest entries that deserialize; serializing them back names
    // every field (no field of these structs is skipped when serialized).
    let rt: RuntimeCommon = serde_json::from_value(json!({
        "name": "r", "type": "dummy", "default_machine_type": "m"
    }))
    .unwrap();
    let b: BuilderCommon = serde_json::from_value(json!({"name": "b", "type": "t"})).unwrap();
    let mut v = key_list_differs(
        "RUNTIME_COMMON_KEYS",
        RUNTIME_COMMON_KEYS,
        "RuntimeCommon",
        &serialized_keys(&rt),
    );
    v.extend(key_list_differs(
        "BUILDER_COMMON_KEYS",
        BUILDER_COMMON_KEYS,
        "BuilderCommon",
        &serialized_keys(&b),
    ));
    assert!(v.is_empty(), "{}", v.join("\n"));
}

// ---------------------------------------------------------------------------
// each checker fails where it should

fn synthetic(packages: Value) -> Value {
    json!({ "packages": packages })
}

#[test]
fn engine_rule_fails_on_a_csis_dependency() {
    let meta = synthetic(json!([
        {"name": "csis-engine", "dependencies": [
            {"name": "petgraph", "kind": null},
            {"name": "csis-rules", "kind": null},
            {"name": "csis-testkit", "kind": "dev"},
            {"name": "csis-cache", "kind": "dev"}
        ]},
        {"name": "csis-ops", "dependencies": [{"name": "csis-engine", "kind": null}]}
    ]));
    assert_eq!(
        engine_csis_deps(&meta),
        [
            "csis-engine depends on csis-rules (normal)",
            "csis-engine depends on csis-cache (dev)"
        ]
    );
    let clean = synthetic(json!([
        {"name": "csis-engine", "dependencies": [{"name": "petgraph", "kind": null}]}
    ]));
    assert!(engine_csis_deps(&clean).is_empty());
}

#[test]
fn aws_rule_fails_on_an_sdk_crate_outside_the_aws_runtime() {
    let meta = synthetic(json!([
        {"name": "csis-runtime-aws", "dependencies": [
            {"name": "aws-sdk-ec2", "kind": null},
            {"name": "aws-config", "kind": null}
        ]},
        {"name": "csis-ops", "dependencies": [
            {"name": "csis-runtime-aws", "kind": null},
            {"name": "aws-smithy-types", "kind": null}
        ]},
        {"name": "csis", "dependencies": [{"name": "aws-config", "kind": "dev"}]}
    ]));
    assert_eq!(
        aws_sdk_outside_aws(&meta),
        [
            "csis-ops depends on the AWS SDK crate aws-smithy-types (normal); only csis-runtime-aws may",
            "csis depends on the AWS SDK crate aws-config (dev); only csis-runtime-aws may"
        ]
    );
    assert!(!is_aws_sdk("csis-runtime-aws"));
    assert!(!is_aws_sdk("awsome"));
}

#[test]
fn loader_rule_fails_on_a_runtime_or_the_cache_depending_on_rules() {
    let meta = synthetic(json!([
        {"name": "csis-runtime-docker", "dependencies": [
            {"name": "csis-schema", "kind": null},
            {"name": "csis-rules", "kind": null}
        ]},
        {"name": "csis-runtime", "dependencies": [{"name": "csis-rules", "kind": "build"}]},
        {"name": "csis-runtime-aws", "dependencies": [{"name": "csis-rules", "kind": "dev"}]},
        {"name": "csis-cache", "dependencies": [{"name": "csis-rules", "kind": null}]},
        {"name": "csis-ops", "dependencies": [{"name": "csis-rules", "kind": null}]}
    ]));
    assert_eq!(
        rules_below_the_loader(&meta),
        [
            "csis-runtime-docker depends on csis-rules (normal); it reads the schema from csis-schema",
            "csis-runtime depends on csis-rules (build); it reads the schema from csis-schema",
            "csis-cache depends on csis-rules (normal); it reads the schema from csis-schema"
        ]
    );
    let clean = synthetic(json!([
        {"name": "csis-runtime-dummy", "dependencies": [{"name": "csis-schema", "kind": null}]}
    ]));
    assert!(rules_below_the_loader(&clean).is_empty());
}

#[test]
fn module_doc_rule_fails_on_a_file_without_one() {
    assert_eq!(
        lacks_module_doc("src/x.rs", "use std::path::Path;\n//! late\n"),
        Some("src/x.rs:1: does not start with a `//!` comment saying what it is".into())
    );
    assert!(lacks_module_doc("src/y.rs", "/// an item doc\nfn f() {}\n").is_some());
    assert!(lacks_module_doc("src/z.rs", "").is_some());
    assert_eq!(
        lacks_module_doc("src/ok.rs", "\n//! What this is.\nfn f() {}\n"),
        None
    );
}

#[test]
fn key_list_rule_fails_on_a_missing_or_extra_key() {
    #[derive(serde::Serialize)]
    struct Common {
        name: String,
        #[serde(rename = "type")]
        type_: String,
        tags: Vec<String>,
    }
    let fields = serialized_keys(&Common {
        name: String::new(),
        type_: String::new(),
        tags: Vec::new(),
    });
    assert_eq!(fields, ["name", "tags", "type"]);
    assert!(key_list_differs("KEYS", &["name", "type", "tags"], "Common", &fields).is_empty());
    assert_eq!(
        key_list_differs("KEYS", &["name", "type", "aliases"], "Common", &fields),
        [
            "KEYS lacks `tags`, a field of Common",
            "KEYS names `aliases`, which Common does not have"
        ]
    );
}

// ---------------------------------------------------------------------------
// no import loop between files

#[path = "tidy/binaries.rs"]
mod binaries;
#[path = "tidy/binary.rs"]
mod binary;
#[path = "tidy/commands.rs"]
mod commands;
#[path = "tidy/install.rs"]
mod install;
#[path = "tidy/layout.rs"]
mod layout;
#[path = "tidy/loops.rs"]
mod loops;
#[path = "tidy/prints.rs"]
mod prints;
#[path = "tidy/runtime_types.rs"]
mod runtime_types;
#[path = "tidy/rust.rs"]
mod rust;
#[path = "tidy/size.rs"]
mod size;
#[path = "tidy/tags.rs"]
mod tags;
#[path = "tidy/testkit.rs"]
mod testkit;
#[path = "tidy/words.rs"]
mod words;
use tags::{spelled_tags, tag_names};

/// Every library and binary source folder of the workspace, from the
/// metadata: (package, folder of its root file).
fn source_folders(meta: &Value) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for p in packages(meta) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if kinds.iter().any(|k| matches!(*k, "lib" | "bin")) {
                let root = PathBuf::from(t["src_path"].as_str().unwrap_or_default());
                let dir = root.parent().unwrap().to_path_buf();
                let name = p["name"].as_str().unwrap_or("?").to_string();
                if !out.iter().any(|(_, d)| d == &dir) {
                    out.push((name, dir));
                }
            }
        }
    }
    out
}

fn files_under(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// The loops of every crate the list does not allow: `modules` the module
/// rule's, else the file rule's.
fn import_loops(modules: bool) -> Vec<String> {
    let root = workspace();
    let folders = source_folders(&cargo_metadata());
    assert!(folders.len() >= 10, "found the crates: {folders:?}");
    let mut found = Vec::new();
    for (name, dir) in folders {
        let folder = dir
            .strip_prefix(&root)
            .unwrap_or(&dir)
            .display()
            .to_string();
        let files = files_under(&dir);
        let loops: Vec<(String, String)> = if modules {
            loops::module_loops(&files)
        } else {
            loops::loops(&files)
                .into_iter()
                .map(|l| {
                    let list = l.join(", ");
                    (list.clone(), format!("the files {list} name each other"))
                })
                .collect()
        };
        for (list, what) in loops {
            found.push(size::Over {
                path: folder.clone(),
                func: Some(format!("loop {list}")),
                what: format!("{name} ({folder}): {what}"),
            });
        }
    }
    let allow = std::fs::read_to_string(root.join("tests/cli/tidy/allow.txt")).unwrap();
    let kind = if modules {
        size::Kind::ModuleLoops
    } else {
        size::Kind::FileLoops
    };
    size::judge(&found, &allow, kind)
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let v = import_loops(false);
    assert!(
        v.is_empty(),
        "import loops between files:\n{}",
        v.join("\n")
    );
}

#[test]
fn no_two_modules_of_a_crate_name_each_other() {
    let v = import_loops(true);
    assert!(
        v.is_empty(),
        "import loops between modules:\n{}",
        v.join("\n")
    );
}

// ---------------------------------------------------------------------------
// files and functions a person can hold

#[test]
fn files_and_product_functions_are_within_their_bounds() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let rel = |p: &Path| p.strip_prefix(&root).unwrap().display().to_string();
    let mut over: Vec<size::Over> = files
        .iter()
        .filter_map(|p| size::file_over(&rel(p), &std::fs::read_to_string(p).unwrap()))
        .collect();
    let mut product = 0;
    for (name, dir) in source_folders(&cargo_metadata()) {
        if name == "csis-testkit" {
            continue;
        }
        let text = files_under(&dir);
        let tests = loops::Crate::new(&text).test_files;
        for (f, t) in &text {
            if tests.contains(f.as_str()) {
                continue;
            }
            let scan = rust::scan(&rust::code(t));
            product += scan.funcs.iter().filter(|f| !f.test).count();
            over.extend(size::funcs_over(&rel(&dir.join(f)), &scan));
        }
    }
    assert!(product > 1000, "found the product functions: {product}");
    over.sort();
    let allow = std::fs::read_to_string(root.join("tests/cli/tidy/allow.txt")).unwrap();
    let v = size::judge(&over, &allow, size::Kind::Bounds);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

// ---------------------------------------------------------------------------
// libraries do not print

#[test]
fn no_library_crate_prints() {
    let root = workspace();
    let mut found = Vec::new();
    let mut libraries = 0;
    for (name, dir) in source_folders(&cargo_metadata()) {
        if name == "csis" || name == "csis-testkit" {
            continue;
        }
        libraries += 1;
        let text = files_under(&dir);
        let tests = loops::Crate::new(&text).test_files;
        for (f, t) in &text {
            if !tests.contains(f.as_str()) {
                let rel = dir
                    .join(f)
                    .strip_prefix(&root)
                    .unwrap()
                    .display()
                    .to_string();
                found.extend(prints::prints(&rel, t));
            }
        }
    }
    assert!(libraries > 10, "found the library crates: {libraries}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

// ---------------------------------------------------------------------------
// tag names spelled once

#[test]
fn tag_names_are_spelled_only_in_the_schema() {
    let root = workspace();
    let names = tag_names(&std::fs::read_to_string(root.join("schema/src/tags.rs")).unwrap());
    assert!(
        names.contains("csis_series") && names.len() >= 10,
        "{names:?}"
    );
    let mut v = Vec::new();
    for (name, dir) in source_folders(&cargo_metadata()) {
        if name == "csis-testkit" {
            continue;
        }
        for (rel, text) in files_under(&dir) {
            let path = dir.join(&rel);
            let shown = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if shown == "schema/src/tags.rs" || rel.ends_with("tests.rs") {
                continue;
            }
            v.extend(spelled_tags(&shown, &text, &names));
        }
    }
    assert!(v.is_empty(), "{}", v.join("\n"));
}

// ---------------------------------------------------------------------------
// the crate map

/// The rows of ARCHITECTURE.md's crate table: (crate, folder), from lines
/// `| \`NAME\` (\`FOLDER/\`...) | ...`.
fn crate_map(architecture: &str) -> BTreeSet<(String, String)> {
    architecture
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| `")?;
            let (name, rest) = rest.split_once("` (`")?;
            let (folder, _) = rest.split_once('`')?;
            Some((name.to_string(), folder.trim_end_matches('/').to_string()))
        })
        .collect()
}

/// The workspace's packages as the crate map names them: (crate, folder
/// under the workspace; `src` for the root package).
fn workspace_crates(meta: &Value, root: &Path) -> BTreeSet<(String, String)> {
    packages(meta)
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
            let dir = manifest.parent().unwrap_or(root);
            let rel = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
            let folder = if rel.is_empty() {
                "src".to_string()
            } else {
                rel
            };
            (p["name"].as_str().unwrap_or("?").to_string(), folder)
        })
        .collect()
}

fn map_differs(
    map: &BTreeSet<(String, String)>,
    crates: &BTreeSet<(String, String)>,
) -> Vec<String> {
    let mut out: Vec<String> = crates
        .difference(map)
        .map(|(n, f)| format!("ARCHITECTURE.md's crate map lacks {n} ({f}/)"))
        .collect();
    out.extend(map.difference(crates).map(|(n, f)| {
        format!("ARCHITECTURE.md's crate map names {n} ({f}/), which the workspace does not have")
    }));
    out
}

#[test]
fn the_crate_map_is_the_workspace() {
    let root = workspace();
    let map = crate_map(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap());
    let crates = workspace_crates(&cargo_metadata(), &root);
    assert!(crates.len() >= 12, "{crates:?}");
    let v = map_differs(&map, &crates);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn crate_map_rule_fails_on_a_missing_or_extra_row() {
    let map = crate_map(
        "| crate | knows |\n|---|---|\n| `csis` (`src/`) | the CLI |\n| `csis-old` (`old/`) | gone |\n",
    );
    let crates: BTreeSet<(String, String)> = [("csis", "src"), ("csis-new", "new")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        map_differs(&map, &crates),
        [
            "ARCHITECTURE.md's crate map lacks csis-new (new/)",
            "ARCHITECTURE.md's crate map names csis-old (old/), which the workspace does not have"
        ]
    );
}
