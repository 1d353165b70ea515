//! `meta-state/mod-tests.yaml` (core.md §3.11): `results {content_hash:
//! {status, idempotent, ...}}`, written by `csis test-mods`, read by the
//! release rules (`require_mod_tests`) and by the plan of the mod tests (a
//! mod is tested again when its record's fingerprint is not its test's).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record_files::write_meta_file;
use crate::release_rules::{ModTests, MOD_TESTS_FILE};
use crate::{CacheError, MetaState};

/// One mod's latest test, by its content hash.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModTestRecord {
    /// `pass` (both applies succeeded) or `fail`.
    pub status: String,
    /// The second apply changed nothing; null when it did not run.
    #[serde(default)]
    pub idempotent: Option<bool>,
    /// The image and the mod's name in it.
    #[serde(default)]
    pub image: String,
    #[serde(default, rename = "mod")]
    pub mod_name: String,
    /// `ansible` or `bash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// The image the throwaway container was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_image: Option<String>,
    /// Where it ran: a docker runtime of the tree, or `local` (the local daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The fingerprint of the test (the mod's content and its base).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// When it ran (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the second apply changed (at most [`MAX_CHANGES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The changes a record keeps.
pub const MAX_CHANGES: usize = 20;

impl ModTestRecord {
    /// A pass that is idempotent: what release asks of a mod.
    pub fn passed(&self) -> bool {
        self.status == "pass" && self.idempotent != Some(false)
    }
}

impl ModTests {
    /// Write it atomically; false when unchanged.
    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, MOD_TESTS_FILE, self)
    }

    /// The record of `content_hash`, when one is readable as a record.
    pub fn get(&self, content_hash: &str) -> Option<ModTestRecord> {
        self.results
            .get(content_hash)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Record the latest test of a mod (read, replace, write).
    pub fn record(
        meta: &MetaState,
        content_hash: &str,
        mut rec: ModTestRecord,
    ) -> Result<(), CacheError> {
        rec.changes.truncate(MAX_CHANGES);
        let mut all = ModTests::load(meta)?;
        let value = serde_json::to_value(&rec).map_err(|e| CacheError::Parse {
            path: meta.dir().join(MOD_TESTS_FILE),
            message: e.to_string(),
        })?;
        all.results.insert(content_hash.to_string(), value);
        all.save(meta).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_by_content_hash_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("meta-state")).unwrap();
        let meta = MetaState::of_tree(dir.path());
        let rec = ModTestRecord {
            status: "pass".into(),
            idempotent: Some(false),
            image: "web".into(),
            mod_name: "setup".into(),
            changes: (0..30).map(|i| format!("C /f{i}")).collect(),
            ..Default::default()
        };
        ModTests::record(&meta, "h1", rec).unwrap();
        let all = ModTests::load(&meta).unwrap();
        let got = all.get("h1").unwrap();
        assert_eq!(got.mod_name, "setup");
        assert_eq!(got.changes.len(), MAX_CHANGES);
        assert!(!got.passed());
        assert_eq!(all.results["h1"]["idempotent"], Value::Bool(false));
        assert!(all.get("h2").is_none());
    }
}
