//! The rules that turn a loaded [`Tree`] into build-graph nodes (resolve,
//! emit, bake, retag, release, dispose) with their fingerprint inputs.
//! Owned by the graph-compile work (issue 3); the loader does not write here.
//!
//! ## The graph
//!
//! Per OS builder x active runtime entry (a base image on one runtime):
//! `//os/<name>@<rt>:resolve` -> `:emit` -> `:bake` -> `:retag` (+ `:dispose`
//! when retention applies on the runtime).
//! Per image x active runtime entry: `//images/<name>@<rt>:emit` -> `:bake`
//! -> `:retag` (+ `:release` with `release:`, `:dispose` with retention); the
//! bake depends on its parent's bake on the same runtime (chains are per
//! runtime).
//!
//! ## Per series
//!
//! The compile is per series (an OS builder or an image): its [`Unit`](crate::compile::Unit) is
//! its nodes on each runtime entry ([`os_unit`](crate::compile::os_unit); for an image
//! [`image_draft`](crate::compile::image_draft), which reads only the tree, then [`finish_image`](crate::compile::finish_image), which
//! adds the content hash of each playbook and script and the pins). An
//! [`Assembler`](crate::compile::Assembler) adds the units to the graph (OS builders, then images
//! parents first) and links each image's bake to its parent's on the same
//! runtime. [`compile`](crate::compile::compile()) hashes the files from disk; the
//! incremental compile ([`crate::incremental`]) memoizes each step per
//! series and takes the hashes from its inputs.
//!
//! ## The bake fingerprint (recipe [`BAKE_RECIPE`](crate::compile::BAKE_RECIPE), over the engine's
//! `csis-fingerprint-v1` encoding)
//!
//! Inputs (core.md §4.3): `series`, `parent` (`"vendor"`, or
//! `{series, policy}` / `{image_identifier}`), `capabilities`, `mods` (each
//! with its builder, operation, idempotency, `config`, the blake3 of every
//! playbook/script file, inline lines, `ensure`), `tests` (in-bake command
//! list), `disk_size`; base images add `vendor {family, family_version,
//! architecture, query, runtime_source {image_id, image_name: null, query}}`,
//! `admin_user`, `admin_public_keys`, `update`. The parent's identity enters
//! as a hashed dependency named `parent`: its **fingerprint** under
//! `parent_policy: follow` (and under `pinned` while no pin exists), or the
//! pinned parent build's **recorded** fingerprint under `pinned`. So every
//! fingerprint, and the whole plan, is known before anything bakes.
//! Excluded: machine type, bake user, tags, run id, timestamps, what a vendor
//! query resolves to today.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use csis_engine::{
    Dep, Fingerprint, Graph, GraphError, Label, Node, NodeId, Planner, Reason, RuleCx, RunPolicy,
};
use serde_json::{json, Value};

use crate::model::{ModKind, ParentPolicy};
use crate::tree::{InBakeTest, ModInput, Parent, Tree};

/// Version of the bake-input recipe (what goes into a bake's inputs). Bump
/// it when the inputs change shape: every bake fingerprint then moves once.
pub const BAKE_RECIPE: &str = "csis-bake-v1";

/// What the compile needs from `meta-state/` (implemented by csis-cache):
/// pins, and the fingerprints recorded for builds.
pub trait PinSource {
    /// The parent build `image` is pinned to on `runtime`.
    fn image_pin(&self, image: &str, runtime: &str) -> Option<String>;
    /// The input fingerprint recorded for `build_id` (64 hex).
    fn build_fingerprint(&self, build_id: &str) -> Option<String>;
}

/// No meta-state at all (every pinned child behaves like follow).
pub struct NoPins;
impl PinSource for NoPins {
    fn image_pin(&self, _: &str, _: &str) -> Option<String> {
        None
    }
    fn build_fingerprint(&self, _: &str) -> Option<String> {
        None
    }
}

/// Where a bake starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum ParentSpec {
    /// A base image: the vendor image the resolve node finds.
    Vendor { resolve: NodeId },
    /// Another image's build on the same runtime.
    Image {
        series: String,
        bake: NodeId,
        policy: ParentPolicy,
        /// The pin in force at compile time (pinned policy only).
        pinned_build: Option<String>,
    },
    /// A fixed parent image id (`image_identifier`).
    Fixed { id: String },
}

/// Everything a bake node needs to become a runtime `BakeRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct BakeSpec {
    pub label: Label,
    pub series: String,
    /// Display name (artifact naming).
    pub display: String,
    pub runtime: String,
    pub image_builder: String,
    /// A base image (OS builder)?
    pub base: bool,
    /// `<image>-<builder>-<timestamp>` / `<os>-<runtime>-<timestamp>`.
    pub final_name: String,
    pub parent: ParentSpec,
    pub machine_type: Option<String>,
    pub disk_size_gb: u32,
    pub bake_user: Option<String>,
    pub package_manager: Option<String>,
    /// The chain root's family (`debian`, `rhel`, `amzn`, ...) and architecture.
    pub family: Option<String>,
    pub architecture: Option<String>,
    pub mods: Vec<ModInput>,
    pub tests: Vec<InBakeTest>,
    /// Builder/image tags merged (lineage tags are added by the caller).
    pub tags: BTreeMap<String, String>,
    pub capabilities: Value,
    /// Mod records for the lineage (`name, type, operation, idempotent, content_hash`).
    pub mod_records: Vec<Value>,
    /// Image names from this image to its root (`[]` for a base image).
    pub chain: Vec<String>,
    /// Base images: the effective update policy.
    pub update: Option<Value>,
    /// Per-image dummy bake time (`config.dummy_bake_seconds`).
    pub dummy_bake_seconds: Option<f64>,
    /// Base images: what the base recipe needs beyond the fingerprint
    /// inputs above (the OS type, admin user and keys, the typed update
    /// policy, the declared identity and storage types).
    pub base_recipe: Option<BaseRecipeSpec>,
    /// The image builder's `required_plugins` (name, version, source).
    pub required_plugins: Vec<(String, String, String)>,
    /// Images: the group activated on the image.
    pub group: Option<GroupSpec>,
}

/// The base-image part of a bake's recipe, as the tree declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseRecipeSpec {
    pub os_type: String,
    pub family: String,
    pub family_version: String,
    pub admin_user: String,
    pub admin_public_keys: Vec<String>,
    pub update: crate::model::UpdatePolicy,
    pub identity_types: Vec<String>,
    pub storage_types: Vec<String>,
    /// Per declared identity type, the group builder that supplies its
    /// prerequisites (None: the tree declares no group builder of it).
    pub identity_builders: Vec<Option<String>>,
    /// Per declared storage type, its storage builder on this runtime
    /// (None: no storage builder of it here, a note in the bake).
    pub storage_builders: Vec<Option<String>>,
}

/// An image's own group, activated on it (`groups/`, its group builder).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpec {
    pub group: String,
    /// `okta` or `posix`.
    pub identity_type: String,
    /// The login hook too (a posix group, or an okta builder naming a
    /// posix builder).
    pub posix: bool,
}

/// The group activation of an image, from its `group:` and the group's builder.
pub fn group_spec(tree: &Tree, image: &crate::tree::Image) -> Option<GroupSpec> {
    let g = tree.group(image.model.group.as_deref()?)?;
    let b = tree.group_builder(g.builder.as_deref()?)?;
    Some(GroupSpec {
        group: g.display.clone(),
        identity_type: b.identity_type.to_string(),
        posix: b.identity_type == "posix" || b.posix.is_some(),
    })
}

fn required_plugins(tree: &Tree, image_builder: &str) -> Vec<(String, String, String)> {
    tree.image_builder(image_builder)
        .map(|b| {
            b.model
                .required_plugins
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        p.version.clone(),
                        p.source
                            .clone()
                            .unwrap_or_else(|| format!("github.com/hashicorp/{}", p.name)),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A resolve node's question.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveSpec {
    pub label: Label,
    pub series: String,
    pub runtime: String,
    pub family: String,
    pub family_version: String,
    pub architecture: String,
    pub owners: Vec<String>,
    pub query: Value,
    pub image_id: Option<String>,
}

/// The domain meaning of one graph node.
#[derive(Debug, Clone)]
pub enum NodeSpec {
    Resolve(ResolveSpec),
    /// Emission for the bake node `bake`.
    Emit {
        bake: NodeId,
    },
    /// Shared with the unit it came from when its parent is the same (the
    /// incremental compile assembles the graph without copying specs).
    Bake(Arc<BakeSpec>),
    /// Post-bake re-tag of the bake node `bake`.
    Retag {
        bake: NodeId,
    },
    /// The post-bake test of the bake node `bake` (`tests.post_bake`):
    /// launch the new build, run `tests` in it, record the outcome in
    /// `meta-state/image-tests.yaml`. Between the retag and the release.
    Test {
        bake: NodeId,
        tests: Vec<InBakeTest>,
    },
    /// Release placeholder (the lineage-operations work fills it in).
    Release {
        bake: NodeId,
        model: String,
    },
    /// Retention placeholder (the lineage-operations work fills it in).
    Dispose {
        series: String,
        runtime: String,
        keep: Option<u32>,
        ephemeral: bool,
    },
}

/// The compiled graph and what each node means.
#[derive(Clone)]
pub struct Compiled {
    pub graph: Graph,
    specs: Vec<NodeSpec>,
    bakes: BTreeMap<(String, String), NodeId>,
    /// Things skipped, for the user (`image x on rt: its parent does not bake there`).
    pub warnings: Vec<String>,
}

impl Compiled {
    pub fn spec(&self, id: NodeId) -> &NodeSpec {
        &self.specs[id.index()]
    }
    pub fn bake_spec(&self, id: NodeId) -> Option<&BakeSpec> {
        match self.spec(id) {
            NodeSpec::Bake(b) => Some(b),
            _ => None,
        }
    }
    /// The bake node of a series on a runtime.
    pub fn bake_of(&self, series: &str, runtime: &str) -> Option<NodeId> {
        self.bakes
            .get(&(series.to_string(), runtime.to_string()))
            .copied()
    }
    /// Every bake node.
    pub fn bake_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.bakes.values().copied()
    }
}

/// Compile errors (graph-level: duplicates, invalid labels).
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("{0}")]
    Label(String),
}

fn label(kind_path: &str, name: &str, runtime: &str) -> Result<Label, CompileError> {
    Label::new(&format!("{kind_path}/{name}"), Some(runtime), None)
        .map_err(|e| CompileError::Label(e.to_string()))
}

/// blake3 of a file's bytes (`missing` when unreadable).
pub fn file_hash(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(b) => blake3::hash(&b).to_hex().to_string(),
        Err(_) => "missing".to_string(),
    }
}

fn mod_operation(m: &ModInput) -> &'static str {
    match m.kind {
        ModKind::Ansible => "ansible",
        ModKind::BashRemote => "bash",
    }
}

fn mod_idempotent(m: &ModInput) -> &'static str {
    match m.kind {
        ModKind::Ansible => "ansible",
        ModKind::BashRemote if m.inline.is_empty() && m.files.is_empty() && m.ensure.is_some() => {
            "declared"
        }
        ModKind::BashRemote => "unknown",
    }
}

/// A mod's fingerprint input (with per-file content hashes, so `--explain`
/// names the file that changed) and its lineage record.
fn mod_input_and_record(m: &ModInput, hash: &mut dyn FnMut(&Path) -> String) -> (Value, Value) {
    let files: Vec<Value> = m
        .declared_files
        .iter()
        .zip(m.files.iter())
        .map(|(d, abs)| json!({"path": d, "blake3": hash(abs)}))
        .collect();
    let content = json!({
        "type": m.builder,
        "config": m.config,
        "files": files,
        "script": m.inline,
        "ensure": m.ensure,
    });
    let content_hash = Fingerprint::compute("mod-content", &content, &[]).to_hex();
    let input = json!({
        "name": m.name,
        "type": m.builder,
        "operation": mod_operation(m),
        "idempotent": mod_idempotent(m),
        "config": m.config,
        "files": files,
        "script": m.inline,
        "ensure": m.ensure,
    });
    let record = json!({
        "name": m.name,
        "type": m.builder,
        "operation": mod_operation(m),
        "idempotent": mod_idempotent(m),
        "content_hash": content_hash,
    });
    (input, record)
}

fn tests_input(tests: &[InBakeTest]) -> Value {
    Value::Array(
        tests
            .iter()
            .map(|t| json!({"run": t.run, "expect_rc": t.expect_rc, "contains": t.contains}))
            .collect(),
    )
}

fn dummy_seconds(config: &crate::model::JsonMap) -> Option<f64> {
    config.get("dummy_bake_seconds").and_then(|v| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    })
}

/// Compile the tree into the graph. `pins` answers pinned parents; the
/// playbook and script files are hashed from disk ([`file_hash`], each file
/// once per compile).
pub fn compile(tree: &Tree, pins: &dyn PinSource) -> Result<Compiled, CompileError> {
    let mut seen: HashMap<PathBuf, String> = HashMap::new();
    compile_with(tree, pins, &mut |p: &Path| {
        if let Some(h) = seen.get(p) {
            return h.clone();
        }
        let h = file_hash(p);
        seen.insert(p.to_path_buf(), h.clone());
        h
    })
}

/// [`compile`] with the content hash of every playbook and script file
/// answered by `hash` (blake3 hex, or `missing`).
///
/// The compile is per series: [`os_unit`] for each OS builder,
/// [`image_draft`] + [`finish_image`] for each image (parents first), and
/// an [`Assembler`] that adds the units to the graph and links each image
/// to its parent's bake.
fn compile_with(
    tree: &Tree,
    pins: &dyn PinSource,
    hash: &mut dyn FnMut(&Path) -> String,
) -> Result<Compiled, CompileError> {
    let mut a = Assembler::default();
    for os in &tree.os_builders {
        a.add(os_unit(tree, os)?)?;
    }
    for idx in image_order(tree) {
        let draft = image_draft(tree, &tree.images[idx])?;
        a.add(finish_image(draft, hash, pins))?;
    }
    Ok(a.finish())
}

/// Which kind of series a [`Unit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKind {
    /// An OS builder (a base image).
    Os,
    /// An image.
    Image,
}

/// One series' share of the graph: its nodes on each active `runtimes[]`
/// entry (that names a runtime and an image builder), in entry order. What
/// depends on other series (the parent's bake node, whether an entry
/// enters the graph at all) is left to the [`Assembler`]. Compared by
/// value: the incremental compile backdates an unchanged unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub kind: SeriesKind,
    /// The series (canonical name).
    pub series: String,
    pub entries: Vec<Entry>,
}

/// One runtime entry of a [`Unit`]: its nodes in graph order (resolve for
/// an OS builder, bake, emit, retag, release with `release:`, dispose with
/// retention).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub runtime: String,
    resolve: Option<(Arc<Node>, ResolveSpec)>,
    /// The bake node with its inputs (an image's draft has no `mods` there
    /// yet). Nodes are shared: the graph points at the unit's nodes.
    bake: Arc<Node>,
    /// `spec.parent` is set by the assembler (from `parent`); an image's
    /// draft has no `mod_records` yet.
    spec: Arc<BakeSpec>,
    parent: ParentLink,
    emit: Arc<Node>,
    retag: Arc<Node>,
    test: Option<TestNode>,
    release: Option<ReleaseNode>,
    dispose: Option<DisposeNode>,
}

/// Where an entry's bake starts from, before the graph exists.
#[derive(Debug, Clone, PartialEq)]
enum ParentLink {
    /// The vendor image the entry's resolve node finds.
    Vendor,
    /// `image_identifier`.
    Fixed(String),
    /// The bake of the series `series` on the same runtime (an OS builder or
    /// an image: by name, as the graph holds it).
    Series {
        series: String,
        policy: ParentPolicy,
        /// The pin in force (pinned policy), and its recorded fingerprint.
        pinned_build: Option<String>,
        pinned_fp: Option<Fingerprint>,
    },
}

impl Entry {
    /// The series this entry's bake hashes as its `parent` (follow, and
    /// pinned while no recorded fingerprint is known), and the series whose
    /// bake must exist on the runtime for the entry to enter the graph.
    pub fn parent_series(&self) -> Option<(&str, bool)> {
        match &self.parent {
            ParentLink::Series {
                series, pinned_fp, ..
            } => Some((series.as_str(), pinned_fp.is_none())),
            _ => None,
        }
    }

    /// Where the bake is among [`Entry::fingerprints`] (after the resolve
    /// node of an OS builder).
    pub fn bake_index(&self) -> usize {
        usize::from(self.resolve.is_some())
    }

    /// The fingerprints of this entry's nodes, in graph order, as
    /// [`Graph::fingerprints`] computes them once the entry is in the
    /// graph. `parent` is the fingerprint of the parent's bake (needed
    /// when [`Entry::parent_series`] says it is hashed).
    pub fn fingerprints(&self, parent: Option<Fingerprint>) -> Vec<Fingerprint> {
        let own = |n: &Node| Fingerprint::compute(n.kind(), n.inputs(), &[]);
        let mut out = Vec::with_capacity(6);
        if let Some((n, _)) = &self.resolve {
            out.push(own(n));
        }
        let dep = match &self.parent {
            ParentLink::Series {
                pinned_fp: Some(fp),
                ..
            } => Some(*fp),
            ParentLink::Series { .. } => Some(parent.unwrap_or_default()),
            ParentLink::Vendor | ParentLink::Fixed(_) => None,
        };
        let deps: Vec<(&str, Fingerprint)> = dep.map(|fp| ("parent", fp)).into_iter().collect();
        out.push(Fingerprint::compute(
            self.bake.kind(),
            self.bake.inputs(),
            &deps,
        ));
        out.push(own(&self.emit));
        out.push(own(&self.retag));
        if let Some((n, _)) = &self.test {
            out.push(own(n));
        }
        if let Some((n, _)) = &self.release {
            out.push(own(n));
        }
        if let Some((n, ..)) = &self.dispose {
            out.push(own(n));
        }
        out
    }
}

fn bake_cost(tree: &Tree, runtime: &str, secs: Option<f64>) -> u64 {
    match tree.runtime(runtime).and_then(|r| r.dummy()) {
        Some(d) => ((secs.unwrap_or(d.bake_seconds).max(0.0) * 1000.0) as u64).max(1),
        None => 600_000,
    }
}

/// A release node and its model.
type ReleaseNode = (Arc<Node>, String);
/// A post-bake test node and the commands it runs.
type TestNode = (Arc<Node>, Vec<InBakeTest>);

/// The post-bake test node of an image on a runtime, when it declares
/// `tests.post_bake`. Its inputs are the commands (what they check enters
/// its fingerprint, never the bake's); it runs when its bake ran.
fn test_node(
    tree: &Tree,
    image: &crate::tree::Image,
    target: &Label,
    runtime: &str,
) -> Option<TestNode> {
    let tests = tree.post_bake_commands(image)?;
    let node = Node::new(target.clone(), "test")
        .with_policy(RunPolicy::WhenDependencyDue)
        .with_attr("series", &image.name)
        .with_attr("runtime", runtime)
        .with_inputs(crate::secret::redacted(
            json!({"post_bake": tests_input(&tests)}),
        ));
    Some((Arc::new(node), tests))
}
/// A dispose node, its `keep` and whether the runtime is ephemeral.
type DisposeNode = (Arc<Node>, Option<u32>, bool);

/// The follow-ups of a bake shared by bases and images: retag, release, dispose.
fn follow_ups(
    tree: &Tree,
    target: &Label,
    series: &str,
    runtime: &str,
    release: Option<&str>,
    keep: Option<u32>,
) -> (Arc<Node>, Option<ReleaseNode>, Option<DisposeNode>) {
    let attrs = |n: Node| n.with_attr("series", series).with_attr("runtime", runtime);
    let retag = attrs(Node::new(target.clone(), "retag").with_policy(RunPolicy::WhenDependencyDue));
    let release = release.map(|model| {
        (
            Arc::new(attrs(
                Node::new(target.clone(), "release")
                    .with_policy(RunPolicy::WhenDependencyDue)
                    .with_inputs(json!({"model": model})),
            )),
            model.to_string(),
        )
    });
    let ephemeral = tree.runtime(runtime).is_some_and(|r| r.common.ephemeral);
    let dispose = (keep.is_some() || ephemeral).then(|| {
        (
            Arc::new(attrs(
                Node::new(target.clone(), "dispose")
                    .with_policy(RunPolicy::WhenDependencyDue)
                    .with_inputs(json!({"keep": keep, "ephemeral": ephemeral})),
            )),
            keep,
            ephemeral,
        )
    });
    (Arc::new(retag), release, dispose)
}

fn kind_label(target: &Label, kind: &str) -> Result<Label, CompileError> {
    target
        .with_kind(kind)
        .map_err(|e| CompileError::Label(e.to_string()))
}

/// A placeholder until the assembler knows the parent's node.
fn unlinked() -> ParentSpec {
    ParentSpec::Fixed { id: String::new() }
}

/// An OS builder's unit: per active runtime entry a resolve, bake, emit,
/// retag (+ dispose).
pub fn os_unit(tree: &Tree, os: &crate::tree::OsBuilder) -> Result<Unit, CompileError> {
    let ts = &tree.execution.timestamp;
    let mut entries = Vec::new();
    for entry in os.active_runtimes() {
        let (Some(rt), Some(ib)) = (entry.runtime.clone(), entry.image_builder.clone()) else {
            continue;
        };
        let target = label("os", &os.name, &rt)?;
        let arch = os_architecture(os);
        let owners = tree.os_owners(os, entry);
        let query = Value::Object(tree.os_query(os, entry).into_iter().collect());
        let entry_query = Value::Object(entry.entry.query.clone().into_iter().collect());
        let vendor = json!({
            "family": os.model.family,
            "family_version": os.model.family_version,
            "architecture": arch,
            "query": Value::Object(os.model.query.clone().into_iter().collect()),
            "runtime_source": {"image_id": entry.entry.image_id, "image_name": null, "query": entry_query},
        });
        let resolve = Node::new(target.clone(), "resolve")
            .with_policy(RunPolicy::WhenDependentDue)
            .with_inputs(json!({"vendor": vendor, "owners": owners}))
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        let resolve_spec = ResolveSpec {
            label: kind_label(&target, "resolve")?,
            series: os.name.clone(),
            runtime: rt.clone(),
            family: os.model.family.clone(),
            family_version: os.model.family_version.clone(),
            architecture: arch.clone(),
            owners,
            query,
            image_id: entry.entry.image_id.clone(),
        };
        let tests = tree.os_tests(os, entry);
        let disk = tree.os_disk_size(os, entry);
        let update = serde_json::to_value(os.model.effective_update()).unwrap_or(Value::Null);
        let caps = serde_json::to_value(tree.os_capability_stamp(os)).unwrap_or(Value::Null);
        let bake_inputs = json!({
            "recipe": BAKE_RECIPE,
            "series": os.name,
            "parent": "vendor",
            "capabilities": caps,
            "mods": [],
            "tests": tests_input(&tests),
            "disk_size": disk,
            "vendor": vendor,
            "admin_user": os.model.admin_user,
            "admin_public_keys": os.admin_public_keys,
            "update": update,
        });
        let refresh = os.model.effective_update().refresh_days;
        let mut bake = Node::new(target.clone(), "bake")
            .with_pool(&rt)
            .with_cost(bake_cost(tree, &rt, dummy_seconds(&os.model.config)))
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        if let Some(d) = refresh {
            bake = bake.with_attr("refresh_days", &d.to_string());
        }
        let tags: BTreeMap<String, String> = tree.os_tags(os, entry).into_iter().collect();
        let spec = BakeSpec {
            label: kind_label(&target, "bake")?,
            series: os.name.clone(),
            display: os.display.clone(),
            runtime: rt.clone(),
            image_builder: ib.clone(),
            base: true,
            final_name: format!("{}-{}-{}", os.display, rt, ts),
            parent: unlinked(),
            machine_type: tree.os_machine_type(entry),
            disk_size_gb: disk,
            bake_user: tree.os_bake_user(os, entry),
            package_manager: Some(os.model.package_manager().to_string()),
            family: Some(os.model.family.clone()),
            architecture: Some(arch.clone()),
            mods: Vec::new(),
            tests,
            tags,
            capabilities: caps,
            mod_records: Vec::new(),
            chain: Vec::new(),
            update: Some(update),
            dummy_bake_seconds: dummy_seconds(&os.model.config),
            base_recipe: Some(BaseRecipeSpec {
                os_type: os.model.type_.clone(),
                family: os.model.family.clone(),
                family_version: os.model.family_version.clone(),
                admin_user: os.model.admin_user.clone(),
                admin_public_keys: os.admin_public_keys.clone(),
                update: os.model.effective_update(),
                identity_types: os.model.identity_types.clone(),
                storage_types: os.model.storage_types.clone(),
                identity_builders: os
                    .model
                    .identity_types
                    .iter()
                    .map(|t| tree.group_builder_of_type(t).map(|b| b.display.clone()))
                    .collect(),
                storage_builders: os
                    .model
                    .storage_types
                    .iter()
                    .map(|t| {
                        tree.storage_builder_of_type(t, &rt)
                            .map(|b| b.display.clone())
                    })
                    .collect(),
            }),
            required_plugins: required_plugins(tree, &ib),
            group: None,
        };
        let emit = Node::new(target.clone(), "emit")
            .with_policy(RunPolicy::WhenDependentDue)
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        let keep = tree.runtime(&rt).and_then(|r| r.common.retention_keep);
        let (retag, release, dispose) = follow_ups(tree, &target, &os.name, &rt, None, keep);
        entries.push(Entry {
            runtime: rt,
            resolve: Some((Arc::new(resolve), resolve_spec)),
            bake: Arc::new(bake.with_inputs(crate::secret::redacted(bake_inputs))),
            spec: Arc::new(spec),
            parent: ParentLink::Vendor,
            emit: Arc::new(emit),
            retag,
            test: None,
            release,
            dispose,
        });
    }
    Ok(Unit {
        kind: SeriesKind::Os,
        series: os.name.clone(),
        entries,
    })
}

/// An image's unit before its files are hashed and its pins looked up: the
/// bake inputs lack `mods` and the specs their `mod_records` (see
/// [`finish_image`]). It reads the tree and nothing else.
pub fn image_draft(tree: &Tree, image: &crate::tree::Image) -> Result<Unit, CompileError> {
    let ts = &tree.execution.timestamp;
    let chain: Vec<String> = tree
        .chain(image)
        .iter()
        .map(|l| l.name().to_string())
        .collect();
    let chain_images: Vec<String> = chain[..chain.len().saturating_sub(1)].to_vec();
    let mods = tree.mod_inputs(image);
    let tests = tree.image_tests(image);
    let disk = tree.image_disk_size(image);
    let caps = serde_json::to_value(tree.capability_stamp(image)).unwrap_or(Value::Null);
    let root = tree.chain_root(image);
    let pm = root.map(|o| o.model.package_manager().to_string());
    let family = root.map(|o| o.model.family.clone());
    let architecture = root.map(os_architecture);
    let policy = image.model.parent_policy;
    let policy_name = match policy {
        ParentPolicy::Pinned => "pinned",
        ParentPolicy::Follow => "follow",
    };
    let pname = match &image.parent {
        Parent::Os(o) | Parent::Image(o) => o,
    };
    let secs = dummy_seconds(&image.model.config);
    let group = group_spec(tree, image);
    let release = image.model.release.as_ref().map(|r| r.model.as_str());
    let mut entries = Vec::new();
    for entry in image.active_runtimes() {
        let (Some(rt), Some(ib)) = (entry.runtime.clone(), entry.image_builder.clone()) else {
            continue;
        };
        let target = label("images", &image.name, &rt)?;
        let (parent_input, parent) = match &entry.entry.image_identifier {
            Some(fixed) => (
                json!({"image_identifier": fixed}),
                ParentLink::Fixed(fixed.clone()),
            ),
            None => (
                json!({"series": pname, "policy": policy_name}),
                ParentLink::Series {
                    series: pname.clone(),
                    policy,
                    pinned_build: None,
                    pinned_fp: None,
                },
            ),
        };
        let mut bake_inputs = json!({
            "recipe": BAKE_RECIPE,
            "series": image.name,
            "parent": parent_input,
            "capabilities": caps,
            "tests": tests_input(&tests),
            "disk_size": disk,
        });
        // the group activation changes the image (and its verification):
        // an image with a group hashes it (one without keeps its inputs)
        if let Some(g) = &group {
            bake_inputs["group"] = json!({
                "name": g.group,
                "identity_type": g.identity_type,
                "posix": g.posix,
            });
        }
        let tags: BTreeMap<String, String> = tree.image_tags(image, entry).into_iter().collect();
        let bake = Node::new(target.clone(), "bake")
            .with_pool(&rt)
            .with_cost(bake_cost(tree, &rt, secs))
            .with_attr("series", &image.name)
            .with_attr("runtime", &rt);
        let spec = BakeSpec {
            label: kind_label(&target, "bake")?,
            series: image.name.clone(),
            display: image.display.clone(),
            runtime: rt.clone(),
            image_builder: ib.clone(),
            base: false,
            final_name: format!("{}-{}-{}", image.display, ib, ts),
            parent: unlinked(),
            machine_type: tree.image_machine_type(entry),
            disk_size_gb: disk,
            bake_user: tree.image_bake_user(image, entry),
            package_manager: pm.clone(),
            family: family.clone(),
            architecture: architecture.clone(),
            mods: mods.clone(),
            tests: tests.clone(),
            tags,
            capabilities: caps.clone(),
            mod_records: Vec::new(),
            chain: chain_images.clone(),
            update: None,
            dummy_bake_seconds: secs,
            base_recipe: None,
            group: group.clone(),
            required_plugins: required_plugins(tree, &ib),
        };
        let emit = Node::new(target.clone(), "emit")
            .with_policy(RunPolicy::WhenDependentDue)
            .with_attr("series", &image.name)
            .with_attr("runtime", &rt);
        let keep = tree.retention_keep(image, &rt);
        let (retag, release, dispose) = follow_ups(tree, &target, &image.name, &rt, release, keep);
        let test = test_node(tree, image, &target, &rt);
        entries.push(Entry {
            runtime: rt,
            resolve: None,
            bake: Arc::new(bake.with_inputs(crate::secret::redacted(bake_inputs))),
            spec: Arc::new(spec),
            parent,
            emit: Arc::new(emit),
            retag,
            test,
            release,
            dispose,
        });
    }
    Ok(Unit {
        kind: SeriesKind::Image,
        series: image.name.clone(),
        entries,
    })
}

/// Finish an image's [`image_draft`]: the mods' inputs with the content
/// hash of every playbook and script (`hash`), their lineage records, and
/// the pins (`pins`, asked only under `parent_policy: pinned`).
pub fn finish_image(
    mut draft: Unit,
    hash: &mut dyn FnMut(&Path) -> String,
    pins: &dyn PinSource,
) -> Unit {
    let Some(first) = draft.entries.first() else {
        return draft;
    };
    let (mod_inputs, mod_records): (Vec<Value>, Vec<Value>) = first
        .spec
        .mods
        .iter()
        .map(|m| mod_input_and_record(m, hash))
        .map(|(i, r)| (crate::secret::redacted(i), crate::secret::redacted(r)))
        .unzip();
    for e in &mut draft.entries {
        if let Value::Object(m) = Arc::make_mut(&mut e.bake).inputs_mut() {
            m.insert("mods".to_string(), Value::Array(mod_inputs.clone()));
        }
        Arc::make_mut(&mut e.spec).mod_records = mod_records.clone();
        if let ParentLink::Series {
            policy: ParentPolicy::Pinned,
            pinned_build,
            pinned_fp,
            ..
        } = &mut e.parent
        {
            *pinned_build = pins.image_pin(&draft.series, &e.runtime);
            // For the planner's "parent pin moved" (attributes never
            // enter a fingerprint).
            if let Some(b) = pinned_build.as_deref() {
                let n = Arc::make_mut(&mut e.bake);
                *n = n.clone().with_attr(PINNED_PARENT_ATTR, b);
            }
            *pinned_fp = pinned_build
                .as_deref()
                .and_then(|b| pins.build_fingerprint(b))
                .and_then(|h| Fingerprint::from_hex(&h).ok());
        }
    }
    draft
}

/// Adds [`Unit`]s to a graph, OS builders first, then images parents
/// first, and links them: an entry enters the graph when its series has no
/// bake on that runtime yet (else: `a second runtimes[] entry`) and, for an
/// image, when its parent has a bake there (else: skipped).
///
/// The graph shares the units' nodes (`Arc`): a unit added by value (the
/// plain [`compile`]) moves them in; a unit the caller keeps (the
/// incremental compile) is cloned cheaply. A bake spec is copied only to
/// set its parent, and with [`Assembler::with_specs`] a copy made by the
/// previous assembly is reused when its parent is the same.
#[derive(Default)]
pub struct Assembler {
    g: Graph,
    specs: Vec<NodeSpec>,
    bakes: BTreeMap<(String, String), NodeId>,
    warnings: Vec<String>,
    linked: Option<(LinkedSpecs, LinkedSpecs)>,
}

/// The bake specs an [`Assembler`] linked (its parent set), by the unit's
/// spec they were copied from: kept from one assembly to the next by the
/// incremental compile ([`Assembler::with_specs`]), so that the graph of an
/// unchanged unit shares its specs instead of copying them again. Each
/// entry holds the unit's spec (so its address names it while the entry
/// lives) and the linked copy.
#[derive(Default)]
pub struct LinkedSpecs {
    map: HashMap<usize, (Arc<BakeSpec>, Arc<BakeSpec>)>,
}

impl Assembler {
    /// An assembler that reuses the linked specs of a previous assembly
    /// ([`Assembler::finish_with_specs`] returns this one's).
    pub fn with_specs(previous: LinkedSpecs) -> Assembler {
        Assembler {
            linked: Some((previous, LinkedSpecs::default())),
            ..Assembler::default()
        }
    }

    fn node(&mut self, node: Arc<Node>, spec: NodeSpec) -> Result<NodeId, CompileError> {
        let id = self.g.add_node_arc(node)?;
        debug_assert_eq!(id.index(), self.specs.len());
        self.specs.push(spec);
        Ok(id)
    }

    /// The unit's bake spec with its parent set: itself when the parent
    /// is already that one, or when nothing else holds it (set in place);
    /// else the copy linked last time with the same parent, or a new copy.
    fn link(&mut self, mut spec: Arc<BakeSpec>, parent: ParentSpec) -> Arc<BakeSpec> {
        if spec.parent == parent {
            return spec;
        }
        let Some((old, new)) = &mut self.linked else {
            Arc::make_mut(&mut spec).parent = parent;
            return spec;
        };
        let key = Arc::as_ptr(&spec) as usize;
        let linked = match old.map.remove(&key) {
            Some((_, l)) if l.parent == parent => l,
            _ => {
                let mut copy = (*spec).clone();
                copy.parent = parent;
                Arc::new(copy)
            }
        };
        new.map.insert(key, (spec, linked.clone()));
        linked
    }

    /// Add a unit; per entry, whether it entered the graph (its nodes are
    /// the next ones, in [`Entry::fingerprints`] order).
    pub fn add(&mut self, unit: Unit) -> Result<Vec<bool>, CompileError> {
        let what = match unit.kind {
            SeriesKind::Os => "os builder",
            SeriesKind::Image => "image",
        };
        let mut added = Vec::with_capacity(unit.entries.len());
        for e in unit.entries {
            let rt = e.runtime;
            let key = (unit.series.clone(), rt.clone());
            if self.bakes.contains_key(&key) {
                self.warnings.push(format!(
                    "{what} {}: a second runtimes[] entry bakes on {rt}; only the first is used",
                    unit.series
                ));
                added.push(false);
                continue;
            }
            let (parent, parent_dep) = match e.parent {
                ParentLink::Vendor => (None, None),
                ParentLink::Fixed(id) => (Some(ParentSpec::Fixed { id }), None),
                ParentLink::Series {
                    series,
                    policy,
                    pinned_build,
                    pinned_fp,
                } => {
                    let Some(&pbake) = self.bakes.get(&(series.clone(), rt.clone())) else {
                        self.warnings.push(format!(
                            "image {} on {rt}: its parent {series} does not bake on {rt}; skipped",
                            unit.series
                        ));
                        added.push(false);
                        continue;
                    };
                    let dep = match pinned_fp {
                        Some(fp) => Dep::pinned("parent", fp),
                        None => Dep::hashed("parent"),
                    };
                    (
                        Some(ParentSpec::Image {
                            series,
                            bake: pbake,
                            policy,
                            pinned_build,
                        }),
                        Some((pbake, dep)),
                    )
                }
            };
            let resolve = match e.resolve {
                Some((node, spec)) => Some(self.node(node, NodeSpec::Resolve(spec))?),
                None => None,
            };
            let parent = match (parent, resolve) {
                (Some(p), _) => p,
                (None, Some(resolve)) => ParentSpec::Vendor { resolve },
                (None, None) => unreachable!("a vendor parent comes with a resolve node"),
            };
            let spec = self.link(e.spec, parent);
            let bake = self.node(e.bake, NodeSpec::Bake(spec))?;
            let emit = self.node(e.emit, NodeSpec::Emit { bake })?;
            if let Some(resolve) = resolve {
                self.g.add_dep(emit, resolve, Dep::Order)?;
            }
            self.g.add_dep(bake, emit, Dep::Order)?;
            if let Some((pbake, dep)) = parent_dep {
                self.g.add_dep(bake, pbake, dep)?;
            }
            self.bakes.insert(key, bake);
            let retag = self.node(e.retag, NodeSpec::Retag { bake })?;
            self.g.add_dep(retag, bake, Dep::Order)?;
            // Retention runs after the release: a build to release is not
            // disposed first (on an ephemeral runtime the new build would go).
            let mut before_dispose = retag;
            // The post-bake test runs on the retagged build; the release
            // waits for it (a failed test leaves the build unreleased).
            if let Some((node, tests)) = e.test {
                let t = self.node(node, NodeSpec::Test { bake, tests })?;
                self.g.add_dep(t, retag, Dep::Order)?;
                before_dispose = t;
            }
            if let Some((node, model)) = e.release {
                let r = self.node(node, NodeSpec::Release { bake, model })?;
                self.g.add_dep(r, before_dispose, Dep::Order)?;
                before_dispose = r;
            }
            if let Some((node, keep, ephemeral)) = e.dispose {
                let d = self.node(
                    node,
                    NodeSpec::Dispose {
                        series: unit.series.clone(),
                        runtime: rt.clone(),
                        keep,
                        ephemeral,
                    },
                )?;
                self.g.add_dep(d, before_dispose, Dep::Order)?;
            }
            added.push(true);
        }
        Ok(added)
    }

    /// The compiled graph.
    pub fn finish(self) -> Compiled {
        self.finish_with_specs().0
    }

    /// The compiled graph, and the specs this assembly linked (for the
    /// next one, [`Assembler::with_specs`]).
    pub fn finish_with_specs(self) -> (Compiled, LinkedSpecs) {
        let linked = self.linked.map(|(_, new)| new).unwrap_or_default();
        (
            Compiled {
                graph: self.g,
                specs: self.specs,
                bakes: self.bakes,
                warnings: self.warnings,
            },
            linked,
        )
    }
}

/// Images ordered parents first (a stable topological order over `source_image`).
pub fn image_order(tree: &Tree) -> Vec<usize> {
    let index: BTreeMap<&str, usize> = tree
        .images
        .iter()
        .enumerate()
        .map(|(i, im)| (im.name.as_str(), i))
        .collect();
    let mut state = vec![0u8; tree.images.len()]; // 0 new, 1 visiting, 2 done
    let mut out = Vec::with_capacity(tree.images.len());
    for start in 0..tree.images.len() {
        // iterative DFS
        let mut stack = vec![(start, false)];
        while let Some((i, expanded)) = stack.pop() {
            if expanded {
                state[i] = 2;
                out.push(i);
                continue;
            }
            if state[i] != 0 {
                continue;
            }
            state[i] = 1;
            stack.push((i, true));
            if let Parent::Image(p) = &tree.images[i].parent {
                if let Some(&pi) = index.get(p.as_str()) {
                    if state[pi] == 0 {
                        stack.push((pi, false));
                    }
                }
            }
        }
    }
    out
}

/// `--force-bake` values: `all`, `SERIES`, `SERIES@RUNTIME` (repeatable).
#[derive(Debug, Clone, Default)]
pub struct ForceBake {
    pub all: bool,
    pub items: Vec<(String, Option<String>)>,
}

impl ForceBake {
    pub fn parse(values: &[String]) -> ForceBake {
        let mut f = ForceBake::default();
        for v in values.iter().flat_map(|v| v.split(',')) {
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            if v == "all" {
                f.all = true;
                continue;
            }
            match v.split_once('@') {
                Some((s, r)) => f.items.push((
                    crate::tree::normalize_name(s),
                    Some(crate::tree::normalize_name(r)),
                )),
                None => f.items.push((crate::tree::normalize_name(v), None)),
            }
        }
        f
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.items.is_empty()
    }

    /// Does this force the bake node `node`?
    pub fn forces(&self, node: &Node) -> bool {
        if node.kind() != "bake" {
            return false;
        }
        if self.all {
            return true;
        }
        let (Some(s), Some(r)) = (node.attr("series"), node.attr("runtime")) else {
            return false;
        };
        self.items
            .iter()
            .any(|(fs, fr)| fs == s && fr.as_deref().is_none_or(|fr| fr == r))
    }
}

/// The update-policy rule: a base image whose head is at least
/// `update.refresh_days` old is due (`update policy: head <b> is <n> days old`).
pub fn refresh_rule() -> impl csis_engine::Rule {
    |cx: &RuleCx<'_>| {
        let days: u64 = cx.node.attr("refresh_days")?.parse().ok()?;
        let rec = cx.record?;
        let age = rec.age?;
        let age_days = age.as_secs() / 86_400;
        (age >= Duration::from_secs(days * 86_400)).then(|| {
            Reason::custom(
                "update-policy",
                format!(
                    "update policy: head {} is {age_days} days old (refresh_days: {days})",
                    rec.build.as_deref().unwrap_or("?")
                ),
            )
        })
    }
}

/// The attribute of a pinned image's bake naming the parent build it is
/// pinned to.
pub const PINNED_PARENT_ATTR: &str = "pinned_parent";

/// The upgrade rule: a pinned image whose pin names another parent build
/// than its head was baked from is due (`parent pin moved <from> -> <to>`;
/// `csis upgrade image` moves a pin).
pub fn pin_moved_rule() -> impl csis_engine::Rule {
    |cx: &RuleCx<'_>| {
        let pin = cx.node.attr(PINNED_PARENT_ATTR)?;
        let from = cx.record?.deps.get("parent")?;
        (from != pin)
            .then(|| Reason::custom("pin-moved", format!("parent pin moved {from} -> {pin}")))
    }
}

/// The planner csis uses: forced, no build yet, parent moved (follow),
/// parent re-bakes this run (follow), parent pin moved (pinned), inputs
/// changed, update policy.
pub fn planner(force: &ForceBake) -> Planner<'_> {
    let mut p = Planner::new();
    if !force.is_empty() {
        p = p.forced(move |n| force.forces(n));
    }
    p.rule(csis_engine::plan::rules::no_record())
        .rule(csis_engine::plan::rules::dep_moved())
        .rule(csis_engine::plan::rules::dep_due())
        .rule(pin_moved_rule())
        .rule(csis_engine::plan::rules::inputs_changed())
        .rule(refresh_rule())
}

/// The files a tree's compile read besides the YAML (playbooks, scripts),
/// for `csis watch`.
pub fn input_files(tree: &Tree) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = tree
        .images
        .iter()
        .flat_map(|i| tree.mod_inputs(i).into_iter().flat_map(|m| m.files))
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests;

/// An OS builder's architecture: `default` (or none) is `x86_64`.
fn os_architecture(os: &crate::tree::OsBuilder) -> String {
    if os.model.architecture.is_empty() || os.model.architecture == "default" {
        "x86_64".to_string()
    } else {
        os.model.architecture.clone()
    }
}
