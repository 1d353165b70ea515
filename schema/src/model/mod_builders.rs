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

/// What is spelled for a mod kind, each in one place: a new kind is one
/// row here and one `BakeStep` variant (whose matches the compiler checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModKindRow {
    pub kind: ModKind,
    /// Its `type:` in `cfg/mod-builders.yml`.
    pub token: &'static str,
    /// The operation its mods record (`operation` of a bake's inputs and
    /// of the bundle's mods).
    pub operation: &'static str,
    /// Its word in the emitted step comments, as the original writes it
    /// (`Modifications for NAME of type WORD`).
    pub comment: &'static str,
    /// The packer plugin its provisioner needs, if any (`required_plugins`).
    pub packer_plugin: Option<&'static str>,
}

/// Every mod kind.
pub const MOD_KINDS: &[ModKindRow] = &[
    ModKindRow {
        kind: ModKind::Ansible,
        token: "ansible",
        operation: "ansible",
        comment: "ansible",
        packer_plugin: Some("ansible"),
    },
    ModKindRow {
        kind: ModKind::BashRemote,
        token: "bash-remote",
        operation: "bash",
        comment: "bash (shell)",
        packer_plugin: None,
    },
];

impl ModKind {
    /// Its row of [`MOD_KINDS`].
    pub fn row(self) -> &'static ModKindRow {
        // a match, so that a new kind without its row does not compile
        match self {
            ModKind::Ansible => &MOD_KINDS[0],
            ModKind::BashRemote => &MOD_KINDS[1],
        }
    }

    /// The operation a mod of this kind records (`operation` of a bake's
    /// inputs and of the bundle's mods): the one spelling of each.
    pub fn operation(self) -> &'static str {
        self.row().operation
    }

    pub fn parse(t: &str) -> Option<Self> {
        MOD_KINDS.iter().find(|r| r.token == t).map(|r| r.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mod_kind_has_one_row_and_its_token_is_its_serde_name() {
        for k in [ModKind::Ansible, ModKind::BashRemote] {
            assert_eq!(MOD_KINDS.iter().filter(|r| r.kind == k).count(), 1);
            assert_eq!(k.row().kind, k, "row() points at the kind's own row");
            let serde = serde_json::to_value(k).unwrap();
            assert_eq!(serde.as_str(), Some(k.row().token));
            assert_eq!(ModKind::parse(k.row().token), Some(k));
        }
    }
}
