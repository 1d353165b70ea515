//! `state_backends:`: what every builder entry shares ([`BuilderCommon`])
//! and the `s3` and `local` backends.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::values::default_true;
use crate::model::JsonMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuilderCommon {
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
}

pub const BUILDER_COMMON_KEYS: &[&str] = &[
    "name",
    "type",
    "description",
    "aliases",
    "executable",
    "is_default",
    "config",
    "gitignore",
    "tags",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssumeRole {
    pub role_arn: String,
    #[serde(default)]
    pub session_name: Option<String>,
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub external_id: Option<String>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub policy_arns: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub transitive_tag_keys: Vec<String>,
    #[serde(default)]
    pub source_identity: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssumeRoleWithWebIdentity {
    pub role_arn: String,
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub policy_arns: Vec<String>,
    #[serde(default)]
    pub session_name: Option<String>,
    #[serde(default)]
    pub web_identity_token: Option<String>,
    #[serde(default)]
    pub web_identity_token_file: Option<String>,
}

/// An `s3` state backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Backend {
    pub bucket: String,
    /// Non-empty; a trailing `/` is added.
    pub key: String,
    #[serde(default = "default_region")]
    pub region: String,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub encrypt: bool,
    #[serde(default = "default_true")]
    pub use_lockfile: bool,
    #[serde(default)]
    pub allowed_account_ids: Vec<String>,
    #[serde(default)]
    pub forbidden_account_ids: Vec<String>,
    #[serde(default)]
    pub http_proxy: Option<String>,
    #[serde(default)]
    pub https_proxy: Option<String>,
    #[serde(default)]
    pub no_proxy: Vec<String>,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    #[serde(default)]
    pub shared_config_file: Option<String>,
    #[serde(default)]
    pub shared_credentials_file: Option<String>,
    #[serde(default)]
    pub skip_credentials_validation: bool,
    #[serde(default)]
    pub skip_region_validation: bool,
    #[serde(default)]
    pub skip_requesting_account_id: bool,
    #[serde(default)]
    pub skip_metadata_api_check: bool,
    #[serde(default)]
    pub skip_s3_checksum: bool,
    #[serde(default)]
    pub use_dualstack_endpoint: bool,
    #[serde(default)]
    pub use_fips_endpoint: bool,
    #[serde(default)]
    pub endpoints: Option<IndexMap<String, String>>,
    #[serde(default)]
    pub assume_role: Option<AssumeRole>,
    #[serde(default)]
    pub assume_role_with_web_identity: Option<AssumeRoleWithWebIdentity>,
}
fn default_region() -> String {
    "us-east-2".into()
}
fn default_retries() -> u32 {
    5
}

/// A `local` state backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalBackend {
    /// Relative to the tree root, or absolute. Default `state`.
    #[serde(default = "default_state_path")]
    pub path: String,
}
fn default_state_path() -> String {
    "state".into()
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // a handful per tree
pub enum StateBackendKind {
    S3(S3Backend),
    Local(LocalBackend),
}

pub const UNUSED_STATE_BACKEND_TYPES: &[&str] = &["gcs"];
