//! The compile's vocabulary: what each graph node means to csis (its
//! [`NodeSpec`]: a resolve's question, a bake's [`BakeSpec`], ...), the
//! compiled graph with its specs ([`Compiled`]), and what the compile asks
//! of `meta-state/` ([`PinSource`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use csis_engine::{Graph, GraphError, Label, NodeId};
use serde_json::Value;

use crate::tree::{InBakeTest, ModInput, RuntimeEntry};
use csis_schema::model::{JsonMap, ParentPolicy};

/// What the compile needs from `meta-state/` (implemented by csis-cache):
/// pins, and the fingerprints recorded for builds.
pub trait PinSource {
    /// The parent build `image` is pinned to on `runtime`.
    fn image_pin(&self, image: &str, runtime: &str) -> Option<String>;
    /// The input fingerprint recorded for `build_id` (64 hex).
    fn build_fingerprint(&self, build_id: &str) -> Option<String>;
    /// The capability stamp recorded for `build_id` (`{identity_types,
    /// storage_types}`), when it is recorded: a pinned child inherits its
    /// parent build's stamp, not today's declaration of its root (core.md
    /// §1.4, N24).
    fn build_capabilities(&self, build_id: &str) -> Option<Value> {
        let _ = build_id;
        None
    }
    /// The fleet's records: the instances and storages recorded (so one the
    /// tree declares no more gets a node that retires it), the instance
    /// pins and pending replacements, the series heads (the build an
    /// instance will boot enters its fingerprint).
    fn fleet(&self) -> RecordedFleet {
        RecordedFleet::default()
    }
}

/// What the compile reads of the fleet's records (`launch-params.yaml`,
/// `storage-state.yaml`, `pins.yaml`, the lineage heads).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedFleet {
    /// Launched instances, by name.
    pub instances: BTreeMap<String, RecordedInstance>,
    /// Recorded storages (not destroyed), by name.
    pub storages: BTreeMap<String, RecordedStorage>,
    /// `instance -> build` (pins.yaml `instances`).
    pub pins: BTreeMap<String, String>,
    /// `instance -> build` (pins.yaml `pending_replacements`).
    pub pending: BTreeMap<String, String>,
    /// `(series, runtime) -> head build`.
    pub heads: BTreeMap<(String, String), String>,
}

/// A launched instance as `launch-params.yaml` records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedInstance {
    pub runtime: String,
    pub image: String,
    pub build: String,
    /// The storages it mounts.
    pub mounts: Vec<String>,
}

/// A storage as `storage-state.yaml` records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedStorage {
    /// `active`, `archived` or `destroyed`.
    pub state: String,
    pub builder: String,
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

/// The scheduler's cost of a bake, in milliseconds (it runs the longest
/// remaining path first): the compile asks its caller, which knows the
/// runtime types (`csis_ops::wiring`), once per series and runtime entry.
/// Never part of a fingerprint.
pub trait BakeCost: Send + Sync {
    /// The cost of baking the series whose `config:` is `config` on the
    /// runtime entry `runtime`.
    fn bake_cost(&self, runtime: &RuntimeEntry, config: &JsonMap) -> u64;
}

/// What a bake costs when its runtime type does not say: ten minutes.
pub const DEFAULT_BAKE_COST: u64 = 600_000;

/// Every bake costs [`DEFAULT_BAKE_COST`].
pub struct DefaultCost;
impl BakeCost for DefaultCost {
    fn bake_cost(&self, _: &RuntimeEntry, _: &JsonMap) -> u64 {
        DEFAULT_BAKE_COST
    }
}

/// The kind of a graph node. The engine carries it as a string (it knows
/// no kinds): [`NodeKind::as_str`], the same in labels
/// (`//images/web@rt:bake`), events and `--json` output. A string compares
/// with a kind directly (`n.kind == NodeKind::Bake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeKind {
    /// The vendor image a base image starts from (a read-only query).
    Resolve,
    /// The emission of a bake's files.
    Emit,
    Bake,
    /// The movable tags of a new build.
    Retag,
    /// The post-bake test of a new build.
    Test,
    Release,
    /// The retention of a series on a runtime.
    Dispose,
    /// A modification applied twice in a throwaway container (`csis
    /// test-mods`; its own graph, [`crate::compile::mod_tests`]).
    ModTest,
    /// A declared (or recorded) storage: created, archived, destroyed.
    Storage,
    /// A declared (or recorded) instance: launched, replaced, decommissioned.
    Instance,
}

impl NodeKind {
    /// The kind as the engine carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            NodeKind::Resolve => "resolve",
            NodeKind::Emit => "emit",
            NodeKind::Bake => "bake",
            NodeKind::Retag => "retag",
            NodeKind::Test => "test",
            NodeKind::Release => "release",
            NodeKind::Dispose => "dispose",
            NodeKind::ModTest => "mod_test",
            NodeKind::Storage => "storage",
            NodeKind::Instance => "instance",
        }
    }
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<NodeKind> for str {
    fn eq(&self, kind: &NodeKind) -> bool {
        self == kind.as_str()
    }
}

impl PartialEq<NodeKind> for &str {
    fn eq(&self, kind: &NodeKind) -> bool {
        *self == kind.as_str()
    }
}

impl PartialEq<NodeKind> for String {
    fn eq(&self, kind: &NodeKind) -> bool {
        self == kind.as_str()
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
    pub update: csis_schema::model::UpdatePolicy,
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

/// What one mod test node runs.
#[derive(Debug, Clone)]
pub struct ModTestSpec {
    pub label: Label,
    /// The image whose modification it is (the first, when images share it).
    pub image: String,
    pub modification: ModInput,
    /// The content hash its bakes record (`mods[].content_hash`).
    pub content_hash: String,
    /// `ansible` or `bash`.
    pub operation: String,
    /// The chain root: the OS builder whose family the test container is.
    pub os: String,
    pub family: String,
    pub family_version: String,
    pub package_manager: String,
    /// The OS builder's `local_test_image`, when declared.
    pub local_test_image: Option<String>,
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
    /// A mod test (only in the graph of [`crate::compile::mod_tests`]).
    ModTest(Box<ModTestSpec>),
    /// A storage's lifecycle (`compile::fleet`).
    Storage(Arc<StorageSpec>),
    /// An instance's lifecycle (`compile::fleet`).
    Instance(Arc<InstanceSpec>),
}

/// What a storage node applies.
#[derive(Debug, Clone)]
pub struct StorageSpec {
    pub label: Label,
    /// Canonical name.
    pub name: String,
    pub runtime: String,
    pub builder: String,
    /// The declaration; None: recorded, declared no more (destroy).
    pub declared: Option<crate::fleet::Storage>,
    /// Why it may not change anything (`apply_storage`), None: it applies.
    pub gated: Option<String>,
}

/// What an instance node applies.
#[derive(Debug, Clone)]
pub struct InstanceSpec {
    pub label: Label,
    /// As declared (its hostnames are `<name>-NNN`).
    pub name: String,
    pub runtime: String,
    pub builder: String,
    pub image: String,
    /// The declaration; None: recorded, declared no more (decommission).
    pub declared: Option<crate::fleet::Instance>,
    /// The image's bake node on the runtime (when it bakes there).
    pub bake: Option<NodeId>,
    /// Its image's post-bake tests (an ephemeral instance runs them).
    pub post_bake: Vec<InBakeTest>,
    /// Why it may not change anything (`apply_instances`), None: it applies.
    pub gated: Option<String>,
    /// `require_released_builds`: a first bind takes the release.
    pub require_released: bool,
    /// The release model of its image, when it declares one.
    pub release_model: Option<String>,
}

/// The compiled graph and what each node means.
#[derive(Clone)]
pub struct Compiled {
    pub graph: Graph,
    pub(super) specs: Vec<NodeSpec>,
    /// Shared between copies (a watcher patches a copy of the last
    /// compile, whose bake nodes stay).
    pub(super) bakes: Arc<BTreeMap<(String, String), NodeId>>,
    /// The fleet's nodes (storages, then instances), in graph order.
    pub(super) fleet: Vec<NodeId>,
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
    /// Every storage and instance node.
    pub fn fleet_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.fleet.iter().copied()
    }
    pub fn instance_spec(&self, id: NodeId) -> Option<&InstanceSpec> {
        match self.spec(id) {
            NodeSpec::Instance(i) => Some(i),
            _ => None,
        }
    }
    pub fn storage_spec(&self, id: NodeId) -> Option<&StorageSpec> {
        match self.spec(id) {
            NodeSpec::Storage(s) => Some(s),
            _ => None,
        }
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

/// The attribute of a pinned image's bake naming the parent build it is
/// pinned to.
pub const PINNED_PARENT_ATTR: &str = "pinned_parent";
