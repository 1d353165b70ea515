//! Group builders (`cfg/` `group_builders:`), storage builders
//! (`storage_builders:`) and groups (`groups/`), read into strict models
//! (config.md C.8, C.9, D.4). csis runs none of their own lifecycles yet
//! (the OPA and tofu roots); what they change is the bake and its
//! validation: a base image's identity-type prerequisites name the group
//! builder of that type, its storage-type prerequisites the storage builder
//! of that type on the bake's runtime, and an image's own group gives its
//! group activation step. Values these lifecycles alone read (a group's
//! members, an Okta key) are kept as declared: an `ENC[age:...]` marker
//! there is not opened.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::JsonMap;
use crate::tree::Origin;

/// A provider a group builder's roots require (`required_providers`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderModel {
    pub name: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub config: JsonMap,
}

/// A `group_builders:` entry: `okta-tf`, `okta-tf-ro`, `posix`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupBuilderModel {
    pub name: String,
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
    #[serde(default)]
    pub state_configuration: Option<String>,
    // -- the Okta workspace (okta-tf, okta-tf-ro)
    #[serde(default)]
    pub org: Option<String>,
    #[serde(default)]
    pub team: Option<String>,
    /// Kept as declared (an `ENC[age:...]` marker is not opened).
    #[serde(default)]
    pub key: Option<String>,
    /// Kept as declared (an `ENC[age:...]` marker is not opened).
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub api_host: Option<String>,
    #[serde(default)]
    pub okta_base_url: Option<String>,
    #[serde(default)]
    pub default_user_status: Option<String>,
    #[serde(default)]
    pub required_providers: Vec<ProviderModel>,
    #[serde(default)]
    pub gateway_selector: Option<String>,
    #[serde(default)]
    pub account_discovery: Option<bool>,
    #[serde(default)]
    pub workload_connection: Option<String>,
    #[serde(default)]
    pub workload_role: Option<String>,
    /// okta-tf: the posix group builder whose login hook also makes the
    /// OPA groups exist on the machine.
    #[serde(default)]
    pub posix: Option<String>,
    #[serde(default)]
    pub posix_ssh_keys: Option<bool>,
    // -- posix
    #[serde(default)]
    pub shell: Option<String>,
    #[serde(default)]
    pub admin_sudo: Option<bool>,
}

/// The group builder types and the identity type each stands for.
pub const GROUP_BUILDER_TYPES: &[(&str, &str)] = &[
    ("okta-tf", "okta"),
    ("okta-tf-ro", "okta"),
    ("posix", "posix"),
];

/// The identity type of a group builder type (`okta`, `posix`).
pub fn identity_type_of(group_builder_type: &str) -> Option<&'static str> {
    GROUP_BUILDER_TYPES
        .iter()
        .find(|(t, _)| *t == group_builder_type)
        .map(|(_, i)| *i)
}

/// A loaded group builder.
#[derive(Debug, Clone)]
pub struct GroupBuilder {
    /// Canonical (normalized) name.
    pub name: String,
    pub display: String,
    pub model: GroupBuilderModel,
    /// `okta` or `posix`.
    pub identity_type: &'static str,
    /// The resolved `posix:` builder (okta-tf), canonical.
    pub posix: Option<String>,
    pub origin: Origin,
}

/// A `storage_builders:` entry (`tf-aws-ebs`, `tf-aws-efs`, `tf-aws-s3`,
/// `tf-gcp-pd`, `tf-gcp-filestore`, `tf-gcp-gcs`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StorageBuilderModel {
    pub name: String,
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
    /// The runtime its storage lives on (`default`).
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub required_plugins: Vec<serde_json::Value>,
    #[serde(default)]
    pub state_configuration: Option<String>,
    /// Typed module inputs per type (a misspelt key is refused at load).
    #[serde(default)]
    pub variables: JsonMap,
    // -- the types' own fields
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default)]
    pub disk_type: Option<String>,
    #[serde(default)]
    pub bucket_name: Option<String>,
    #[serde(default)]
    pub tier: Option<String>,
    #[serde(default)]
    pub capacity_gb: Option<u32>,
    #[serde(default)]
    pub location: Option<String>,
}

/// A storage builder type: its storage type token, the runtime type its
/// storage lives on, the `variables` it takes, and its own fields.
pub struct StorageType {
    pub builder_type: &'static str,
    pub token: &'static str,
    /// `aws`, `gcloud`.
    pub runtime_type: &'static str,
    pub variables: &'static [&'static str],
    pub own: &'static [&'static str],
}

pub const STORAGE_BUILDER_TYPES: &[StorageType] = &[
    StorageType {
        builder_type: "tf-aws-ebs",
        token: "ebs",
        runtime_type: "aws",
        variables: &["volume_type", "encrypted", "tags"],
        own: &["size"],
    },
    StorageType {
        builder_type: "tf-aws-efs",
        token: "efs",
        runtime_type: "aws",
        variables: &["performance_mode", "encrypted", "tags"],
        own: &[],
    },
    StorageType {
        builder_type: "tf-aws-s3",
        token: "s3",
        runtime_type: "aws",
        variables: &["force_destroy", "tags"],
        own: &["bucket_name"],
    },
    StorageType {
        builder_type: "tf-gcp-pd",
        token: "pd",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["size", "disk_type"],
    },
    StorageType {
        builder_type: "tf-gcp-filestore",
        token: "filestore",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["tier", "capacity_gb"],
    },
    StorageType {
        builder_type: "tf-gcp-gcs",
        token: "gcs",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["bucket_name", "location"],
    },
];

/// The own fields any storage builder type may carry.
pub const STORAGE_OWN_FIELDS: &[&str] = &[
    "size",
    "disk_type",
    "bucket_name",
    "tier",
    "capacity_gb",
    "location",
];

pub fn storage_type(builder_type: &str) -> Option<&'static StorageType> {
    STORAGE_BUILDER_TYPES
        .iter()
        .find(|t| t.builder_type == builder_type)
}

/// A loaded storage builder.
#[derive(Debug, Clone)]
pub struct StorageBuilder {
    pub name: String,
    pub display: String,
    pub model: StorageBuilderModel,
    /// The storage type token (`ebs`, `efs`, ...).
    pub storage_type: &'static str,
    /// The resolved runtime (canonical), when it is one the tree declares
    /// and csis runs.
    pub runtime: Option<String>,
    pub origin: Origin,
}

/// `attributes:` of a group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupAttributes {
    #[serde(default)]
    pub unix_gid: Option<u32>,
    #[serde(default)]
    pub unix_group_name: Option<String>,
    #[serde(default)]
    pub windows_group_name: Option<String>,
}

/// A `groups:` entry of `groups/`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupModel {
    pub name: String,
    /// The group builder (`default`).
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub is_root: bool,
    /// User names, kept as declared (an `ENC[age:...]` marker is not opened).
    #[serde(default)]
    pub members: Vec<String>,
    /// User names, kept as declared (an `ENC[age:...]` marker is not opened).
    #[serde(default)]
    pub admins: Vec<String>,
    #[serde(default)]
    pub in_both: Option<bool>,
    #[serde(default)]
    pub gid: Option<u32>,
    #[serde(default = "yes")]
    pub include_root_group_in_admins: bool,
    #[serde(default)]
    pub unmanaged: bool,
    #[serde(default)]
    pub attributes: Option<GroupAttributes>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
}

fn yes() -> bool {
    true
}

/// A loaded group.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub display: String,
    pub model: GroupModel,
    /// The resolved group builder (canonical), when the tree declares it.
    pub builder: Option<String>,
    pub origin: Origin,
}
