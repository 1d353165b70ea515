//! `meta-state/verifications.yaml`: `verifications [...]`, the last 500
//! verdicts of `csis verify instance` (core.md §3.11), oldest first. Each
//! entry is `{instance, runtime, expected_build, ok, run, time, checks:
//! [{name, ok, detail, evidence}]}`; unknown fields survive a rewrite.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::revocations::{read_meta_file, write_meta_file};
use crate::{CacheError, MetaState};

pub const VERIFICATIONS_FILE: &str = "verifications.yaml";
/// How many verdicts the file keeps.
pub const KEPT_VERIFICATIONS: usize = 500;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verifications {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub verifications: Vec<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Verifications {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, VERIFICATIONS_FILE)
    }
    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, VERIFICATIONS_FILE, self)
    }
    /// Append one verdict (read, append, keep the last 500, write).
    pub fn append(meta: &MetaState, entry: Value) -> Result<(), CacheError> {
        let mut all = Verifications::load(meta)?;
        all.verifications.push(entry);
        let extra = all.verifications.len().saturating_sub(KEPT_VERIFICATIONS);
        all.verifications.drain(..extra);
        all.save(meta).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_500_and_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaState::at(dir.path());
        std::fs::write(
            dir.path().join(VERIFICATIONS_FILE),
            "note: kept\nverifications:\n  - {instance: old, ok: true, extra_field: 1}\n",
        )
        .unwrap();
        for i in 0..KEPT_VERIFICATIONS {
            Verifications::append(
                &meta,
                serde_json::json!({"instance": format!("i{i}"), "ok": false}),
            )
            .unwrap();
        }
        let v = Verifications::load(&meta).unwrap();
        assert_eq!(v.verifications.len(), KEPT_VERIFICATIONS);
        assert_eq!(v.verifications[0]["instance"], "i0");
        assert_eq!(v.extra["note"], "kept");
    }
}
