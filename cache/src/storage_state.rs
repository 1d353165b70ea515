//! `meta-state/storage-state.yaml` (core.md §3.11, §9.1): per storage its
//! state, generation, facts and every transition it went through:
//! `storages {name: {state, generation, facts {builder, type,
//! bucket_name?, archive?, id?}, history [{from, to, run, generation,
//! action?}]}}`. [`transition`] is the state machine; a transition is
//! recorded only after a real storage apply
//! ([`crate::Recorder::record_storage`]). Nothing is deleted: a destroyed
//! storage keeps its record (the tombstone).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const STORAGE_STATE_FILE: &str = "storage-state.yaml";

/// A storage's state (requested or recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageState {
    Active,
    Archived,
    Destroyed,
}

impl StorageState {
    pub const ALL: [StorageState; 3] = [
        StorageState::Active,
        StorageState::Archived,
        StorageState::Destroyed,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            StorageState::Active => "active",
            StorageState::Archived => "archived",
            StorageState::Destroyed => "destroyed",
        }
    }
}

impl std::fmt::Display for StorageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a legal transition does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransitionAction {
    /// new -> active: generation 1.
    Create,
    /// active -> archived.
    Archive,
    /// archived -> active.
    Restore,
    /// active|archived -> destroyed.
    Destroy,
    /// destroyed -> active: a new storage, generation + 1, no data continuity.
    Regenerate,
    /// The state stays.
    Keep,
}

impl TransitionAction {
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionAction::Create => "create",
            TransitionAction::Archive => "archive",
            TransitionAction::Restore => "restore",
            TransitionAction::Destroy => "destroy",
            TransitionAction::Regenerate => "regenerate",
            TransitionAction::Keep => "keep",
        }
    }
}

/// A legal move of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// `None`: never recorded (a new storage).
    pub from: Option<StorageState>,
    pub to: StorageState,
    pub action: TransitionAction,
}

impl Transition {
    /// Does it change anything?
    pub fn changes(&self) -> bool {
        self.action != TransitionAction::Keep
    }
    /// The generation after it, given the recorded one (0 when new).
    pub fn next_generation(&self, recorded: u32) -> u32 {
        match self.action {
            TransitionAction::Create => recorded.max(1),
            TransitionAction::Regenerate => recorded.saturating_add(1),
            _ => recorded,
        }
    }
}

/// An illegal move, with why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("a new storage must start `active`, not `{requested}` (it was never applied)")]
    NewMustStartActive { requested: StorageState },
    #[error("`{from}` -> `{to}` while attached to an instance: detach it first (leaving `active` needs no attachments; detach, then {to}, takes two runs)")]
    LeavingActiveAttached {
        from: StorageState,
        to: StorageState,
    },
    #[error(
        "a `{state}` storage is attached to an instance: only an `active` storage may be attached"
    )]
    AttachedNotActive { state: StorageState },
    #[error("`destroyed` -> `archived`: a destroyed storage comes back only as `active` (a regeneration, with no data)")]
    DestroyedToArchived,
    #[error(
        "`archived` is not supported by this storage's builder (only `active` or `destroyed`)"
    )]
    ArchiveUnsupported,
}

/// The state machine (core.md §9.1): legal are new -> active; active <->
/// archived; active|archived -> destroyed; destroyed -> active (a
/// regeneration); staying in a state. Leaving `active` needs no
/// attachments, and so does staying archived or destroyed; `archived` only
/// where the builder supports it; a new storage starts `active`.
pub fn transition(
    current: Option<StorageState>,
    requested: StorageState,
    attached: bool,
    supports_archive: bool,
) -> Result<Transition, TransitionError> {
    use StorageState::*;
    use TransitionAction as A;
    if requested == Archived && !supports_archive {
        return Err(TransitionError::ArchiveUnsupported);
    }
    let Some(from) = current else {
        return match requested {
            Active => Ok(Transition {
                from: None,
                to: Active,
                action: A::Create,
            }),
            r => Err(TransitionError::NewMustStartActive { requested: r }),
        };
    };
    let action = match (from, requested) {
        (Active, Active) | (Archived, Archived) | (Destroyed, Destroyed) => A::Keep,
        (Active, Archived) => A::Archive,
        (Archived, Active) => A::Restore,
        (Active | Archived, Destroyed) => A::Destroy,
        (Destroyed, Active) => A::Regenerate,
        (Destroyed, Archived) => return Err(TransitionError::DestroyedToArchived),
    };
    if requested != Active && attached {
        return Err(if from == requested {
            TransitionError::AttachedNotActive { state: from }
        } else {
            TransitionError::LeavingActiveAttached {
                from,
                to: requested,
            }
        });
    }
    Ok(Transition {
        from: current,
        to: requested,
        action,
    })
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageStates {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub storages: BTreeMap<String, StorageRecord>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One storage's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageRecord {
    pub state: StorageState,
    #[serde(default)]
    pub generation: u32,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub facts: RecordedFacts,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub history: Vec<StorageEvent>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `facts {builder, type, bucket_name?, archive?, id?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedFacts {
    #[serde(default)]
    pub builder: String,
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<Value>,
    /// The provider's id (a docker volume's name, an EBS volume id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One item of `history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageEvent {
    /// `null` for the first (written as `from: null`, as the original does).
    #[serde(default)]
    pub from: Option<StorageState>,
    pub to: StorageState,
    #[serde(default)]
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl StorageStates {
    /// A storage's recorded state (`None`: never applied).
    pub fn state(&self, name: &str) -> Option<StorageState> {
        self.storages.get(name).map(|r| r.state)
    }

    /// A storage's recorded generation (0: never applied).
    pub fn generation(&self, name: &str) -> u32 {
        self.storages.get(name).map_or(0, |r| r.generation)
    }

    /// Record a transition made by a real apply: the state, the generation,
    /// the facts (the ones given replace the recorded ones; an absent
    /// provider id keeps the recorded one) and one history event.
    /// Idempotent: a transition whose `from` is not the recorded state was
    /// applied already (a replay) and changes nothing; a `Keep` only
    /// refreshes the facts. Returns whether anything changed.
    pub fn apply(&mut self, name: &str, t: &Transition, facts: RecordedFacts, run: &str) -> bool {
        if self.state(name) != t.from {
            return false;
        }
        let generation = t.next_generation(self.generation(name));
        let rec = self
            .storages
            .entry(name.to_string())
            .or_insert_with(|| StorageRecord {
                state: t.to,
                generation,
                facts: RecordedFacts::default(),
                history: Vec::new(),
                extra: BTreeMap::new(),
            });
        let before = rec.clone();
        let mut facts = facts;
        // a regeneration is a new resource; an archive taken in place of
        // the live resource (AWS: a snapshot, the volume gone) has no id
        let gone = t.action == TransitionAction::Regenerate
            || (t.action == TransitionAction::Archive && facts.archive.is_some());
        if facts.id.is_none() && !gone {
            facts.id = rec.facts.id.take();
        }
        let mut extra = std::mem::take(&mut rec.facts.extra);
        extra.append(&mut facts.extra);
        facts.extra = extra;
        rec.facts = facts;
        if t.changes() {
            rec.state = t.to;
            rec.generation = generation;
            rec.history.push(StorageEvent {
                from: t.from,
                to: t.to,
                run: run.to_string(),
                generation: Some(generation),
                action: Some(t.action.as_str().to_string()),
                extra: BTreeMap::new(),
            });
        }
        *rec != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StorageState::*;

    fn facts(id: Option<&str>, archive: Option<&str>) -> RecordedFacts {
        RecordedFacts {
            builder: "b".into(),
            id: id.map(str::to_string),
            archive: archive.map(|a| Value::String(a.into())),
            ..RecordedFacts::default()
        }
    }

    /// An archive taken in place of the live resource (a snapshot, the
    /// volume gone) leaves no id; an archive in place (no archive fact)
    /// keeps the recorded id, as does a step that names none.
    #[test]
    fn an_archive_that_replaces_the_resource_drops_its_id_else_the_id_is_kept() {
        let create = transition(None, Active, false, true).unwrap();
        let archive = transition(Some(Active), Archived, false, true).unwrap();
        let mut s = StorageStates::default();
        assert!(s.apply("data", &create, facts(Some("vol-1"), None), "r1"));
        let mut kept = s.clone();
        assert!(s.apply("data", &archive, facts(None, Some("snap-1")), "r2"));
        let rec = &s.storages["data"];
        assert_eq!((rec.state, rec.facts.id.as_deref()), (Archived, None));
        assert_eq!(rec.facts.archive, Some(Value::String("snap-1".into())));
        assert!(kept.apply("data", &archive, facts(None, None), "r2"));
        let rec = &kept.storages["data"];
        assert_eq!(
            (rec.state, rec.facts.id.as_deref()),
            (Archived, Some("vol-1"))
        );
    }
}
