//! `os_builders:`: base images, their update policy and their
//! `runtimes[]` entries.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::values::default_str;
use crate::model::{IntOrDefault, JsonMap, OneOrMany, Tests};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpdatePolicyKind {
    #[default]
    None,
    Security,
    Packages,
    Full,
}

/// `update:` of an OS builder.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpdatePolicy {
    #[serde(default)]
    pub policy: UpdatePolicyKind,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub pin: IndexMap<String, String>,
    #[serde(default)]
    pub refresh_days: Option<u32>,
}

/// An OS builder: a base image (`OsBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsBuilderModel {
    pub name: String,
    /// `rhel`, `fedora` (dnf); `debian`, `ubuntu` (apt); `alpine` (apk).
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub gitignore: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    pub family: String,
    pub family_version: String,
    #[serde(default)]
    pub runtimes: Vec<OsRuntimeEntry>,
    #[serde(default = "default_str")]
    pub architecture: String,
    #[serde(default)]
    pub default_primary_disk_size: IntOrDefault,
    #[serde(default)]
    pub owners: Vec<String>,
    #[serde(default)]
    pub query: JsonMap,
    /// Step 3 of the bake-user order.
    #[serde(default)]
    pub config_username: Option<String>,
    #[serde(default)]
    pub auto_update: bool,
    #[serde(default)]
    pub update: Option<UpdatePolicy>,
    #[serde(default)]
    pub identity_types: Vec<String>,
    #[serde(default)]
    pub storage_types: Vec<String>,
    #[serde(default = "default_admin_user")]
    pub admin_user: String,
    #[serde(default)]
    pub admin_public_keys: Option<OneOrMany>,
    #[serde(default)]
    pub local_test_image: Option<String>,
    #[serde(default)]
    pub tests: Tests,
    /// rhel: accepted, not read.
    #[serde(default)]
    pub subscription_id: Option<String>,
}

fn default_admin_user() -> String {
    "csisadmin".into()
}

impl OsBuilderModel {
    /// The package manager of the family: `dnf`, `apt` or `apk`.
    pub fn package_manager(&self) -> &'static str {
        package_manager(&self.type_, &self.family)
    }
    /// The effective update policy (`auto_update` = full when `update` is absent).
    pub fn effective_update(&self) -> UpdatePolicy {
        match &self.update {
            Some(u) => u.clone(),
            None if self.auto_update => UpdatePolicy {
                policy: UpdatePolicyKind::Full,
                ..Default::default()
            },
            None => UpdatePolicy::default(),
        }
    }
}

/// `dnf`, `apt` or `apk` for an OS type/family.
pub fn package_manager(type_: &str, family: &str) -> &'static str {
    match (type_, family) {
        ("debian" | "ubuntu", _) | (_, "debian" | "ubuntu") => "apt",
        ("alpine", _) | (_, "alpine") => "apk",
        _ => "dnf",
    }
}

pub const OS_TYPES: &[&str] = &["rhel", "fedora", "debian", "ubuntu", "alpine"];

/// An OS builder's `runtimes[]` entry (`OSBuilderBaseImageBuilderSubconfig`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsRuntimeEntry {
    #[serde(default = "default_str")]
    pub image_builder: String,
    /// A label, unique within the builder.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A fixed vendor image (AWS: AMI id; docker: a digest reference).
    #[serde(default)]
    pub image_id: Option<String>,
    #[serde(default)]
    pub auto_update: Option<bool>,
    #[serde(default)]
    pub default_machine_type: Option<String>,
    #[serde(default)]
    pub default_primary_disk_size: Option<IntOrDefault>,
    /// Merged over the builder's.
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    /// Appended to the builder's (after the runtime's `default_owners`).
    #[serde(default)]
    pub owners: Vec<String>,
    /// Merged over the builder's, key by key.
    #[serde(default)]
    pub query: JsonMap,
    /// Step 2 of the bake-user order.
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// Replaces the builder's `tests` for this runtime.
    #[serde(default)]
    pub tests: Option<Tests>,
    #[serde(default)]
    pub config: JsonMap,
}
