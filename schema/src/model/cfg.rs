//! `cfg/_config.yml`: the globals ([`IaConfig`]), where the records live
//! ([`MetaStateSpec`]) and the run settings under `config:` ([`ConfigKeys`]).

use serde::{Deserialize, Serialize};

use crate::model::values::default_true;
use crate::model::{BoolOrList, JsonMap, OneOrMany};

/// The globals: whatever in `cfg/` is not a builder list (`IAConfig`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IaConfig {
    pub id: String,
    #[serde(default = "default_generation_directory")]
    pub generation_directory: String,
    #[serde(default = "default_dateformat")]
    pub dateformat: String,
    #[serde(default)]
    pub gitignore: Vec<String>,
    #[serde(default = "default_sleep")]
    pub sleep_before_finalization: i64,
    #[serde(default)]
    pub encryption: Encryption,
    #[serde(default)]
    pub public_safe: PublicSafe,
    /// Run settings; see [`ConfigKeys`]. Loaded separately (unknown keys are carried).
    #[serde(default, skip_deserializing)]
    pub config: ConfigKeys,
    /// Where the records live: `local` (`meta-state/`, the
    /// default), `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///path`.
    /// The global `--meta-state URL` overrides it.
    #[serde(default)]
    pub meta_state: Option<MetaStateSpec>,
    /// Accepted, unused.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Accepted, unused.
    #[serde(default)]
    pub last_updated: Option<String>,
}

/// Where a tree's records live: `meta_state:` in `cfg/_config.yml`, or
/// `--meta-state URL`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MetaStateSpec {
    /// `meta-state/` of the tree (committed by users).
    #[default]
    Local,
    /// `s3://bucket[/prefix]`
    S3 { bucket: String, prefix: String },
    /// `gs://bucket[/prefix]`
    Gs { bucket: String, prefix: String },
    /// `file:///absolute/path`: a directory used as an object store.
    File { path: String },
}

impl MetaStateSpec {
    /// Parse `local`, `s3://bucket/prefix`, `gs://bucket/prefix` or
    /// `file:///path`; the error says what is accepted.
    pub fn parse(s: &str) -> Result<MetaStateSpec, String> {
        let t = s.trim();
        if t.is_empty() || t == "local" {
            return Ok(MetaStateSpec::Local);
        }
        let bucket = |rest: &str| -> Result<(String, String), String> {
            let (b, p) = rest.split_once('/').unwrap_or((rest, ""));
            let ok = !b.is_empty()
                && b.len() <= 222
                && b.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c));
            if !ok {
                return Err(format!("`{t}`: `{b}` is not a bucket name"));
            }
            let p = p.trim_matches('/');
            if p.split('/').any(|seg| seg == "." || seg == "..")
                || p.contains("//")
                || p.chars().any(|c| c.is_control())
            {
                return Err(format!("`{t}`: `{p}` is not a key prefix"));
            }
            Ok((b.to_string(), p.to_string()))
        };
        if let Some(rest) = t.strip_prefix("s3://") {
            let (bucket, prefix) = bucket(rest)?;
            return Ok(MetaStateSpec::S3 { bucket, prefix });
        }
        if let Some(rest) = t.strip_prefix("gs://") {
            let (bucket, prefix) = bucket(rest)?;
            return Ok(MetaStateSpec::Gs { bucket, prefix });
        }
        if let Some(rest) = t.strip_prefix("file://") {
            if !rest.starts_with('/') || rest.len() < 2 {
                return Err(format!(
                    "`{t}`: a file URL names an absolute path (file:///path)"
                ));
            }
            return Ok(MetaStateSpec::File {
                path: rest.trim_end_matches('/').to_string(),
            });
        }
        Err(format!(
            "`{t}` is not a meta-state store: use local, s3://bucket/prefix, gs://bucket/prefix or file:///path"
        ))
    }

    pub fn is_local(&self) -> bool {
        matches!(self, MetaStateSpec::Local)
    }
}

impl std::fmt::Display for MetaStateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |b: &str, p: &str| {
            if p.is_empty() {
                b.to_string()
            } else {
                format!("{b}/{p}")
            }
        };
        match self {
            MetaStateSpec::Local => write!(f, "local"),
            MetaStateSpec::S3 { bucket, prefix } => write!(f, "s3://{}", join(bucket, prefix)),
            MetaStateSpec::Gs { bucket, prefix } => write!(f, "gs://{}", join(bucket, prefix)),
            MetaStateSpec::File { path } => write!(f, "file://{path}"),
        }
    }
}

impl Serialize for MetaStateSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for MetaStateSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        MetaStateSpec::parse(&s).map_err(serde::de::Error::custom)
    }
}

fn default_generation_directory() -> String {
    "generated".into()
}
fn default_dateformat() -> String {
    "%Y-%m-%d-%H%M%S".into()
}
fn default_sleep() -> i64 {
    1
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encryption {
    /// age X25519 recipients every `ENC[age:...]` is encrypted to.
    #[serde(default)]
    pub recipients: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicSafe {
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `config:` keys the system reads; any other key is carried in `extra`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigKeys {
    #[serde(default)]
    pub apply_identity: BoolOrList,
    #[serde(default)]
    pub apply_storage: BoolOrList,
    #[serde(default)]
    pub apply_instances: BoolOrList,
    /// Let the release lifecycle mark artifacts in the cloud.
    #[serde(default)]
    pub apply_release: BoolOrList,
    #[serde(default)]
    pub use_state_backends: bool,
    #[serde(default = "default_module_source_base")]
    pub module_source_base: String,
    /// Public SSH keys of the mandatory admin user (N9/N12).
    #[serde(default)]
    pub admin_public_keys: OneOrMany,
    #[serde(default)]
    pub okta_gateway_selector: Option<String>,
    #[serde(default)]
    pub require_mod_tests: bool,
    #[serde(default = "default_true")]
    pub require_image_tests: bool,
    #[serde(default)]
    pub require_released_builds: bool,
    #[serde(default)]
    pub preflight: Preflight,
    /// Keys the system does not read, carried for plugins.
    #[serde(skip_deserializing, flatten)]
    pub extra: JsonMap,
}

impl Default for ConfigKeys {
    fn default() -> Self {
        ConfigKeys {
            apply_identity: Default::default(),
            apply_storage: Default::default(),
            apply_instances: Default::default(),
            apply_release: Default::default(),
            use_state_backends: false,
            module_source_base: default_module_source_base(),
            admin_public_keys: Default::default(),
            okta_gateway_selector: None,
            require_mod_tests: false,
            require_image_tests: true,
            require_released_builds: false,
            preflight: Default::default(),
            extra: Default::default(),
        }
    }
}

/// The keys [`ConfigKeys`] models (everything else under `config:` is extra).
pub const CONFIG_KEYS: &[&str] = &[
    "apply_identity",
    "apply_storage",
    "apply_instances",
    "apply_release",
    "use_state_backends",
    "module_source_base",
    "admin_public_keys",
    "okta_gateway_selector",
    "require_mod_tests",
    "require_image_tests",
    "require_released_builds",
    "preflight",
];

fn default_module_source_base() -> String {
    "../tfmodules".into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preflight {
    #[serde(default = "default_run_minutes")]
    pub expected_run_minutes: u32,
}
impl Default for Preflight {
    fn default() -> Self {
        Preflight {
            expected_run_minutes: 30,
        }
    }
}
fn default_run_minutes() -> u32 {
    30
}
