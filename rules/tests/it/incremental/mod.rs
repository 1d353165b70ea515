//! The incremental load and compile (`csis_rules::incremental`) recompute
//! only what an edit invalidates, proven by counting query executions, and
//! always answer what a fresh `csis_rules::load` and `compile` of the same
//! files answer. This file keeps the tree the modules share.

mod compile;
mod load;
mod patch;

use std::collections::BTreeMap;
use std::path::Path;

use csis_rules::incremental::{Counts, Incremental};
use csis_rules::LoadOptions;

const CFG: &[(&str, &str)] = &[
    ("cfg/_config.yml", "id: incremental-test\n"),
    (
        "cfg/runtime-builders.yml",
        "runtime_builders:\n  - name: sim\n    type: dummy\n    is_default: true\n    default_machine_type: small\n",
    ),
    (
        "cfg/image-builders.yml",
        "image_builders:\n  - name: sim-bake\n    type: dummy\n    runtime: sim\n    is_default: true\n",
    ),
    (
        "cfg/mod-builders.yml",
        "mod_builders:\n  - name: ansible\n    type: ansible\n    is_default: true\n  - name: bash\n    type: bash-remote\n",
    ),
    (
        "cfg/os-builders.yml",
        "os_builders:\n  - name: deb12\n    type: debian\n    family: debian\n    family_version: \"12\"\n    is_default: true\n    runtimes:\n      - image_builder: sim-bake\n",
    ),
];

const WEB: &str = "images:\n  - name: web\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}]\n    modifications:\n      - name: web-setup\n        playbooks: [playbooks/web.yml]\n";
const APP: &str = "images:\n  - name: app\n    source_image: web\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n    modifications:\n      - name: app-setup\n        type: bash\n        scripts: [scripts/app.sh]\n";
const TOOLS: &str = "images:\n  - name: tools\n    source_image: app\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n";

/// 5 cfg files + 3 image files (one per image), a playbook and a script.
fn write_tree(root: &Path) {
    let mut files: Vec<(&str, &str)> = CFG.to_vec();
    files.extend([
        ("images/web.yml", WEB),
        ("images/app.yml", APP),
        ("images/more/tools.yaml", TOOLS),
        ("playbooks/web.yml", "- hosts: all\n  tasks: []\n"),
        ("scripts/app.sh", "echo app\n"),
    ]);
    write_files(root, files);
}

/// Write `files` (root-relative path, text) under `root`, with their directories.
fn write_files<P: AsRef<Path>, T: AsRef<[u8]>>(
    root: &Path,
    files: impl IntoIterator<Item = (P, T)>,
) {
    for (p, text) in files {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn opts() -> LoadOptions {
    LoadOptions {
        env: Some(BTreeMap::new()),
        now: Some(chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap()),
        ..Default::default()
    }
}

/// Counts executed by `f`.
fn during(inc: &mut Incremental, f: impl FnOnce(&mut Incremental)) -> Counts {
    let before = inc.counts();
    f(inc);
    inc.counts() - before
}
