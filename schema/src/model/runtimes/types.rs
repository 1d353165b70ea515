//! What the schema and the load know of each runtime type: one row per
//! type ([`TypeModel`]: [`AWS_MODEL`], [`DOCKER_MODEL`], [`DUMMY_MODEL`],
//! over the types' own models in `aws.rs`, `docker.rs`, `dummy.rs`),
//! listed in [`RUNTIME_TYPE_MODELS`]. The
//! load decides by a row's facts, never by a type's name: which types
//! exist, how an entry's own fields are typed, the family default user,
//! the default executable, what the type's machines can honour (an OPA
//! agent, a delayed teardown, storage without a builder), a session.
//!
//! `csis_ops::wiring::RUNTIME_TYPES` names each row as its `model`, beside
//! what the type does (its crate, its checks); the rows live here, below
//! the loader, because every load needs them, the loads of the rules' and
//! the runtimes' own tests (`LoadOptions::default()`) among them, and the
//! loader depends on no runtime crate.

use crate::diag::Diagnostic;
use crate::model::{
    AwsFields, DockerFields, DummyFields, OsBuilderModel, RuntimeCommon, RuntimeKind,
};
use crate::yaml::Node;

/// One runtime type as the schema and the load know it.
pub struct TypeModel {
    /// The `type:` of a runtime entry.
    pub name: &'static str,
    /// The entry's own fields (every key but the common ones) typed as
    /// this type's model, or every diagnostic of them.
    pub parse: fn(&Node, &str) -> Result<RuntimeKind, Vec<Diagnostic>>,
    /// The family default user of an OS builder baking on it (step 6 of
    /// the bake-user order).
    pub default_user: fn(&OsBuilderModel) -> &'static str,
    /// The `executables:` entry it runs when its entry names none and the
    /// tree declares one of that name.
    pub default_executable: Option<&'static str>,
    /// Whether its machines can run an OPA agent (identity type `okta`,
    /// an OPA group).
    pub opa_agent: bool,
    /// Whether its instances are torn down after a delay
    /// (`teardown_after` means something on it).
    pub delayed_teardown: bool,
    /// The storage types it keeps itself, with no storage builder.
    pub own_storage_types: &'static [&'static str],
    /// Whether it stands in for any other type's storage, instance
    /// builders and own storage types (the engine's tests).
    pub simulates_any: bool,
    /// Whether a session reaches its machines without an admin key (N9).
    pub session: fn(&RuntimeCommon) -> bool,
    /// Where it is reached, in clear.
    pub address: fn(&RuntimeKind) -> String,
    /// The machine types it declares, when it keeps a catalog (None: any
    /// machine type is the runtime's to judge).
    pub machine_types: fn(&RuntimeKind) -> Option<Vec<String>>,
}

/// Every runtime type csis implements, in the order `csis validate` and
/// the load's hint name them.
pub static RUNTIME_TYPE_MODELS: &[&TypeModel] = &[&AWS_MODEL, &DOCKER_MODEL, &DUMMY_MODEL];

/// The row of the runtime type `name`, if csis implements it.
pub fn type_model(name: &str) -> Option<&'static TypeModel> {
    RUNTIME_TYPE_MODELS.iter().copied().find(|m| m.name == name)
}

impl RuntimeKind {
    /// The row of this entry's type.
    pub fn model(&self) -> &'static TypeModel {
        match self {
            RuntimeKind::Aws(_) => &AWS_MODEL,
            RuntimeKind::Docker(_) => &DOCKER_MODEL,
            RuntimeKind::Dummy(_) => &DUMMY_MODEL,
        }
    }

    pub fn type_name(&self) -> &'static str {
        self.model().name
    }
}

/// The default user of a type whose machines start as root.
pub(super) fn root_user(_: &OsBuilderModel) -> &'static str {
    "root"
}

/// A session always reaches the machines (through a daemon, simulated).
pub(super) fn always(_: &RuntimeCommon) -> bool {
    true
}

/// The `a`/`an` before a type's name in a sentence (`an aws runtime`).
pub fn article(type_name: &str) -> &'static str {
    match type_name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// The `aws` type's row ([`TypeModel`]).
pub const AWS_MODEL: TypeModel = TypeModel {
    name: "aws",
    parse: |node, path| crate::yaml::from_node_all::<AwsFields>(node, path).map(RuntimeKind::Aws),
    default_user: aws_default_user,
    default_executable: None,
    opa_agent: true,
    delayed_teardown: true,
    own_storage_types: &[],
    simulates_any: false,
    // N9: only an `ssm` session reaches its machines without a key
    session: |common| {
        (common.session_mechanism.as_deref()).is_some_and(|m| m.trim().eq_ignore_ascii_case("ssm"))
    },
    address: |kind| match kind {
        RuntimeKind::Aws(a) => a.region.clone(),
        _ => String::new(),
    },
    machine_types: |_| None,
};

/// The user an AMI of the OS builder's family starts with.
fn aws_default_user(os: &OsBuilderModel) -> &'static str {
    match (os.type_.as_str(), os.family.as_str()) {
        ("debian", _) | (_, "debian") => "admin",
        ("ubuntu", _) | (_, "ubuntu") => "ubuntu",
        _ => "ec2-user",
    }
}

/// The `docker` type's row ([`TypeModel`]): a container starts as
/// root, runs no OPA agent (no systemd) and is not torn down after a
/// delay; a named volume is its own storage.
pub const DOCKER_MODEL: TypeModel = TypeModel {
    name: "docker",
    parse: |node, path| {
        crate::yaml::from_node_all::<DockerFields>(node, path).map(RuntimeKind::Docker)
    },
    default_user: root_user,
    default_executable: Some("docker"),
    opa_agent: false,
    delayed_teardown: false,
    own_storage_types: &["volume"],
    simulates_any: false,
    session: always,
    address: |kind| match kind {
        RuntimeKind::Docker(d) => (d.host.clone().map(|h| format!("host {h}")))
            .or_else(|| d.context.clone().map(|c| format!("context {c}")))
            .unwrap_or_else(|| "the local daemon (DOCKER_HOST or the default socket)".into()),
        _ => String::new(),
    },
    machine_types: |kind| match kind {
        RuntimeKind::Docker(d) => Some(d.machine_types.keys().cloned().collect()),
        _ => None,
    },
};

/// The `dummy` type's row ([`TypeModel`]): it stands in for any
/// type's storage and instance builders (the engine's tests).
pub const DUMMY_MODEL: TypeModel = TypeModel {
    name: "dummy",
    parse: |node, path| {
        crate::yaml::from_node_all::<DummyFields>(node, path).map(RuntimeKind::Dummy)
    },
    default_user: root_user,
    default_executable: None,
    opa_agent: true,
    delayed_teardown: true,
    own_storage_types: &[],
    simulates_any: true,
    session: always,
    address: |_| "local (simulated)".into(),
    machine_types: |kind| match kind {
        RuntimeKind::Dummy(d) if !d.machine_types.is_empty() => {
            Some(d.machine_types.keys().cloned().collect())
        }
        _ => None,
    },
};
