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
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, Events, KindCounts, Summary};
use crate::fingerprint::Fingerprint;
use crate::graph::{Graph, Node, NodeId, RunPolicy};
use crate::label::Label;
use crate::plan::{Plan, Reason};

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
    pub fn inputs(&self) -> &Value {
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
    let started_at = Instant::now();
    let n = graph.len();
    let mut st = vec![St::NotDue; n];
    let mut pos = vec![u32::MAX; n];
    let mut summary = Summary::default();
    let kinds = &mut summary.kinds;

    // Skipped (and would-run) events first; due nodes wait.
    let mut would = vec![false; n];
    for (i, pn) in plan.nodes.iter().enumerate() {
        pos[pn.id.index()] = i as u32;
        let rehearsed = opts
            .rehearse
            .as_ref()
            .is_some_and(|run| !run.contains(&pn.kind));
        if pn.due && rehearsed {
            would[pn.id.index()] = true;
            kind_counts(kinds, &pn.kind).would_run += 1;
            summary.would_run += 1;
            events.emit(Event::WouldRun {
                label: pn.label.clone(),
                kind: pn.kind.clone(),
                reason: pn.reason.clone(),
            });
        } else if pn.due {
            st[pn.id.index()] = St::Waiting;
        } else if graph.node(pn.id).policy() == RunPolicy::Decide {
            kind_counts(kinds, &pn.kind).skipped += 1;
            events.emit(Event::Skipped {
                label: pn.label.clone(),
                kind: pn.kind.clone(),
                reason: pn.reason.clone(),
            });
        }
    }
    let is_due = |st: &[St], id: NodeId| st[id.index()] != St::NotDue;

    // Pending due dependencies (per edge) and longest remaining path.
    let mut pending = vec![0u32; n];
    let mut prio = vec![0u64; n];
    // (a rehearsed node is not due here: it stays NotDue)
    for pn in plan.nodes.iter().rev().filter(|p| is_due(&st, p.id)) {
        let id = pn.id;
        pending[id.index()] = graph.deps(id).filter(|&(d, _)| is_due(&st, d)).count() as u32;
        let tail = graph
            .dependents(id)
            .filter(|&s| is_due(&st, s))
            .map(|s| prio[s.index()])
            .max()
            .unwrap_or(0);
        let cost = opts
            .costs
            .get(&id)
            .copied()
            .unwrap_or_else(|| graph.node(id).cost());
        prio[id.index()] = tail.saturating_add(cost);
    }

    // Pools: index 0 is "no limit".
    let mut pool_index: HashMap<&str, usize> = HashMap::new();
    let mut limits: Vec<usize> = vec![usize::MAX];
    for (name, &lim) in &opts.pools {
        pool_index.insert(name.as_str(), limits.len());
        limits.push(lim);
    }
    let pool_of = |id: NodeId| -> usize {
        graph
            .node(id)
            .pool()
            .and_then(|p| pool_index.get(p).copied())
            .unwrap_or(0)
    };
    let mut pool_running = vec![0usize; limits.len()];
    let mut ready: Vec<BinaryHeap<ReadyKey>> = vec![BinaryHeap::new(); limits.len()];
    let key = |id: NodeId, prio: &[u64], pos: &[u32]| -> ReadyKey {
        (
            prio[id.index()],
            Reverse(pos[id.index()]),
            id.index() as u32,
        )
    };
    let due_now: Vec<NodeId> = plan
        .nodes
        .iter()
        .filter(|p| is_due(&st, p.id))
        .map(|p| p.id)
        .collect();
    for id in due_now {
        if pending[id.index()] == 0 {
            st[id.index()] = St::Ready;
            ready[pool_of(id)].push(key(id, &prio, &pos));
        }
    }

    let run_token = opts.cancel.child_token();
    let mut outputs: Vec<Option<Arc<NodeOutput>>> = vec![None; n];
    let mut elapsed: Vec<Duration> = vec![Duration::ZERO; n];
    let mut errors: HashMap<NodeId, NodeError> = HashMap::new();
    let mut tasks: HashMap<tokio::task::Id, NodeId> = HashMap::new();
    let mut set: JoinSet<(Result<NodeOutput, NodeError>, Duration)> = JoinSet::new();
    let mut running = 0usize;
    let mut stop_reason: Option<String> = None;
    let mut stopped_at: Option<Instant> = None;
    let mut aborted = false;
    let mut node_started: Vec<Option<Instant>> = vec![None; n];

    loop {
        if stop_reason.is_none() && opts.cancel.is_cancelled() {
            stop_reason = Some("the run was cancelled".into());
        }
        if stop_reason.is_some() && stopped_at.is_none() {
            stopped_at = Some(Instant::now());
        }
        if stop_reason.is_none() {
            while running < opts.jobs {
                // The best ready node among pools with room.
                let mut best: Option<(usize, ReadyKey)> = None;
                for (p, heap) in ready.iter().enumerate() {
                    if pool_running[p] >= limits[p] {
                        continue;
                    }
                    if let Some(&top) = heap.peek() {
                        if best.is_none_or(|(_, b)| top > b) {
                            best = Some((p, top));
                        }
                    }
                }
                let Some((p, _)) = best else { break };
                let (_, _, ix) = ready[p].pop().expect("peeked");
                let id = plan.nodes[pos[ix as usize] as usize].id;
                let pn = plan.node(id).expect("planned");
                let node = graph.node_arc(id).clone();
                let mut deps: Vec<DepInfo> = Vec::new();
                for (d, _) in graph.deps(id) {
                    if deps.iter().all(|x| x.id != d) {
                        deps.push(DepInfo {
                            id: d,
                            node: graph.node_arc(d).clone(),
                            output: outputs[d.index()].clone(),
                        });
                    }
                }
                deps.sort_by(|a, b| a.node.label().cmp(b.node.label()));
                let reason = pn.decision.reason().cloned().unwrap_or(Reason::Always);
                events.emit(Event::Started {
                    label: pn.label.clone(),
                    kind: pn.kind.clone(),
                    reason: pn.reason.clone(),
                });
                let cx = NodeContext {
                    id,
                    node,
                    fingerprint: pn.fingerprint,
                    reason,
                    cancel: run_token.clone(),
                    deps: deps.into(),
                    events: events.clone(),
                };
                let fut = action(cx);
                let t0 = Instant::now();
                node_started[id.index()] = Some(t0);
                let handle = set.spawn(async move {
                    let r = fut.await;
                    (r, t0.elapsed())
                });
                tasks.insert(handle.id(), id);
                st[id.index()] = St::Running;
                running += 1;
                pool_running[p] += 1;
            }
        }
        if running == 0 {
            break;
        }
        let deadline = match (opts.grace, stopped_at) {
            (Some(g), Some(at)) if !aborted => Some(at + g),
            _ => None,
        };
        let joined = tokio::select! {
            biased;
            j = set.join_next_with_id() => j.expect("a task is running"),
            _ = opts.cancel.cancelled(), if stop_reason.is_none() => {
                stop_reason = Some("the run was cancelled".into());
                continue;
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                aborted = true;
                set.abort_all();
                continue;
            }
        };
        let (id, result, took) = match joined {
            Ok((tid, (r, took))) => (tasks.remove(&tid).expect("known task"), r, took),
            Err(je) => {
                let id = tasks.remove(&je.id()).expect("known task");
                let err = if je.is_panic() {
                    NodeError::new("the action panicked")
                } else {
                    NodeError {
                        message: "aborted: did not stop within the grace period".into(),
                        cancelled: true,
                    }
                };
                let took = node_started[id.index()].map_or(Duration::ZERO, |t| t.elapsed());
                (id, Err(err), took)
            }
        };
        running -= 1;
        pool_running[pool_of(id)] -= 1;
        elapsed[id.index()] = took;
        let node = graph.node(id);
        match result {
            Ok(out) => {
                st[id.index()] = St::Done;
                events.emit(Event::Finished {
                    label: node.label().clone(),
                    kind: node.kind().to_string(),
                    elapsed_ms: ms(took),
                    output: out.value.clone(),
                });
                outputs[id.index()] = Some(Arc::new(out));
                for s in graph.dependents(id) {
                    if st[s.index()] == St::Waiting {
                        pending[s.index()] -= 1;
                        if pending[s.index()] == 0 {
                            st[s.index()] = St::Ready;
                            ready[pool_of(s)].push(key(s, &prio, &pos));
                        }
                    }
                }
            }
            Err(err) => {
                let cancelled = err.cancelled || run_token.is_cancelled();
                st[id.index()] = if cancelled { St::Cancelled } else { St::Failed };
                events.emit(Event::Failed {
                    label: node.label().clone(),
                    kind: node.kind().to_string(),
                    error: err.message.clone(),
                    elapsed_ms: ms(took),
                    cancelled,
                });
                errors.insert(id, err);
                // Block every due descendant not yet started.
                let mut stack = vec![id];
                while let Some(v) = stack.pop() {
                    for s in graph.dependents(v) {
                        if matches!(st[s.index()], St::Waiting | St::Ready) {
                            st[s.index()] = St::Blocked(id);
                            stack.push(s);
                        }
                    }
                }
                if opts.fail_fast && !cancelled && stop_reason.is_none() {
                    stop_reason = Some(format!(
                        "stopped by fail-fast after {} failed",
                        node.label()
                    ));
                    run_token.cancel();
                    stopped_at = Some(Instant::now());
                }
            }
        }
    }

    // Outcomes, not-run events, counts.
    let mut outcomes = Vec::with_capacity(plan.nodes.len());
    for pn in &plan.nodes {
        let id = pn.id;
        let kc: &mut KindCounts = kind_counts(&mut summary.kinds, &pn.kind);
        let outcome = match st[id.index()] {
            St::NotDue if would[id.index()] => NodeOutcome::WouldRun,
            St::NotDue if graph.node(id).policy() == RunPolicy::Decide => NodeOutcome::Skipped,
            St::NotDue => NodeOutcome::NotNeeded,
            St::Done => {
                kc.finished += 1;
                summary.finished += 1;
                if opts.count_kind.as_deref().is_none_or(|k| k == pn.kind) {
                    if outputs[id.index()].as_ref().is_some_and(|o| o.reused) {
                        summary.reused += 1;
                    } else {
                        summary.baked += 1;
                    }
                }
                NodeOutcome::Finished {
                    output: outputs[id.index()].clone().expect("finished has output"),
                    elapsed: elapsed[id.index()],
                }
            }
            St::Failed => {
                kc.failed += 1;
                summary.failed += 1;
                NodeOutcome::Failed {
                    error: errors.remove(&id).expect("failed has error"),
                    elapsed: elapsed[id.index()],
                }
            }
            St::Cancelled => {
                kc.cancelled += 1;
                summary.cancelled += 1;
                NodeOutcome::Cancelled {
                    error: errors.remove(&id).expect("cancelled has error"),
                    elapsed: elapsed[id.index()],
                }
            }
            St::Running => unreachable!("every running action is awaited"),
            St::Waiting | St::Ready | St::Blocked(_) => {
                kc.not_run += 1;
                summary.not_run += 1;
                let reason = match st[id.index()] {
                    St::Blocked(cause) => {
                        let verb = if st[cause.index()] == St::Cancelled {
                            "was cancelled"
                        } else {
                            "failed"
                        };
                        format!("{} {verb}", graph.node(cause).label())
                    }
                    _ => stop_reason
                        .clone()
                        .unwrap_or_else(|| "not started".to_string()),
                };
                events.emit(Event::NotRun {
                    label: pn.label.clone(),
                    kind: pn.kind.clone(),
                    reason: reason.clone(),
                });
                NodeOutcome::NotRun { reason }
            }
        };
        outcomes.push((id, outcome));
    }
    summary.skipped = summary.kinds.values().map(|k| k.skipped).sum();
    summary.interrupted = stop_reason.is_some();
    summary.elapsed_ms = ms(started_at.elapsed());
    events.emit(Event::Summary(summary.clone()));
    RunReport {
        summary,
        outcomes,
        index: pos,
    }
}
