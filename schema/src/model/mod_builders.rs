//! `mod_builders:`: ansible and bash-remote.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::JsonMap;

/// A `mod_builders:` entry (`ansible` or `bash-remote`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModBuilderModel {
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
    /// ansible: the provisioner's extra_arguments; bash-remote: accepted, not emitted.
    #[serde(default)]
    pub extra_arguments: Vec<String>,
    /// ansible only.
    #[serde(default)]
    pub ansible_connection: Option<String>,
    #[serde(default)]
    pub expect_disconnect: bool,
    /// Accepted, not read (the bake user is used).
    #[serde(default)]
    pub configuration_user: Option<String>,
    /// bash-remote only; no `{{ .Path }}`.
    #[serde(default)]
    pub execute_command: Option<String>,
    /// bash-remote only (`KEY=VALUE`).
    #[serde(default)]
    pub environment_vars: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModKind {
    Ansible,
    BashRemote,
}

impl ModKind {
    /// The operation a mod of this kind records (`operation` of a bake's
    /// inputs and of the bundle's mods): the one spelling of each.
    pub const fn operation(self) -> &'static str {
        match self {
            ModKind::Ansible => "ansible",
            ModKind::BashRemote => "bash",
        }
    }

    pub fn parse(t: &str) -> Option<Self> {
        match t {
            "ansible" => Some(ModKind::Ansible),
            "bash-remote" => Some(ModKind::BashRemote),
            _ => None,
        }
    }
}
