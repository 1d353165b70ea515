//! The fleet across the hook surface (docs/fleet.md §3): what a runtime is
//! asked to launch (an instance from a build, with its storages mounted)
//! and to create (a storage of one generation), what it answers, the
//! labels both carry, and the launch script every runtime runs on a new
//! machine ([`launch_script`], the original's user data).

use std::collections::BTreeMap;

use csis_schema::tags;
use serde::{Deserialize, Serialize};

/// Launch one instance: a machine of `build_id`, named `hostname`, its
/// storages mounted, the launch script run on its first start (and, as the
/// original's user data is not, on every restart: it is idempotent).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchRequest {
    /// The declared name.
    pub instance: String,
    /// The canonical hostname `<name>-NNN`; docker: also the container name.
    pub hostname: String,
    /// The build it boots (docker image id, AMI id).
    pub build_id: String,
    /// The generation (`NNN` of the hostname).
    pub generation: u32,
    /// A machine type the runtime declares (None: the runtime's default).
    pub machine_type: Option<String>,
    /// In declared order.
    pub mounts: Vec<MountRequest>,
    /// Rendered by [`launch_script`].
    pub launch_script: String,
    /// [`instance_labels`]: `csis_instance`, `csis_config`, `csis_build`,
    /// `csis_generation` (and the instance's declared tags the caller adds).
    pub labels: BTreeMap<String, String>,
    pub ephemeral: bool,
}

/// One storage mounted on an instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MountRequest {
    /// The storage's declared name.
    pub storage: String,
    /// The runtime's id of it ([`StorageFacts::id`]: docker: the volume's name).
    pub volume: String,
    /// Where it is mounted (`/mnt/storage` by default).
    pub mount_point: String,
    /// The instance's group: the owner of `<mount_point>/<group>/`.
    pub group: String,
    /// The mode of that subtree (`2770`, `2775`).
    pub share_mode: String,
    /// Others may read the subtree (`o+rx`).
    pub public_read: bool,
}

/// What a launch made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchedInstance {
    /// The provider's id (docker: the container id; AWS: the instance id).
    pub id: String,
    /// The hostname it carries.
    pub hostname: String,
}

/// Create one generation of a storage (idempotent: an existing one of this
/// tree, storage and generation is answered as it is).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StorageRequest {
    /// The declared name.
    pub storage: String,
    pub generation: u32,
    /// [`storage_labels`]: `csis_storage`, `csis_config`, `csis_generation`
    /// (and the storage's declared tags the caller adds).
    pub labels: BTreeMap<String, String>,
}

/// Keep a storage's data as an archive before its live resource is
/// destroyed (the original's `active -> archived` transition action): AWS
/// snapshots the EBS volume named `storage` and waits until the snapshot is
/// complete. Idempotent: an archive named `archive` already there is
/// answered (once complete).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArchiveRequest {
    /// The declared name (the volume's `Name` tag).
    pub storage: String,
    /// The archive's name (the snapshot's `Name` tag): the original's
    /// `csis-<label>-archive`.
    pub archive: String,
    /// The tree's id: a volume of another tree is never archived as this
    /// tree's (its `csis_config` tag, when it carries one, must be ours).
    pub config: String,
    /// Wait this long at most for the archive to complete.
    pub timeout_s: u64,
}

/// A storage as the runtime holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StorageFacts {
    /// The declared name (its `csis_storage` label).
    pub storage: String,
    /// The runtime's id (docker: the volume's name; AWS: the volume id).
    pub id: String,
    pub labels: BTreeMap<String, String>,
    /// The machines that use it now (docker: container names), sorted.
    pub users: Vec<String>,
}

impl StorageFacts {
    /// Its generation (the `csis_generation` label), when it carries one.
    pub fn generation(&self) -> Option<u32> {
        self.labels.get(tags::GENERATION)?.parse().ok()
    }
}

/// The labels of an instance: its name, its tree (the original's form of
/// the id, [`tags::config_value`]), its build and its generation.
pub fn instance_labels(
    instance: &str,
    config_id: &str,
    build_id: &str,
    generation: u32,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        (tags::INSTANCE.to_string(), instance.to_string()),
        (tags::CONFIG.to_string(), tags::config_value(config_id)),
        (tags::BUILD.to_string(), build_id.to_string()),
        (tags::GENERATION.to_string(), generation.to_string()),
    ])
}

/// The labels of a storage: its name, its tree and its generation.
pub fn storage_labels(storage: &str, config_id: &str, generation: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (tags::STORAGE.to_string(), storage.to_string()),
        (tags::CONFIG.to_string(), tags::config_value(config_id)),
        (tags::GENERATION.to_string(), generation.to_string()),
    ])
}

/// Where the launch script says it is done: written last, so its presence
/// means every step before it succeeded.
pub const LAUNCH_MARKER: &str = "/var/lib/csis/launch-applied";

/// An admin user of the instance's group, made on the machine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchUser {
    pub name: String,
    /// Its posix uid (None: the machine chooses).
    pub uid: Option<u32>,
    /// OpenSSH public keys, appended to its `authorized_keys` once each.
    #[serde(default)]
    pub public_keys: Vec<String>,
}

/// What the launch script of one instance is made of.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchScript {
    /// The declared name.
    pub instance: String,
    /// The canonical hostname `<name>-NNN`.
    pub hostname: String,
    /// The instance's (its image's) group.
    pub group: String,
    /// The group's posix gid (None: the machine chooses).
    pub gid: Option<u32>,
    /// The group's admins, made members of it.
    pub admins: Vec<LaunchUser>,
    pub mounts: Vec<MountRequest>,
    /// The instance's `userdata`, run as it is (in a subshell) after the
    /// csis steps; empty: none.
    pub userdata: String,
}

mod script;
pub use script::launch_script;
