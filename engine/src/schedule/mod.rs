//! The scheduler: runs a plan's due nodes with one async action per node.
//!
//! - At most `jobs` actions run at once, and at most `limit` per pool.
//! - A due node starts once every due dependency has finished successfully
//!   (dependencies that are current do not run and do not block).
//! - Among ready nodes, the one with the longest remaining path (sum of
//!   [`crate::Node::with_cost`] along the longest chain of due dependents,
//!   itself included) starts first; ties go to plan order.
//! - A failed node stops its due descendants (`not_run`); other branches go
//!   on. With `fail_fast`, the first failure stops the run as a cancellation
//!   does: no node starts, running actions see their token cancelled.
//! - Cancellation ([`RunOptions::cancel_token`]): nothing new starts, running
//!   actions see [`NodeContext::cancel`] cancelled and are awaited; a node
//!   that then returns `Ok` is finished, an `Err` counts as cancelled. With
//!   [`RunOptions::cancel_grace`], actions still running after the grace
//!   period are aborted (counted as cancelled).
//!
//! Actions are spawned on the current tokio runtime (call [`run`] inside one).

use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, Events, KindCounts, Summary};
use crate::fingerprint::Fingerprint;
use crate::graph::{Graph, Node, NodeId};
use crate::label::Label;
use crate::plan::{Plan, Reason};

mod scheduler;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    jobs: usize,
    pools: HashMap<String, usize>,
    fail_fast: bool,
    count_kind: Option<String>,
    cancel: CancellationToken,
    grace: Option<Duration>,
    costs: HashMap<NodeId, u64>,
    rehearse: Option<Vec<String>>,
}

impl RunOptions {
    /// `jobs` actions at most at once (`-j N`; 0 is taken as 1).
    pub fn new(jobs: usize) -> Self {
        RunOptions {
            jobs: jobs.max(1),
            pools: HashMap::new(),
            fail_fast: false,
            count_kind: None,
            cancel: CancellationToken::new(),
            grace: None,
            costs: HashMap::new(),
            rehearse: None,
        }
    }
    /// This run's cost of `node`, where the caller knows better than the
    /// graph's estimate ([`crate::Node::with_cost`]), e.g. from how long
    /// the node's last run took. Only the order of ready nodes changes.
    pub fn cost(mut self, node: NodeId, cost: u64) -> Self {
        self.costs.insert(node, cost);
        self
    }
    /// At most `limit` actions of nodes in `pool` at once (0 is taken as 1).
    /// Pools without a limit are bounded only by `jobs`.
    pub fn pool_limit(mut self, pool: &str, limit: usize) -> Self {
        self.pools.insert(pool.to_string(), limit.max(1));
        self
    }
    /// Stop everything at the first failure.
    pub fn fail_fast(mut self, yes: bool) -> Self {
        self.fail_fast = yes;
        self
    }
    /// The node kind the summary's `baked` counts (e.g. `"bake"`).
    pub fn count_kind(mut self, kind: &str) -> Self {
        self.count_kind = Some(kind.to_string());
        self
    }
    /// The token that cancels the run (e.g. cancelled on Ctrl-C).
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
    /// After a stop (cancellation or fail-fast), actions still running after
    /// `grace` are aborted (dropped at their next await) and count as
    /// cancelled. Without it, the run waits for every action to return.
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }
    /// A dry run: only due nodes of the kinds in `run` run; every other due
    /// node is reported `would_run` (its event, its count, its outcome) and
    /// treated as not due, so what depends on it does not wait for it.
    pub fn rehearse(mut self, run: &[&str]) -> Self {
        self.rehearse = Some(run.iter().map(|k| k.to_string()).collect());
        self
    }
    /// The token that cancels the run.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }
}

/// What an action returns for its dependents to read (e.g. a resolve's image
/// id, a bake's build id). Any JSON value; `null` by default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeOutput {
    pub value: Value,
    /// The action found its result already made and produced nothing new
    /// (a cache hit): counted in the summary's `reused`, not its `baked`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

impl NodeOutput {
    /// An output holding `value`.
    pub fn new(value: Value) -> Self {
        NodeOutput {
            value,
            reused: false,
        }
    }
    /// An output holding `value`, of an action that reused a result made
    /// before ([`NodeOutput::reused`]).
    pub fn reused(value: Value) -> Self {
        NodeOutput {
            value,
            reused: true,
        }
    }
    /// No output (`null`).
    pub fn none() -> Self {
        NodeOutput::default()
    }
    /// A field of an object output.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key)
    }
    /// A string field of an object output.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.value.get(key).and_then(Value::as_str)
    }
}

/// Why an action failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeError {
    pub message: String,
    /// The action stopped because it was told to (cancellation).
    pub cancelled: bool,
}

impl NodeError {
    /// A failure with a message.
    pub fn new(message: impl fmt::Display) -> Self {
        NodeError {
            message: message.to_string(),
            cancelled: false,
        }
    }
    /// The action stopped on cancellation.
    pub fn cancelled() -> Self {
        NodeError {
            message: "cancelled".into(),
            cancelled: true,
        }
    }
    /// A failure from an error and its sources (`a: b: c`).
    pub fn from_error(e: &(dyn std::error::Error + 'static)) -> Self {
        let mut msg = e.to_string();
        let mut src = e.source();
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        NodeError::new(msg)
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NodeError {}

/// A direct dependency as an action sees it.
#[derive(Clone, Debug)]
pub struct DepInfo {
    pub id: NodeId,
    pub node: Arc<Node>,
    /// Its output, if it ran (and finished) in this run.
    pub output: Option<Arc<NodeOutput>>,
}

/// What an action gets: its node, fingerprint, reason, the outputs of its
/// direct dependencies that ran, a cancellation token and a log sink.
#[derive(Clone, Debug)]
pub struct NodeContext {
    id: NodeId,
    node: Arc<Node>,
    fingerprint: Fingerprint,
    reason: Reason,
    cancel: CancellationToken,
    deps: Arc<[DepInfo]>,
    events: Events,
}

impl NodeContext {
    pub fn id(&self) -> NodeId {
        self.id
    }
    pub fn node(&self) -> &Node {
        &self.node
    }
    pub fn label(&self) -> &Label {
        self.node.label()
    }
    pub fn kind(&self) -> &str {
        self.node.kind()
    }
    pub fn inputs(&self) -> &crate::Inputs {
        self.node.inputs()
    }
    /// One of the node's attributes.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.node.attr(key)
    }
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
    /// Why the node runs.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }
    /// Cancelled when the run is cancelled or fail-fast stops it: stop and
    /// clean up, then return (e.g. `Err(NodeError::cancelled())`).
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
    /// The direct dependencies (each once).
    pub fn deps(&self) -> &[DepInfo] {
        &self.deps
    }
    /// The output of the first direct dependency of `kind` that ran (in label order).
    pub fn dep_output(&self, kind: &str) -> Option<&NodeOutput> {
        self.deps
            .iter()
            .filter(|d| d.node.kind() == kind)
            .find_map(|d| d.output.as_deref())
    }
    /// The output of the direct dependency with this label, if it ran.
    pub fn dep_output_of(&self, label: &Label) -> Option<&NodeOutput> {
        self.deps
            .iter()
            .find(|d| d.node.label() == label)
            .and_then(|d| d.output.as_deref())
    }
    /// Report a line of output (an [`Event::Log`]).
    pub fn log(&self, line: impl Into<String>) {
        self.events.emit(Event::Log {
            label: self.node.label().clone(),
            line: line.into(),
        });
    }
}

/// What happened to one planned node.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOutcome {
    /// A current `Decide` node.
    Skipped,
    /// A node that was not due and needed no event (support, follow-up).
    NotNeeded,
    Finished {
        output: Arc<NodeOutput>,
        elapsed: Duration,
    },
    Failed {
        error: NodeError,
        elapsed: Duration,
    },
    /// Running when the run was cancelled, and returned an error.
    Cancelled {
        error: NodeError,
        elapsed: Duration,
    },
    /// Due, never started.
    NotRun {
        reason: String,
    },
    /// Due, not run by a dry run ([`RunOptions::rehearse`]).
    WouldRun,
}

/// The result of [`run`].
#[derive(Clone, Debug)]
pub struct RunReport {
    pub summary: Summary,
    /// Every planned node's outcome, in plan order.
    pub outcomes: Vec<(NodeId, NodeOutcome)>,
    /// Node index -> position in `outcomes` (u32::MAX when not planned).
    index: Vec<u32>,
}

impl RunReport {
    /// The outcome of `id`.
    pub fn outcome(&self, id: NodeId) -> Option<&NodeOutcome> {
        match self.index.get(id.index()) {
            Some(&p) if p != u32::MAX => Some(&self.outcomes[p as usize].1),
            _ => None,
        }
    }
    /// The output of `id`, if it finished.
    pub fn output(&self, id: NodeId) -> Option<&NodeOutput> {
        match self.outcome(id)? {
            NodeOutcome::Finished { output, .. } => Some(output),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    NotDue,
    Waiting,
    Ready,
    Running,
    Done,
    Failed,
    Cancelled,
    Blocked(NodeId),
}

type ReadyKey = (u64, Reverse<u32>, u32);

/// The counts of `kind`, without allocating when it is already there.
fn kind_counts<'a>(
    kinds: &'a mut std::collections::BTreeMap<String, KindCounts>,
    kind: &str,
) -> &'a mut KindCounts {
    if !kinds.contains_key(kind) {
        kinds.insert(kind.to_string(), KindCounts::default());
    }
    kinds.get_mut(kind).expect("inserted")
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// Run `plan`'s due nodes: `action(cx)` for each, as soon as its due
/// dependencies finished, within the limits of `opts`. Returns when nothing
/// runs any more; the summary is also the last event.
pub async fn run<A, F>(
    graph: &Graph,
    plan: &Plan,
    opts: RunOptions,
    events: Events,
    mut action: A,
) -> RunReport
where
    A: FnMut(NodeContext) -> F,
    F: Future<Output = Result<NodeOutput, NodeError>> + Send + 'static,
{
    let mut s = scheduler::Scheduler::new(graph, plan, opts, events);
    loop {
        if s.stop_reason.is_none() && s.opts.cancel.is_cancelled() {
            s.stop("the run was cancelled".into());
        }
        if s.stop_reason.is_none() {
            s.spawn_ready(&mut action);
        }
        if s.running == 0 {
            break;
        }
        let deadline = match (s.opts.grace, s.stopped_at) {
            (Some(g), Some(at)) if !s.aborted => Some(at + g),
            _ => None,
        };
        let joined = tokio::select! {
            biased;
            j = s.set.join_next_with_id() => j.expect("a task is running"),
            _ = s.opts.cancel.cancelled(), if s.stop_reason.is_none() => {
                s.stop("the run was cancelled".into());
                continue;
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                s.aborted = true;
                s.set.abort_all();
                continue;
            }
        };
        s.joined(joined);
    }
    s.report()
}
