//! Helpers shared by the ops_*, after_docker and builds_* integration
//! tests: a temporary copy of a fixture tree under `tests/fixtures/ops/`
//! (csis_testkit) and its records, and the lineage rules every runtime
//! keeps ([`suite`]).
#![allow(dead_code)]

pub mod suite;

use csis_cache::{BuildRecord, MetaState};

/// A temporary copy of a fixture tree (see [`csis_testkit::Tree`]); each
/// test adds the methods of its own runtime in its own `impl Tree`.
pub struct Tree(pub csis_testkit::Tree);

impl std::ops::Deref for Tree {
    type Target = csis_testkit::Tree;
    fn deref(&self) -> &csis_testkit::Tree {
        &self.0
    }
}

impl Tree {
    /// The dummy runtime `sim`'s store file.
    pub fn store_path(&self) -> std::path::PathBuf {
        self.root.join(".csis/dummy/sim.json")
    }

    /// The dummy runtime `sim`'s store, as JSON.
    pub fn store(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.store_path()).unwrap()).unwrap()
    }

    /// The build ids the dummy runtime `sim` holds.
    pub fn store_ids(&self) -> std::collections::BTreeSet<String> {
        self.store()["images"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    /// Write a file of the tree.
    pub fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.root.join(rel), text).unwrap();
    }

    /// Replace the first `from` (which must be there) by `to` in a file of
    /// the tree.
    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.root.join(rel)).unwrap();
        assert!(text.contains(from), "{rel} lacks {from:?}");
        self.write(rel, &text.replacen(from, to, 1));
    }

    /// A copy of `tests/fixtures/ops/basic` (the dummy runtime `sim`).
    pub fn basic() -> Tree {
        Tree(csis_testkit::Tree::of("ops/basic"))
    }

    pub fn meta(&self) -> MetaState {
        MetaState::of_tree(&self.root)
    }

    /// The recorded builds of `series`, oldest first.
    pub fn builds(&self, series: &str) -> Vec<BuildRecord> {
        self.meta()
            .lineage()
            .unwrap()
            .builds
            .into_iter()
            .filter(|b| b.series == series)
            .collect()
    }

    /// The ids of every recorded build.
    pub fn recorded(&self) -> std::collections::BTreeSet<String> {
        self.meta()
            .lineage()
            .unwrap()
            .builds
            .into_iter()
            .map(|b| b.build_id)
            .collect()
    }

    /// Pin instance `name` to `build` in `meta-state/pins.yaml`.
    pub fn pin_instance(&self, name: &str, build: &str) {
        let mut pins = self.meta().pins().unwrap();
        pins.instances.insert(name.into(), build.into());
        self.meta().save_pins(&pins).unwrap();
    }

    /// Their ids.
    pub fn ids(&self, series: &str) -> Vec<String> {
        self.builds(series)
            .into_iter()
            .map(|b| b.build_id)
            .collect()
    }
}
