//! csis-cache: the records csis keeps about a tree.
//!
//! - `meta-state/` (committed by users): [`Lineage`] (`lineage.yaml`, one
//!   [`BuildRecord`] per successful bake, append-only, the original's schema
//!   plus csis's `inputs`/`fingerprint_recipe`/`parent_fingerprint`),
//!   [`Pins`] (`pins.yaml`) and [`Releases`] (`releases.yaml`). Files the
//!   original wrote load: unknown fields are kept and written back; an absent
//!   file is empty. Every write is atomic (temp + fsync + rename) with sorted keys.
//! - The fleet's records ([`fleet`]): [`LaunchParams`]
//!   (`launch-params.yaml`), [`InstanceState`] (`instance-state.yaml`, the
//!   generation ledger), [`StorageStates`] (`storage-state.yaml`, the
//!   storage state machine's record), and the instance pins of [`Pins`];
//!   changed only through the [`Recorder`]'s journalled fleet operations.
//! - `.csis/` (never committed): the tree lock ([`TreeLock`], `.csis/lock`),
//!   bake logs (`.csis/logs/`), runtime-local state (`.csis/dummy/`).
//!
//! Invariants: a record exists only for a bake that succeeded; a record is
//! on disk before the bake is reported finished ([`Recorder::record`]), so
//! a kill -9 loses nothing finished; the series head is the last-appended
//! record of a series on a runtime.

mod atomic;
pub mod fleet;
pub mod instance_state;
mod journal;
pub mod launch_params;
pub mod lease;
pub mod lineage;
mod lock;
pub mod mod_tests;
pub mod objstore;
pub mod pins;
pub mod plan;
mod record_files;
mod recorder;
pub mod releases;
// lineage operations
pub mod build_ref;
pub mod drift;
pub mod heads;
pub mod release_rules;
pub mod remote;
pub mod retention;
pub mod revocations;
pub mod runid;
pub mod stamp;
pub mod storage_state;
mod store;
pub mod verifications;
mod yamlio;

use std::path::{Path, PathBuf};

pub use atomic::write_atomic;
pub use fleet::{EphemeralVerdict, FleetRecords, InstanceOp, InstanceView, Machine};
pub use heads::{load_for_planning, planning_sources};
pub use instance_state::{canonical_hostname, InstanceState, INSTANCE_STATE_FILE};
pub use journal::{replay_fleet_journal, replay_journal, PinBinding};
pub use launch_params::{LaunchParams, LaunchRecord, MountRecord, LAUNCH_PARAMS_FILE};
pub use lineage::{
    run_order, BuildRecord, Capabilities, Lineage, RecordTests, Restamp, VendorImage,
};
pub use lock::TreeLock;
pub use pins::{image_key, PinMove, Pins};
pub use plan::{engine_record, LineageRecords, MetaPins};
pub use recorder::Recorder;
pub use releases::{Release, Releases};
pub use revocations::{head_unrevoked, planning_view, Revocations};
pub use runid::{age_days, parse_run_id, run_id, run_id_now};
pub use storage_state::{
    transition, StorageState, StorageStates, Transition, TransitionError, STORAGE_STATE_FILE,
};
pub use store::{MetaState, LINEAGE_FILE, PINS_FILE, RELEASES_FILE};

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: cannot read: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// Another process holds the tree lock (the CLI exits 75 with `--no-wait`).
    /// The meta-state store failed (or a conditional write lost a race
    /// that retrying cannot win).
    #[error("meta-state store {url}: {message}")]
    Store { url: String, message: String },
    #[error("the tree is locked by another csis process ({}{})", path.display(), if holder.is_empty() { String::new() } else { format!(", {holder}") })]
    Locked { path: PathBuf, holder: String },
}

impl CacheError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CacheError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// `.csis/` of a tree: what users should not commit.
#[derive(Debug, Clone)]
pub struct LocalDir {
    dir: PathBuf,
}

impl LocalDir {
    pub fn of_tree(root: &Path) -> Self {
        LocalDir {
            dir: root.join(".csis"),
        }
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `.csis/logs/`
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// The log file of one node: `.csis/logs/<label-as-file>.log`.
    pub fn log_file(&self, label: &str) -> PathBuf {
        self.logs().join(format!("{}.log", label_as_file(label)))
    }
    /// `.csis/lineage.journal`: records of the running build not yet in
    /// `meta-state/` (see [`Recorder`]).
    pub fn journal(&self) -> PathBuf {
        self.dir.join("lineage.journal")
    }
    /// `.csis/<name>/` for runtime-local state (e.g. `dummy`).
    pub fn sub(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// Create `.csis/` with a `.gitignore` of `*`, so nothing in it is
    /// committed even when the tree's own `.gitignore` forgets it.
    pub fn ensure(&self) -> Result<(), CacheError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| CacheError::io(&self.dir, e))?;
        let gi = self.dir.join(".gitignore");
        if !gi.exists() {
            write_atomic(
                &gi,
                b"# csis local state: logs, locks, caches. Never commit.\n*\n",
            )
            .map_err(|e| CacheError::io(&gi, e))?;
        }
        Ok(())
    }

    /// Take the tree lock (see [`TreeLock::acquire`]).
    pub fn lock(&self, wait: bool, on_wait: impl FnOnce(&str)) -> Result<TreeLock, CacheError> {
        self.ensure()?;
        TreeLock::acquire(&self.dir, wait, on_wait)
    }

    /// Take the tree lock without the holder's note (see
    /// [`TreeLock::acquire_unnoted`]).
    pub fn lock_unnoted(
        &self,
        wait: bool,
        on_wait: impl FnOnce(&str),
    ) -> Result<TreeLock, CacheError> {
        self.ensure()?;
        TreeLock::acquire_unnoted(&self.dir, wait, on_wait)
    }
}

/// A label as a file name: `//images/dask@aws-east2:bake` ->
/// `images_dask@aws-east2_bake`.
pub fn label_as_file(label: &str) -> String {
    label
        .trim_start_matches('/')
        .chars()
        .map(|c| match c {
            '/' | ':' | '\\' | ' ' => '_',
            c => c,
        })
        .collect()
}

/// A null YAML value where a list/map/struct is declared reads as empty
/// (the original's rule: a key with no value becomes empty).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
