//! # csis-engine
//!
//! The generic build-graph engine under csis: labels and patterns, content
//! fingerprints (blake3), the DAG (petgraph), the planner (due + reason, first
//! match wins), the tokio scheduler (`-j N`, per-pool limits, critical path
//! first, fail-fast, cancellation) and the events it reports.
//!
//! It knows **nodes**, never images, YAML, clouds or daemons: a node is a
//! [`Label`], a kind string chosen by the caller (`"resolve"`, `"emit"`,
//! `"bake"`, ...), canonical inputs (a [`serde_json::Value`], kept encoded:
//! [`Inputs`]), dependencies,
//! a [`RunPolicy`], an optional pool (e.g. its runtime) and opaque string
//! attributes (e.g. `series`, `runtime`) that are copied into the plan.
//!
//! ## Use, in four steps
//!
//! ```
//! use csis_engine::*;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. Build the graph (the graph-compile owner does this from the loaded tree).
//! let mut g = Graph::new();
//! let os: Label = "//os/deb12@docker-local".parse()?;
//! let img: Label = "//images/dask@docker-local".parse()?;
//! let resolve = g.add_node(Node::new(os.clone(), "resolve")
//!     .with_policy(RunPolicy::WhenDependentDue).with_pool("docker-local"))?;
//! let base = g.add_node(Node::new(os, "bake")
//!     .with_inputs(json!({"series": "deb12", "vendor": {"family": "debian"}}))
//!     .with_attr("series", "deb12").with_attr("runtime", "docker-local").with_pool("docker-local"))?;
//! g.add_dep(base, resolve, Dep::Order)?;
//! let child = g.add_node(Node::new(img, "bake")
//!     .with_inputs(json!({"series": "dask", "mods": []}))
//!     .with_attr("series", "dask").with_attr("runtime", "docker-local").with_pool("docker-local"))?;
//! g.add_dep(child, base, Dep::hashed("parent"))?;      // parent_policy: follow
//! // (pinned: g.add_dep(child, base, Dep::pinned("parent", recorded_fp))?)
//!
//! // 2. Select (patterns select nodes plus their ancestors) and fingerprint.
//! let sel = g.select(&[Pattern::parse("//images/...")?])?;
//! let fps = g.fingerprints()?;
//!
//! // 3. Plan: first matching rule wins; records come from meta-state.
//! let records = MemoryRecords::default();        // nothing baked yet
//! let plan = Planner::standard().plan(&g, &sel, &fps, &records)?;
//! assert!(plan.node(child).unwrap().due);
//! println!("{}", serde_json::to_string(&plan)?);
//!
//! // 4. Run the due nodes with one async action per node.
//! let (events, _log) = Events::collect();
//! let opts = RunOptions::new(4).pool_limit("docker-local", 2).count_kind("bake");
//! let report = run(&g, &plan, opts, events, |cx: NodeContext| async move {
//!     cx.log(format!("running {}", cx.label()));
//!     Ok(NodeOutput::new(json!({"build_id": cx.fingerprint().short()})))
//! }).await;
//! assert_eq!(report.summary.baked, 2);
//! # Ok(()) }
//! ```
//!
//! ## Invariants
//!
//! - **A fingerprint depends only on declared inputs**: the recipe version
//!   ([`RECIPE`]), the node kind, its canonical inputs (object keys sorted,
//!   typed and length-prefixed) and the `(name, fingerprint)` of each *hashed*
//!   dependency (sorted). Never on labels, clocks, records, plans or outputs.
//!   Key order in the inputs does not matter.
//! - Fingerprints are computed parents first; a pinned dependency hashes a
//!   literal recorded fingerprint and adds only an ordering edge.
//! - **The whole plan is known before the first action runs**: [`run`] takes a
//!   finished [`Plan`] and only executes its due nodes; it never re-plans.
//! - A node runs only after every dependency that runs in the same run has
//!   finished successfully. A failed node stops its descendants (reported as
//!   not run); independent branches go on unless `fail_fast`.
//! - On cancellation no node starts; running actions see their
//!   [`CancellationToken`] cancelled (and are aborted after
//!   [`RunOptions::cancel_grace`], if set); finished nodes stay finished.
//! - Events: all `skipped` first, then `started`/`log`/`finished`/`failed`
//!   as they happen, then one `not_run` per due node that did not run, then
//!   exactly one `summary`, last. Every due node is exactly one of finished,
//!   failed, cancelled or not run.
//! - The graph is acyclic: a cycle is an error that prints it.
//! - Selection is ancestor-closed: a selected node's dependencies are selected.
//! - All work is linear in nodes + edges (plus sorting each node's hashed
//!   dependencies and, for maps not already sorted, its input keys).
//!
//! ## Module map
//!
//! [`label`] (`//path@runtime:kind`), [`pattern`] (selection syntax and the
//! closest-label error), [`fingerprint`] (the recipe, [`diff`]), [`inputs`]
//! (a node's inputs in the recipe's encoding), [`graph`]
//! (nodes, [`Dep`] edges, cycles, selection, fingerprints), [`plan`] (rules,
//! records, decisions), [`schedule`] ([`run`]), [`event`] (JSON lines).

pub mod event;
pub mod fingerprint;
pub mod graph;
pub mod inputs;
pub mod label;
pub mod pattern;
pub mod plan;
pub mod record;
pub mod schedule;

pub use event::{Event, Events, KindCounts, Summary};
pub use fingerprint::{
    canonical_bytes, diff, FieldChange, Fingerprint, FingerprintParseError, RECIPE,
};
pub use graph::{
    CycleError, Dep, Fingerprints, Graph, GraphError, Node, NodeId, RunPolicy, Selection,
};
pub use inputs::Inputs;
pub use label::{Label, LabelError};
pub use pattern::{Pattern, PatternError, SelectError};
pub use plan::{
    rules, Decision, DepBuilds, MemoryRecords, Plan, PlanError, PlannedNode, Planner, Reason,
    Record, Records, Replan, Rule, RuleCx,
};
pub use schedule::{
    run, DepInfo, NodeContext, NodeError, NodeOutcome, NodeOutput, RunOptions, RunReport,
};
pub use tokio_util::sync::CancellationToken;
