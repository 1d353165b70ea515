//! Group builders (`cfg/` `group_builders:`), storage builders
//! (`storage_builders:`) and groups (`groups/`) as declared: strict models.
//! Values only their own lifecycles read (a group's members, an Okta key)
//! are kept as declared: an `ENC[age:...]` marker there is not opened.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::JsonMap;

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
