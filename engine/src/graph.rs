//! The DAG: nodes, dependencies, cycle detection, selection, fingerprints.
//!
//! Edges point from a dependency to its dependent, so a topological order
//! lists parents first. Three kinds of dependency ([`Dep`]):
//!
//! - [`Dep::Order`]: "runs after"; not hashed (e.g. a bake after its emit).
//! - [`Dep::Hashed`]: runs after, and the dependency's fingerprint is hashed
//!   into the dependent's under a name (a child under `parent_policy: follow`
//!   hashes its parent bake's fingerprint as `"parent"`).
//! - [`Dep::Pinned`]: runs after (an ordering edge only), and a *literal*
//!   recorded fingerprint is hashed under the name (a pinned child hashes the
//!   pinned build's recorded fingerprint). A pinned and a follow child whose
//!   pin equals the parent's current fingerprint hash identically.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use fixedbitset::FixedBitSet;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction::{Incoming, Outgoing};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fingerprint::Fingerprint;
use crate::inputs::Inputs;
use crate::label::Label;
use crate::pattern::{closest, Pattern, SelectError};

/// A node's index in its [`Graph`] (dense, from 0, in insertion order).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct NodeId(u32);

impl NodeId {
    /// The dense index (0..graph.len()).
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// The id of the node at `index` in insertion order (what [`NodeId::index`]
    /// returns); a graph refuses an id past its nodes.
    pub fn from_index(index: usize) -> NodeId {
        NodeId(u32::try_from(index).expect("fewer than 2^32 nodes"))
    }
    fn ix(self) -> NodeIndex<u32> {
        NodeIndex::new(self.0 as usize)
    }
    fn from_ix(ix: NodeIndex<u32>) -> Self {
        NodeId(ix.index() as u32)
    }
}

/// When a node runs. The planner ([`crate::Planner`]) reads it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPolicy {
    /// Due or current as decided by the planner's rules (bake, release, dispose).
    #[default]
    Decide,
    /// A support node: due iff a selected dependent is due (resolve, emit).
    /// Its own fingerprint is still computed; it never counts as skipped.
    WhenDependentDue,
    /// A follow-up node: due iff a selected dependency that is not a
    /// `WhenDependentDue` support node is due (retag after its bake).
    WhenDependencyDue,
    /// Always due.
    Always,
}

/// A dependency edge; see the module docs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Dep {
    /// Runs after; not hashed.
    Order,
    /// Runs after; the dependency's fingerprint is hashed under this name.
    Hashed(Box<str>),
    /// Runs after; this literal fingerprint is hashed under the name.
    Pinned {
        name: Box<str>,
        fingerprint: Fingerprint,
    },
}

impl Dep {
    /// A hashed dependency named `name` (e.g. `"parent"` under follow).
    pub fn hashed(name: &str) -> Dep {
        Dep::Hashed(name.into())
    }
    /// An ordering edge that hashes a literal recorded fingerprint (pinned).
    pub fn pinned(name: &str, fingerprint: Fingerprint) -> Dep {
        Dep::Pinned {
            name: name.into(),
            fingerprint,
        }
    }
    /// The hash name of a hashed or pinned dependency.
    pub fn hash_name(&self) -> Option<&str> {
        match self {
            Dep::Order => None,
            Dep::Hashed(n) => Some(n),
            Dep::Pinned { name, .. } => Some(name),
        }
    }
}

/// One node. Build with [`Node::new`] and the builder methods.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    label: Label,
    /// Canonically encoded ([`Inputs`]).
    inputs: Inputs,
    policy: RunPolicy,
    pool: Option<Box<str>>,
    cost: u64,
    /// Sorted by key; few entries.
    attrs: Vec<(Box<str>, Box<str>)>,
}

impl Node {
    /// A node of `kind` for `target`: its label is `target` with the kind set
    /// (replacing any kind the target label had). Inputs default to `null`,
    /// the policy to [`RunPolicy::Decide`], the cost to 1, no pool.
    ///
    /// # Panics
    /// If `kind` is not a valid label word (empty, or has `/@:` or spaces).
    pub fn new(target: Label, kind: &str) -> Node {
        let label = target
            .with_kind(kind)
            .unwrap_or_else(|e| panic!("invalid node kind: {e}"));
        Node {
            label,
            inputs: Inputs::null(),
            policy: RunPolicy::Decide,
            pool: None,
            cost: 1,
            attrs: Vec::new(),
        }
    }
    /// Set the canonical inputs hashed into the fingerprint (kept
    /// encoded, [`Inputs`]).
    pub fn with_inputs(mut self, inputs: Value) -> Self {
        self.inputs = Inputs::new(&inputs);
        self
    }
    /// Set one top-level field of the inputs (an object), to finish them
    /// in place before the node is in a graph.
    pub fn set_input(&mut self, key: &str, value: &Value) {
        self.inputs.set(key, value);
    }
    /// Set the run policy.
    pub fn with_policy(mut self, policy: RunPolicy) -> Self {
        self.policy = policy;
        self
    }
    /// Name the pool whose parallel limit applies (e.g. the runtime).
    pub fn with_pool(mut self, pool: &str) -> Self {
        self.pool = Some(pool.into());
        self
    }
    /// An estimate of the node's duration in any unit (default 1), used only
    /// to order ready nodes by longest remaining path. Never hashed.
    pub fn with_cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }
    /// An opaque attribute copied to the plan (`series`, `runtime`). Never hashed.
    pub fn with_attr(mut self, key: &str, value: &str) -> Self {
        self.set_attr(key, value);
        self
    }

    /// Set an attribute in place (see [`Node::with_attr`]).
    pub fn set_attr(&mut self, key: &str, value: &str) {
        match self.attrs.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(i) => self.attrs[i].1 = value.into(),
            Err(i) => self.attrs.insert(i, (key.into(), value.into())),
        }
    }

    /// The label, with the kind: `//images/dask@aws-east2:bake`.
    pub fn label(&self) -> &Label {
        &self.label
    }
    /// The kind (`bake`, `emit`, ...).
    pub fn kind(&self) -> &str {
        self.label.kind().expect("a node label has a kind")
    }
    /// The canonical inputs (encoded: [`Inputs::to_value`] for the value).
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }
    /// The run policy.
    pub fn policy(&self) -> RunPolicy {
        self.policy
    }
    /// The pool, if any.
    pub fn pool(&self) -> Option<&str> {
        self.pool.as_deref()
    }
    /// The cost estimate.
    pub fn cost(&self) -> u64 {
        self.cost
    }
    /// All attributes, sorted by key.
    pub fn attrs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.attrs.iter().map(|(k, v)| (&**k, &**v))
    }
    /// One attribute.
    pub fn attr(&self, key: &str) -> Option<&str> {
        // A node has a handful of attributes: a scan that compares
        // lengths first touches the bytes of one key (a binary search
        // compared whole keys; a plan asks two attributes of every node).
        self.attrs
            .iter()
            .find(|(k, _)| k.len() == key.len() && **k == *key)
            .map(|(_, v)| &**v)
    }
}

/// A dependency cycle, printed as `//a:bake -> //b:bake -> //a:bake`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("dependency cycle: {}", .cycle.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(" -> "))]
pub struct CycleError {
    /// The labels around the cycle; the first is repeated at the end.
    pub cycle: Vec<Label>,
}

/// Errors building or walking a graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("duplicate node label {0}")]
    DuplicateLabel(Label),
    #[error("{0} cannot depend on itself")]
    SelfDependency(Label),
    #[error("node id {0:?} is not in this graph")]
    UnknownNode(NodeId),
    #[error("node {was} cannot be replaced by a node of another label ({by})")]
    Replaced { was: Label, by: Label },
    #[error(transparent)]
    Cycle(#[from] CycleError),
}

/// The build graph.
#[derive(Default)]
pub struct Graph {
    g: DiGraph<Arc<Node>, Dep, u32>,
    /// Labels are the tree's own names (not a peer's input), so FxHash's
    /// weaker resistance to crafted collisions costs nothing.
    /// Shared between copies ([`Clone`]: a watcher patches a copy of the
    /// last graph, whose labels stay), copied when a copy adds a node.
    by_label: Arc<FxHashMap<Label, NodeId>>,
    /// Which nodes and edges the graph has ([`Graph::shape`]): given when
    /// first asked (0: not yet, or a node or edge added since), so that
    /// building a graph costs no atomic operation per node.
    shape: std::sync::atomic::AtomicU64,
}

impl Clone for Graph {
    /// A copy of the same shape ([`Graph::shape`]).
    fn clone(&self) -> Graph {
        Graph {
            g: self.g.clone(),
            by_label: self.by_label.clone(),
            shape: std::sync::atomic::AtomicU64::new(self.shape()),
        }
    }
}

/// The last shape given ([`Graph::shape`]): unique in the process.
static SHAPES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn new_shape() -> u64 {
    SHAPES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Graph({} nodes, {} edges)",
            self.g.node_count(),
            self.g.edge_count()
        )
    }
}

/// A set of selected nodes (see [`Graph::select`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    set: FixedBitSet,
}

impl Selection {
    /// Whether `id` is selected.
    pub fn contains(&self, id: NodeId) -> bool {
        self.set.contains(id.index())
    }
    /// How many nodes are selected.
    pub fn len(&self) -> usize {
        self.set.count_ones(..)
    }
    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.set.is_clear()
    }
    /// The selected ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.set.ones().map(|i| NodeId(i as u32))
    }
}

/// Every node's fingerprint, plus the topological order used to compute them.
#[derive(Clone, Debug)]
pub struct Fingerprints {
    fps: Vec<Fingerprint>,
    order: Vec<NodeId>,
}

impl Fingerprints {
    /// Fingerprints computed elsewhere for `graph`'s nodes (indexed by
    /// [`NodeId::index`]), e.g. memoized per node by an incremental compile.
    /// The caller vouches that each equals what [`Graph::fingerprints`]
    /// computes; this only adds the topological order.
    ///
    /// # Panics
    /// If `fps` does not hold one fingerprint per node.
    pub fn from_computed(graph: &Graph, fps: Vec<Fingerprint>) -> Result<Self, CycleError> {
        assert_eq!(fps.len(), graph.len(), "one fingerprint per node");
        Ok(Fingerprints {
            fps,
            order: graph.topo_order()?,
        })
    }

    /// New fingerprints `fps` (indexed by [`NodeId::index`]) of a graph of
    /// the same shape as these were computed for (the same nodes and
    /// edges, some nodes' contents replaced, [`Graph::replace_node`]): the
    /// topological order is kept. The caller vouches for both.
    ///
    /// # Panics
    /// If `fps` does not hold one fingerprint per node.
    pub fn with_values(&self, fps: Vec<Fingerprint>) -> Fingerprints {
        assert_eq!(fps.len(), self.fps.len(), "one fingerprint per node");
        Fingerprints {
            fps,
            order: self.order.clone(),
        }
    }

    /// The fingerprint of `id`.
    pub fn get(&self, id: NodeId) -> Fingerprint {
        self.fps[id.index()]
    }
    /// All node ids, parents before children.
    pub fn topo_order(&self) -> &[NodeId] {
        &self.order
    }
}

impl std::ops::Index<NodeId> for Fingerprints {
    type Output = Fingerprint;
    fn index(&self, id: NodeId) -> &Fingerprint {
        &self.fps[id.index()]
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// An empty graph with room for `nodes` nodes and `edges` edges.
    pub fn with_capacity(nodes: usize, edges: usize) -> Graph {
        Graph {
            g: DiGraph::with_capacity(nodes, edges),
            by_label: Arc::new(FxHashMap::with_capacity_and_hasher(
                nodes,
                Default::default(),
            )),
            shape: Default::default(),
        }
    }

    /// Add a node. Labels are unique.
    pub fn add_node(&mut self, node: Node) -> Result<NodeId, GraphError> {
        self.add_node_arc(Arc::new(node))
    }

    /// Add a node shared with the caller (no copy: an incremental compile
    /// keeps its memoized nodes and the graph points at them). Labels are
    /// unique.
    pub fn add_node_arc(&mut self, node: Arc<Node>) -> Result<NodeId, GraphError> {
        use std::collections::hash_map::Entry;
        match Arc::make_mut(&mut self.by_label).entry(node.label.clone()) {
            Entry::Occupied(_) => Err(GraphError::DuplicateLabel(node.label.clone())),
            Entry::Vacant(slot) => {
                let id = NodeId::from_ix(self.g.add_node(node));
                slot.insert(id);
                *self.shape.get_mut() = 0;
                Ok(id)
            }
        }
    }

    /// Put `node` in the place of node `id`, whose label it must have: its
    /// edges and its place in every order stay (an incremental compile
    /// patches a graph whose shape did not move).
    pub fn replace_node(&mut self, id: NodeId, node: Arc<Node>) -> Result<(), GraphError> {
        self.check(id)?;
        let slot = &mut self.g[id.ix()];
        if slot.label != node.label {
            return Err(GraphError::Replaced {
                was: slot.label.clone(),
                by: node.label.clone(),
            });
        }
        *slot = node;
        Ok(())
    }

    /// Declare that `node` depends on `dep` (so `dep` runs first).
    pub fn add_dep(&mut self, node: NodeId, dep: NodeId, kind: Dep) -> Result<(), GraphError> {
        self.check(node)?;
        self.check(dep)?;
        if node == dep {
            return Err(GraphError::SelfDependency(self.node(node).label.clone()));
        }
        self.g.add_edge(dep.ix(), node.ix(), kind);
        *self.shape.get_mut() = 0;
        Ok(())
    }

    fn check(&self, id: NodeId) -> Result<(), GraphError> {
        if id.index() < self.g.node_count() {
            Ok(())
        } else {
            Err(GraphError::UnknownNode(id))
        }
    }

    /// An id of the graph's nodes (their labels, in their places) and
    /// edges: a copy of the graph keeps it, and so does a node replaced in
    /// place ([`Graph::replace_node`], which keeps its label); adding a node
    /// or an edge gives a new one, never given before in the process. Two
    /// graphs of one shape have the same labels at the same ids and the same
    /// edges (a plan made on one can carry its nodes to the other,
    /// [`crate::Planner::plan_after`]).
    pub fn shape(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        match self.shape.load(Relaxed) {
            0 => {
                let new = new_shape();
                match self.shape.compare_exchange(0, new, Relaxed, Relaxed) {
                    Ok(_) => new,
                    Err(given) => given,
                }
            }
            given => given,
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.g.node_count()
    }
    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }
    /// Number of dependency edges.
    pub fn edge_count(&self) -> usize {
        self.g.edge_count()
    }

    /// The node `id`. Panics if `id` is not from this graph.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.g[id.ix()]
    }
    /// The node `id`, shared (handed to actions).
    pub fn node_arc(&self, id: NodeId) -> &Arc<Node> {
        &self.g[id.ix()]
    }
    /// The node with this (full) label.
    pub fn find(&self, label: &Label) -> Option<NodeId> {
        self.by_label.get(label).copied()
    }
    /// All node ids in insertion order.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.g.node_indices().map(NodeId::from_ix)
    }
    /// The direct dependencies of `id`, with the edge kind.
    pub fn deps(&self, id: NodeId) -> impl Iterator<Item = (NodeId, &Dep)> + '_ {
        self.g
            .edges_directed(id.ix(), Incoming)
            .map(|e| (NodeId::from_ix(e.source()), e.weight()))
    }
    /// The direct dependents of `id` (nodes that depend on it).
    pub fn dependents(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.g
            .neighbors_directed(id.ix(), Outgoing)
            .map(NodeId::from_ix)
    }

    /// A topological order (dependencies first), or the cycle.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, CycleError> {
        // Kahn's algorithm; ties in insertion order, so the order is stable.
        let n = self.g.node_count();
        let mut indeg: Vec<u32> = vec![0; n];
        for e in self.g.edge_references() {
            indeg[e.target().index()] += 1;
        }
        let mut queue: VecDeque<NodeIndex<u32>> = (0..n)
            .filter(|&i| indeg[i] == 0)
            .map(NodeIndex::new)
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(v) = queue.pop_front() {
            order.push(NodeId::from_ix(v));
            for w in self.g.neighbors_directed(v, Outgoing) {
                indeg[w.index()] -= 1;
                if indeg[w.index()] == 0 {
                    queue.push_back(w);
                }
            }
        }
        if order.len() == n {
            return Ok(order);
        }
        let left: Vec<bool> = indeg.iter().map(|&d| d > 0).collect();
        Err(self.find_cycle(&left))
    }

    /// Find one cycle among the nodes Kahn's algorithm could not order.
    fn find_cycle(&self, left: &[bool]) -> CycleError {
        // Every leftover node has a leftover predecessor; walk predecessors
        // until a node repeats: that closes a cycle.
        let start = left.iter().position(|&b| b).expect("a node is left");
        let mut seen: HashMap<usize, usize> = HashMap::new();
        let mut walk: Vec<usize> = Vec::new();
        let mut v = start;
        loop {
            if let Some(&at) = seen.get(&v) {
                let mut cyc: Vec<usize> = walk[at..].to_vec();
                cyc.reverse(); // predecessors walked backwards: flip to dep order
                let mut labels: Vec<Label> = cyc
                    .iter()
                    .map(|&i| self.g[NodeIndex::new(i)].label.clone())
                    .collect();
                labels.push(labels[0].clone());
                return CycleError { cycle: labels };
            }
            seen.insert(v, walk.len());
            walk.push(v);
            v = self
                .g
                .neighbors_directed(NodeIndex::new(v), Incoming)
                .map(|p| p.index())
                .find(|&p| left[p])
                .expect("a leftover node has a leftover predecessor");
        }
    }

    /// Check the graph is acyclic.
    pub fn check_acyclic(&self) -> Result<(), CycleError> {
        self.topo_order().map(|_| ())
    }

    /// Every node.
    pub fn select_all(&self) -> Selection {
        let mut set = FixedBitSet::with_capacity(self.len());
        set.insert_range(..);
        Selection { set }
    }

    /// The nodes matching any pattern, plus all their ancestors (what they
    /// need). A pattern that matches no node is an error naming the closest
    /// labels. An empty pattern list selects nothing.
    pub fn select(&self, patterns: &[Pattern]) -> Result<Selection, SelectError> {
        let mut set = FixedBitSet::with_capacity(self.len());
        let mut stack: Vec<NodeIndex<u32>> = Vec::new();
        for p in patterns {
            let mut any = false;
            for ix in self.g.node_indices() {
                if p.matches(&self.g[ix].label) {
                    any = true;
                    if !set.put(ix.index()) {
                        stack.push(ix);
                    }
                }
            }
            if !any {
                return Err(SelectError {
                    pattern: p.as_str().to_string(),
                    closest: closest(p, self.g.node_weights().map(|n| &n.label), 3),
                });
            }
        }
        while let Some(v) = stack.pop() {
            for d in self.g.neighbors_directed(v, Incoming) {
                if !set.put(d.index()) {
                    stack.push(d);
                }
            }
        }
        Ok(Selection { set })
    }

    /// Every node's fingerprint, parents first (see [`crate::fingerprint`]).
    pub fn fingerprints(&self) -> Result<Fingerprints, CycleError> {
        let order = self.topo_order()?;
        let mut fps = vec![Fingerprint::default(); self.len()];
        let mut deps: Vec<(&str, Fingerprint)> = Vec::new();
        let mut buf: Vec<u8> = Vec::with_capacity(4096);
        for &id in &order {
            deps.clear();
            for e in self.g.edges_directed(id.ix(), Incoming) {
                match e.weight() {
                    Dep::Order => {}
                    Dep::Hashed(name) => deps.push((name, fps[e.source().index()])),
                    Dep::Pinned { name, fingerprint } => deps.push((name, *fingerprint)),
                }
            }
            let node = &self.g[id.ix()];
            fps[id.index()] =
                Fingerprint::compute_encoded(&mut buf, node.kind(), &node.inputs, &mut deps);
        }
        Ok(Fingerprints { fps, order })
    }

    /// The canonical document of a node, to store with its record and diff
    /// later (`--explain`): `{"kind", "inputs", "deps": {name: fingerprint}}`.
    /// It holds exactly what the fingerprint hashes (besides the recipe).
    /// A repeated hash name gets a `#2`, `#3`, ... suffix here.
    pub fn canonical(&self, id: NodeId, fps: &Fingerprints) -> Value {
        let node = self.node(id);
        let mut deps: Vec<(String, Fingerprint)> = self
            .deps(id)
            .filter_map(|(d, dep)| match dep {
                Dep::Order => None,
                Dep::Hashed(n) => Some((n.to_string(), fps.get(d))),
                Dep::Pinned { name, fingerprint } => Some((name.to_string(), *fingerprint)),
            })
            .collect();
        deps.sort();
        let mut map = serde_json::Map::new();
        let mut count: HashMap<String, usize> = HashMap::new();
        for (name, fp) in deps {
            let c = count.entry(name.clone()).or_insert(0);
            *c += 1;
            let key = if *c == 1 { name } else { format!("{name}#{c}") };
            map.insert(key, Value::String(fp.to_hex()));
        }
        serde_json::json!({
            "kind": node.kind(),
            "inputs": node.inputs.to_value(),
            "deps": Value::Object(map),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> Label {
        Label::parse(s).unwrap()
    }

    #[test]
    fn duplicate_and_self_dependency() {
        let mut g = Graph::new();
        let a = g.add_node(Node::new(t("//a@rt"), "bake")).unwrap();
        assert_eq!(
            g.add_node(Node::new(t("//a@rt"), "bake")),
            Err(GraphError::DuplicateLabel(t("//a@rt:bake")))
        );
        assert!(matches!(
            g.add_dep(a, a, Dep::Order),
            Err(GraphError::SelfDependency(_))
        ));
        assert_eq!(g.find(&t("//a@rt:bake")), Some(a));
    }

    #[test]
    fn a_shared_node_is_not_copied_and_labels_stay_unique() {
        let mut g = Graph::new();
        let n = Arc::new(Node::new(t("//a@rt"), "bake").with_inputs(json!({"x": 1})));
        let a = g.add_node_arc(n.clone()).unwrap();
        assert!(Arc::ptr_eq(g.node_arc(a), &n));
        assert_eq!(g.find(&t("//a@rt:bake")), Some(a));
        assert_eq!(
            g.add_node_arc(n),
            Err(GraphError::DuplicateLabel(t("//a@rt:bake")))
        );
        assert_eq!(
            g.add_node(Node::new(t("//a@rt"), "bake")),
            Err(GraphError::DuplicateLabel(t("//a@rt:bake")))
        );
    }

    #[test]
    fn canonical_holds_inputs_and_hashed_deps() {
        let mut g = Graph::new();
        let p = g
            .add_node(Node::new(t("//p@rt"), "bake").with_inputs(json!({"x": 1})))
            .unwrap();
        let c = g
            .add_node(Node::new(t("//c@rt"), "bake").with_inputs(json!({"y": 2})))
            .unwrap();
        g.add_dep(c, p, Dep::hashed("parent")).unwrap();
        let fps = g.fingerprints().unwrap();
        let doc = g.canonical(c, &fps);
        assert_eq!(doc["inputs"], json!({"y": 2}));
        assert_eq!(doc["deps"]["parent"], json!(fps.get(p).to_hex()));
    }
}
