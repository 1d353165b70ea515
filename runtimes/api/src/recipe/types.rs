//! The recipe's types: what a bake's recipe declares (base image, instance
//! image, plugins), what a runtime tells the lowering of its machines
//! ([`Target`]), and what the lowering gives ([`Step`], [`Lowered`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files::write_if_changed;

/// The OS update policy in force for a base image (`update:`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct UpdateRecipe {
    /// `none`, `security`, `packages` or `full`.
    pub policy: String,
    pub packages: Vec<String>,
    pub exclude: Vec<String>,
    /// Package -> version, in declared order.
    pub pin: Vec<(String, String)>,
}

/// One declared identity type of a base image and the group builder that
/// supplies its prerequisites.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdentityPrereq {
    /// `okta` or `posix`.
    pub identity_type: String,
    /// The group builder (`opa-groups`).
    pub builder: String,
}

/// One declared storage type of a base image and the storage builder of it
/// on this runtime (None: no plugin for it on this runtime).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StoragePrereq {
    /// `ebs`, `efs`, `s3`, `volume`, ...
    pub storage_type: String,
    pub builder: Option<String>,
}

/// What a base image bake adds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BaseRecipe {
    /// The OS builder's `type` (`rhel`, `debian`, ...) and family.
    pub os_type: String,
    pub family: String,
    pub family_version: String,
    /// `x86_64`, `arm64`, ... (repository names).
    pub architecture: String,
    pub update: UpdateRecipe,
    pub admin_user: String,
    pub admin_public_keys: Vec<String>,
    pub identity: Vec<IdentityPrereq>,
    pub storage: Vec<StoragePrereq>,
}

/// The image's own group, activated on the image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupActivation {
    pub group: String,
    /// `okta` or `posix`.
    pub identity_type: String,
    /// The login hook that makes the group exist on the machine (a posix
    /// group, or an okta group whose builder names a posix builder).
    pub posix: bool,
}

/// One modification in the local bundle (`csis-mods/<image>/MANIFEST.yaml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BundleMod {
    pub name: String,
    /// The mod builder's name (`ansible`, `bash`).
    pub builder: String,
    /// `ansible` or `bash`.
    pub operation: String,
    /// `ansible`, `declared` or `unknown`.
    pub idempotent: String,
    pub content_hash: String,
}

/// What an instance image bake adds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ImageRecipe {
    pub group: Option<GroupActivation>,
    /// One per modification, in the order of the bake's steps.
    pub bundle: Vec<BundleMod>,
}

/// A packer plugin the image builder declares (`required_plugins`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequiredPlugin {
    pub name: String,
    pub version: String,
    pub source: String,
}

/// The recipe of a bake beyond its modifications and tests (which are the
/// request's `steps` and `tests`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Recipe {
    pub base: Option<BaseRecipe>,
    pub image: Option<ImageRecipe>,
}

/// The session agent a runtime bakes into base images (AWS: SSM).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionAgent {
    /// `ssm`.
    pub mechanism: String,
    pub install: Vec<String>,
    pub verify: Vec<String>,
}

/// What a runtime tells the lowering about its bake machines.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub runtime: String,
    /// Steps run as an unprivileged user and need `sudo` (cloud machines);
    /// `false`: they run as root (a docker bake container).
    pub sudo: bool,
    /// The machine runs systemd (services can be enabled).
    pub systemd: bool,
    /// Extra settle lines, after the cloud-init wait (AWS: Systems Manager
    /// quiet; docker: `sudo` and `python3` when a package manager allows).
    pub settle: Vec<String>,
    pub session_agent: Option<SessionAgent>,
}

/// What a lowered step does.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Nothing runs: the comment says why (a storage type without plugin).
    Note,
    /// Shell lines (one script), through the step runner when `runner`.
    Shell {
        lines: Vec<String>,
        runner: bool,
        env: Vec<String>,
        execute_command: Option<String>,
        /// The lines hold a secret: this 0600 file outside the emission
        /// holds them (and `env` as `export` lines). A runtime that writes
        /// the step to disk (a packer root) names this file instead of
        /// writing the lines or `env`; one that runs it from memory runs
        /// the lines.
        private: Option<PathBuf>,
    },
    /// Script files (`rel` under the emission directory, `abs` on disk).
    Scripts {
        scripts: Vec<(String, PathBuf)>,
        runner: bool,
        env: Vec<String>,
        execute_command: Option<String>,
    },
    /// One playbook run with ansible-playbook from the baking machine.
    Ansible {
        playbook: (String, PathBuf),
        /// `-e ansible_python_interpreter=...`, the mod builder's own, then
        /// `-e <config as JSON>`.
        extra_arguments: Vec<String>,
        binary: String,
    },
    /// A directory of the emission (`rel`, ending in `/`) copied to `destination`.
    Upload { rel: String, destination: String },
    /// The in-bake verification: `set -e` and one line per assertion.
    Verify {
        lines: Vec<String>,
        assertions: usize,
        /// As for [`StepKind::Shell`]: the lines hold a secret (a test's
        /// command), this 0600 file holds them.
        private: Option<PathBuf>,
    },
}

/// One step of a bake.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The `#` comment before the step (without `# `).
    pub comment: String,
    pub kind: StepKind,
}

/// A file the steps read, written under the emission directory.
#[derive(Debug, Clone, PartialEq)]
pub struct EmittedFile {
    /// Relative to the emission directory.
    pub rel: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// A bake, lowered.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    pub steps: Vec<Step>,
    /// The local modification bundle, the scripts and playbooks the steps read.
    pub files: Vec<EmittedFile>,
    /// The number of in-bake assertions.
    pub assertions: usize,
}

impl Lowered {
    /// Write [`Lowered::files`] under `dir`, each only when it changed.
    pub fn write_files(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for f in &self.files {
            let path = dir.join(&f.rel);
            write_if_changed(&path, &f.content, f.mode)?;
            out.push(path);
        }
        Ok(out)
    }
}

impl Target {
    /// `cmd` with the privilege the target needs.
    pub(super) fn su(&self, cmd: &str) -> String {
        if self.sudo {
            format!("sudo {cmd}")
        } else {
            cmd.to_string()
        }
    }
}
