//! The fleet as the tree declares it, resolved (docs/fleet.md section 1):
//! instances (`instances/`), storages (`storages/`), users (`groups/`
//! `users:`), instance builders and user builders (`cfg/`). Every foreign
//! key is canonical (normalised) and checked when the tree loads; defaults
//! are applied, so the compile and the operations read these as they are.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use csis_schema::model::JsonMap;
use csis_schema::Origin;

pub use csis_schema::model::{
    AttachModel, ImagePolicy, InstanceBuilderModel, InstanceModel, OnFailure, StorageModel,
    StorageState, UserAttributes, UserBuilderModel, UserModel,
};

/// How many instances may mount one storage at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attach {
    Single,
    Many,
}

/// An instance: a machine booted from a build of its image.
#[derive(Debug, Clone, Serialize)]
pub struct Instance {
    /// As declared (a hostname label, <= 63 characters).
    pub name: String,
    /// Canonical image name.
    pub image: String,
    /// The image's group (canonical).
    pub group: String,
    /// Canonical instance builder.
    pub builder: String,
    /// `docker`, `tofu`, `tofu-gce`.
    pub builder_type: String,
    /// Canonical runtime (the builder's).
    pub runtime: String,
    /// The declared machine type, else None (the runtime's default).
    pub machine_type: Option<String>,
    /// Declared order; a duplicate storage name keeps the later entry.
    pub mounts: Vec<Mount>,
    pub ephemeral: bool,
    /// The instance's, else the runtime's, else teardown.
    pub on_failure: OnFailure,
    /// The instance's, else the runtime's.
    pub teardown_after: Option<String>,
    pub image_policy: ImagePolicy,
    pub availability_zone: Option<String>,
    /// Appended to the launch script.
    pub userdata: String,
    pub tags: IndexMap<String, String>,
    /// As declared.
    #[serde(skip)]
    pub model: InstanceModel,
    #[serde(skip)]
    pub origin: Origin,
}

/// One storage an instance mounts.
#[derive(Debug, Clone, Serialize)]
pub struct Mount {
    /// Canonical storage name.
    pub storage: String,
    /// Default `/mnt/storage`.
    pub mount_point: String,
    /// The storage type token: `ebs`, `efs`, `s3`, `volume`, ...
    pub storage_type: String,
    /// Canonical storage builder.
    pub builder: String,
    /// The instance's group (its `/<mount_point>/<group>/` subtree).
    pub group: String,
    /// The storage's: `2770` or `2775`.
    pub share_mode: String,
    pub public_read: bool,
}

/// A storage: a volume, file system or bucket that outlives instances.
#[derive(Debug, Clone, Serialize)]
pub struct Storage {
    /// Canonical name.
    pub name: String,
    /// As declared.
    pub display: String,
    /// Canonical storage builder.
    pub builder: String,
    /// `tf-aws-ebs`, `docker-volume`, ...
    pub builder_type: String,
    /// The token (`ebs`, `volume`, ...).
    pub storage_type: String,
    /// The builder's runtime (canonical).
    pub runtime: String,
    /// Canonical group names allowed to attach.
    pub groups: Vec<String>,
    pub public_read: bool,
    /// `2770` (default) or `2775`.
    pub share_mode: String,
    /// The requested state (default active).
    pub requested: StorageState,
    pub attach: Attach,
    pub posix: bool,
    pub supports_archive: bool,
    /// The item's `size`, else the builder's.
    pub size_gb: Option<u32>,
    pub bucket_name: Option<String>,
    pub availability_zone: Option<String>,
    pub lifecycle: Option<JsonMap>,
    pub config: JsonMap,
    /// The builder's tags, then the item's (later wins).
    pub tags: IndexMap<String, String>,
    /// As declared.
    #[serde(skip)]
    pub model: StorageModel,
    #[serde(skip)]
    pub origin: Origin,
}

/// A user of `groups/` (`users:`).
#[derive(Debug, Clone, Serialize)]
pub struct User {
    /// As declared (a user name may be `ENC[...]`: kept as declared).
    pub name: String,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    /// The posix uid (`uid`, else `attributes.unix_uid`).
    pub uid: Option<u32>,
    pub public_keys: Vec<String>,
    /// The canonical user builder, when the tree declares one.
    pub builder: Option<String>,
    /// As declared (profile strings kept, `ENC[...]` not opened).
    #[serde(skip)]
    pub model: UserModel,
    #[serde(skip)]
    pub origin: Origin,
}

/// An `instance_builders:` entry, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceBuilder {
    /// Canonical name.
    pub name: String,
    /// As declared.
    pub display: String,
    /// `docker`, `tofu`, `tofu-gce`.
    pub type_: String,
    /// Canonical runtime.
    pub runtime: String,
    pub is_default: bool,
    pub executable: Option<String>,
    pub state_configuration: Option<String>,
    pub required_plugins: Vec<serde_json::Value>,
    pub config: JsonMap,
    pub tags: IndexMap<String, String>,
    /// As declared.
    #[serde(skip)]
    pub model: InstanceBuilderModel,
    #[serde(skip)]
    pub origin: Origin,
}

/// A `user_builders:` entry, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct UserBuilder {
    /// Canonical name.
    pub name: String,
    /// As declared.
    pub display: String,
    /// `okta-tf`, `okta-tf-ro`, `posix`.
    pub type_: String,
    pub is_default: bool,
    pub model: UserBuilderModel,
    #[serde(skip)]
    pub origin: Origin,
}

/// An instance builder type: the runtime type it runs on.
pub struct InstanceType {
    pub builder_type: &'static str,
    /// `docker`, `aws`, `gcloud` (gcloud: not run by csis).
    pub runtime_type: &'static str,
}

/// The instance builder types.
pub const INSTANCE_BUILDER_TYPES: &[InstanceType] = &[
    InstanceType {
        builder_type: "docker",
        runtime_type: "docker",
    },
    InstanceType {
        builder_type: "tofu",
        runtime_type: "aws",
    },
    InstanceType {
        builder_type: "tofu-gce",
        runtime_type: "gcloud",
    },
];

pub fn instance_type(builder_type: &str) -> Option<&'static InstanceType> {
    INSTANCE_BUILDER_TYPES
        .iter()
        .find(|t| t.builder_type == builder_type)
}

/// The user builder types.
pub const USER_BUILDER_TYPES: &[&str] = &["okta-tf", "okta-tf-ro", "posix"];

/// The default mount point of an instance's storage.
pub const DEFAULT_MOUNT_POINT: &str = "/mnt/storage";
/// The share modes a storage may declare; the first is the default.
pub const SHARE_MODES: &[&str] = &["2770", "2775"];
