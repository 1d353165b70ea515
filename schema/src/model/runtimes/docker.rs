//! The `docker` runtime entry's own fields: the daemon (host or context),
//! the repository builds are tagged in, the network, machine types.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::NoCredentials;

/// A docker machine type: `--cpus`, `--memory`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineType {
    #[serde(default)]
    pub cpus: Option<f64>,
    /// `1g`, `512m`, ...
    #[serde(default)]
    pub memory: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerNetworking {
    /// The network bake containers join, by name (referenced, never created).
    #[serde(default = "default_bridge")]
    pub network: String,
}
impl Default for DockerNetworking {
    fn default() -> Self {
        DockerNetworking {
            network: default_bridge(),
        }
    }
}
fn default_bridge() -> String {
    "bridge".into()
}

/// The `docker` runtime's own fields (`DockerContainerBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerFields {
    /// A `DOCKER_HOST` URL; may be an `ENC[age:...]` marker. Not with `context`.
    #[serde(default)]
    pub host: Option<String>,
    /// A docker context name (`DOCKER_CONTEXT`). Not with `host`.
    #[serde(default)]
    pub context: Option<String>,
    /// Where builds are tagged; default `csis/<runtime name>` (lower-cased).
    #[serde(default)]
    pub repository: Option<String>,
    /// `DOCKER_CERT_PATH` (a path, never a value).
    #[serde(default)]
    pub tls_cert_path: Option<String>,
    /// `DOCKER_TLS_VERIFY`.
    #[serde(default)]
    pub tls_verify: bool,
    #[serde(default)]
    pub networking: Option<DockerNetworking>,
    /// name -> `{cpus, memory}`; when any, `default_machine_type` must name one.
    #[serde(default)]
    pub machine_types: IndexMap<String, MachineType>,
    #[serde(default)]
    pub credentials: NoCredentials,
}

impl DockerFields {
    /// The repository builds are tagged in (`csis/<runtime>` by default), lower-cased.
    pub fn repository_for(&self, runtime_name: &str) -> String {
        self.repository
            .clone()
            .unwrap_or_else(|| format!("csis/{runtime_name}"))
            .to_lowercase()
    }
    pub fn network(&self) -> &str {
        self.networking
            .as_ref()
            .map(|n| n.network.as_str())
            .unwrap_or("bridge")
    }
}
