//! `executables:`: the tools a builder runs, with their version floors.

use serde::{Deserialize, Serialize};

use crate::model::values::is_default_sentinel;
use crate::model::JsonMap;

/// An `executables:` entry: a tool a builder runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Executable {
    pub name: String,
    /// Picks the version checker; `default` = same as the name.
    #[serde(rename = "type", default = "default_exe_type")]
    pub type_: String,
    /// Version floor: a PEP 440 specifier set (`">=1.14, <1.15"`).
    #[serde(default)]
    pub version: Option<String>,
    /// Absolute path or a name on PATH; default = the name.
    #[serde(default)]
    pub binary: Option<String>,
    #[serde(default)]
    pub prepended_arguments: Vec<String>,
    #[serde(default)]
    pub appended_arguments: Vec<String>,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
}

fn default_exe_type() -> String {
    "executable".into()
}

impl Executable {
    /// The binary to run (`binary`, else the name).
    pub fn binary(&self) -> &str {
        self.binary.as_deref().unwrap_or(&self.name)
    }
    /// The checker type (`default` = the name).
    pub fn checker(&self) -> &str {
        if is_default_sentinel(&self.type_) {
            &self.name
        } else {
            &self.type_
        }
    }
}
