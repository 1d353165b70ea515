//! What every runtime entry of `runtime_builders:` has, whatever its type
//! ([`RuntimeCommon`]), and the type-specific part ([`RuntimeKind`]).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::values::default_str;
use crate::model::{AwsFields, DockerFields, DummyFields, JsonMap};

/// Fields every runtime entry has, whatever its type.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeCommon {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The `executables:` entry this runtime runs (docker: default `docker`).
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub gitignore: Vec<String>,
    /// Merged into every image's tags.
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    /// Used by bakes and instances that name no machine type.
    pub default_machine_type: String,
    /// Validated as a foreign key; not read (as in the original).
    #[serde(default = "default_str")]
    pub default_image_builder: String,
    /// Joins every vendor-image query's owners on this runtime.
    #[serde(default)]
    pub default_owners: Option<Vec<String>>,
    /// Step 5 of the bake-user order.
    #[serde(default)]
    pub default_config_username: Option<String>,
    /// The closing retention disposes of every build here after a successful run.
    #[serde(default)]
    pub ephemeral: bool,
    /// Builds kept per series here when the image declares no `retention`.
    #[serde(default)]
    pub retention_keep: Option<u32>,
    /// `keep` or `teardown` (ephemeral instances).
    #[serde(default)]
    pub on_failure: Option<OnFailure>,
    /// `<n>m|h|d`.
    #[serde(default)]
    pub teardown_after: Option<String>,
    /// The state backend roots on this runtime inherit (`default` = the default backend).
    #[serde(default = "default_str")]
    pub state_configuration: String,
    /// Step 4 of the bake-user order (`default` names none).
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// aws: `ssm`.
    #[serde(default)]
    pub session_mechanism: Option<String>,
    /// csis extension: how many bakes may run on this runtime at once
    /// (None = no per-runtime limit beyond the scheduler's).
    #[serde(default)]
    pub max_parallel: Option<u32>,
}

/// The keys of [`RuntimeCommon`] (the rest of an entry goes to its type's model).
pub const RUNTIME_COMMON_KEYS: &[&str] = &[
    "name",
    "type",
    "description",
    "aliases",
    "executable",
    "is_default",
    "config",
    "gitignore",
    "tags",
    "default_machine_type",
    "default_image_builder",
    "default_owners",
    "default_config_username",
    "ephemeral",
    "retention_keep",
    "on_failure",
    "teardown_after",
    "state_configuration",
    "ssh_username",
    "session_mechanism",
    "max_parallel",
];

/// What happens to a failed (ephemeral) instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// Leave it standing (labelled) for a person to look at.
    Keep,
    /// Remove it.
    #[default]
    Teardown,
}

/// No credentials (docker, dummy): the mapping must be empty.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoCredentials {}

/// The type-specific part of a runtime.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RuntimeKind {
    Aws(AwsFields),
    Docker(DockerFields),
    Dummy(DummyFields),
}

/// Runtime types csis knows but does not implement yet.
pub const UNUSED_RUNTIME_TYPES: &[&str] = &["gcloud"];
