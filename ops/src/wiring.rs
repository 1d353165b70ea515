//! Which runtime type is which crate: one table, [`RUNTIME_TYPES`]. Each
//! entry names the type's model (`csis_schema::model::TypeModel`: its
//! name, its fields' parse and the facts the load decides by, in the
//! schema below the loader), constructs the runtime from its
//! tree entry, names its offline checks (of its entries and of the series
//! baked on it, which every load runs: [`offline_checks`]), says what its
//! online checks ask, whether it runs mod tests and which of its fields
//! `csis runtime describe` shows. Wiring a runtime is a lookup by type
//! name; a new runtime type is one new row (and its model).
//!
//! Each runtime type is also a cargo feature of `csis-ops` (and of the
//! binary): `aws`, `docker`, `dummy`, all on by default. A type built out
//! keeps its row ([`RuntimeType::built_in`] false): a tree that declares a
//! runtime of that type is refused at its `type:` line by the load, and
//! constructing one says how to get a binary that carries it.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Result};
use csis_rules::compile::{BakeCost, DEFAULT_BAKE_COST};
use csis_rules::{RuntimeChecks, Tree};
use csis_runtime::DynRuntime;
use csis_schema::model::{JsonMap, RuntimeCommon, RuntimeKind, TypeModel};
use csis_schema::model::{AWS_MODEL, DOCKER_MODEL, DUMMY_MODEL};
use csis_schema::{BaseEntry, MadeSeries, Problem, RuntimeEntry};

/// A line of `csis runtime describe` that a runtime type shows of itself,
/// in its order (the binary says each in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Region,
    AccountId,
    SessionMechanism,
    /// Where it is reached: a host or a context.
    HostOrContext,
    Repository,
    /// Where it is reached, otherwise.
    Address,
}

/// The fields of one runtime type that `csis runtime describe` shows.
#[derive(Debug, Clone, Default)]
pub struct TypeFields {
    pub region: Option<String>,
    pub account_id: Option<String>,
    pub host: Option<String>,
    pub context: Option<String>,
    pub repository: Option<String>,
}

/// One runtime type.
pub struct RuntimeType {
    /// The `type:` of a runtime entry (its model's name).
    pub name: &'static str,
    /// What the schema and the load know of the type.
    pub model: &'static TypeModel,
    /// Whether this binary carries the type (its cargo feature is on).
    pub built_in: bool,
    /// Construct the runtime from its tree entry (connects to nothing yet).
    pub construct: fn(&Tree, &RuntimeEntry) -> Result<DynRuntime>,
    /// The scheduler's cost of a bake on it, in milliseconds, from the
    /// runtime entry and the series' `config:` (None: every bake costs
    /// [`DEFAULT_BAKE_COST`]).
    pub bake_cost: Option<fn(&RuntimeEntry, &JsonMap) -> u64>,
    /// Its offline checks of a runtime entry of this type.
    pub entry_problems: fn(&RuntimeCommon, &RuntimeKind) -> Vec<Problem>,
    /// Its offline checks of an OS builder's entry on it.
    pub base_entry_problems: fn(&BaseEntry) -> Vec<Problem>,
    /// Its offline checks of a series (image or OS builder) baked on it.
    pub series_problems: fn(&MadeSeries) -> Vec<Problem>,
    /// What its online checks (`check_online`) ask, which `csis validate
    /// --offline` lists as skipped.
    pub online_checks: &'static str,
    /// Its own fields, for `csis runtime describe`.
    pub fields: fn(&RuntimeEntry) -> TypeFields,
    /// The lines `csis runtime describe` shows of it, in order.
    pub shown: &'static [Shown],
    /// Whether `csis test-mods` runs its mod tests on it (in a throwaway
    /// container, `Runtime::test_mod`).
    pub tests_mods: bool,
}

/// What `csis runtime describe` shows of each type, built in or not.
const DUMMY_SHOWN: &[Shown] = &[Shown::Address];
const DOCKER_SHOWN: &[Shown] = &[Shown::HostOrContext, Shown::Repository];
const AWS_SHOWN: &[Shown] = &[Shown::Region, Shown::AccountId, Shown::SessionMechanism];

/// Every runtime type csis knows.
pub static RUNTIME_TYPES: &[RuntimeType] = &[
    #[cfg(feature = "dummy")]
    RuntimeType {
        name: DUMMY_MODEL.name,
        model: &DUMMY_MODEL,
        built_in: true,
        construct: dummy,
        bake_cost: Some(dummy_bake_cost),
        entry_problems: |_, _| Vec::new(),
        base_entry_problems: |_| Vec::new(),
        series_problems: |_| Vec::new(),
        online_checks: "its online hook",
        fields: |_| TypeFields::default(),
        shown: DUMMY_SHOWN,
        tests_mods: false,
    },
    #[cfg(not(feature = "dummy"))]
    RuntimeType::missing(&DUMMY_MODEL, DUMMY_SHOWN),
    #[cfg(feature = "docker")]
    RuntimeType {
        name: DOCKER_MODEL.name,
        model: &DOCKER_MODEL,
        built_in: true,
        construct: docker,
        bake_cost: None,
        entry_problems: |common, kind| match kind {
            RuntimeKind::Docker(d) => csis_runtime_docker::settings::entry_problems(common, d),
            _ => Vec::new(),
        },
        base_entry_problems: csis_runtime_docker::query::base_entry_problems,
        series_problems: csis_runtime_docker::names::series_problems,
        online_checks: "the daemon answering",
        fields: |rt| match &rt.kind {
            RuntimeKind::Docker(d) => TypeFields {
                host: d
                    .host
                    .as_deref()
                    .map(|h| csis_schema::secret::redact(h).into_owned()),
                context: d.context.clone(),
                repository: Some(d.repository_for(&rt.name)),
                ..Default::default()
            },
            _ => TypeFields::default(),
        },
        shown: DOCKER_SHOWN,
        tests_mods: true,
    },
    #[cfg(not(feature = "docker"))]
    RuntimeType::missing(&DOCKER_MODEL, DOCKER_SHOWN),
    #[cfg(feature = "aws")]
    RuntimeType {
        name: AWS_MODEL.name,
        model: &AWS_MODEL,
        built_in: true,
        construct: aws,
        bake_cost: None,
        entry_problems: |common, kind| match kind {
            RuntimeKind::Aws(a) => csis_runtime_aws::offline::entry_problems(common, a),
            _ => Vec::new(),
        },
        base_entry_problems: |_| Vec::new(),
        series_problems: |_| Vec::new(),
        online_checks: "network discovery (VPC, subnets, security groups)",
        fields: |rt| match &rt.kind {
            RuntimeKind::Aws(a) => TypeFields {
                region: Some(a.region.clone()),
                account_id: a.account_id.clone(),
                ..Default::default()
            },
            _ => TypeFields::default(),
        },
        shown: AWS_SHOWN,
        tests_mods: false,
    },
    #[cfg(not(feature = "aws"))]
    RuntimeType::missing(&AWS_MODEL, AWS_SHOWN),
];

impl RuntimeType {
    /// The row of a type this binary was built without: the load refuses
    /// an entry of it at its `type:` line, and it constructs nothing.
    #[cfg_attr(not(test), allow(dead_code))] // used when a runtime feature is off
    const fn missing(model: &'static TypeModel, shown: &'static [Shown]) -> RuntimeType {
        RuntimeType {
            name: model.name,
            model,
            built_in: false,
            construct: |_, rt| {
                Err(anyhow!(
                    "runtime {}: {}",
                    rt.display,
                    not_built_in(rt.type_name())
                ))
            },
            bake_cost: None,
            entry_problems: |_, kind| vec![Problem::error("type", not_built_in(kind.type_name()))],
            base_entry_problems: |_| Vec::new(),
            series_problems: |_| Vec::new(),
            online_checks: "nothing (not built in)",
            fields: |_| TypeFields::default(),
            shown,
            tests_mods: false,
        }
    }
}

/// What a binary without runtime type `name` says of an entry of it.
#[cfg_attr(not(test), allow(dead_code))] // used when a runtime feature is off
fn not_built_in(name: &str) -> String {
    format!(
        "this csis was built without the `{name}` runtime type \
         (install it with `cargo install --path . --features {name}`, or the default features)"
    )
}

/// The runtime types this binary carries, for `csis --version`.
pub fn built_in_types() -> Vec<&'static str> {
    RUNTIME_TYPES
        .iter()
        .filter(|t| t.built_in)
        .map(|t| t.name)
        .collect()
}

/// The meta-state stores this binary opens (`s3` and `gs` with the
/// `store` feature), for `csis --version`.
pub fn built_in_stores() -> &'static [&'static str] {
    csis_cache::objstore::BUILT_IN
}

/// Whether this binary asks Okta PAM (`csis identity export-gids`; the
/// `opa` feature).
pub const OPA: bool = cfg!(feature = "opa");

/// Every runtime type's offline checks, for the load
/// (`csis_rules::LoadOptions::runtime_checks`).
pub fn offline_checks() -> Vec<RuntimeChecks> {
    RUNTIME_TYPES
        .iter()
        .map(|t| RuntimeChecks {
            runtime_type: t.name,
            entry: t.entry_problems,
            base_entry: t.base_entry_problems,
            series: t.series_problems,
        })
        .collect()
}

/// The type of a runtime entry.
pub fn runtime_type(rt: &RuntimeEntry) -> Result<&'static RuntimeType> {
    RUNTIME_TYPES
        .iter()
        .find(|t| t.name == rt.type_name())
        .ok_or_else(|| {
            anyhow!(
                "runtime {}: type {} is not wired",
                rt.display,
                rt.type_name()
            )
        })
}

/// The runtime types' costs of a bake ([`RuntimeType::bake_cost`]), for the
/// compile.
pub struct BakeCosts;

impl BakeCost for BakeCosts {
    fn bake_cost(&self, rt: &RuntimeEntry, config: &JsonMap) -> u64 {
        match runtime_type(rt).ok().and_then(|t| t.bake_cost) {
            Some(cost) => cost(rt, config),
            None => DEFAULT_BAKE_COST,
        }
    }
}

/// Construct the runtime named `name` of the tree (`CSIS_TIMING=1` says
/// so: `construct runtime NAME`). An operation asks its [`Runtimes`]
/// instead, which constructs each once.
pub fn runtime(tree: &Tree, name: &str) -> Result<DynRuntime> {
    let Some(rt) = tree.runtime(name) else {
        bail!("runtime {name} is not declared in this tree");
    };
    let t0 = std::time::Instant::now();
    let made = (runtime_type(rt)?.construct)(tree, rt);
    crate::timing::timing(&format!("construct runtime {}", rt.name), t0);
    made
}

#[cfg(feature = "dummy")]
fn dummy(tree: &Tree, rt: &RuntimeEntry) -> Result<DynRuntime> {
    use csis_runtime_dummy::{DummyConfig, DummyRuntime};
    use std::sync::Arc;
    let RuntimeKind::Dummy(d) = &rt.kind else {
        bail!("runtime {} is not a dummy runtime", rt.display);
    };
    let state_dir = match &d.store {
        Some(dir) => tree.root().join(dir),
        None => csis_cache::LocalDir::of_tree(tree.root()).sub("dummy"),
    };
    let mut cfg = DummyConfig::new(rt.name.clone(), state_dir);
    cfg.bake_seconds = d.bake_seconds;
    cfg.fail_series.extend(d.fail.iter().cloned());
    let series = (tree.images.iter().map(|i| (&i.name, &i.model.config)))
        .chain(tree.os_builders.iter().map(|o| (&o.name, &o.model.config)));
    for (name, config) in series {
        if let Some(s) = csis_runtime_dummy::series_seconds(config) {
            cfg.series_seconds.insert(name.clone(), s);
        }
    }
    Ok(Arc::new(DummyRuntime::new(cfg)))
}

/// A dummy bake takes the seconds its series or its runtime entry says.
#[cfg(feature = "dummy")]
fn dummy_bake_cost(rt: &RuntimeEntry, config: &JsonMap) -> u64 {
    match rt.dummy() {
        Some(d) => csis_runtime_dummy::bake_cost(
            d.bake_seconds,
            csis_runtime_dummy::series_seconds(config),
        ),
        None => DEFAULT_BAKE_COST,
    }
}

#[cfg(feature = "docker")]
fn docker(tree: &Tree, rt: &RuntimeEntry) -> Result<DynRuntime> {
    let settings = csis_runtime_docker::DockerSettings::from_model(
        rt,
        tree.root(),
        |n| tree.executable(n),
        &tree.image_builders,
    )
    .map_err(|e| anyhow!("runtime {}: {e}", rt.display))?;
    // The fleet's queries need which containers and volumes are this tree's.
    let mut settings = settings;
    settings.config = Some(tree.config.id.clone());
    let docker = csis_runtime_docker::docker_runtime(settings)
        .map_err(|e| anyhow!("runtime {}: {e}", rt.display))?;
    Ok(docker)
}

/// Where `csis test-mods` runs when the tree declares no runtime that
/// runs mod tests: the local Docker daemon (refused when this csis was
/// built without the docker runtime type).
pub fn local_mod_test_runtime() -> Result<DynRuntime> {
    #[cfg(feature = "docker")]
    {
        let rt = csis_runtime_docker::DockerRuntime::new(
            csis_runtime_docker::settings::DockerSettings::new("local"),
        )?;
        Ok(std::sync::Arc::new(rt))
    }
    #[cfg(not(feature = "docker"))]
    {
        Err(anyhow!("{}", not_built_in(DOCKER_MODEL.name)))
    }
}

#[cfg(feature = "aws")]
fn aws(tree: &Tree, rt: &RuntimeEntry) -> Result<DynRuntime> {
    let RuntimeKind::Aws(aws) = &rt.kind else {
        bail!("runtime {} is not an aws runtime", rt.display);
    };
    let mut settings = csis_runtime_aws::AwsSettings::from_model(&rt.common, aws);
    settings.packer_binary = packer_binary(tree, &rt.name);
    settings.config = Some(tree.config.id.clone());
    Ok(std::sync::Arc::new(csis_runtime_aws::AwsRuntime::new(
        settings,
    )))
}

/// The `executables:` binary of the packer image builder bound to `runtime`.
#[cfg(feature = "aws")]
fn packer_binary(tree: &Tree, runtime: &str) -> Option<String> {
    tree.image_builders
        .iter()
        .filter(|ib| ib.runtime == runtime)
        .filter_map(|ib| ib.executable.as_deref())
        .filter_map(|exe| tree.executable(exe))
        .map(|e| e.model.binary.clone().unwrap_or_else(|| e.name.clone()))
        .next()
}

/// The runtimes of one operation (a build, a command's [`crate::Context`]),
/// each constructed on its first use and then shared, with the one tokio
/// runtime their hook calls run on. A runtime object is only ever used on
/// that tokio runtime: its clients' connections belong to it. The state
/// gate, the plan's vendor reads and the build's nodes all ask the same
/// one, so a build constructs each runtime it touches once
/// (`tests/cli/build_convergence.rs`).
#[derive(Default)]
pub struct Runtimes {
    made: std::sync::Mutex<BTreeMap<String, DynRuntime>>,
    tokio: std::sync::OnceLock<tokio::runtime::Runtime>,
}

impl Runtimes {
    /// The runtime `name` (a name or an alias) of `tree`, constructed on
    /// first use.
    pub fn get(&self, tree: &Tree, name: &str) -> Result<DynRuntime> {
        let Some(entry) = tree.runtime(name) else {
            bail!("runtime {name} is not declared in this tree");
        };
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = made.get(&entry.name) {
            return Ok(rt.clone());
        }
        let rt = runtime(tree, &entry.name)?;
        made.insert(entry.name.clone(), rt.clone());
        Ok(rt)
    }

    /// Every runtime in `names`, by the names asked.
    pub fn some<'a>(
        &self,
        tree: &Tree,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, DynRuntime>> {
        let mut out = BTreeMap::new();
        for name in names {
            if !out.contains_key(name) {
                out.insert(name.to_string(), self.get(tree, name)?);
            }
        }
        Ok(out)
    }

    /// The tokio runtime the hook calls run on (multi-threaded: a build's
    /// nodes run on it at once), started on first use. Panics when the
    /// system cannot start one (no threads left).
    pub fn tokio(&self) -> &tokio::runtime::Runtime {
        self.tokio.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime")
        })
    }

    /// Run a hook call (or any future) to completion on [`Runtimes::tokio`].
    /// Not from inside a tokio runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.tokio().block_on(f)
    }

    /// Stop the tokio runtime, giving what still runs on it (a log
    /// reader, a blocking call) two seconds. Dropping the runtimes does it.
    pub fn shutdown(&mut self) {
        if let Some(t) = self.tokio.take() {
            t.shutdown_timeout(std::time::Duration::from_secs(2));
        }
    }
}

impl Drop for Runtimes {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_one_row_built_in_or_not() {
        let names: Vec<&str> = RUNTIME_TYPES.iter().map(|t| t.name).collect();
        assert_eq!(names, ["dummy", "docker", "aws"]);
        let built: Vec<&str> = RUNTIME_TYPES
            .iter()
            .filter(|t| t.built_in)
            .map(|t| t.name)
            .collect();
        assert_eq!(built_in_types(), built);
        // Exactly the types whose feature this build carries (CI tests
        // the default features and the quick start's docker-only set).
        let features = [
            ("dummy", cfg!(feature = "dummy")),
            ("docker", cfg!(feature = "docker")),
            ("aws", cfg!(feature = "aws")),
        ];
        let want: Vec<&str> = features.iter().filter(|f| f.1).map(|f| f.0).collect();
        assert_eq!(built_in_types(), want);
    }

    #[test]
    fn every_type_model_has_its_row() {
        let mut rows: Vec<&str> = RUNTIME_TYPES.iter().map(|t| t.model.name).collect();
        rows.sort();
        let models: Vec<&str> = csis_schema::model::RUNTIME_TYPE_MODELS
            .iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(rows, models);
        assert!(RUNTIME_TYPES.iter().all(|t| t.name == t.model.name));
    }

    #[test]
    fn a_type_built_out_is_refused_at_its_type_line() {
        let row = RuntimeType::missing(&DUMMY_MODEL, DUMMY_SHOWN);
        assert!(!row.built_in);
        let common: RuntimeCommon = serde_json::from_value(serde_json::json!({
            "name": "sim", "type": "dummy", "default_machine_type": "small"
        }))
        .unwrap();
        let kind = RuntimeKind::Dummy(Default::default());
        let problems = (row.entry_problems)(&common, &kind);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "type");
        assert!(!problems[0].warning);
        assert!(
            problems[0]
                .message
                .contains("built without the `dummy` runtime type")
                && problems[0].message.contains("--features dummy"),
            "{}",
            problems[0].message
        );
    }
}
