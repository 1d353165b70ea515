//! Strict typed models of everything csis loads from a tree.
//!
//! Each struct refuses unknown keys (`deny_unknown_fields`), so a typo is an
//! error naming its field path. These are the models *as declared* (after
//! templating and decryption); the resolved views that name their foreign
//! keys canonically are in [`crate::tree`].
//!
//! A runtime entry is split in two when it loads: the fields every runtime
//! shares ([`RuntimeCommon`]) and the fields of its `type`
//! ([`AwsRuntime`], [`DockerRuntime`], [`DummyRuntime`]), each strict.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Free-form YAML carried as JSON (`config:` maps, `query:`).
pub type Json = serde_json::Value;
/// A free-form mapping.
pub type JsonMap = IndexMap<String, Json>;

fn default_true() -> bool {
    true
}
fn default_str() -> String {
    "default".to_string()
}
fn is_default_sentinel(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || t.eq_ignore_ascii_case("default")
}

/// `true`/`false`, or a list of names (`apply_release: [aws-east2]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BoolOrList {
    Bool(bool),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for BoolOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BoolOrList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false or a list of names")
            }
            fn visit_bool<E>(self, v: bool) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(false))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BoolOrList, E> {
                match v.trim().to_ascii_lowercase().as_str() {
                    "true" | "yes" | "on" => Ok(BoolOrList::Bool(true)),
                    "false" | "no" | "off" => Ok(BoolOrList::Bool(false)),
                    _ => Err(E::custom(format!(
                        "expected true, false or a list of names, found `{v}`"
                    ))),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<BoolOrList, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<String>()? {
                    out.push(x);
                }
                Ok(BoolOrList::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for BoolOrList {
    fn default() -> Self {
        BoolOrList::Bool(false)
    }
}

impl BoolOrList {
    /// Does the setting allow `name` (a builder or runtime name)?
    pub fn allows(&self, names: &[&str]) -> bool {
        match self {
            BoolOrList::Bool(b) => *b,
            BoolOrList::List(l) => l.iter().any(|x| names.iter().any(|n| x == n)),
        }
    }
}

/// A list that also accepts one string (`admin_public_keys: "ssh-ed25519 ..."`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "OneOrManyRepr")]
pub struct OneOrMany(pub Vec<String>);

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrManyRepr {
    One(String),
    Many(Vec<String>),
}
impl From<OneOrManyRepr> for OneOrMany {
    fn from(r: OneOrManyRepr) -> Self {
        match r {
            OneOrManyRepr::One(s) => OneOrMany(vec![s]),
            OneOrManyRepr::Many(v) => OneOrMany(v),
        }
    }
}

/// An integer, or the sentinel `default` (disk sizes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum IntOrDefault {
    #[default]
    Default,
    Value(u32),
}

impl IntOrDefault {
    pub fn get(self) -> Option<u32> {
        match self {
            IntOrDefault::Default => None,
            IntOrDefault::Value(v) => Some(v),
        }
    }
}

impl Serialize for IntOrDefault {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrDefault::Default => s.serialize_str("default"),
            IntOrDefault::Value(v) => s.serialize_u32(*v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrDefault {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IntOrDefault;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size in GB or `default`")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrDefault, E> {
                if v <= 0 || v > u32::MAX as i64 {
                    return Err(E::custom(format!(
                        "a size must be a positive number of GB, not {v}"
                    )));
                }
                Ok(IntOrDefault::Value(v as u32))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrDefault, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<IntOrDefault, E> {
                if v.fract() == 0.0 {
                    self.visit_i64(v as i64)
                } else {
                    Err(E::custom(format!(
                        "a size must be a whole number of GB, not {v}"
                    )))
                }
            }
            fn visit_unit<E>(self) -> Result<IntOrDefault, E> {
                Ok(IntOrDefault::Default)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrDefault, E> {
                let t = v.trim();
                if is_default_sentinel(t) {
                    Ok(IntOrDefault::Default)
                } else if let Ok(n) = t
                    .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                    .parse::<i64>()
                {
                    self.visit_i64(n)
                } else {
                    Err(E::custom(format!(
                        "expected a size in GB or `default`, found `{v}`"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------
// cfg/_config.yml

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
    /// Where the records live (issue 14): `local` (`meta-state/`, the
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

// ---------------------------------------------------------------------------
// executables

/// An `executables:` entry: a tool a builder runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Executable {
    pub name: String,
    /// Picks the version checker; `default` = same as the name.
    #[serde(rename = "type", default = "default_exe_type")]
    pub type_: String,
    /// Version floor: a PEP 440 specifier set (`">=1.14, <1.15"`).
    #[serde(default)]
    pub version: Option<String>,
    /// Absolute path or a name on PATH; default = the name.
    #[serde(default)]
    pub binary: Option<String>,
    #[serde(default)]
    pub prepended_arguments: Vec<String>,
    #[serde(default)]
    pub appended_arguments: Vec<String>,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
}

fn default_exe_type() -> String {
    "executable".into()
}

impl Executable {
    /// The binary to run (`binary`, else the name).
    pub fn binary(&self) -> &str {
        self.binary.as_deref().unwrap_or(&self.name)
    }
    /// The checker type (`default` = the name).
    pub fn checker(&self) -> &str {
        if is_default_sentinel(&self.type_) {
            &self.name
        } else {
            &self.type_
        }
    }
}

// ---------------------------------------------------------------------------
// runtime_builders

/// Fields every runtime entry has, whatever its type.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeCommon {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The `executables:` entry this runtime runs (docker: default `docker`).
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub gitignore: Vec<String>,
    /// Merged into every image's tags.
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    /// Used by bakes and instances that name no machine type.
    pub default_machine_type: String,
    /// Validated as a foreign key; not read (as in the original).
    #[serde(default = "default_str")]
    pub default_image_builder: String,
    /// Joins every vendor-image query's owners on this runtime.
    #[serde(default)]
    pub default_owners: Option<Vec<String>>,
    /// Step 5 of the bake-user order.
    #[serde(default)]
    pub default_config_username: Option<String>,
    /// The closing retention disposes of every build here after a successful run.
    #[serde(default)]
    pub ephemeral: bool,
    /// Builds kept per series here when the image declares no `retention`.
    #[serde(default)]
    pub retention_keep: Option<u32>,
    /// `keep` or `teardown` (ephemeral instances).
    #[serde(default)]
    pub on_failure: Option<OnFailure>,
    /// `<n>m|h|d`.
    #[serde(default)]
    pub teardown_after: Option<String>,
    /// The state backend roots on this runtime inherit (`default` = the default backend).
    #[serde(default = "default_str")]
    pub state_configuration: String,
    /// Step 4 of the bake-user order (`default` names none).
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// aws: `ssm`.
    #[serde(default)]
    pub session_mechanism: Option<String>,
    /// csis extension: how many bakes may run on this runtime at once
    /// (None = no per-runtime limit beyond the scheduler's).
    #[serde(default)]
    pub max_parallel: Option<u32>,
}

/// The keys of [`RuntimeCommon`] (the rest of an entry goes to its type's model).
pub const RUNTIME_COMMON_KEYS: &[&str] = &[
    "name",
    "type",
    "description",
    "aliases",
    "executable",
    "is_default",
    "config",
    "gitignore",
    "tags",
    "default_machine_type",
    "default_image_builder",
    "default_owners",
    "default_config_username",
    "ephemeral",
    "retention_keep",
    "on_failure",
    "teardown_after",
    "state_configuration",
    "ssh_username",
    "session_mechanism",
    "max_parallel",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    Keep,
    Teardown,
}

/// `credentials:` of an aws runtime (boto3 `Session` keywords).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsCredentials {
    #[serde(default)]
    pub profile_name: Option<String>,
    #[serde(default)]
    pub aws_access_key_id: Option<String>,
    #[serde(default)]
    pub aws_secret_access_key: Option<String>,
    #[serde(default)]
    pub aws_session_token: Option<String>,
}

/// A `networking.subnets[]` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subnet {
    #[serde(default)]
    pub name: Option<String>,
    pub subnet_id: String,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub public: bool,
    #[serde(default)]
    pub cidr: Option<String>,
    #[serde(default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub config: JsonMap,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvailabilityZone {
    pub name: String,
    #[serde(default)]
    pub is_default: bool,
}

/// `networking:` of an aws runtime (`AwsCloudNetworkingModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsNetworking {
    /// A label; defaults to the network id.
    #[serde(default)]
    pub name: Option<String>,
    /// The VPC id; `default` = the account's default VPC.
    #[serde(default = "default_str")]
    pub network: String,
    /// At least one; exactly one `is_default`.
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    #[serde(default)]
    pub availability_zones: Vec<AvailabilityZone>,
    #[serde(default)]
    pub default_availability_zone: Option<String>,
    /// Existing groups every instance also wears; at most five.
    #[serde(default)]
    pub addl_security_groups: Vec<String>,
    /// Port 22 opened only to these groups.
    #[serde(default)]
    pub ssh_ingress_security_group_ids: Vec<String>,
}

impl AwsNetworking {
    /// The subnet bakes and instances use (the first `is_default`).
    pub fn default_subnet(&self) -> Option<&Subnet> {
        self.subnets.iter().find(|s| s.is_default)
    }
    /// The zone: `default_availability_zone`, the default zone, or the default subnet's.
    pub fn zone(&self) -> Option<&str> {
        self.default_availability_zone
            .as_deref()
            .or_else(|| {
                self.availability_zones
                    .iter()
                    .find(|z| z.is_default)
                    .map(|z| z.name.as_str())
            })
            .or_else(|| {
                self.default_subnet()
                    .and_then(|s| s.availability_zone.as_deref())
            })
    }
    /// The label (`name`, else the network id).
    pub fn label(&self) -> &str {
        match self.name.as_deref() {
            Some(n) if !is_default_sentinel(n) => n,
            _ => &self.network,
        }
    }
}

/// The `aws` runtime's own fields (`AwsCloudBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsRuntime {
    /// boto3 `region_name`, the packer `region`.
    pub region: String,
    /// Reported by `runtime describe`; a bare number becomes a string.
    #[serde(default)]
    pub account_id: Option<String>,
    #[serde(default)]
    pub credentials: AwsCredentials,
    /// Written into the amazon-ebs source when declared.
    #[serde(default)]
    pub ena_support: Option<bool>,
    #[serde(default)]
    pub sriov_support: Option<bool>,
    /// Build instances' profile when `session_instance_profile` is unset.
    #[serde(default)]
    pub iam_instance_profile: Option<String>,
    /// The SSM-capable profile for launched and build instances.
    #[serde(default)]
    pub session_instance_profile: Option<String>,
    /// Null loads with a warning (image generation needs it).
    #[serde(default)]
    pub networking: Option<AwsNetworking>,
}

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

/// No credentials (docker, dummy): the mapping must be empty.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoCredentials {}

/// The `docker` runtime's own fields (`DockerContainerBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerRuntime {
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

impl DockerRuntime {
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

/// The `dummy` test runtime's own fields: nothing leaves the machine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DummyRuntime {
    /// Simulated seconds every bake takes.
    #[serde(default)]
    pub bake_seconds: f64,
    /// Series (image or OS builder names) whose bakes fail.
    #[serde(default)]
    pub fail: Vec<String>,
    /// Series whose vendor-image resolve fails.
    #[serde(default)]
    pub fail_resolve: Vec<String>,
    /// Where the simulated image store lives (relative to the tree root;
    /// default `.csis/dummy/<runtime>`).
    #[serde(default)]
    pub store: Option<String>,
    /// Free-form machine types, accepted for parity with docker.
    #[serde(default)]
    pub machine_types: IndexMap<String, MachineType>,
    #[serde(default)]
    pub credentials: NoCredentials,
}

/// The type-specific part of a runtime.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RuntimeKind {
    Aws(AwsRuntime),
    Docker(DockerRuntime),
    Dummy(DummyRuntime),
}

impl RuntimeKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            RuntimeKind::Aws(_) => "aws",
            RuntimeKind::Docker(_) => "docker",
            RuntimeKind::Dummy(_) => "dummy",
        }
    }
}

/// Runtime types csis knows but does not implement yet.
pub const UNUSED_RUNTIME_TYPES: &[&str] = &["gcloud"];

// ---------------------------------------------------------------------------
// state_backends

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuilderCommon {
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
}

pub const BUILDER_COMMON_KEYS: &[&str] = &[
    "name",
    "type",
    "description",
    "aliases",
    "executable",
    "is_default",
    "config",
    "gitignore",
    "tags",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssumeRole {
    pub role_arn: String,
    #[serde(default)]
    pub session_name: Option<String>,
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub external_id: Option<String>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub policy_arns: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub transitive_tag_keys: Vec<String>,
    #[serde(default)]
    pub source_identity: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssumeRoleWithWebIdentity {
    pub role_arn: String,
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub policy_arns: Vec<String>,
    #[serde(default)]
    pub session_name: Option<String>,
    #[serde(default)]
    pub web_identity_token: Option<String>,
    #[serde(default)]
    pub web_identity_token_file: Option<String>,
}

/// An `s3` state backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Backend {
    pub bucket: String,
    /// Non-empty; a trailing `/` is added.
    pub key: String,
    #[serde(default = "default_region")]
    pub region: String,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub encrypt: bool,
    #[serde(default = "default_true")]
    pub use_lockfile: bool,
    #[serde(default)]
    pub allowed_account_ids: Vec<String>,
    #[serde(default)]
    pub forbidden_account_ids: Vec<String>,
    #[serde(default)]
    pub http_proxy: Option<String>,
    #[serde(default)]
    pub https_proxy: Option<String>,
    #[serde(default)]
    pub no_proxy: Vec<String>,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    #[serde(default)]
    pub shared_config_file: Option<String>,
    #[serde(default)]
    pub shared_credentials_file: Option<String>,
    #[serde(default)]
    pub skip_credentials_validation: bool,
    #[serde(default)]
    pub skip_region_validation: bool,
    #[serde(default)]
    pub skip_requesting_account_id: bool,
    #[serde(default)]
    pub skip_metadata_api_check: bool,
    #[serde(default)]
    pub skip_s3_checksum: bool,
    #[serde(default)]
    pub use_dualstack_endpoint: bool,
    #[serde(default)]
    pub use_fips_endpoint: bool,
    #[serde(default)]
    pub endpoints: Option<IndexMap<String, String>>,
    #[serde(default)]
    pub assume_role: Option<AssumeRole>,
    #[serde(default)]
    pub assume_role_with_web_identity: Option<AssumeRoleWithWebIdentity>,
}
fn default_region() -> String {
    "us-east-2".into()
}
fn default_retries() -> u32 {
    5
}

/// A `local` state backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalBackend {
    /// Relative to the tree root, or absolute. Default `state`.
    #[serde(default = "default_state_path")]
    pub path: String,
}
fn default_state_path() -> String {
    "state".into()
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // a handful per tree
pub enum StateBackendKind {
    S3(S3Backend),
    Local(LocalBackend),
}

pub const UNUSED_STATE_BACKEND_TYPES: &[&str] = &["gcs"];

// ---------------------------------------------------------------------------
// tests (OS builders, OS runtime entries, images)

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileTest {
    pub path: String,
    #[serde(default)]
    pub contains: Option<String>,
    /// Octal, as a string (`"0644"`).
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandTest {
    pub run: String,
    #[serde(default)]
    pub expect_rc: Option<i32>,
    #[serde(default)]
    pub contains: Option<String>,
}

/// In-bake assertions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tests {
    #[serde(default)]
    pub files: Vec<FileTest>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub commands: Vec<CommandTest>,
    #[serde(default)]
    pub services_enabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
    /// Run on a launched ephemeral instance after the bake (images only).
    #[serde(default)]
    pub post_bake: Option<PostBakeTests>,
}

impl Tests {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.packages.is_empty()
            && self.commands.is_empty()
            && self.services_enabled.is_empty()
            && self.users.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PostBakeTests {
    #[serde(default)]
    pub files: Vec<FileTest>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub commands: Vec<CommandTest>,
    #[serde(default)]
    pub services_enabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
    /// Absolute mount points that must be mounted.
    #[serde(default)]
    pub mounts: Vec<String>,
}

// ---------------------------------------------------------------------------
// os_builders

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpdatePolicyKind {
    #[default]
    None,
    Security,
    Packages,
    Full,
}

/// `update:` of an OS builder.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpdatePolicy {
    #[serde(default)]
    pub policy: UpdatePolicyKind,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub pin: IndexMap<String, String>,
    #[serde(default)]
    pub refresh_days: Option<u32>,
}

/// An OS builder: a base image (`OsBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsBuilderModel {
    pub name: String,
    /// `rhel`, `fedora` (dnf); `debian`, `ubuntu` (apt); `alpine` (apk).
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
    pub family: String,
    pub family_version: String,
    #[serde(default)]
    pub runtimes: Vec<OsRuntimeEntry>,
    #[serde(default = "default_str")]
    pub architecture: String,
    #[serde(default)]
    pub default_primary_disk_size: IntOrDefault,
    #[serde(default)]
    pub owners: Vec<String>,
    #[serde(default)]
    pub query: JsonMap,
    /// Step 3 of the bake-user order.
    #[serde(default)]
    pub config_username: Option<String>,
    #[serde(default)]
    pub auto_update: bool,
    #[serde(default)]
    pub update: Option<UpdatePolicy>,
    #[serde(default)]
    pub identity_types: Vec<String>,
    #[serde(default)]
    pub storage_types: Vec<String>,
    #[serde(default = "default_admin_user")]
    pub admin_user: String,
    #[serde(default)]
    pub admin_public_keys: Option<OneOrMany>,
    #[serde(default)]
    pub local_test_image: Option<String>,
    #[serde(default)]
    pub tests: Tests,
    /// rhel: accepted, not read.
    #[serde(default)]
    pub subscription_id: Option<String>,
}

fn default_admin_user() -> String {
    "csisadmin".into()
}

impl OsBuilderModel {
    /// The package manager of the family: `dnf`, `apt` or `apk`.
    pub fn package_manager(&self) -> &'static str {
        package_manager(&self.type_, &self.family)
    }
    /// The effective update policy (`auto_update` = full when `update` is absent).
    pub fn effective_update(&self) -> UpdatePolicy {
        match &self.update {
            Some(u) => u.clone(),
            None if self.auto_update => UpdatePolicy {
                policy: UpdatePolicyKind::Full,
                ..Default::default()
            },
            None => UpdatePolicy::default(),
        }
    }
}

/// `dnf`, `apt` or `apk` for an OS type/family.
pub fn package_manager(type_: &str, family: &str) -> &'static str {
    match (type_, family) {
        ("debian" | "ubuntu", _) | (_, "debian" | "ubuntu") => "apt",
        ("alpine", _) | (_, "alpine") => "apk",
        _ => "dnf",
    }
}

pub const OS_TYPES: &[&str] = &["rhel", "fedora", "debian", "ubuntu", "alpine"];

/// An OS builder's `runtimes[]` entry (`OSBuilderBaseImageBuilderSubconfig`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsRuntimeEntry {
    #[serde(default = "default_str")]
    pub image_builder: String,
    /// A label, unique within the builder.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A fixed vendor image (AWS: AMI id; docker: a digest reference).
    #[serde(default)]
    pub image_id: Option<String>,
    #[serde(default)]
    pub auto_update: Option<bool>,
    #[serde(default)]
    pub default_machine_type: Option<String>,
    #[serde(default)]
    pub default_primary_disk_size: Option<IntOrDefault>,
    /// Merged over the builder's.
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    /// Appended to the builder's (after the runtime's `default_owners`).
    #[serde(default)]
    pub owners: Vec<String>,
    /// Merged over the builder's, key by key.
    #[serde(default)]
    pub query: JsonMap,
    /// Step 2 of the bake-user order.
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// Replaces the builder's `tests` for this runtime.
    #[serde(default)]
    pub tests: Option<Tests>,
    #[serde(default)]
    pub config: JsonMap,
}

// ---------------------------------------------------------------------------
// image_builders

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

// ---------------------------------------------------------------------------
// mod_builders

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
    pub fn parse(t: &str) -> Option<Self> {
        match t {
            "ansible" => Some(ModKind::Ansible),
            "bash-remote" => Some(ModKind::BashRemote),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// images/

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ParentPolicy {
    /// Bake from the pinned parent build until `upgrade image`.
    #[default]
    Pinned,
    /// A newer parent head re-bakes the image and moves the pin.
    Follow,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    pub keep: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Release {
    pub model: String,
}

/// An image's `runtimes[]` entry: one bake per entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRuntimeEntry {
    #[serde(default = "default_str")]
    pub image_builder: String,
    #[serde(default)]
    pub machine_type: Option<String>,
    /// Step 1 of the bake-user order.
    #[serde(default = "default_str")]
    pub ssh_username: String,
    /// A fixed parent image id to bake from.
    #[serde(default)]
    pub image_identifier: Option<String>,
    #[serde(default)]
    pub owners: Option<Vec<String>>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureFileModel {
    pub path: String,
    #[serde(default)]
    pub content: String,
    /// Octal as a string; `0644` unquoted is read as the string too.
    #[serde(default)]
    pub mode: Option<Json>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureCommandModel {
    pub run: String,
    #[serde(default)]
    pub unless: Option<String>,
}

/// `ensure:` of a bash item.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnsureModel {
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub files: Vec<EnsureFileModel>,
    #[serde(default)]
    pub services: Vec<String>,
    #[serde(default)]
    pub commands: Vec<EnsureCommandModel>,
}

/// A modification item inside an image (`ModItemModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModItem {
    pub name: String,
    /// Mod builder name or alias; `default` or absent = the default mod builder.
    #[serde(rename = "type", default = "default_str")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Part of the build's content hash; not passed to ansible or the shell.
    #[serde(default)]
    pub config: JsonMap,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// ansible: root-relative playbook paths.
    #[serde(default)]
    pub playbooks: Vec<String>,
    /// bash: inline lines (literal).
    #[serde(default)]
    pub script: Vec<String>,
    /// bash: root-relative script files.
    #[serde(default)]
    pub scripts: Vec<String>,
    /// bash: declarative steps.
    #[serde(default)]
    pub ensure: Option<EnsureModel>,
}

/// An `images:` entry (an instance image).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageModel {
    pub name: String,
    /// Primary image builder (`default`).
    #[serde(rename = "type", default = "default_str")]
    pub type_: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub tags: IndexMap<String, String>,
    #[serde(default)]
    pub config: JsonMap,
    /// An OS builder or another image; the chain ends at an OS builder.
    pub source_image: String,
    /// The owning group (a `groups/` group; activated on the image).
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub runtimes: Vec<ImageRuntimeEntry>,
    #[serde(default)]
    pub modifications: Vec<ModItem>,
    #[serde(default)]
    pub tests: Tests,
    #[serde(default)]
    pub parent_policy: ParentPolicy,
    #[serde(default)]
    pub retention: Option<Retention>,
    #[serde(default)]
    pub release: Option<Release>,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub architecture: Option<String>,
    #[serde(default)]
    pub primary_disk_size: Option<IntOrDefault>,
    /// Accepted, not read.
    #[serde(default)]
    pub variables: JsonMap,
    /// Accepted, not read.
    #[serde(default)]
    pub auto_update: Option<bool>,
    #[serde(default)]
    pub auto_generate_storage: Option<bool>,
    #[serde(default)]
    pub default_groups: Vec<String>,
}
