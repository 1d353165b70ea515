//! [`Scheduler`]: one run of the scheduler's state machine (the node
//! states, the ready queues per pool, the running actions), which
//! [`super::run`] drives.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    kind_counts, ms, DepInfo, NodeContext, NodeError, NodeOutcome, NodeOutput, ReadyKey,
    RunOptions, RunReport, St,
};
use crate::event::{Event, Events, KindCounts, Summary};
use crate::graph::{Graph, NodeId, RunPolicy};
use crate::plan::{Plan, Reason};

/// What a spawned action gives back: its result and how long it took.
pub(super) type Joined = (Result<NodeOutput, NodeError>, Duration);

/// One run of the scheduler: the state of every node, the ready queues per
/// pool and the running actions. [`run`] drives it: [`Scheduler::spawn_ready`]
/// starts what may start, [`Scheduler::joined`] takes an action's end,
/// [`Scheduler::stop`] stops starting, [`Scheduler::report`] says how it ended.
pub(super) struct Scheduler<'g> {
    graph: &'g Graph,
    plan: &'g Plan,
    pub(super) opts: RunOptions,
    events: Events,
    started_at: Instant,
    summary: Summary,
    st: Vec<St>,
    /// node index -> its index in the plan
    pos: Vec<u32>,
    /// due but rehearsed (`would_run`)
    would: Vec<bool>,
    /// due dependencies not finished yet
    pending: Vec<u32>,
    /// longest remaining path
    prio: Vec<u64>,
    /// pool name -> index; index 0 is "no limit"
    pool_index: HashMap<String, usize>,
    limits: Vec<usize>,
    pool_running: Vec<usize>,
    ready: Vec<BinaryHeap<ReadyKey>>,
    run_token: CancellationToken,
    outputs: Vec<Option<Arc<NodeOutput>>>,
    elapsed: Vec<Duration>,
    errors: HashMap<NodeId, NodeError>,
    tasks: HashMap<tokio::task::Id, NodeId>,
    pub(super) set: JoinSet<Joined>,
    pub(super) running: usize,
    pub(super) stop_reason: Option<String>,
    pub(super) stopped_at: Option<Instant>,
    pub(super) aborted: bool,
    node_started: Vec<Option<Instant>>,
}

impl<'g> Scheduler<'g> {
    pub(super) fn new(graph: &'g Graph, plan: &'g Plan, opts: RunOptions, events: Events) -> Self {
        let n = graph.len();
        let mut pool_index = HashMap::new();
        let mut limits: Vec<usize> = vec![usize::MAX];
        for (name, &lim) in &opts.pools {
            pool_index.insert(name.clone(), limits.len());
            limits.push(lim);
        }
        let run_token = opts.cancel.child_token();
        let mut s = Scheduler {
            graph,
            plan,
            events,
            started_at: Instant::now(),
            summary: Summary::default(),
            st: vec![St::NotDue; n],
            pos: vec![u32::MAX; n],
            would: vec![false; n],
            pending: vec![0; n],
            prio: vec![0; n],
            pool_running: vec![0; limits.len()],
            ready: vec![BinaryHeap::new(); limits.len()],
            pool_index,
            limits,
            run_token,
            outputs: vec![None; n],
            elapsed: vec![Duration::ZERO; n],
            errors: HashMap::new(),
            tasks: HashMap::new(),
            set: JoinSet::new(),
            running: 0,
            stop_reason: None,
            stopped_at: None,
            aborted: false,
            node_started: vec![None; n],
            opts,
        };
        s.announce();
        s.rank();
        let due_now: Vec<NodeId> = (s.plan.nodes.iter())
            .filter(|p| s.is_due(p.id) && s.pending[p.id.index()] == 0)
            .map(|p| p.id)
            .collect();
        for id in due_now {
            s.make_ready(id);
        }
        s
    }

    /// Skipped (and would-run) events first; due nodes wait.
    fn announce(&mut self) {
        let kinds = &mut self.summary.kinds;
        for (i, pn) in self.plan.nodes.iter().enumerate() {
            self.pos[pn.id.index()] = i as u32;
            let rehearsed =
                (self.opts.rehearse.as_ref()).is_some_and(|run| !run.contains(&pn.kind));
            if pn.due && rehearsed {
                self.would[pn.id.index()] = true;
                kind_counts(kinds, &pn.kind).would_run += 1;
                self.summary.would_run += 1;
                self.events.emit(Event::WouldRun {
                    label: pn.label.clone(),
                    kind: pn.kind.clone(),
                    reason: pn.reason.clone(),
                });
            } else if pn.due {
                self.st[pn.id.index()] = St::Waiting;
            } else if self.graph.node(pn.id).policy() == RunPolicy::Decide {
                kind_counts(kinds, &pn.kind).skipped += 1;
                self.events.emit(Event::Skipped {
                    label: pn.label.clone(),
                    kind: pn.kind.clone(),
                    reason: pn.reason.clone(),
                });
            }
        }
    }

    /// (a rehearsed node is not due here: it stays NotDue)
    fn is_due(&self, id: NodeId) -> bool {
        self.st[id.index()] != St::NotDue
    }

    /// Pending due dependencies (per edge) and the longest remaining path.
    fn rank(&mut self) {
        let (graph, plan) = (self.graph, self.plan);
        for pn in plan.nodes.iter().rev() {
            let id = pn.id;
            if !self.is_due(id) {
                continue;
            }
            self.pending[id.index()] =
                graph.deps(id).filter(|&(d, _)| self.is_due(d)).count() as u32;
            let tail = (graph.dependents(id))
                .filter(|&s| self.is_due(s))
                .map(|s| self.prio[s.index()])
                .max()
                .unwrap_or(0);
            let cost = (self.opts.costs.get(&id).copied()).unwrap_or_else(|| graph.node(id).cost());
            self.prio[id.index()] = tail.saturating_add(cost);
        }
    }

    fn pool_of(&self, id: NodeId) -> usize {
        (self.graph.node(id).pool())
            .and_then(|p| self.pool_index.get(p).copied())
            .unwrap_or(0)
    }

    fn make_ready(&mut self, id: NodeId) {
        self.st[id.index()] = St::Ready;
        let key = (
            self.prio[id.index()],
            Reverse(self.pos[id.index()]),
            id.index() as u32,
        );
        let p = self.pool_of(id);
        self.ready[p].push(key);
    }

    /// Stop starting nodes (running ones go on to their end).
    pub(super) fn stop(&mut self, reason: String) {
        if self.stop_reason.is_none() {
            self.stop_reason = Some(reason);
        }
        if self.stopped_at.is_none() {
            self.stopped_at = Some(Instant::now());
        }
    }

    /// Start the best ready nodes, among pools with room, up to `jobs`.
    pub(super) fn spawn_ready<A, F>(&mut self, action: &mut A)
    where
        A: FnMut(NodeContext) -> F,
        F: Future<Output = Result<NodeOutput, NodeError>> + Send + 'static,
    {
        while self.running < self.opts.jobs {
            let mut best: Option<(usize, ReadyKey)> = None;
            for (p, heap) in self.ready.iter().enumerate() {
                if self.pool_running[p] >= self.limits[p] {
                    continue;
                }
                if let Some(&top) = heap.peek() {
                    if best.is_none_or(|(_, b)| top > b) {
                        best = Some((p, top));
                    }
                }
            }
            let Some((p, _)) = best else { break };
            let (_, _, ix) = self.ready[p].pop().expect("peeked");
            let id = self.plan.nodes[self.pos[ix as usize] as usize].id;
            self.spawn(id, action);
            self.pool_running[p] += 1;
        }
    }

    fn spawn<A, F>(&mut self, id: NodeId, action: &mut A)
    where
        A: FnMut(NodeContext) -> F,
        F: Future<Output = Result<NodeOutput, NodeError>> + Send + 'static,
    {
        let graph = self.graph;
        let pn = self.plan.node(id).expect("planned");
        let mut deps: Vec<DepInfo> = Vec::new();
        for (d, _) in graph.deps(id) {
            if deps.iter().all(|x| x.id != d) {
                deps.push(DepInfo {
                    id: d,
                    node: graph.node_arc(d).clone(),
                    output: self.outputs[d.index()].clone(),
                });
            }
        }
        deps.sort_by(|a, b| a.node.label().cmp(b.node.label()));
        let reason = pn.decision.reason().cloned().unwrap_or(Reason::Always);
        self.events.emit(Event::Started {
            label: pn.label.clone(),
            kind: pn.kind.clone(),
            reason: pn.reason.clone(),
        });
        let cx = NodeContext {
            id,
            node: graph.node_arc(id).clone(),
            fingerprint: pn.fingerprint,
            reason,
            cancel: self.run_token.clone(),
            deps: deps.into(),
            events: self.events.clone(),
        };
        let fut = action(cx);
        let t0 = Instant::now();
        self.node_started[id.index()] = Some(t0);
        let handle = self.set.spawn(async move {
            let r = fut.await;
            (r, t0.elapsed())
        });
        self.tasks.insert(handle.id(), id);
        self.st[id.index()] = St::Running;
        self.running += 1;
    }

    /// An action ended (returned, panicked or was aborted).
    pub(super) fn joined(
        &mut self,
        joined: Result<(tokio::task::Id, Joined), tokio::task::JoinError>,
    ) {
        let (id, result, took) = match joined {
            Ok((tid, (r, took))) => (self.tasks.remove(&tid).expect("known task"), r, took),
            Err(je) => {
                let id = self.tasks.remove(&je.id()).expect("known task");
                let err = if je.is_panic() {
                    NodeError::new("the action panicked")
                } else {
                    NodeError {
                        message: "aborted: did not stop within the grace period".into(),
                        cancelled: true,
                    }
                };
                let took = self.node_started[id.index()].map_or(Duration::ZERO, |t| t.elapsed());
                (id, Err(err), took)
            }
        };
        self.running -= 1;
        let p = self.pool_of(id);
        self.pool_running[p] -= 1;
        self.elapsed[id.index()] = took;
        match result {
            Ok(out) => self.finished(id, out, took),
            Err(err) => self.failed(id, err, took),
        }
    }

    /// A node finished: its due dependents whose dependencies all finished
    /// are ready.
    fn finished(&mut self, id: NodeId, out: NodeOutput, took: Duration) {
        let graph = self.graph;
        let node = graph.node(id);
        self.st[id.index()] = St::Done;
        self.events.emit(Event::Finished {
            label: node.label().clone(),
            kind: node.kind().to_string(),
            elapsed_ms: ms(took),
            output: out.value.clone(),
        });
        self.outputs[id.index()] = Some(Arc::new(out));
        for s in graph.dependents(id) {
            if self.st[s.index()] == St::Waiting {
                self.pending[s.index()] -= 1;
                if self.pending[s.index()] == 0 {
                    self.make_ready(s);
                }
            }
        }
    }

    /// A node failed (or was cancelled): every due descendant not yet
    /// started is blocked; with fail-fast the run stops.
    fn failed(&mut self, id: NodeId, err: NodeError, took: Duration) {
        let graph = self.graph;
        let node = graph.node(id);
        let cancelled = err.cancelled || self.run_token.is_cancelled();
        self.st[id.index()] = if cancelled { St::Cancelled } else { St::Failed };
        self.events.emit(Event::Failed {
            label: node.label().clone(),
            kind: node.kind().to_string(),
            error: err.message.clone(),
            elapsed_ms: ms(took),
            cancelled,
        });
        self.errors.insert(id, err);
        let mut stack = vec![id];
        while let Some(v) = stack.pop() {
            for s in graph.dependents(v) {
                if matches!(self.st[s.index()], St::Waiting | St::Ready) {
                    self.st[s.index()] = St::Blocked(id);
                    stack.push(s);
                }
            }
        }
        if self.opts.fail_fast && !cancelled && self.stop_reason.is_none() {
            self.stop(format!(
                "stopped by fail-fast after {} failed",
                node.label()
            ));
            self.run_token.cancel();
        }
    }

    /// Outcomes, not-run events, counts; the summary last.
    pub(super) fn report(mut self) -> RunReport {
        let mut outcomes = Vec::with_capacity(self.plan.nodes.len());
        for pn in &self.plan.nodes {
            let outcome = self.outcome(pn.id, &pn.kind);
            if let NodeOutcome::NotRun { reason } = &outcome {
                self.events.emit(Event::NotRun {
                    label: pn.label.clone(),
                    kind: pn.kind.clone(),
                    reason: reason.clone(),
                });
            }
            outcomes.push((pn.id, outcome));
        }
        let summary = &mut self.summary;
        summary.skipped = summary.kinds.values().map(|k| k.skipped).sum();
        summary.interrupted = self.stop_reason.is_some();
        summary.elapsed_ms = ms(self.started_at.elapsed());
        self.events.emit(Event::Summary(summary.clone()));
        RunReport {
            summary: self.summary,
            outcomes,
            index: self.pos,
        }
    }

    /// How node `id` (of `kind`) ended, counted in the summary.
    fn outcome(&mut self, id: NodeId, kind: &str) -> NodeOutcome {
        let i = id.index();
        let summary = &mut self.summary;
        let kc: &mut KindCounts = kind_counts(&mut summary.kinds, kind);
        match self.st[i] {
            St::NotDue if self.would[i] => NodeOutcome::WouldRun,
            St::NotDue if self.graph.node(id).policy() == RunPolicy::Decide => NodeOutcome::Skipped,
            St::NotDue => NodeOutcome::NotNeeded,
            St::Done => {
                kc.finished += 1;
                summary.finished += 1;
                let output = self.outputs[i].clone().expect("finished has output");
                if self.opts.count_kind.as_deref().is_none_or(|k| k == kind) {
                    if output.reused {
                        summary.reused += 1;
                    } else {
                        summary.baked += 1;
                    }
                }
                NodeOutcome::Finished {
                    output,
                    elapsed: self.elapsed[i],
                }
            }
            St::Failed => {
                kc.failed += 1;
                summary.failed += 1;
                NodeOutcome::Failed {
                    error: self.errors.remove(&id).expect("failed has error"),
                    elapsed: self.elapsed[i],
                }
            }
            St::Cancelled => {
                kc.cancelled += 1;
                summary.cancelled += 1;
                NodeOutcome::Cancelled {
                    error: self.errors.remove(&id).expect("cancelled has error"),
                    elapsed: self.elapsed[i],
                }
            }
            St::Running => unreachable!("every running action is awaited"),
            St::Waiting | St::Ready | St::Blocked(_) => {
                kc.not_run += 1;
                summary.not_run += 1;
                let reason = match self.st[i] {
                    St::Blocked(cause) => {
                        let verb = if self.st[cause.index()] == St::Cancelled {
                            "was cancelled"
                        } else {
                            "failed"
                        };
                        format!("{} {verb}", self.graph.node(cause).label())
                    }
                    _ => (self.stop_reason.clone()).unwrap_or_else(|| "not started".to_string()),
                };
                NodeOutcome::NotRun { reason }
            }
        }
    }
}
