//! The steps of a bake, resolved from an image's `modifications:` and
//! `tests:` so that a runtime needs nothing of the configuration tree.

use std::path::PathBuf;

use csis_schema::model::ModKind;
use serde::{Deserialize, Serialize};

/// One modification, in declared order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BakeStep {
    /// A `bash-remote` item: inline lines (literal), script files, an `ensure` block.
    Shell {
        name: String,
        inline: Vec<String>,
        /// Absolute paths of the script files (resolved against the tree root).
        scripts: Vec<PathBuf>,
        ensure: Option<Ensure>,
        /// `environment_vars` of the mod builder (`KEY=VALUE`).
        env: Vec<String>,
        /// `execute_command` of the mod builder, if declared.
        execute_command: Option<String>,
    },
    /// An `ansible` item: its playbooks, each run with `ansible-playbook`.
    Ansible {
        name: String,
        /// Absolute paths of the playbooks.
        playbooks: Vec<PathBuf>,
        extra_arguments: Vec<String>,
        /// The `ansible-playbook` binary to run (from `executables:`).
        binary: String,
        /// The item's `config:`, passed to ansible as extra vars.
        #[serde(default)]
        extra_vars: serde_json::Map<String, serde_json::Value>,
    },
}

impl BakeStep {
    /// The mod kind it lowers (its row of `MOD_KINDS` spells its words).
    pub fn kind(&self) -> ModKind {
        match self {
            BakeStep::Shell { .. } => ModKind::BashRemote,
            BakeStep::Ansible { .. } => ModKind::Ansible,
        }
    }
}

/// `ensure:` of a bash item: declared, idempotent state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Ensure {
    pub packages: Vec<String>,
    pub files: Vec<EnsureFile>,
    pub services: Vec<String>,
    pub commands: Vec<EnsureCommand>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnsureFile {
    pub path: String,
    pub content: String,
    /// Octal mode as written (`0644`).
    pub mode: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnsureCommand {
    pub run: String,
    pub unless: Option<String>,
}

/// One in-bake assertion: a shell command and what it must give.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestCommand {
    /// What the assertion checks, for messages (`file /etc/x contains y`).
    pub description: String,
    pub run: String,
    pub expect_rc: i32,
    pub contains: Option<String>,
}
