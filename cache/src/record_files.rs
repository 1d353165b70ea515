//! The records' file access: how each record of `meta-state/` (the fleet's
//! three files, `revocations.yaml`) is read from and written to a
//! [`MetaState`], locally or on the tree's store. It lives above the record
//! files, beside the store, so that a record file is data and its rules
//! only, and names no [`MetaState`] (the store reads the fleet records and
//! the journal, which name the records: the other way would be a loop).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::fleet::FleetRecords;
use crate::instance_state::{InstanceState, INSTANCE_STATE_FILE};
use crate::launch_params::{LaunchParams, LAUNCH_PARAMS_FILE};
use crate::revocations::{Revocations, REVOCATIONS_FILE};
use crate::storage_state::{StorageStates, STORAGE_STATE_FILE};
use crate::{yamlio, CacheError, MetaState};

impl Revocations {
    /// Read `meta-state/revocations.yaml` (empty when absent).
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, REVOCATIONS_FILE)
    }

    /// Write it atomically; false when unchanged.
    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, REVOCATIONS_FILE, self)
    }
}

impl InstanceState {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, INSTANCE_STATE_FILE)
    }

    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, INSTANCE_STATE_FILE, self)
    }
}

impl LaunchParams {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, LAUNCH_PARAMS_FILE)
    }

    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, LAUNCH_PARAMS_FILE, self)
    }
}

impl StorageStates {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, STORAGE_STATE_FILE)
    }

    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, STORAGE_STATE_FILE, self)
    }
}

impl FleetRecords {
    /// The three files (each empty when absent).
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        Ok(FleetRecords {
            launch: LaunchParams::load(meta)?,
            instances: InstanceState::load(meta)?,
            storages: StorageStates::load(meta)?,
        })
    }

    /// Write the three files (each atomic, each only when changed).
    /// Returns whether any changed.
    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        let a = self.launch.save(meta)?;
        let b = self.instances.save(meta)?;
        let c = self.storages.save(meta)?;
        Ok(a || b || c)
    }
}

// ---- the meta-state files this crate's record operations own ----

pub(crate) fn read_meta_file<T: DeserializeOwned + Serialize + Default>(
    meta: &MetaState,
    file: &str,
) -> Result<T, CacheError> {
    if meta.is_remote() {
        return meta.read(file);
    }
    let path = meta.dir().join(file);
    match std::fs::read_to_string(&path) {
        Ok(text) => yamlio::from_text(&path.to_string_lossy(), &text)
            .map_err(|message| CacheError::Parse { path, message }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(CacheError::io(&path, e)),
    }
}

pub(crate) fn write_meta_file<T: Serialize>(
    meta: &MetaState,
    file: &str,
    value: &T,
) -> Result<bool, CacheError> {
    if meta.is_remote() {
        return meta.write(file, value);
    }
    let path = meta.dir().join(file);
    let text = yamlio::to_text(value).map_err(|message| CacheError::Parse {
        path: path.clone(),
        message,
    })?;
    crate::write_atomic(&path, text.as_bytes()).map_err(|e| CacheError::io(&path, e))
}
