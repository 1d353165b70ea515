//! `image_builders:`: packer-ebs, packer-docker, the native docker bake,
//! the dummy builder.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::values::default_str;
use crate::model::JsonMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiredPlugin {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub config: JsonMap,
}

/// An `image_builders:` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageBuilderModel {
    pub name: String,
    /// `packer-ebs`, `packer-docker`, `docker` (native), `dummy`.
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
    #[serde(default = "default_str")]
    pub runtime: String,
    #[serde(default = "default_str")]
    pub default_machine_type: String,
    #[serde(default)]
    pub required_plugins: Vec<RequiredPlugin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageBuilderKind {
    /// packer `amazon-ebs` (aws runtimes).
    PackerEbs,
    /// packer `docker` (docker runtimes).
    PackerDocker,
    /// A native bake through the Docker API (docker runtimes).
    Docker,
    /// The test builder (dummy runtimes).
    Dummy,
}

impl ImageBuilderKind {
    pub fn parse(t: &str) -> Option<Self> {
        Some(match t {
            "packer-ebs" => Self::PackerEbs,
            "packer-docker" => Self::PackerDocker,
            "docker" => Self::Docker,
            "dummy" => Self::Dummy,
            _ => return None,
        })
    }
    /// The runtime types this builder can bake on.
    pub fn runtime_types(self) -> &'static [&'static str] {
        match self {
            Self::PackerEbs => &["aws"],
            Self::PackerDocker | Self::Docker => &["docker"],
            Self::Dummy => &["dummy"],
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PackerEbs => "packer-ebs",
            Self::PackerDocker => "packer-docker",
            Self::Docker => "docker",
            Self::Dummy => "dummy",
        }
    }
}

pub const UNUSED_IMAGE_BUILDER_TYPES: &[&str] = &["packer-gce"];
