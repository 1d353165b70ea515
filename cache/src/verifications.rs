//! `meta-state/verifications.yaml`: `verifications [...]`, the last 500
//! verdicts of `csis verify instance` (core.md §3.11), oldest first. Each
//! entry is `{instance, runtime, expected_build, ok, run, time, checks:
//! [{name, ok, detail, evidence}]}`; unknown fields survive a rewrite.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record_files::{read_meta_file, write_meta_file};
use crate::{CacheError, MetaState};

pub const VERIFICATIONS_FILE: &str = "verifications.yaml";
/// How many verdicts the file keeps.
pub const KEPT_VERIFICATIONS: usize = 500;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verifications {
    /// Each entry is read as a [`Verdict`]: an entry that is not one (no
    /// `instance`, an `ok` that is not a boolean, a scalar) is refused at
    /// its line, never written back.
    #[serde(default, deserialize_with = "verdicts")]
    pub verifications: Vec<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// What every entry holds at least; the rest is kept as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Verdict {
    instance: String,
    #[serde(deserialize_with = "crate::release_rules::strict_bool")]
    ok: bool,
    #[serde(flatten)]
    extra: BTreeMap<String, Value>,
}

fn verdicts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    use serde::de::Error;
    let v: Option<Vec<Verdict>> = Option::deserialize(d)?;
    v.unwrap_or_default()
        .into_iter()
        .map(|x| serde_json::to_value(x).map_err(D::Error::custom))
        .collect()
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
        let path = meta.dir().join(VERIFICATIONS_FILE);
        serde_json::from_value::<Verdict>(entry.clone()).map_err(|e| CacheError::Parse {
            path,
            message: format!("not a verdict: {e}"),
        })?;
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
    fn junk_entries_are_refused_at_their_line_and_never_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaState::at(dir.path());
        let junk = "verifications:\n  - {instance: a, ok: true}\n  - just a string\n";
        std::fs::write(dir.path().join(VERIFICATIONS_FILE), junk).unwrap();
        let e = Verifications::load(&meta).unwrap_err().to_string();
        assert!(e.contains("verifications.yaml:3"), "{e}");
        let e = Verifications::append(&meta, serde_json::json!({"instance": "b", "ok": true}))
            .unwrap_err();
        assert!(e.to_string().contains("verifications.yaml"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(VERIFICATIONS_FILE)).unwrap(),
            junk,
            "a refused file is left as it is"
        );
        let yes = "verifications:\n  - {instance: a, ok: 'yes'}\n";
        std::fs::write(dir.path().join(VERIFICATIONS_FILE), yes).unwrap();
        let e = Verifications::load(&meta).unwrap_err().to_string();
        assert!(e.contains("verifications.yaml:2"), "{e}");
        assert!(e.contains("boolean"), "{e}");
    }

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
