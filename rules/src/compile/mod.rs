//! The rules that turn a loaded [`Tree`] into build-graph nodes (resolve,
//! emit, bake, retag, release, dispose) with their fingerprint inputs.
//!
//! ## The graph
//!
//! Per OS builder x active runtime entry (a base image on one runtime):
//! `//os/<name>@<rt>:resolve` -> `:emit` -> `:bake` -> `:retag` (+ `:dispose`
//! when retention applies on the runtime).
//! Per image x active runtime entry: `//images/<name>@<rt>:emit` -> `:bake`
//! -> `:retag` (+ `:release` with `release:`, `:dispose` with retention); the
//! bake depends on its parent's bake on the same runtime (chains are per
//! runtime).
//!
//! ## Per series
//!
//! The compile is per series (an OS builder or an image): its [`Unit`](crate::compile::Unit) is
//! its nodes on each runtime entry ([`os_unit`](crate::compile::os_unit); for an image
//! [`image_draft`](crate::compile::image_draft), which reads only the tree, then [`finish_image`](crate::compile::finish_image), which
//! adds the content hash of each playbook and script and the pins). An
//! [`Assembler`](crate::compile::Assembler) adds the units to the graph (OS builders, then images
//! parents first) and links each image's bake to its parent's on the same
//! runtime. [`compile`](crate::compile::compile()) hashes the files from disk; the
//! incremental compile ([`crate::incremental`]) memoizes each step per
//! series and takes the hashes from its inputs.
//!
//! The fingerprint inputs of a bake (recipe [`BAKE_RECIPE`], over the
//! engine's `csis-fingerprint-v1` encoding) are described in ARCHITECTURE.md
//! ("Fingerprints"); `bake_inputs` builds them.
//!
//! The modules: `vocabulary` (the specs of the nodes, [`Compiled`]),
//! `bake_inputs`, `units` (the series rules), `assemble` (the
//! [`Assembler`]), `fleet` (the storage and instance nodes, after every
//! series), `policy` (forced bakes, the planner's rules).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::tree::Tree;

mod assemble;
mod bake_inputs;
mod fleet;
mod mod_tests;
mod policy;
mod units;
mod vocabulary;

pub use assemble::{image_order, patch_unit, Assembler, LinkedSpecs};
pub use bake_inputs::{file_hash, BAKE_RECIPE};
pub use fleet::{
    gate, instance_label, launch_params, storage_inputs, storage_label, will_boot,
    DECOMMISSION_ATTR, GATED_ATTR,
};
pub use mod_tests::{default_test_image, mod_tests, MOD_TEST_RECIPE};
pub use policy::{
    pin_moved_rule, planner, planner_with, refresh_rule, reinstate_rule, vendor_moved_rule,
    ForceBake, VendorMoves, REINSTATE,
};
pub use units::{finish_image, group_spec, image_draft, os_unit, Entry, SeriesKind, Unit};
pub use vocabulary::{
    BakeCost, BakeSpec, BaseRecipeSpec, CompileError, Compiled, DefaultCost, GroupSpec,
    InstanceSpec, ModTestSpec, NoPins, NodeKind, NodeSpec, ParentSpec, PinSource, RecordedFleet,
    RecordedInstance, RecordedStorage, ResolveSpec, StorageSpec, DEFAULT_BAKE_COST,
    PINNED_PARENT_ATTR,
};

/// Compile the tree into the graph. `pins` answers pinned parents; the
/// playbook and script files are hashed from disk ([`file_hash`], each file
/// once per compile); every bake costs [`DEFAULT_BAKE_COST`].
pub fn compile(tree: &Tree, pins: &(dyn PinSource + Sync)) -> Result<Compiled, CompileError> {
    compile_with_costs(tree, pins, &DefaultCost)
}

/// [`compile`] with the scheduler's cost of each bake answered by `costs`
/// (what the runtime types say, `csis_ops::wiring`).
///
/// The compile is per series: [`os_unit`] for each OS builder,
/// [`image_draft`] + [`finish_image`] for each image, and an [`Assembler`]
/// that adds the units to the graph (OS builders, then images parents
/// first, [`image_order`]) and links each image to its parent's bake. An
/// image's unit reads the tree, its files and its pins and nothing of
/// another unit, so the images' units are made on one thread per core
/// ([`csis_schema::par_map`]) and assembled in order on this one:
/// the graph, its warnings and the first error are those of a compile on
/// one thread.
pub fn compile_with_costs(
    tree: &Tree,
    pins: &(dyn PinSource + Sync),
    costs: &dyn BakeCost,
) -> Result<Compiled, CompileError> {
    let hashes = FileHashes::default();
    compile_with(tree, pins, costs, &|p: &Path| hashes.get(p))
}

/// [`compile_with_costs`] with the content hash of every playbook and
/// script file answered by `hash` (blake3 hex, or `missing`), from any of
/// the compile's threads.
fn compile_with(
    tree: &Tree,
    pins: &(dyn PinSource + Sync),
    costs: &dyn BakeCost,
    hash: &(dyn Fn(&Path) -> String + Sync),
) -> Result<Compiled, CompileError> {
    let mut a = Assembler::default();
    for os in &tree.os_builders {
        a.add(os_unit(tree, os, costs)?)?;
    }
    let order = image_order(tree);
    let units = csis_schema::par_map(&order, |&idx| {
        let draft = image_draft(tree, &tree.images[idx], costs)?;
        Ok::<_, CompileError>(finish_image(draft, &mut |p: &Path| hash(p), pins))
    });
    for unit in units {
        a.add(unit?)?;
    }
    a.add_fleet(tree, &pins.fleet())?;
    Ok(a.finish())
}

/// The content hash of each playbook and script, each file read once per
/// compile whatever thread asks first (two threads asking at once may both
/// read it: the same bytes, the same hash).
#[derive(Default)]
struct FileHashes(Mutex<HashMap<PathBuf, String>>);

impl FileHashes {
    fn get(&self, p: &Path) -> String {
        let seen = |m: &Mutex<HashMap<PathBuf, String>>| {
            m.lock().unwrap_or_else(|e| e.into_inner()).get(p).cloned()
        };
        if let Some(h) = seen(&self.0) {
            return h;
        }
        let h = file_hash(p);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.to_path_buf(), h.clone());
        h
    }
}

/// The files a tree's compile read besides the YAML (playbooks, scripts),
/// for `csis watch`.
pub fn input_files(tree: &Tree) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = tree
        .images
        .iter()
        .flat_map(|i| tree.mod_inputs(i).into_iter().flat_map(|m| m.files))
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests;
