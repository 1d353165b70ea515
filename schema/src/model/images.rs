//! `images/`: an instance image, its `runtimes[]` entries, its
//! modifications, retention and release.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::values::default_str;
use crate::model::{IntOrDefault, Json, JsonMap, Tests};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ParentPolicy {
    /// Bake from the pinned parent build until `upgrade image`.
    #[default]
    Pinned,
    /// A newer parent head re-bakes the image and moves the pin.
    Follow,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    pub keep: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Release {
    pub model: String,
}

/// An image's `runtimes[]` entry: one bake per entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRuntimeEntry {
    #[serde(default = "default_str")]
    pub image_builder: String,
    #[serde(default)]
    pub machine_type: Option<String>,
    /// Step 1 of the bake-user order.
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// A fixed parent image id to bake from.
    #[serde(default)]
    pub image_identifier: Option<String>,
    #[serde(default)]
    pub owners: Option<Vec<String>>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureFileModel {
    pub path: String,
    #[serde(default)]
    pub content: String,
    /// Octal as a string; `0644` unquoted is read as the string too.
    #[serde(default)]
    pub mode: Option<Json>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureCommandModel {
    pub run: String,
    #[serde(default)]
    pub unless: Option<String>,
}

/// `ensure:` of a bash item.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureModel {
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub files: Vec<EnsureFileModel>,
    #[serde(default)]
    pub services: Vec<String>,
    #[serde(default)]
    pub commands: Vec<EnsureCommandModel>,
}

/// A modification item inside an image (`ModItemModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModItem {
    pub name: String,
    /// Mod builder name or alias; `default` or absent = the default mod builder.
    #[serde(rename = "type", default = "default_str")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Part of the build's content hash; not passed to ansible or the shell.
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// ansible: root-relative playbook paths.
    #[serde(default)]
    pub playbooks: Vec<String>,
    /// bash: inline lines (literal).
    #[serde(default)]
    pub script: Vec<String>,
    /// bash: root-relative script files.
    #[serde(default)]
    pub scripts: Vec<String>,
    /// bash: declarative steps.
    #[serde(default)]
    pub ensure: Option<EnsureModel>,
}

/// An `images:` entry (an instance image).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageModel {
    pub name: String,
    /// Primary image builder (`default`).
    #[serde(rename = "type", default = "default_str")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
    /// An OS builder or another image; the chain ends at an OS builder.
    pub source_image: String,
    /// The owning group (a `groups/` group; activated on the image).
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub runtimes: Vec<ImageRuntimeEntry>,
    #[serde(default)]
    pub modifications: Vec<ModItem>,
    #[serde(default)]
    pub tests: Tests,
    #[serde(default)]
    pub parent_policy: ParentPolicy,
    #[serde(default)]
    pub retention: Option<Retention>,
    #[serde(default)]
    pub release: Option<Release>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub architecture: Option<String>,
    #[serde(default)]
    pub primary_disk_size: Option<IntOrDefault>,
    /// Accepted, not read.
    #[serde(default)]
    pub variables: JsonMap,
    /// Accepted, not read.
    #[serde(default)]
    pub auto_update: Option<bool>,
    #[serde(default)]
    pub auto_generate_storage: Option<bool>,
    #[serde(default)]
    pub default_groups: Vec<String>,
}
