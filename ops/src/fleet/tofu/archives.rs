//! A storage root's archives (core.md §9.1, the original's tf-aws-ebs
//! transition actions): a storage requested `archived` has no module call
//! in its root, so the root's plan destroys its volume; before that plan,
//! its data is kept in an archive (`Runtime::archive_storage`: a completed
//! snapshot named `csis-<label>-archive`). When the archive cannot be
//! taken, the root is neither planned nor applied. A storage restored
//! (recorded archived, declared active) is made from its archive by the
//! apply (`snapshot_name`), and its archive is deleted after the apply, as
//! is the archive of a storage destroyed while archived.

use std::collections::{BTreeMap, BTreeSet};

use csis_cache::storage_state::StorageState;
use csis_rules::compile::StorageSpec;
use csis_runtime::ArchiveRequest;

use super::super::apply::Apply;
use super::super::plan::{Action, FleetView};
use crate::tofu_roots::archive_name;

/// How long an archive may take to complete (a snapshot of a large volume
/// takes a while; the original waits without bound).
const ARCHIVE_TIMEOUT_S: u64 = 3 * 3600;

/// What a storage root's sequence does with archives.
#[derive(Debug, Clone, Default)]
pub(super) struct Archives {
    /// Taken before the plan (active -> archived), by canonical name.
    take: Vec<(String, ArchiveRequest)>,
    /// Deleted after an apply (archived -> active, archived -> destroyed).
    drop: Vec<(String, ArchiveRequest)>,
}

/// What became of a root's archives.
#[derive(Debug, Clone, Default)]
pub struct ArchiveOutcome {
    /// storage (canonical name) -> its archive's id, taken this run.
    pub taken: BTreeMap<String, String>,
    /// The storages whose archive the apply made obsolete but could not be
    /// deleted (it stays, and is said).
    pub kept: BTreeSet<String>,
}

impl Archives {
    /// What storage `s` of the root needs of archives, by its transition
    /// now (`action`, decided over `v`).
    pub(super) fn note(&mut self, a: &Apply<'_>, v: &FleetView, s: &StorageSpec, action: Action) {
        let was_archived = v.records.storage_state(&s.name) == Some(StorageState::Archived);
        let display = s.declared.as_ref().map_or(s.name.as_str(), |d| &d.display);
        let req = ArchiveRequest {
            storage: display.to_string(),
            archive: archive_name(display),
            config: a.tree.config.id.clone(),
            timeout_s: ARCHIVE_TIMEOUT_S,
        };
        match action {
            Action::Archive => self.take.push((s.name.clone(), req)),
            Action::Restore => self.drop.push((s.name.clone(), req)),
            Action::Destroy if was_archived => self.drop.push((s.name.clone(), req)),
            _ => {}
        }
    }

    /// Before the plan: every archive taken (or found complete). An error
    /// names the storage; the caller then plans and applies nothing.
    pub(super) async fn take(&self, a: &Apply<'_>) -> Result<BTreeMap<String, String>, String> {
        let mut taken = BTreeMap::new();
        for (name, req) in &self.take {
            (a.log)(format!(
                "archiving storage {} as {} before its volume goes",
                req.storage, req.archive
            ));
            let id = a.rt.archive_storage(req).await.map_err(|e| {
                format!(
                    "storage {}: its archive could not be taken, nothing planned or applied: {}",
                    req.storage,
                    csis_schema::secret::redact_printed(&e.to_string())
                )
            })?;
            (a.log)(format!("storage {} archived as {id}", req.storage));
            taken.insert(name.clone(), id);
        }
        Ok(taken)
    }

    /// After an apply: the archives no longer needed deleted; the storages
    /// whose archive could not be (said in the log, kept in the record).
    pub(super) async fn release(&self, a: &Apply<'_>) -> BTreeSet<String> {
        let mut kept = BTreeSet::new();
        for (name, req) in &self.drop {
            match a.rt.delete_archive(req).await {
                Ok(ids) if ids.is_empty() => {}
                Ok(ids) => (a.log)(format!(
                    "storage {}: archive {} deleted ({})",
                    req.storage,
                    req.archive,
                    ids.join(", ")
                )),
                Err(e) => {
                    (a.log)(format!(
                        "storage {}: archive {} could not be deleted (it stays): {}",
                        req.storage,
                        req.archive,
                        csis_schema::secret::redact_printed(&e.to_string())
                    ));
                    kept.insert(name.clone());
                }
            }
        }
        kept
    }
}
