//! The original's tofu roots, written from plain data ([`RootsInput`]):
//! storage roots (`generated/storage/<builder>/storage-generation/`),
//! identity roots (`generated/identity/<builder>/{group,user}-generation/`)
//! and instance roots (`generated/instance-image/<builder>/instance-generation/`),
//! each with its partial backend file, and the entries of
//! `meta-state/state-locations.yaml` (one location per root). The team's
//! `tfmodules/` are referenced by each module call's `source`, never
//! rewritten. The gated sequence of a root (init, plan, apply under the
//! flag) runs through [`runner::Tofu`].
//!
//! Nothing here knows a tree: `csis-ops` (`ops/src/tofu_roots.rs`) maps
//! the resolved tree onto [`RootsInput`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod backend;
mod blocks;
mod files;
pub mod hv;
mod instances;
pub mod runner;

pub use backend::{BackendArg, BackendKind, Location, StateBackend};
pub use hv::Hv;

#[derive(Debug, thiserror::Error)]
pub enum TofuError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot write {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{0}")]
    Failed(String),
}

pub type Result<T> = std::result::Result<T, TofuError>;

/// Everything the roots of one run are written from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootsInput {
    /// The run id (`state-locations.yaml` `run`).
    pub run: String,
    /// `config.module_source_base`: relative to the configuration root (made
    /// relative to each root's directory), absolute, or a URL (as is).
    pub module_source_base: String,
    pub roots: Vec<Root>,
}

/// One root: one builder's workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Root {
    /// The builder's name: the workspace, the directory.
    pub builder: String,
    /// The original's builder class, named in the header comments
    /// (`TofuEbsStorageBuilder`, `OktaTfGroupBuilder`, ...).
    pub class: String,
    /// The executable that runs the root (`tofu`, a path).
    pub executable: String,
    pub required_providers: Vec<RequiredProvider>,
    /// Provider blocks; each gets `alias = <builder label>`.
    pub providers: Vec<Provider>,
    pub backend: StateBackend,
    /// The roots this one reads (`data "terraform_remote_state"`), in order.
    pub remote_states: Vec<RemoteState>,
    pub body: RootBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequiredProvider {
    pub name: String,
    pub source: String,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provider {
    pub name: String,
    pub args: Vec<(String, Hv)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteState {
    /// The workspace read (a builder name).
    pub workspace: String,
    pub backend: StateBackend,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RootBody {
    Storage(StorageRoot),
    Groups(GroupsRoot),
    Users(UsersRoot),
    Instances(InstancesRoot),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StorageRoot {
    pub storages: Vec<StorageCall>,
}

/// One storage's module call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StorageCall {
    pub name: String,
    /// The module under `module_source_base` (`aws_storage_ebs`).
    pub module: String,
    pub allowed_groups: Vec<String>,
    pub public_read: bool,
    /// `active`, `archived`, `destroyed`.
    pub requested: String,
    /// The module inputs after `source` and `providers`, in order.
    pub inputs: Vec<(String, Hv)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupsRoot {
    pub groups: Vec<GroupCall>,
    /// Credential variables (`<team>_key`, `<team>_secret`), filled from the
    /// environment (`TF_VAR_...`) at apply.
    pub variables: Vec<Variable>,
    /// The gid shim: the program that answers `{group: gid}`, and its query.
    pub gid_program: Vec<String>,
    pub gid_query: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupCall {
    pub name: String,
    pub module: String,
    pub inputs: Vec<(String, Hv)>,
    /// `unmanaged: true`: the group leaves management; its module call
    /// becomes a `removed` block that destroys nothing, and it leaves the
    /// outputs.
    #[serde(default)]
    pub unmanaged: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    pub description: String,
    pub sensitive: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UsersRoot {
    pub users: Vec<UserLookup>,
}

/// A `data "okta_user"` lookup by login; of a managed user (`okta-tf`),
/// also its `okta_user` resource, which the lookup depends on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserLookup {
    pub name: String,
    /// The login (an e-mail): clear, or sealed.
    pub login: Hv,
    /// The managed user's `okta_user` arguments, in order (none: a lookup
    /// of a user made elsewhere).
    #[serde(default)]
    pub resource: Option<Vec<(String, Hv)>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstancesRoot {
    /// The config id (`csis_config` tag of the security group).
    pub config_id: String,
    pub security_group: Option<SecurityGroup>,
    /// The identity workspace gids and enrollment tokens are read from.
    pub identity_workspace: Option<String>,
    pub instances: Vec<InstanceCall>,
}

/// `aws_security_group.csis_instances`: SSH from the ingress groups only
/// (never a CIDR), all egress; emitted when the runtime names its VPC.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecurityGroup {
    pub vpc_id: String,
    pub ssh_ingress_security_group_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceCall {
    pub name: String,
    /// Canonical hostname of the generation it stands (`<name>-NNN`).
    pub hostname: String,
    pub image: String,
    pub group: String,
    pub module: String,
    pub image_ref: ImageRef,
    pub instance_type: String,
    pub subnet_id: Option<String>,
    pub iam_instance_profile: Option<String>,
    /// Security groups worn besides `csis_instances` (never modified).
    pub security_groups: Vec<String>,
    pub tags: Vec<(String, String)>,
    pub mounts: Vec<MountInput>,
    pub ephemeral: bool,
    /// The OPA enrollment section of the user data (okta identity).
    pub enrollment: bool,
    /// The owning group's declared gid (`gid:`, a posix group): the user
    /// data's `group_gid` when no identity root publishes one.
    #[serde(default)]
    pub gid: Option<u32>,
    /// The instance's own `userdata:`, run before the launch marker.
    pub userdata: Option<String>,
}

/// The image an instance boots: by pin (`ami_id = "<build>"`), else
/// deferred (`var.<label>_ami_id`, filled from the record or the bake's
/// result through `instances.auto.tfvars`, and the name pattern).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageRef {
    Pinned { build: String },
    Deferred { name_pattern: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountInput {
    pub storage: String,
    /// `ebs`, `efs`.
    pub storage_type: String,
    /// The storage root's workspace (its builder).
    pub workspace: String,
    pub mount_point: String,
    pub group: String,
    pub share_mode: String,
    pub public_read: bool,
}

/// What [`emit`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Emission {
    pub roots: Vec<EmittedRoot>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmittedRoot {
    pub builder: String,
    /// The executable its sequence runs ([`runner::Tofu::new`]).
    pub executable: String,
    /// The root's directory, relative to `generated/`.
    pub dir: PathBuf,
    /// The partial backend file's name (for `init -backend-config=`).
    pub backend_file: String,
    pub location: Location,
    /// Files (relative to `dir`) and whether each was (re)written.
    pub files: Vec<(String, bool)>,
    /// Files of an earlier emission no longer part of the root (an
    /// undeclared instance or storage, whose plan then destroys it).
    pub removed: Vec<String>,
    /// Per instance: the sha256 of its user data template.
    pub user_data_sha256: Vec<(String, String)>,
}

impl RootBody {
    /// The lifecycle directory and the phase directory.
    pub fn place(&self) -> (&'static str, &'static str) {
        match self {
            RootBody::Storage(_) => ("storage", "storage-generation"),
            RootBody::Groups(_) => ("identity", "group-generation"),
            RootBody::Users(_) => ("identity", "user-generation"),
            RootBody::Instances(_) => ("instance-image", "instance-generation"),
        }
    }
}

impl Root {
    /// `<lifecycle>/<builder>/<phase>`, relative to `generated/`.
    pub fn dir(&self) -> PathBuf {
        let (lc, phase) = self.body.place();
        Path::new(lc).join(&self.builder).join(phase)
    }
    /// `<builder>-<phase>`, the stem of every file of the root.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.builder, self.body.place().1)
    }
    pub fn label(&self) -> String {
        hv::label(&self.builder)
    }
}

/// Write every root under `generated` (write-if-changed), refusing first,
/// before any file is written: a builder name that is not a plain name, two
/// roots at one state location, a file that would hold a registered secret
/// in clear, a module call that does not parse as HCL.
/// `config_root` is where `module_source_base` is relative to.
pub fn emit(input: &RootsInput, config_root: &Path, generated: &Path) -> Result<Emission> {
    let locations = backend::locations(input)?;
    let mut planned = Vec::new();
    for (root, mut location) in input.roots.iter().zip(locations) {
        let up = up_to_config(config_root, generated, root)?;
        // a local state's path as its backend file says it: from the root
        if let Some(p) = location.path.as_mut() {
            *p = format!("{up}{p}");
        }
        let source = module_prefix(&input.module_source_base, &up);
        let texts = files::root_files(root, &up, &source)?;
        for (name, text) in &texts {
            guard(root, name, text)?;
        }
        planned.push((root, location, texts));
    }
    let mut out = Emission::default();
    for (root, location, texts) in planned {
        let dir = generated.join(root.dir());
        let mut written = Vec::new();
        let mut sums = Vec::new();
        for (name, text) in &texts {
            written.push((name.clone(), write_if_changed(&dir.join(name), text)?));
            if let Some(inst) = name
                .strip_prefix("user-data-")
                .and_then(|n| n.strip_suffix(".sh.tftpl"))
            {
                sums.push((inst.to_string(), sha256(text)));
            }
        }
        let removed = remove_stale(&dir, &root.stem(), &texts)?;
        out.roots.push(EmittedRoot {
            builder: root.builder.clone(),
            executable: root.executable.clone(),
            removed,
            dir: root.dir(),
            backend_file: format!("{}.tfbackend.hcl", root.stem()),
            location,
            files: written,
            user_data_sha256: sums,
        });
    }
    Ok(out)
}

/// Remove the root's own files (its stem's `.tf`, the user-data templates)
/// that this emission does not write; a file of anyone else stays.
fn remove_stale(dir: &Path, stem: &str, texts: &[(String, String)]) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = (name.starts_with(&format!("{stem}-")) && name.ends_with(".tf"))
            || (name.starts_with("user-data-") && name.ends_with(".sh.tftpl"));
        if ours && !texts.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(e.path()).map_err(|err| TofuError::Io {
                path: e.path().display().to_string(),
                err,
            })?;
            removed.push(name);
        }
    }
    removed.sort();
    Ok(removed)
}

/// Write `instances.auto.tfvars` (`<label>_ami_id = "<id>"`) beside an
/// instance root, from the record or a bake of this run, before it plans,
/// and `ephemeral_present` when the root has ephemeral instances (they
/// share it: present while one is to be proved or stands, absent
/// otherwise, so that a plan of the root makes none unasked).
/// The file is run-local (the generated `.gitignore` keeps it out of git).
pub fn write_image_vars(
    root_dir: &Path,
    images: &[(String, String)],
    ephemeral_present: Option<bool>,
) -> Result<bool> {
    let mut text = String::new();
    if let Some(present) = ephemeral_present {
        text.push_str(&format!("ephemeral_present = {present}\n"));
    }
    for (instance, id) in images {
        text.push_str(&format!(
            "{}_ami_id = {}\n",
            hv::label(instance),
            hv::quote(id)
        ));
    }
    write_if_changed(&root_dir.join("instances.auto.tfvars"), &text)
}

fn guard(root: &Root, name: &str, text: &str) -> Result<()> {
    if csis_schema::secret::contains(text) {
        return Err(TofuError::Invalid(format!(
            "root {}: {name} would hold a secret in clear: refused (a secret goes in by reference: ENC[...] through local.sensitive, a credential through a variable)",
            root.builder
        )));
    }
    if name.ends_with(".tf") {
        hv::parse_check(text).map_err(|e| {
            TofuError::Invalid(format!("root {}: {name} does not parse: {e}", root.builder))
        })?;
    }
    Ok(())
}

/// The way from a root's directory up to the configuration root (`../../../../`).
fn up_to_config(config_root: &Path, generated: &Path, root: &Root) -> Result<String> {
    let dir = generated.join(root.dir());
    let rel = dir.strip_prefix(config_root).map_err(|_| {
        TofuError::Invalid(format!(
            "{} is not under the configuration root {}: refused",
            dir.display(),
            config_root.display()
        ))
    })?;
    Ok("../".repeat(rel.components().count()))
}

/// The `source` prefix of a module call: `module_source_base` relative to
/// the root's directory when it is relative to the configuration root.
fn module_prefix(base: &str, up: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.contains("://") || base.contains("::") || base.starts_with('/') {
        base.to_string()
    } else {
        format!("{up}{}", base.trim_start_matches("./"))
    }
}

pub fn sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Write `content` unless the file already holds exactly it (temp + rename).
pub fn write_if_changed(path: &Path, content: &str) -> Result<bool> {
    let io = |err| TofuError::Io {
        path: path.display().to_string(),
        err,
    };
    if std::fs::read(path).ok().as_deref() == Some(content.as_bytes()) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let tmp = path.with_extension("csis-tmp");
    std::fs::write(&tmp, content).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(true)
}

/// A builder name safe as a directory and a file stem.
pub(crate) fn plain_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(TofuError::Invalid(format!(
            "{what} {name:?} is not a plain name (letters, digits, '-', '_', '.'): refused"
        )))
    }
}
