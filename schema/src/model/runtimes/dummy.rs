//! The `dummy` runtime entry's own fields (the test runtime: simulated
//! bakes, failures on purpose, its store).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::{MachineType, NoCredentials};

/// The `dummy` test runtime's own fields: nothing leaves the machine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DummyFields {
    /// Simulated seconds every bake takes.
    #[serde(default)]
    pub bake_seconds: f64,
    /// Series (image or OS builder names) whose bakes fail.
    #[serde(default)]
    pub fail: Vec<String>,
    /// Series whose vendor-image resolve fails.
    #[serde(default)]
    pub fail_resolve: Vec<String>,
    /// Where the simulated image store lives (relative to the tree root;
    /// default `.csis/dummy/<runtime>`).
    #[serde(default)]
    pub store: Option<String>,
    /// Free-form machine types, accepted for parity with docker.
    #[serde(default)]
    pub machine_types: IndexMap<String, MachineType>,
    #[serde(default)]
    pub credentials: NoCredentials,
}
