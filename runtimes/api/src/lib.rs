//! csis-runtime: the hook surface every runtime answers (the seeds' runtime
//! builder hooks), and the types that cross it.
//!
//! A runtime is one place where images bake and live: an AWS region, a Docker
//! daemon, or the `dummy` test runtime. The engine never calls a runtime; the
//! `csis` binary turns graph nodes into hook calls. A hook that a runtime
//! cannot answer returns [`RuntimeError::Unsupported`], and the caller makes
//! no claim from it (silence is never a claim).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
pub use tokio_util::sync::CancellationToken;

pub mod fleet;
mod output;
pub mod probe;
pub mod recipe;
mod steps;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
use csis_schema::tags;
pub use fleet::{
    launch_script, ArchiveRequest, LaunchRequest, LaunchScript, LaunchUser, LaunchedInstance,
    MountRequest, StorageFacts, StorageRequest,
};
pub use output::{stream_output, OutputStream};
pub use steps::{BakeStep, Ensure, EnsureCommand, EnsureFile, TestCommand};

/// Does an image with these lineage tags belong to another tree than the
/// one whose config id is `config`? An image without the tag (made before
/// csis stamped it, or by hand) belongs to no other tree: it stays visible
/// (a foreign image to adopt or dispose), but is never adopted silently.
/// `config` is the tree's id as written; the tag may hold the original's
/// form of it (lowercased, [`tags::config_value`]) or the id as written.
pub fn of_other_tree(tags: &BTreeMap<String, String>, config: &str) -> bool {
    tags.get(tags::CONFIG)
        .is_some_and(|c| !tags::is_config_of(c, config))
}

pub mod owner;

/// Why a hook did not answer.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// This runtime kind has no answer for the hook.
    #[error("runtime {runtime}: `{hook}` is not supported by runtime type {kind}")]
    Unsupported {
        runtime: String,
        kind: String,
        hook: &'static str,
    },
    /// The daemon or cloud did not answer (unreachable, credentials, ...).
    #[error("{0}")]
    Unavailable(String),
    /// The runtime answered and refused (not found, in use, invalid pin, ...).
    #[error("{0}")]
    Refused(String),
    /// The operation ran and failed (a bake step exited non-zero, ...).
    #[error("{0}")]
    Failed(String),
    /// Stopped by cancellation (Ctrl-C); whatever was started was cleaned up.
    #[error("cancelled")]
    Cancelled,
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// What a resolve node asks: find the vendor image of an OS builder's
/// runtime entry, by query or by a pinned id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResolveRequest {
    /// `//os/<name>@<runtime>`
    pub label: String,
    /// The OS builder (series) name.
    pub series: String,
    pub family: String,
    pub family_version: String,
    pub architecture: String,
    /// Owners merged in the seed's order (OS builder, runtime default_owners, entry).
    pub owners: Vec<String>,
    /// The merged query (`filters:` and any runtime-specific keys), as declared.
    pub query: serde_json::Value,
    /// A pinned vendor image id (AMI id, docker digest reference); skips the query.
    pub image_id: Option<String>,
}

/// A vendor image found by a resolve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResolvedImage {
    /// What a bake starts from: an AMI id, a docker digest reference or image id.
    pub id: String,
    pub name: Option<String>,
    pub owner: Option<String>,
    pub creation_date: Option<String>,
    /// Extra facts (root device name, ...), runtime-specific.
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
}

/// The fact of a [`ResolvedImage`] that says its reference can name
/// another image later (`"true"`: a docker tag, not a digest): the base's
/// record keeps it, and every plan reads the reference again with
/// [`Runtime::vendor_now`].
pub const FACT_MOVABLE: &str = "movable";

/// Where a bake starts from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum BakeParent {
    /// A vendor image found by the resolve node.
    Vendor(ResolvedImage),
    /// A csis build of the parent series on the same runtime.
    Build { series: String, build_id: String },
    /// The parent series bakes earlier in this run, so its build is not
    /// known when the child is emitted: the runtime finds the parent's
    /// newest output by name (AWS: owners `self`, `name = "<name_prefix>*"`,
    /// most recent; docker: the parent's movable tag
    /// `<repository>:<series>`). A bake always gets a [`BakeParent::Build`].
    Deferred {
        series: String,
        /// The parent's final name without its timestamp
        /// (`<os>-<runtime>` for a base image, `<image>-<image builder>`).
        name_prefix: String,
    },
}

/// Receives a bake's output, line by line: the progress line shows the last
/// one, the bake's log file keeps all of them.
pub trait LogSink: Send + Sync {
    fn line(&self, line: &str);
}

/// A sink that drops everything (tests, quiet hooks).
pub struct NullLog;
impl LogSink for NullLog {
    fn line(&self, _line: &str) {}
}

/// Everything one bake node needs, computed before anything bakes.
#[derive(Clone)]
pub struct BakeRequest {
    /// `//images/<name>@<runtime>` or `//os/<name>@<runtime>`.
    pub label: String,
    pub series: String,
    pub runtime: String,
    /// The image builder entry that bakes it (its type selects native/packer).
    pub image_builder: String,
    /// The artifact's final name (`<series>-<builder>-<timestamp>` or
    /// `<os>-<runtime>-<timestamp>`), before the runtime makes it valid.
    pub final_name: String,
    /// The floating per-series name a child bakes from when its parent is
    /// deferred (docker: `<repository>:<prefix>`).
    pub prefix: String,
    pub parent: BakeParent,
    pub machine_type: Option<String>,
    pub disk_size_gb: Option<u32>,
    /// The user the bake's steps run as (the bake-user order); None = root/runtime default.
    pub bake_user: Option<String>,
    /// Package manager family of the chain root (`apt`, `dnf`, `apk`), for settle and `ensure`.
    pub package_manager: Option<String>,
    /// The chain root's OS family (`debian`, `rhel`, `amzn`, ...): device names, default users.
    pub family: Option<String>,
    /// The chain root's architecture (`x86_64`, `arm64`, ...).
    pub architecture: Option<String>,
    /// Modifications, in declared order.
    pub steps: Vec<BakeStep>,
    /// In-bake verification, run last; a failing one fails the bake.
    pub tests: Vec<TestCommand>,
    /// The rest of the recipe: a base image's update, admin user and
    /// prerequisites; an image's group activation and bundle
    /// ([`recipe::lower`] turns it and the steps into what runs).
    pub recipe: recipe::Recipe,
    /// The image builder's declared `required_plugins` (packer builders).
    pub required_plugins: Vec<recipe::RequiredPlugin>,
    /// Lineage tags/labels (`csis_series`, `csis_parent`, `csis_run`,
    /// `csis_fingerprint`, `csis_identity_types`, `csis_storage_types`) merged
    /// over builder/image tags (lineage wins).
    pub tags: BTreeMap<String, String>,
    /// The configuration tree's root: playbooks and scripts are relative to it.
    pub tree_root: PathBuf,
    /// This node's directory under `generated/` (emission goes there).
    pub emit_dir: PathBuf,
    pub log: Arc<dyn LogSink>,
    pub cancel: CancellationToken,
    /// `csis build --keep-failed`: a failed bake's machine is kept (marked
    /// [`tags::KEPT_FAILED`]) instead of removed; only asked of a runtime
    /// whose [`Runtime::keeps_failed_bakes`] says it can.
    pub keep_failed: bool,
}

impl std::fmt::Debug for BakeRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BakeRequest")
            .field("label", &self.label)
            .field("final_name", &self.final_name)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

/// What a successful bake produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BakeOutcome {
    /// The build id: AMI id, docker image id (`sha256:...`), dummy id.
    pub build_id: String,
    /// The artifact's name as made.
    pub name: String,
    /// Number of in-bake assertions that ran and passed.
    pub assertions: usize,
}

/// What a mod test found (`csis test-mods`, core.md §3.11): the
/// modification applied in a throwaway container of its OS family, then
/// applied a second time, which must change nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModTestOutcome {
    /// The container it ran in (removed when the test ends).
    pub container: String,
    /// The image the container was made from, as the runtime found it.
    pub image: String,
    /// The first apply: `Err` holds why it failed.
    pub first: std::result::Result<(), String>,
    /// The second apply, when the first succeeded.
    pub second: Option<std::result::Result<(), String>>,
    /// What the second apply changed: for an ansible mod its recap's
    /// `changed=N`, for a shell mod each path whose type, mode, owner or
    /// content it changed (`C /etc/motd`). Empty = idempotent.
    pub changes: Vec<String>,
}

/// One image in the runtime's store that carries csis lineage tags.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImageFacts {
    pub build_id: String,
    pub name: Option<String>,
    pub created: Option<String>,
    /// Lineage tags (`csis_series`, `csis_parent`, ...) as the runtime sees them now.
    pub tags: BTreeMap<String, String>,
    /// The runtime holds it without any of the names a bake gives a build
    /// (docker: committed and never tagged, a bake stopped between its
    /// commit and its tag): what an interrupted bake leaves.
    #[serde(default)]
    pub unnamed: bool,
    /// The tags naming its series rather than itself that it holds, in
    /// full (docker: `<repository>:<series>` and the release tags
    /// `<repository>:<series>--<model>`; what moves from build to build).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series_tags: Vec<String>,
}

/// What a disposal did: whether the build was there, and what the runtime
/// kept or freed besides, said so a report can be honest about it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DisposeOutcome {
    /// The build was on the runtime (`false`: it was already gone).
    pub existed: bool,
    /// One line each: what stays on the runtime although the build is
    /// disposed (docker: a parent's layers while child images stand on
    /// them), or what else went with it (such a parent, freed with its last
    /// child). Empty when the build went and nothing else changed.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// What else lives on the runtime (containers, instances, volumes) that may
/// reference a build.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Inventory {
    /// Machines (containers, instances), kept failed bakes excepted.
    pub instances: Vec<InstanceFacts>,
    pub volumes: Vec<VolumeFacts>,
    /// Failed bakes' machines `csis build --keep-failed` kept.
    #[serde(default)]
    pub kept_failed: Vec<KeptBake>,
}

/// A failed bake's machine kept for inspection (`csis build
/// --keep-failed`), marked [`tags::KEPT_FAILED`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KeptBake {
    /// The machine's name (docker: the container's) or id.
    pub name: String,
    pub series: Option<String>,
    /// The run whose bake failed (the mark's value).
    pub run: Option<String>,
    /// The `csis_config` label/tag, when present.
    pub config: Option<String>,
    /// The command that opens a shell in it.
    pub inspect: String,
}

/// A volume (docker volume, cloud disk) the runtime holds, with its labels.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VolumeFacts {
    /// The volume's name (docker) or id (cloud disk).
    pub name: String,
    /// The `csis_config` label/tag, when present.
    pub config: Option<String>,
    /// Every label/tag it carries (`csis_config` included).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl VolumeFacts {
    /// A volume from its name and labels (`config` read from `csis_config`).
    pub fn new(name: impl Into<String>, labels: BTreeMap<String, String>) -> Self {
        VolumeFacts {
            name: name.into(),
            config: labels.get(tags::CONFIG).cloned(),
            labels,
        }
    }
}

/// The name, as reports print a volume.
impl std::fmt::Display for VolumeFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstanceFacts {
    pub id: String,
    pub name: Option<String>,
    /// The build it was created from.
    pub image: Option<String>,
    pub power: PowerState,
    /// The `csis_config` label/tag, when present.
    pub config: Option<String>,
    /// Every label/tag it carries (a fleet instance's `csis_instance`,
    /// `csis_build`, `csis_generation` among them).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// What csis runs it as: a bake's machine, a post-bake test's, or
    /// neither (an instance).
    #[serde(default)]
    pub role: MachineRole,
}

/// What a machine on a runtime is to csis, by its marks.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MachineRole {
    /// Not marked: an instance (a container or VM of a build, or anything else).
    #[default]
    Instance,
    /// A bake's machine (docker: a `csis-bake-*` container; AWS: a builder instance).
    Bake,
    /// A post-bake test's machine ([`tags::TEST_MACHINE`]).
    Test,
}

impl MachineRole {
    /// The role by a machine's marks: [`tags::TEST_MACHINE`], else a bake mark.
    pub fn of(labels: &BTreeMap<String, String>, bake_marks: &[&str]) -> MachineRole {
        let set = |k: &str| labels.get(k).is_some_and(|v| !v.is_empty());
        if set(tags::TEST_MACHINE) {
            MachineRole::Test
        } else if bake_marks.iter().any(|k| set(k)) {
            MachineRole::Bake
        } else {
            MachineRole::Instance
        }
    }
}

/// An instance's power state, in the seeds' vocabulary (`running`,
/// `stopped`, `starting`, `stopping`, `absent`, `unknown`). `starting` and
/// `stopping` are transitions (EC2's `pending`; `stopping`/`shutting-down`):
/// neither is `running` nor `stopped`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    Running,
    Stopped,
    Starting,
    Stopping,
    Absent,
    Unknown,
}

/// The result of a command run in an instance's session (SSM, docker exec).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// One check of `verify_instance` (`startup scripts`, `booted image`,
/// `data disks mounted`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifyCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// The last lines of output (at most 20).
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// What a post-bake test asks of a runtime: launch the new build as a test
/// machine for a bounded time, marked so that a leftover (its csis killed)
/// is found and removed by the next build.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestMachineRequest {
    /// The build to launch (docker image id, AMI id).
    pub build_id: String,
    pub series: String,
    /// The machine's name (`csis-test-<runtime>-<series>-<pid>`), made
    /// valid by the runtime.
    pub name: String,
    /// Who launched it: `host:pid` (the mark's owner).
    pub owner: String,
    /// The machine stops by itself after this many seconds, even if csis
    /// is killed before it removes it.
    pub lifetime_s: u64,
    /// How long to wait until it answers a session command.
    pub ready_timeout_s: u64,
}

/// A launched test machine: what `run_session_command` and
/// `remove_test_machine` take.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestMachine {
    /// The container name / instance id.
    pub id: String,
    /// The image it booted, as the runtime reports it.
    pub booted: Option<String>,
}

/// This process as a mark's owner: `host:pid`.
pub fn owner_here() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// This machine's host name (`/etc/hostname`, `HOSTNAME`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether the owner `host:pid` of a mark is gone: on this host, no process
/// with that pid; from another host (or unparsable) we cannot tell, and
/// the answer is no.
pub fn owner_gone(owner: &str) -> bool {
    let Some((host, pid)) = owner.rsplit_once(':') else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == host_name() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// One line of `csis preflight`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreflightLine {
    pub ok: bool,
    pub what: String,
    pub detail: String,
}

/// One finding of an online check at load (network discovery, daemon answer).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OnlineFinding {
    /// Field path in the runtime entry the finding is about (`networking.subnets[1].subnet_id`).
    pub path: String,
    pub message: String,
    /// `false` for a warning.
    pub error: bool,
}

/// The hook surface. Every method has a default that answers `Unsupported`
/// except the identity ones; a runtime overrides what it can answer.
#[async_trait]
pub trait Runtime: Send + Sync {
    /// The runtime entry's name (`docker-local`).
    fn name(&self) -> &str;
    /// The runtime type (`docker`, `aws`, `dummy`).
    fn kind(&self) -> &str;

    fn unsupported(&self, hook: &'static str) -> RuntimeError {
        RuntimeError::Unsupported {
            runtime: self.name().to_string(),
            kind: self.kind().to_string(),
            hook,
        }
    }

    /// Online checks run at load for runtimes a command touches (network
    /// discovery, the daemon answering). `--offline` skips them.
    async fn check_online(&self) -> Result<Vec<OnlineFinding>> {
        Ok(Vec::new())
    }

    /// `csis preflight`: does the daemon/cloud answer, with what version or identity.
    async fn preflight(&self) -> Result<Vec<PreflightLine>> {
        Err(self.unsupported("preflight"))
    }

    /// Find the vendor image (`query_provider_image` / `query_provider_image_by_id`).
    async fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        let _ = req;
        Err(self.unsupported("resolve"))
    }

    /// What a vendor reference that can move (a resolve's
    /// [`FACT_MOVABLE`]) names today, read without fetching anything (one
    /// inspect): the [`ResolvedImage`] with the `id` a resolve would
    /// record. `None` when the reference cannot move (a digest, a query a
    /// runtime does not re-read: `update.refresh_days` is how new vendor
    /// images come in) or the runtime does not hold it.
    async fn vendor_now(&self, req: &ResolveRequest) -> Result<Option<ResolvedImage>> {
        let _ = req;
        Ok(None)
    }

    /// Write what the image builder needs under `req.emit_dir` (packer roots,
    /// scripts). Returns the files written or left unchanged. Native bakes emit nothing.
    async fn emit(&self, req: &BakeRequest) -> Result<Vec<PathBuf>> {
        let _ = req;
        Ok(Vec::new())
    }

    /// Bake one image. Must clean up whatever it started, on success, failure
    /// and cancellation.
    async fn bake(&self, req: &BakeRequest) -> Result<BakeOutcome> {
        let _ = req;
        Err(self.unsupported("bake"))
    }

    /// Give a build an interrupted bake left on the runtime (found again by
    /// its lineage tags and adopted instead of baked again) what that bake
    /// would have given it once made: docker tags it with its name and,
    /// with `head` (it becomes its series' newest build, as when a bake
    /// adopts it), its series' movable tag, as a commit is tagged. Returns
    /// one line for the log per name given (or not given, and why). A
    /// runtime whose builds are named when they are made (an AMI) has
    /// nothing to do.
    async fn adopt(&self, build_id: &str, head: bool) -> Result<Vec<String>> {
        let _ = (build_id, head);
        Ok(Vec::new())
    }

    /// Test one modification (`req.steps`, one step) in a throwaway
    /// machine made from the vendor image `req.parent`: the settle step,
    /// the mod's lowered steps ([`recipe::lower_mods`]), then the same
    /// steps again, judged for idempotence (an ansible mod by its recap's
    /// changed count, a shell mod by what the second run changed on the
    /// filesystem). The machine is removed whatever happens; nothing is
    /// committed. A failed apply is an answer, not an error.
    async fn test_mod(&self, req: &BakeRequest) -> Result<ModTestOutcome> {
        let _ = req;
        Err(self.unsupported("test_mod"))
    }

    /// Remove leftovers of bakes that were killed (stale bake containers,
    /// orphaned build instances). Returns what was removed, for the report.
    async fn clean_stale_bakes(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Can a failed bake of this image builder keep its machine for
    /// inspection ([`BakeRequest::keep_failed`])? `csis build
    /// --keep-failed` refuses a bake on a runtime that cannot.
    fn keeps_failed_bakes(&self, image_builder: &str) -> bool {
        let _ = image_builder;
        false
    }

    /// Remove a failed bake's kept machine ([`Inventory::kept_failed`];
    /// `Ok(false)`: it was gone already).
    async fn remove_kept_bake(&self, name: &str) -> Result<bool> {
        let _ = name;
        Err(self.unsupported("remove_kept_bake"))
    }

    /// Stamp lineage facts known only after the bake (`csis_parent`,
    /// `csis_fingerprint`, `csis_release`).
    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        let _ = (build_id, tags);
        Err(self.unsupported("retag_image"))
    }

    /// Every image on the runtime that carries `csis_series`.
    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        Err(self.unsupported("query_images"))
    }

    /// Containers/instances and volumes, with what they were made from.
    async fn inventory(&self) -> Result<Inventory> {
        Err(self.unsupported("inventory"))
    }

    /// Live references the runtime can see to a build (containers, instances,
    /// launch templates). Empty = nothing uses it.
    async fn image_users(&self, build_id: &str) -> Result<Vec<String>> {
        let _ = build_id;
        Err(self.unsupported("image_users"))
    }

    /// Delete a build and everything that belongs to it (tags, snapshots).
    /// `Ok(false)` when it was already gone.
    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        let _ = build_id;
        Err(self.unsupported("dispose_image"))
    }

    /// [`Runtime::dispose_image`], with what the runtime kept or freed
    /// besides ([`DisposeOutcome::notes`]). The default runs `dispose_image`
    /// and has nothing more to say.
    async fn dispose_image_outcome(&self, build_id: &str) -> Result<DisposeOutcome> {
        self.dispose_image(build_id)
            .await
            .map(|existed| DisposeOutcome {
                existed,
                notes: Vec::new(),
            })
    }

    /// The commands that mark a release (for runner scripts and `--dry-run`).
    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        let _ = (build_id, series, model);
        Vec::new()
    }

    /// Apply a release mark on the runtime.
    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        let _ = (build_id, series, model);
        Err(self.unsupported("release"))
    }

    // ---- instance hooks ----

    async fn query_instance_power_state(&self, instance: &str) -> Result<PowerState> {
        let _ = instance;
        Err(self.unsupported("query_instance_power_state"))
    }
    async fn start_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let _ = (instance, timeout_s);
        Err(self.unsupported("start_instance"))
    }
    async fn stop_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let _ = (instance, timeout_s);
        Err(self.unsupported("stop_instance"))
    }
    /// (provider id, hostname)
    async fn query_instance_identity(&self, instance: &str) -> Result<(String, Option<String>)> {
        let _ = instance;
        Err(self.unsupported("query_instance_identity"))
    }
    async fn query_instance_boot_image(&self, instance: &str) -> Result<Option<String>> {
        let _ = instance;
        Err(self.unsupported("query_instance_boot_image"))
    }
    async fn run_session_command(
        &self,
        instance: &str,
        command: &str,
        timeout_s: u64,
    ) -> Result<SessionResult> {
        let _ = (instance, command, timeout_s);
        Err(self.unsupported("run_session_command"))
    }
    /// Launch `req.build_id` as a test machine (docker: a container under
    /// `--init`; AWS: an instance in the default subnet with the session
    /// instance profile), marked [`csis_schema::tags::TEST_MACHINE`] and
    /// [`TEST_MACHINE_OWNER`], and wait until it answers a session command.
    /// On failure (or cancellation) whatever was started is removed.
    async fn launch_test_machine(&self, req: &TestMachineRequest) -> Result<TestMachine> {
        let _ = req;
        Err(self.unsupported("launch_test_machine"))
    }
    /// Remove a test machine (`Ok(false)`: it was gone already).
    async fn remove_test_machine(&self, id: &str) -> Result<bool> {
        let _ = id;
        Err(self.unsupported("remove_test_machine"))
    }
    /// The deferred verification of a launched instance
    /// (`verify_instance(name, expected_build, expect_mounts, timeout)`): the
    /// launch completion marker within `timeout_s`, the booted image against
    /// `expected_build`, and, when `expect_mounts > 0`, the data disks
    /// mounted. A failed check is an answer (`ok: false`), not an error.
    async fn verify_instance(
        &self,
        instance: &str,
        expected_build: &str,
        expect_mounts: usize,
        timeout_s: u64,
    ) -> Result<Vec<VerifyCheck>> {
        let _ = (instance, expected_build, expect_mounts, timeout_s);
        Err(self.unsupported("verify_instance"))
    }

    // ---- fleet hooks (docs/fleet.md §3) ----

    /// Launch an instance: a machine of `req.build_id` named by
    /// `req.hostname`, labelled `req.labels`, its storages mounted, running
    /// `req.launch_script` at start. A machine of that name that is not
    /// this tree's instance is refused and never touched.
    async fn launch_instance(&self, req: &LaunchRequest) -> Result<LaunchedInstance> {
        let _ = req;
        Err(self.unsupported("launch_instance"))
    }
    /// Remove an instance (by id or hostname); `Ok(false)`: already gone.
    /// Refused for a machine that is not a csis instance (of this tree).
    async fn remove_instance(&self, id: &str) -> Result<bool> {
        let _ = id;
        Err(self.unsupported("remove_instance"))
    }
    /// Create one generation of a storage; idempotent (an existing one is
    /// answered as it is).
    async fn create_storage(&self, req: &StorageRequest) -> Result<StorageFacts> {
        let _ = req;
        Err(self.unsupported("create_storage"))
    }
    /// Destroy a storage by its id; `Ok(false)`: already gone. Refused
    /// (naming its users) while a machine uses it.
    async fn destroy_storage(&self, id: &str) -> Result<bool> {
        let _ = id;
        Err(self.unsupported("destroy_storage"))
    }
    /// Archive a storage's data before its live resource goes (see
    /// [`ArchiveRequest`]); the archive's id. An error when there is nothing
    /// to archive: the caller then destroys nothing.
    async fn archive_storage(&self, req: &ArchiveRequest) -> Result<String> {
        let _ = req;
        Err(self.unsupported("archive_storage"))
    }
    /// Delete the archives named `req.archive` (after a restore from one,
    /// or with the storage's demise); their ids (none: already gone).
    async fn delete_archive(&self, req: &ArchiveRequest) -> Result<Vec<String>> {
        let _ = req;
        Err(self.unsupported("delete_archive"))
    }
    /// This tree's storages (by `csis_config`), with their users.
    async fn query_storages(&self) -> Result<Vec<StorageFacts>> {
        Err(self.unsupported("query_storages"))
    }
    /// This tree's instances (by `csis_config`, labelled `csis_instance`).
    async fn query_instances(&self) -> Result<Vec<InstanceFacts>> {
        Err(self.unsupported("query_instances"))
    }
}

/// Shared handle to a runtime.
pub type DynRuntime = Arc<dyn Runtime>;
