//! Group builders (`cfg/` `group_builders:`), storage builders
//! (`storage_builders:`) and groups (`groups/`), loaded from their strict
//! models (`csis_schema::model`, re-exported here; config.md C.8, C.9, D.4). csis runs none of their own lifecycles yet
//! (the OPA and tofu roots; a storage's is the fleet's, `crate::fleet`); what they change is the bake and its
//! validation: a base image's identity-type prerequisites name the group
//! builder of that type, its storage-type prerequisites the storage builder
//! of that type on the bake's runtime, and an image's own group gives its
//! group activation step. Values these lifecycles alone read (a group's
//! members, an Okta key) are kept as declared: an `ENC[age:...]` marker
//! there is not opened.

use crate::fleet::Attach;
use csis_schema::Origin;

pub use csis_schema::model::{
    GroupAttributes, GroupBuilderModel, GroupModel, ProviderModel, StorageBuilderModel,
};

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

/// A storage builder type: its storage type token, the runtime type its
/// storage lives on, the `variables` it takes, its own fields, and how it
/// attaches (config.md C.8).
pub struct StorageType {
    pub builder_type: &'static str,
    pub token: &'static str,
    /// `aws`, `gcloud`, `docker`.
    pub runtime_type: &'static str,
    pub variables: &'static [&'static str],
    pub own: &'static [&'static str],
    pub attach: crate::fleet::Attach,
    /// A POSIX file system (group subtrees with a share mode).
    pub posix: bool,
    /// `state: archived` is possible (a snapshot with the volume gone).
    pub supports_archive: bool,
}

pub const STORAGE_BUILDER_TYPES: &[StorageType] = &[
    // csis's own: a named local volume of the docker runtime
    StorageType {
        builder_type: "docker-volume",
        token: "volume",
        runtime_type: "docker",
        variables: &["tags"],
        own: &[],
        attach: Attach::Many,
        posix: true,
        supports_archive: false,
    },
    StorageType {
        builder_type: "tf-aws-ebs",
        token: "ebs",
        runtime_type: "aws",
        variables: &["volume_type", "encrypted", "tags"],
        own: &["size"],
        attach: Attach::Single,
        posix: true,
        supports_archive: true,
    },
    StorageType {
        builder_type: "tf-aws-efs",
        token: "efs",
        runtime_type: "aws",
        variables: &["performance_mode", "encrypted", "tags"],
        own: &[],
        attach: Attach::Many,
        posix: true,
        supports_archive: false,
    },
    StorageType {
        builder_type: "tf-aws-s3",
        token: "s3",
        runtime_type: "aws",
        variables: &["force_destroy", "tags"],
        own: &["bucket_name"],
        attach: Attach::Many,
        posix: false,
        supports_archive: false,
    },
    StorageType {
        builder_type: "tf-gcp-pd",
        token: "pd",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["size", "disk_type"],
        attach: Attach::Single,
        posix: true,
        supports_archive: true,
    },
    StorageType {
        builder_type: "tf-gcp-filestore",
        token: "filestore",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["tier", "capacity_gb"],
        attach: Attach::Many,
        posix: true,
        supports_archive: false,
    },
    StorageType {
        builder_type: "tf-gcp-gcs",
        token: "gcs",
        runtime_type: "gcloud",
        variables: &["tags"],
        own: &["bucket_name", "location"],
        attach: Attach::Many,
        posix: false,
        supports_archive: false,
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

/// A loaded group.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub display: String,
    pub model: GroupModel,
    /// The resolved group builder (canonical), when the tree declares it.
    pub builder: Option<String>,
    /// Who the group's root writes as members and admins (resolved by the
    /// load, which holds the tree's identity).
    pub membership: Membership,
    pub origin: Origin,
}

/// A group's members and admins as its root writes them: each person once,
/// compared by the name behind a marker (the load decrypts to compare and
/// keeps the values as declared, so a marker stays sealed); ordered by
/// that name; `in_both` applied; the root group's admins joined unless the
/// group says no.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    pub members: Vec<String>,
    pub admins: Vec<String>,
}
