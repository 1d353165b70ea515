//! The fleet as declared: `instances/` ([`InstanceModel`], its
//! `storages:` items [`AttachModel`]), `storages/` ([`StorageModel`]),
//! `groups/` `users:` ([`UserModel`]), and the `cfg/` builder lists
//! `instance_builders:` ([`InstanceBuilderModel`]) and `user_builders:`
//! ([`UserBuilderModel`]); config.md C.7, C.9, D.2-D.4. Strict models.
//! A user's name and profile strings are kept as declared (an
//! `ENC[age:...]` marker there is not opened).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::{JsonMap, OnFailure, ProviderModel};

/// How an instance follows its image (`image_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImagePolicy {
    /// Boot the pinned build until `upgrade instance`.
    #[default]
    Pinned,
    /// A newer head of the image plans a (gated) replacement.
    Follow,
}

/// A storage's requested state (`state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StorageState {
    #[default]
    Active,
    Archived,
    Destroyed,
}

/// An `instances/` item.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstanceModel {
    /// A hostname label (<= 63).
    pub name: String,
    /// The instance builder (`default`).
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
    /// The image it boots (its `group` is the instance's).
    pub image: String,
    /// `default`: the builder's runtime governs.
    #[serde(default)]
    pub runtime: Option<String>,
    /// `""` (or absent): the runtime's default machine type.
    #[serde(default)]
    pub machine_type: Option<String>,
    #[serde(default)]
    pub storages: Vec<AttachModel>,
    #[serde(default)]
    pub ephemeral: bool,
    #[serde(default)]
    pub on_failure: Option<OnFailure>,
    #[serde(default)]
    pub teardown_after: Option<String>,
    #[serde(default)]
    pub image_policy: ImagePolicy,
    #[serde(default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub userdata: String,
}

/// One `storages:` item of an instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AttachModel {
    /// A declared storage.
    pub name: String,
    /// `/mnt/storage` when absent.
    #[serde(default)]
    pub mount_point: Option<String>,
    /// Must be positive; not read.
    #[serde(default)]
    pub min_size: Option<u32>,
    /// Set at generation (the storage's token); accepted.
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
}

/// A `storages/` item.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StorageModel {
    pub name: String,
    /// The storage builder (`default`).
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
    /// Accepted; the builder's runtime governs.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Declared groups allowed to attach.
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub public_read: bool,
    /// `2770` (default) or `2775`.
    #[serde(default)]
    pub share_mode: Option<String>,
    #[serde(default)]
    pub state: StorageState,
    #[serde(default)]
    pub lifecycle: Option<JsonMap>,
    /// null: the storage name.
    #[serde(default)]
    pub bucket_name: Option<String>,
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// GB; null: the builder's.
    #[serde(default)]
    pub size: Option<u32>,
    // -- accepted, not read
    #[serde(default)]
    pub mount_point: Option<String>,
    #[serde(default)]
    pub singleton: Option<bool>,
    #[serde(default)]
    pub ephemeral: Option<bool>,
    #[serde(default)]
    pub generative: Option<bool>,
    #[serde(default)]
    pub source: Option<serde_json::Value>,
    #[serde(default)]
    pub is_default: bool,
}

/// `attributes:` of a user.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserAttributes {
    #[serde(default)]
    pub unix_uid: Option<u32>,
    #[serde(default)]
    pub unix_gid: Option<u32>,
    #[serde(default)]
    pub unix_user_name: Option<String>,
    #[serde(default)]
    pub windows_user_name: Option<String>,
}

/// A `users:` item of `groups/` (`aliases` refused: a strict model).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserModel {
    /// Kept as declared (may be `ENC[age:...]`).
    pub name: String,
    /// The user builder (`default`).
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    pub first_name: String,
    pub last_name: String,
    #[serde(default)]
    pub middle_name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub is_enabled: Option<bool>,
    #[serde(default)]
    pub managed: Option<bool>,
    #[serde(default)]
    pub attributes: Option<UserAttributes>,
    #[serde(default)]
    pub is_service_account: bool,
    /// posix users: the uid (at least 1024, unique).
    #[serde(default)]
    pub uid: Option<u32>,
    #[serde(default)]
    pub public_keys: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
    // -- the okta profile strings, kept as declared
    #[serde(default)]
    pub city: Option<String>,
    #[serde(default)]
    pub cost_center: Option<String>,
    #[serde(default)]
    pub country_code: Option<String>,
    #[serde(default)]
    pub department: Option<String>,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub division: Option<String>,
    #[serde(default)]
    pub employee_number: Option<String>,
    #[serde(default)]
    pub honorific_prefix: Option<String>,
    #[serde(default)]
    pub honorific_suffix: Option<String>,
    #[serde(default)]
    pub locale: Option<String>,
    #[serde(default)]
    pub manager: Option<String>,
    #[serde(default)]
    pub manager_id: Option<String>,
    #[serde(default)]
    pub mobile_phone: Option<String>,
    #[serde(default)]
    pub nick_name: Option<String>,
    #[serde(default)]
    pub organization: Option<String>,
    #[serde(default)]
    pub postal_address: Option<String>,
    #[serde(default)]
    pub preferred_language: Option<String>,
    #[serde(default)]
    pub primary_phone: Option<String>,
    #[serde(default)]
    pub profile_url: Option<String>,
    #[serde(default)]
    pub second_email: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub street_address: Option<String>,
    #[serde(default)]
    pub timezone: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub user_type: Option<String>,
    #[serde(default)]
    pub zip_code: Option<String>,
}

/// An `instance_builders:` entry (`docker`, `tofu`, `tofu-gce`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstanceBuilderModel {
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
    /// `default`.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Terraform providers (`{name, version, source, config}`).
    #[serde(default)]
    pub required_plugins: Vec<serde_json::Value>,
    #[serde(default)]
    pub state_configuration: Option<String>,
}

/// A `user_builders:` entry (`okta-tf`, `okta-tf-ro`, `posix`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserBuilderModel {
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
    pub default_user_email_template: Option<String>,
    #[serde(default)]
    pub default_user_description_template: Option<String>,
    #[serde(default)]
    pub email_as_username: Option<bool>,
    /// Kept as declared (an `ENC[age:...]` marker is not opened).
    #[serde(default)]
    pub email_domain: Option<String>,
}
