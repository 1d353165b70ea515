//! `meta-state/lineage.yaml`: one record per successful bake, append-only
//! (core.md §4.8), with csis's fields added (`inputs`, `fingerprint_recipe`,
//! `parent_fingerprint`). Unknown fields of records written by the original
//! (or by a newer csis) are kept and written back unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The whole file: `builds: [record...]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lineage {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub builds: Vec<BuildRecord>,
    /// Top-level keys this version does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The capability stamp `{identity_types[], storage_types[]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub identity_types: Vec<String>,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub storage_types: Vec<String>,
}

impl Capabilities {
    /// Neither axis declares anything.
    pub fn is_empty(&self) -> bool {
        self.identity_types.is_empty() && self.storage_types.is_empty()
    }
}

/// `tests {in_bake, assertions}`: a record exists only because the bake,
/// including its in-bake verification, succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordTests {
    #[serde(default = "yes")]
    pub in_bake: bool,
    #[serde(default)]
    pub assertions: u64,
}

fn yes() -> bool {
    true
}

impl Default for RecordTests {
    fn default() -> Self {
        RecordTests {
            in_bake: true,
            assertions: 0,
        }
    }
}

/// `fingerprint_restamped [ {run, previous, reason} ]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restamp {
    pub run: String,
    pub previous: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One successful bake (core.md §4.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The runtime's artifact id (AMI id, docker image id, dummy id).
    pub build_id: String,
    /// The series (image name, or OS builder name for a base image).
    pub series: String,
    /// The runtime it lives on; a record without one matches any runtime
    /// when looking for a series head (the original's rule).
    #[serde(default)]
    pub runtime: Option<String>,
    /// Final artifact name.
    #[serde(default)]
    pub name: Option<String>,
    /// The parent build id it was baked from, or `vendor`.
    #[serde(default)]
    pub parent: Option<String>,
    /// Full 64-hex input fingerprint.
    #[serde(default)]
    pub input_fingerprint: Option<String>,
    /// Run id (`2026_11_30t07_44_28_123456`); lexicographic = chronological.
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub capabilities: Capabilities,
    /// Mod records (`name, type, operation, idempotent, content_hash, run`).
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub mods: Vec<Value>,
    #[serde(default)]
    pub local_mods: bool,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub tests: RecordTests,
    /// The base image's effective update policy, or null.
    #[serde(default)]
    pub update: Option<Value>,
    /// Image names from this image to its root; `[]` for a base image.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub chain: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_by: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::null_as_default"
    )]
    pub fingerprint_restamped: Vec<Restamp>,

    // ---- csis fields ----
    /// The canonical inputs the fingerprint was computed over (for
    /// `csis plan --explain`: an exact field-by-field diff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// The fingerprint recipe version (`csis-bake-v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_recipe: Option<String>,
    /// The parent's fingerprint this bake hashed (`follow`), or the pinned
    /// parent build's recorded fingerprint (`pinned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_fingerprint: Option<String>,

    /// Fields this version does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl BuildRecord {
    /// A record with the identity fields set and everything else empty.
    pub fn new(
        build_id: impl Into<String>,
        series: impl Into<String>,
        runtime: impl Into<String>,
    ) -> Self {
        BuildRecord {
            build_id: build_id.into(),
            series: series.into(),
            runtime: Some(runtime.into()),
            name: None,
            parent: None,
            input_fingerprint: None,
            run: None,
            capabilities: Capabilities::default(),
            mods: Vec::new(),
            local_mods: false,
            tests: RecordTests::default(),
            update: None,
            chain: Vec::new(),
            imported: None,
            imported_by: None,
            fingerprint_restamped: Vec::new(),
            inputs: None,
            fingerprint_recipe: None,
            parent_fingerprint: None,
            extra: BTreeMap::new(),
        }
    }

    /// Does this record count for `runtime` (records without a runtime match any)?
    pub fn on_runtime(&self, runtime: &str) -> bool {
        self.runtime.as_deref().is_none_or(|r| r == runtime)
    }
}

impl Lineage {
    /// The series head on a runtime: the LAST-APPENDED record of that series
    /// whose runtime is `runtime` (or unset). Append order, not timestamps.
    pub fn head(&self, series: &str, runtime: &str) -> Option<&BuildRecord> {
        self.builds
            .iter()
            .rev()
            .find(|b| b.series == series && b.on_runtime(runtime))
    }

    /// The record of one build id.
    pub fn find(&self, build_id: &str) -> Option<&BuildRecord> {
        self.builds.iter().find(|b| b.build_id == build_id)
    }

    /// Append a record; a duplicate build id is ignored (returns false).
    pub fn add_build(&mut self, record: BuildRecord) -> bool {
        if self.find(&record.build_id).is_some() {
            return false;
        }
        self.builds.push(record);
        true
    }

    /// Every record of a series on a runtime, in append order.
    pub fn series_builds<'a>(
        &'a self,
        series: &'a str,
        runtime: &'a str,
    ) -> impl Iterator<Item = &'a BuildRecord> + 'a {
        self.builds
            .iter()
            .filter(move |b| b.series == series && b.on_runtime(runtime))
    }
}
