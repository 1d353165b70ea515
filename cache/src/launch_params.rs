//! `meta-state/launch-params.yaml` (core.md §3.11, §9.2): per instance, what
//! it was (or will be) launched with: `instances {name: LaunchRecord}`.
//! The original's keys (`identity_type`, `enrollment`, `session`,
//! `alias`, ...) csis does not use are kept in `extra` and written back.
//! A record is immutable after launch: only a replacement
//! ([`crate::Recorder::record_replaced`]) or a decommission changes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const LAUNCH_PARAMS_FILE: &str = "launch-params.yaml";

/// The build of a launch record not yet bound (the original's word).
pub const UNBOUND: &str = "unbound";

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchParams {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub instances: BTreeMap<String, LaunchRecord>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One instance's launch parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// The canonical image name.
    #[serde(default)]
    pub image: String,
    /// The build it boots, or `unbound`.
    #[serde(default)]
    pub build: String,
    /// The runtime it stands on (csis's; absent from the original's files).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// The image's posix group.
    #[serde(default)]
    pub group: String,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub mounts: Vec<MountRecord>,
    /// The canonical hostname `<name>-NNN` ([`crate::instance_state::canonical_hostname`]).
    #[serde(default)]
    pub hostname: String,
    #[serde(default, deserialize_with = "crate::release_rules::strict_bool")]
    pub ephemeral: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub userdata: Option<String>,
    /// sha256 (hex) of the rendered launch script.
    #[serde(default)]
    pub user_data_sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// The run that wrote the record.
    #[serde(default)]
    pub run: String,
    /// True once a machine was launched from it.
    #[serde(default, deserialize_with = "crate::release_rules::strict_bool")]
    pub launched: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_run: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One mount of a launch record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MountRecord {
    /// The canonical storage name.
    #[serde(default)]
    pub storage: String,
    /// The storage type token (`ebs`, `volume`, ...).
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The storage builder.
    #[serde(default)]
    pub builder: String,
    #[serde(default)]
    pub mount_point: String,
    #[serde(default)]
    pub group: String,
    /// `2770` | `2775`, a string as the original writes it.
    #[serde(default)]
    pub share_mode: String,
    #[serde(default, deserialize_with = "crate::release_rules::strict_bool")]
    pub public_read: bool,
    /// `/dev/xvdf`, `/dev/disk/by-id/google-<name>`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl LaunchRecord {
    /// The build it boots, unless unbound.
    pub fn bound_build(&self) -> Option<&str> {
        match self.build.as_str() {
            "" | UNBOUND => None,
            b => Some(b),
        }
    }

    /// The same launch parameters, whoever wrote them when: everything
    /// but `run`, `launched`, `launched_run` (what a replacement changes
    /// for a machine that is not being replaced).
    pub fn same_parameters(&self, other: &LaunchRecord) -> bool {
        let strip = |r: &LaunchRecord| LaunchRecord {
            run: String::new(),
            launched: false,
            launched_run: None,
            ..r.clone()
        };
        strip(self) == strip(other)
    }
}

impl LaunchParams {
    /// The launch record of an instance.
    pub fn record(&self, name: &str) -> Option<&LaunchRecord> {
        self.instances.get(name)
    }

    /// `build -> [instance]` for every launch record naming a build.
    pub fn launched(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (inst, r) in &self.instances {
            if let Some(b) = r.bound_build() {
                out.entry(b.to_string()).or_default().push(inst.clone());
            }
        }
        out
    }
}
