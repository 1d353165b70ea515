//! The planner: for every selected node, `Due { reason }` or `Current`.
//!
//! Nodes are decided by their [`RunPolicy`]:
//!
//! - `Decide` nodes (bakes, releases, disposals) go through the planner's
//!   chain, **first match wins**: the `forced` predicate, then each [`Rule`]
//!   in order; no match means current. [`Planner::standard`] holds the chain
//!   of core.md §4.6 minus the domain parts:
//!   1. forced (if a predicate is set with [`Planner::forced`]): `forced`;
//!   2. [`rules::no_record`]: no record for the node: `no build yet on <rt>`;
//!   3. [`rules::dep_moved`]: a hashed dependency's head build differs from
//!      the one this head was made from: `parent moved <a> -> <b>`;
//!   4. [`rules::dep_due`]: a hashed (follow) dependency is due this run:
//!      `parent //images/base@rt:bake re-bakes this run`;
//!   5. [`rules::inputs_changed`]: the fingerprint differs from the record's:
//!      `inputs changed (<old12> -> <new12>)`;
//!   6. then whatever the caller appends with [`Planner::rule`] (e.g. an update
//!      policy: `update policy: head is 31 days old`).
//! - `Always` nodes are due.
//! - `WhenDependencyDue` nodes (retag) are due iff a selected dependency that
//!   is not a `WhenDependentDue` support node is due.
//! - `WhenDependentDue` support nodes (resolve, emit) are due iff a selected
//!   dependent is due (decided last, dependents before dependencies).
//!
//! Rules run parents first, so a rule may read its dependencies' decisions
//! (support nodes' decisions are not known yet then: they read as not due).
//! The plan holds every selected node, in topological order, and is complete
//! before anything runs.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fingerprint::{diff, FieldChange, Fingerprint};
use crate::graph::{CycleError, Dep, Fingerprints, Graph, Node, NodeId, RunPolicy, Selection};
use crate::label::Label;

pub use crate::record::{DepBuilds, Record};

/// The caller's lookup of records: given a node, its head's record.
/// Only asked about `Decide` nodes.
pub trait Records {
    /// The record of `node`'s head, if any.
    fn record(&self, node: &Node) -> Option<&Record>;
}

/// Records in memory, keyed by node label (tests, simple callers).
#[derive(Clone, Debug, Default)]
pub struct MemoryRecords {
    /// Label -> record.
    pub map: HashMap<Label, Record>,
}

impl MemoryRecords {
    /// Set the record of `label`.
    pub fn insert(&mut self, label: Label, record: Record) {
        self.map.insert(label, record);
    }
}

impl Records for MemoryRecords {
    fn record(&self, node: &Node) -> Option<&Record> {
        self.map.get(node.label())
    }
}

impl<R: Records + ?Sized> Records for &R {
    fn record(&self, node: &Node) -> Option<&Record> {
        (**self).record(node)
    }
}

/// Why a node is due.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Reason {
    /// Forced by the caller (`--force-bake`).
    Forced,
    /// No record for the node yet.
    NoRecord { runtime: Option<String> },
    /// A hashed dependency's head moved since this head was made.
    DepMoved {
        dep: String,
        from: String,
        to: String,
    },
    /// A hashed (follow) dependency is due this run.
    DepDue { dep: String, label: Label },
    /// The fingerprint differs from the recorded one.
    InputsChanged {
        old: Option<Fingerprint>,
        new: Fingerprint,
    },
    /// A support node needed by a due dependent.
    NeededBy { label: Label },
    /// A follow-up node after a due dependency.
    After { label: Label },
    /// A node with [`RunPolicy::Always`].
    Always,
    /// A caller rule's reason.
    Custom { code: String, message: String },
}

impl Reason {
    /// A caller-defined reason: a short code and a message for people.
    pub fn custom(code: &str, message: impl Into<String>) -> Reason {
        Reason::Custom {
            code: code.to_string(),
            message: message.into(),
        }
    }
    /// The machine code: `forced`, `no-record`, `dep-moved`, `dep-due`,
    /// `inputs-changed`, `needed-by`, `after`, `always` or the custom code.
    pub fn code(&self) -> &str {
        match self {
            Reason::Forced => "forced",
            Reason::NoRecord { .. } => "no-record",
            Reason::DepMoved { .. } => "dep-moved",
            Reason::DepDue { .. } => "dep-due",
            Reason::InputsChanged { .. } => "inputs-changed",
            Reason::NeededBy { .. } => "needed-by",
            Reason::After { .. } => "after",
            Reason::Always => "always",
            Reason::Custom { code, .. } => code,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced => write!(f, "forced (--force-bake)"),
            Reason::NoRecord { runtime: Some(rt) } => write!(f, "no build yet on {rt}"),
            Reason::NoRecord { runtime: None } => write!(f, "no build yet"),
            Reason::DepMoved { dep, from, to } => write!(f, "{dep} moved {from} -> {to}"),
            Reason::DepDue { dep, label } => write!(f, "{dep} {label} re-bakes this run"),
            Reason::InputsChanged { old, new } => write!(
                f,
                "inputs changed ({} -> {})",
                old.map(|o| o.prefix(12))
                    .unwrap_or_else(|| "unrecorded".into()),
                new.prefix(12)
            ),
            Reason::NeededBy { label } => write!(f, "needed by {label}"),
            Reason::After { label } => write!(f, "after {label}"),
            Reason::Always => write!(f, "always runs"),
            Reason::Custom { message, .. } => f.write_str(message),
        }
    }
}

/// A node's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Runs this run, because of `reason`.
    Due { reason: Reason },
    /// Does not run; `build` is the current head, if recorded.
    Current { build: Option<String> },
}

impl Decision {
    /// Whether the node runs.
    pub fn is_due(&self) -> bool {
        matches!(self, Decision::Due { .. })
    }
    /// The reason, if due.
    pub fn reason(&self) -> Option<&Reason> {
        match self {
            Decision::Due { reason } => Some(reason),
            Decision::Current { .. } => None,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Due { reason } => write!(f, "{reason}"),
            Decision::Current { build: Some(b) } => write!(f, "current (build {b})"),
            Decision::Current { build: None } => write!(f, "current"),
        }
    }
}

/// What a [`Rule`] sees about the node being decided.
pub struct RuleCx<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// The node's id.
    pub id: NodeId,
    /// The node.
    pub node: &'a Node,
    /// The node's fingerprint.
    pub fingerprint: Fingerprint,
    /// The node's record (head), if any.
    pub record: Option<&'a Record>,
    fps: &'a Fingerprints,
    records: &'a dyn Records,
    decisions: &'a [Option<Decision>],
}

impl<'a> RuleCx<'a> {
    /// The decision of an already-decided node (dependencies are decided
    /// before dependents; support nodes are decided last).
    pub fn decision(&self, id: NodeId) -> Option<&'a Decision> {
        self.decisions[id.index()].as_ref()
    }
    /// Whether an already-decided node is due.
    pub fn is_due(&self, id: NodeId) -> bool {
        self.decision(id).is_some_and(Decision::is_due)
    }
    /// The record of another node.
    pub fn record_of(&self, id: NodeId) -> Option<&'a Record> {
        self.records.record(self.graph.node(id))
    }
    /// The fingerprint of another node.
    pub fn fingerprint_of(&self, id: NodeId) -> Fingerprint {
        self.fps.get(id)
    }
    /// The node's `Dep::Hashed` dependencies: (hash name, id), in no
    /// particular order.
    pub fn hashed_deps(&self) -> impl Iterator<Item = (&'a str, NodeId)> + 'a {
        self.graph.deps(self.id).filter_map(|(d, dep)| match dep {
            Dep::Hashed(n) => Some((&**n, d)),
            _ => None,
        })
    }
}

/// One rule of the chain: `Some(reason)` makes the node due (first match wins).
pub trait Rule: Send + Sync {
    /// Check the node.
    fn check(&self, cx: &RuleCx<'_>) -> Option<Reason>;
}

impl<F> Rule for F
where
    F: Fn(&RuleCx<'_>) -> Option<Reason> + Send + Sync,
{
    fn check(&self, cx: &RuleCx<'_>) -> Option<Reason> {
        self(cx)
    }
}

/// The standard rules (see the module docs).
pub mod rules {
    use super::*;

    /// Due when the node has no record.
    pub fn no_record() -> impl Rule {
        |cx: &RuleCx<'_>| {
            cx.record.is_none().then(|| Reason::NoRecord {
                runtime: cx.node.label().runtime().map(str::to_string),
            })
        }
    }

    /// Due when a hashed dependency's head build differs from the build the
    /// node's head was made from (`record.deps[name]`).
    pub fn dep_moved() -> impl Rule {
        |cx: &RuleCx<'_>| {
            let rec = cx.record?;
            if rec.deps.is_empty() {
                return None;
            }
            // The first by name, so that the reason is stable.
            cx.hashed_deps()
                .filter_map(|(name, d)| {
                    let from = rec.deps.get(name)?;
                    let to = cx.record_of(d)?.build.as_ref()?;
                    (from != to).then_some((name, from, to))
                })
                .min()
                .map(|(name, from, to)| Reason::DepMoved {
                    dep: name.to_string(),
                    from: from.clone(),
                    to: to.clone(),
                })
        }
    }

    /// Due when a hashed (follow) dependency is due this run. Pinned and
    /// ordering dependencies do not count.
    pub fn dep_due() -> impl Rule {
        |cx: &RuleCx<'_>| {
            // The first by name (then label), so that the reason is stable.
            cx.hashed_deps()
                .filter(|&(_, d)| cx.is_due(d))
                .min_by(|a, b| {
                    (a.0, cx.graph.node(a.1).label()).cmp(&(b.0, cx.graph.node(b.1).label()))
                })
                .map(|(name, d)| Reason::DepDue {
                    dep: name.to_string(),
                    label: cx.graph.node(d).label().clone(),
                })
        }
    }

    /// Due when the fingerprint differs from the recorded one.
    pub fn inputs_changed() -> impl Rule {
        |cx: &RuleCx<'_>| {
            let old = cx.record.and_then(|r| r.fingerprint);
            (old != Some(cx.fingerprint)).then_some(Reason::InputsChanged {
                old,
                new: cx.fingerprint,
            })
        }
    }
}

type ForcedFn<'a> = Box<dyn Fn(&Node) -> bool + Send + Sync + 'a>;

/// The planner: a chain of rules for `Decide` nodes.
#[derive(Default)]
pub struct Planner<'a> {
    forced: Option<ForcedFn<'a>>,
    rules: Vec<Box<dyn Rule + 'a>>,
}

/// Planning errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Cycle(#[from] CycleError),
    #[error("the fingerprints were computed for a graph of {fps} nodes, the graph has {graph}")]
    Mismatch { fps: usize, graph: usize },
}

/// One node of the plan. Serializes as
/// `{"label","kind","series","runtime","fingerprint","due","reason","code","deps"[,"changes"]}`.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedNode {
    /// The node id in the graph.
    #[serde(skip)]
    pub id: NodeId,
    pub label: Label,
    pub kind: String,
    /// The node's `series` attribute.
    pub series: Option<String>,
    /// The node's `runtime` attribute, else its label's runtime.
    pub runtime: Option<String>,
    pub fingerprint: Fingerprint,
    pub due: bool,
    /// The decision for people: the reason, or `current (build <id>)`.
    pub reason: String,
    /// The reason's code, or `current`.
    pub code: String,
    /// Labels of the direct dependencies, sorted.
    pub deps: Vec<Label>,
    /// For a due node whose record holds a canonical document and whose
    /// fingerprint moved: the fields that changed (`--explain`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// The full decision.
    #[serde(skip)]
    pub decision: Decision,
}

/// The plan: every selected node in topological order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Plan {
    pub nodes: Vec<PlannedNode>,
    #[serde(skip)]
    pos: Vec<u32>,
    /// The shape of the graph planned ([`Graph::shape`]).
    #[serde(skip)]
    shape: u64,
}

/// What [`Planner::plan_after`] answers: the plan, and which of its nodes
/// were made anew (the others were carried over from the last plan,
/// unchanged).
#[derive(Debug)]
pub struct Replan {
    pub plan: Plan,
    /// The nodes made anew (not carried over), in plan order: every node
    /// when the last plan's graph was of another shape.
    pub made: Vec<NodeId>,
}

impl Replan {
    /// How many nodes were carried over from the last plan.
    pub fn carried(&self) -> usize {
        self.plan.nodes.len() - self.made.len()
    }
}

const NOT_PLANNED: u32 = u32::MAX;

impl Plan {
    /// The planned node for `id`, if selected.
    pub fn node(&self, id: NodeId) -> Option<&PlannedNode> {
        match self.pos.get(id.index()) {
            Some(&p) if p != NOT_PLANNED => Some(&self.nodes[p as usize]),
            _ => None,
        }
    }
    /// The planned node with this label (a linear search: in loops, use
    /// `graph.find(label)` and [`Plan::node`]).
    pub fn get(&self, label: &Label) -> Option<&PlannedNode> {
        self.nodes.iter().find(|n| &n.label == label)
    }
    /// Whether `id` is planned and due.
    pub fn is_due(&self, id: NodeId) -> bool {
        self.node(id).is_some_and(|n| n.due)
    }
    /// The due nodes, in plan order.
    pub fn due(&self) -> impl Iterator<Item = &PlannedNode> {
        self.nodes.iter().filter(|n| n.due)
    }
    /// Number of due nodes of `kind`.
    pub fn due_count(&self, kind: &str) -> usize {
        self.due().filter(|n| n.kind == kind).count()
    }
}

impl<'a> Planner<'a> {
    /// A planner with no rule: every `Decide` node is current unless forced.
    pub fn new() -> Self {
        Planner {
            forced: None,
            rules: Vec::new(),
        }
    }

    /// The standard chain: no record, dependency moved, dependency due,
    /// inputs changed.
    pub fn standard() -> Self {
        Planner::new()
            .rule(rules::no_record())
            .rule(rules::dep_moved())
            .rule(rules::dep_due())
            .rule(rules::inputs_changed())
    }

    /// Nodes for which `pred` holds are due (`forced (--force-bake)`),
    /// checked before any rule.
    pub fn forced(mut self, pred: impl Fn(&Node) -> bool + Send + Sync + 'a) -> Self {
        self.forced = Some(Box::new(pred));
        self
    }

    /// Append a rule to the chain (after the existing ones).
    pub fn rule(mut self, rule: impl Rule + 'a) -> Self {
        self.rules.push(Box::new(rule));
        self
    }

    /// Decide every selected node. Linear in nodes + edges (plus the rules).
    pub fn plan(
        &self,
        graph: &Graph,
        selection: &Selection,
        fps: &Fingerprints,
        records: &dyn Records,
    ) -> Result<Plan, PlanError> {
        Ok(self.plan_after(graph, selection, fps, records, None)?.plan)
    }

    /// [`Planner::plan`], carrying over from `last` (a plan of a graph of
    /// the same [`Graph::shape`]) each node that is exactly what this plan
    /// makes of it: the same fingerprint, decision, reason, code, `due`,
    /// series and runtime, and no changed fields. Every node is decided
    /// again; only the planned node is not made again (`csis watch` plans
    /// 30,000 nodes per edit, of which a few move). A node of `last` that a
    /// caller edited after planning (a reason, a decision) is not carried.
    pub fn plan_after(
        &self,
        graph: &Graph,
        selection: &Selection,
        fps: &Fingerprints,
        records: &dyn Records,
        last: Option<Plan>,
    ) -> Result<Replan, PlanError> {
        let n = graph.len();
        if fps.topo_order().len() != n {
            return Err(PlanError::Mismatch {
                fps: fps.topo_order().len(),
                graph: n,
            });
        }
        let order: Vec<NodeId> = fps
            .topo_order()
            .iter()
            .copied()
            .filter(|&id| selection.contains(id))
            .collect();
        let mut decisions = self.decide_all(graph, selection, fps, records, &order);

        // What is carried over from `last` (a plan of a graph of this
        // shape): with the same nodes in the same order (an edit that moved
        // inputs, not the selection), the plan is edited in place, a node
        // that did not move left where it is; else each node is looked up
        // by its place in `last` and moved into the new plan.
        let last = last.filter(|l| l.shape == graph.shape());
        let in_place = last.as_ref().is_some_and(|l| {
            l.nodes.len() == order.len() && l.nodes.iter().zip(&order).all(|(o, &id)| o.id == id)
        });
        let (mut nodes, mut pos, mut slots) = match last {
            Some(l) if in_place => (l.nodes, l.pos, None),
            Some(l) => (
                Vec::with_capacity(order.len()),
                vec![NOT_PLANNED; n],
                Some((l.pos, l.nodes.into_iter().map(Some).collect::<Vec<_>>())),
            ),
            None => (Vec::with_capacity(order.len()), vec![NOT_PLANNED; n], None),
        };
        let mut made = Vec::new();
        for (k, &id) in order.iter().enumerate() {
            let node = graph.node(id);
            let decision = decisions[id.index()]
                .take()
                .expect("every selected node is decided");
            let fingerprint = fps.get(id);
            let mut changes = Vec::new();
            if decision.is_due() && node.policy() == RunPolicy::Decide {
                if let Some(rec) = records.record(node) {
                    if let (Some(old), true) =
                        (&rec.canonical, rec.fingerprint != Some(fingerprint))
                    {
                        changes = diff(old, &graph.canonical(id, fps));
                    }
                }
            }
            let series = node.attr("series");
            let runtime = node.attr("runtime").or(node.label().runtime());
            let same = |o: &PlannedNode| {
                o.id == id
                    && o.fingerprint == fingerprint
                    && o.decision == decision
                    && o.due == decision.is_due()
                    && o.code == decision.reason().map_or("current", Reason::code)
                    && says(&decision, &o.reason)
                    && o.changes.is_empty()
                    && o.series.as_deref() == series
                    && o.runtime.as_deref() == runtime
            };
            if changes.is_empty() {
                if in_place {
                    if same(&nodes[k]) {
                        continue;
                    }
                } else if let Some((last_pos, slots)) = slots.as_mut() {
                    let slot = last_pos
                        .get(id.index())
                        .and_then(|&p| slots.get_mut(p as usize))
                        .filter(|o| o.as_ref().is_some_and(same));
                    if let Some(o) = slot.and_then(Option::take) {
                        pos[id.index()] = nodes.len() as u32;
                        nodes.push(o);
                        continue;
                    }
                }
            }
            let mut deps: Vec<Label> = graph
                .deps(id)
                .map(|(d, _)| graph.node(d).label().clone())
                .collect();
            if deps.len() > 1 {
                deps.sort();
                deps.dedup();
            }
            made.push(id);
            let planned = PlannedNode {
                id,
                label: node.label().clone(),
                kind: node.kind().to_string(),
                series: series.map(str::to_string),
                runtime: runtime.map(str::to_string),
                fingerprint,
                due: decision.is_due(),
                reason: decision.to_string(),
                code: decision
                    .reason()
                    .map_or("current", Reason::code)
                    .to_string(),
                deps,
                changes,
                decision,
            };
            if in_place {
                nodes[k] = planned;
            } else {
                pos[id.index()] = nodes.len() as u32;
                nodes.push(planned);
            }
        }
        Ok(Replan {
            plan: Plan {
                nodes,
                pos,
                shape: graph.shape(),
            },
            made,
        })
    }

    /// Every selected node's decision, by node id: `Decide`, `Always` and
    /// `WhenDependencyDue` nodes parents first, then support nodes
    /// (`WhenDependentDue`) dependents first. `order`: the selected nodes
    /// in topological order.
    fn decide_all(
        &self,
        graph: &Graph,
        selection: &Selection,
        fps: &Fingerprints,
        records: &dyn Records,
        order: &[NodeId],
    ) -> Vec<Option<Decision>> {
        let mut decisions: Vec<Option<Decision>> = vec![None; graph.len()];

        // Forward: Decide, Always, WhenDependencyDue (parents first).
        for &id in order {
            let node = graph.node(id);
            let d = match node.policy() {
                RunPolicy::WhenDependentDue => continue,
                RunPolicy::Always => Decision::Due {
                    reason: Reason::Always,
                },
                RunPolicy::WhenDependencyDue => after_due_dep(graph, id, &decisions),
                RunPolicy::Decide => self.decide(graph, id, fps, records, &decisions),
            };
            decisions[id.index()] = Some(d);
        }

        // Backward: support nodes, dependents first.
        for &id in order.iter().rev() {
            if graph.node(id).policy() != RunPolicy::WhenDependentDue {
                continue;
            }
            let mut needed_by: Option<&Label> = None;
            for s in graph.dependents(id) {
                if selection.contains(s)
                    && decisions[s.index()].as_ref().is_some_and(Decision::is_due)
                {
                    let l = graph.node(s).label();
                    if needed_by.is_none_or(|m| l < m) {
                        needed_by = Some(l);
                    }
                }
            }
            decisions[id.index()] = Some(match needed_by {
                Some(l) => Decision::Due {
                    reason: Reason::NeededBy { label: l.clone() },
                },
                None => Decision::Current { build: None },
            });
        }
        decisions
    }

    /// A node of policy `Decide`: forced, else the first rule that says it
    /// is due, else current (with its record's build).
    fn decide(
        &self,
        graph: &Graph,
        id: NodeId,
        fps: &Fingerprints,
        records: &dyn Records,
        decisions: &[Option<Decision>],
    ) -> Decision {
        let node = graph.node(id);
        let record = records.record(node);
        if self.forced.as_ref().is_some_and(|f| f(node)) {
            return Decision::Due {
                reason: Reason::Forced,
            };
        }
        let cx = RuleCx {
            graph,
            id,
            node,
            fingerprint: fps.get(id),
            record,
            fps,
            records,
            decisions,
        };
        match self.rules.iter().find_map(|r| r.check(&cx)) {
            Some(reason) => Decision::Due { reason },
            None => Decision::Current {
                build: record.and_then(|r| r.build.clone()),
            },
        }
    }
}

/// Whether `reason` is what `decision` says for people (its `Display`),
/// without writing a current node's (most of a plan's nodes) again.
fn says(decision: &Decision, reason: &str) -> bool {
    match decision {
        Decision::Current { build: None } => reason == "current",
        Decision::Current { build: Some(b) } => {
            reason
                .strip_prefix("current (build ")
                .and_then(|r| r.strip_suffix(')'))
                == Some(b.as_str())
        }
        Decision::Due { .. } => decision.to_string() == reason,
    }
}

/// A node of policy `WhenDependencyDue`: due after its due dependency of
/// the smallest label (support nodes aside), else current.
fn after_due_dep(graph: &Graph, id: NodeId, decisions: &[Option<Decision>]) -> Decision {
    let mut due_dep: Option<&Label> = None;
    for (d, _) in graph.deps(id) {
        let dn = graph.node(d);
        if dn.policy() != RunPolicy::WhenDependentDue
            && decisions[d.index()].as_ref().is_some_and(Decision::is_due)
            && due_dep.is_none_or(|l| dn.label() < l)
        {
            due_dep = Some(dn.label());
        }
    }
    match due_dep {
        Some(l) => Decision::Due {
            reason: Reason::After { label: l.clone() },
        },
        None => Decision::Current { build: None },
    }
}
