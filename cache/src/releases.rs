//! `meta-state/releases.yaml`: every release, and per model the current
//! released build of each series (core.md §3.11, §5.4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Releases {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub releases: Vec<Release>,
    /// `model -> {image -> build}`.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub current: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub image: String,
    pub build_id: String,
    pub model: String,
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub capabilities: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Releases {
    /// Is this build the current release of any model?
    pub fn is_current(&self, build_id: &str) -> bool {
        self.current
            .values()
            .any(|m| m.values().any(|b| b == build_id))
    }
}
