//! The node executor of `csis build`: plan under the tree lock, run the
//! due nodes with the engine's scheduler, and record every successful bake
//! at once. What the run does is reported as engine events and notes to a
//! [`Reporter`]; the outcome is a [`BuildOutcome`].
//!
//! A build of an unchanged tree constructs no runtime, so it spawns no
//! process and makes no cloud call.

mod after;
mod bake;
mod lease;
mod logs;
mod node;
pub mod noop;
mod notice;
mod order;
mod steps;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use csis_cache::{BuildRecord, Capabilities, LocalDir, PinBinding, RecordTests, Recorder};
use csis_engine::{Events, NodeContext, NodeError, NodeOutput, Reason, RunOptions, Summary};
use csis_rules::compile::{BakeSpec, ForceBake, NodeSpec, ParentSpec, BAKE_RECIPE};
use csis_runtime::{
    BakeOutcome, BakeParent, BakeRequest, DynRuntime, ImageFacts, LogSink, ResolvedImage,
    RuntimeError, TestCommand,
};
use csis_schema::model::ParentPolicy;
use csis_schema::tags;
use serde_json::json;

use crate::exit;
use crate::session::Session;
use crate::{Access, Context, TreeArgs};

pub(crate) use crate::vendor::resolve_request;
pub use bake::name_prefix;
/// What a [`PlannedNode`] is made of.
pub use csis_engine::{Decision, FieldChange, Fingerprint, Label, NodeId};
/// The engine's vocabulary a build reports in (the binary renders it).
pub use csis_engine::{Event, Plan, PlannedNode};
pub use csis_rules::compile::NodeKind;
/// What cancels a build (`BuildOptions::cancel`).
pub use csis_runtime::CancellationToken;
use logs::BakeLog;
pub use logs::{prune_run_logs, run_log, KEPT_RUN_LOGS};
pub use notice::{LeaseTaken, Notice};
pub use steps::{steps, steps_of_mods};

/// The node kinds a dry run runs (`--dry-run`: plan, resolve and emit);
/// every other due node is reported `would_run`.
pub const DRY_RUN_KINDS: [NodeKind; 2] = [NodeKind::Resolve, NodeKind::Emit];

/// What `csis build` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Labels or patterns; none = `//...`.
    pub patterns: Vec<String>,
    /// At most this many nodes at once (default 4).
    pub jobs: Option<usize>,
    /// Plan and emit only.
    pub dry_run: bool,
    /// `SERIES`, `SERIES@RUNTIME` or `all`.
    pub force_bake: Vec<String>,
    /// Stop everything at the first failure.
    pub fail_fast: bool,
    /// Skip the state query before baking.
    pub no_state_query: bool,
    /// On a shared store: exit 75 at once when another runner holds a
    /// lease this build needs, instead of waiting.
    pub no_wait: bool,
    /// Cancels the run (the binary cancels it on Ctrl-C): nothing new
    /// starts, running bakes are stopped, finished ones stay recorded.
    pub cancel: CancellationToken,
    /// A failed bake's machine is kept for inspection, marked
    /// `csis_kept_failed=<run id>` (refused for a runtime that cannot).
    pub keep_failed: bool,
}

/// Where a build's progress goes (the binary renders it).
pub trait Reporter: Send + Sync {
    /// What the build tells people besides its events.
    fn note(&self, notice: &Notice);
    /// The lines people read of a notice (a node's without its label):
    /// the renderer's words, which a release or dispose node also logs,
    /// answers and fails with (ops words no report).
    fn words(&self, notice: &Notice) -> Vec<String>;
    /// An event of the run.
    fn event(&self, e: &Event);
    /// A line of a running node's output.
    fn log_line(&self, label: &str, line: &str);
    /// A dry run's plan, before anything runs.
    fn dry_run_plan(&self, plan: &Plan);
    /// Where the log of the bake `label` is written (before it starts).
    fn bake_log(&self, label: &str, path: &std::path::Path) {
        let _ = (label, path);
    }
}

/// How a build ended.
pub enum BuildOutcome {
    /// The no-op stamp held: what the last no-op build answered.
    Replayed(noop::Replay),
    /// The state query found hard drift: nothing ran.
    HardDrift(Vec<String>),
    /// `--no-wait`, and another runner holds a lease this build needs.
    Locked(String),
    /// The run happened.
    Ran {
        summary: Summary,
        /// Stopped by Ctrl-C.
        interrupted: bool,
        /// The labels of the due nodes that did not run.
        not_run: Vec<String>,
    },
}

impl BuildOutcome {
    /// The exit code of this outcome.
    pub fn exit_code(&self) -> u8 {
        match self {
            BuildOutcome::Replayed(_) => exit::SUCCESS,
            BuildOutcome::HardDrift(_) => exit::FAILURE,
            BuildOutcome::Locked(_) => exit::LOCKED,
            BuildOutcome::Ran {
                interrupted: true, ..
            } => exit::INTERRUPTED,
            BuildOutcome::Ran { summary, .. } if summary.failed > 0 || summary.cancelled > 0 => {
                exit::FAILURE
            }
            BuildOutcome::Ran { .. } => exit::SUCCESS,
        }
    }
}

/// Run one build of the tree in a [`Context`] opened as every writing
/// operation opens one ([`Access::Build`]): with the tree lock (`on_wait`
/// says who holds it while this one waits; under `--no-wait` a held lock
/// is [`BuildOutcome::Locked`]), or, when the records are on a shared
/// store, with a lease per series the build touches instead (taken once
/// the plan is known).
pub fn run(
    tree: &TreeArgs,
    args: &BuildOptions,
    on_wait: impl FnOnce(&str),
    reporter: Arc<dyn Reporter>,
) -> Result<BuildOutcome> {
    let access = Access::Build {
        wait: !args.no_wait,
    };
    let cx = match Context::records_only(&tree.dir, access, on_wait) {
        Ok(cx) => cx,
        Err(e) => {
            return match e.downcast_ref::<csis_cache::CacheError>() {
                Some(locked @ csis_cache::CacheError::Locked { .. }) => {
                    Ok(BuildOutcome::Locked(locked.to_string()))
                }
                _ => Err(e),
            }
        }
    };
    run_in(cx, tree, args, reporter)
}

/// [`run`] in the context `cx` (its lock, when it holds one, noted once
/// the build goes past its no-op stamp, so that a build the stamp answers
/// writes nothing into it). A dry build of a copy of the tree (`drift`)
/// runs in a context that reads.
pub(crate) fn run_in(
    mut cx: Context,
    tree: &TreeArgs,
    args: &BuildOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<BuildOutcome> {
    let shared = cx.shared();
    let local = cx.local.clone();
    // A build of an unchanged tree answers from its no-op stamp (noop.rs),
    // unless the records are on a shared store (other runners change them
    // without touching this tree).
    let stamp = if shared {
        None
    } else {
        noop::NoopStamp::for_build(tree, args)
    };
    if let Some(replay) = stamp.as_ref().and_then(|s| s.replay()) {
        return Ok(BuildOutcome::Replayed(replay));
    }
    cx.note_holder();
    let mut session = crate::session::open_in(&mut cx, &tree.load_options())?;
    let sel = session.select(&args.patterns)?;
    let force = ForceBake::parse(&args.force_bake);
    let mut plan = session.plan(&sel, &force)?;
    say_before_run(&session, &plan, &*reporter);
    let run_id = csis_cache::run_id_now();
    // On a shared store: a lease per (series, runtime) this build bakes,
    // releases or disposes, then the plan again on the records as they are
    // now (a runner that held one of them may have baked it meanwhile).
    let store = session.meta.store()?;
    if let Some(store) = store.as_ref().filter(|_| !args.dry_run) {
        let l = csis_cache::lease::Leases::new(store.clone(), &run_id);
        if let Some(locked) =
            lease::lease_the_plan(tree, args, &l, &mut session, &mut plan, &*reporter)?
        {
            return Ok(BuildOutcome::Locked(locked));
        }
        cx.hold_leases(l);
    }
    // The bakes due in this run (before a dry run keeps only its emits):
    // a child emitted while its parent still has to bake finds the parent
    // by name (`BakeParent::Deferred`).
    let due_bakes: HashSet<NodeId> = plan
        .nodes
        .iter()
        .filter(|n| n.due && n.kind == NodeKind::Bake)
        .map(|n| n.id)
        .collect();
    if args.dry_run {
        // Plan + emit only (DRY_RUN_KINDS); the vendor images are resolved
        // (a read-only query) so that no emitted file holds a placeholder.
        // Every other due node is reported `would_run` by the scheduler.
        reporter.dry_run_plan(&plan);
    }
    let runs = |n: &csis_engine::PlannedNode| {
        n.due && (!args.dry_run || DRY_RUN_KINDS.iter().any(|k| n.kind == *k))
    };

    // The state gate (lineage operations): only when something will run or
    // a launched machine is kept standing (is it still there?), so a no-op
    // build of images talks to no runtime but for the plan's read of the
    // vendor tags its bases were baked from (crate::vendor).
    if !args.dry_run && (plan.nodes.iter().any(|n| n.due) || keeps_machines(&session, &plan)) {
        let hard = state_gate(args, &mut session, &mut plan)?;
        if !hard.is_empty() {
            return Ok(BuildOutcome::HardDrift(hard));
        }
    }

    // Runtimes only for what runs: a no-op build constructs none. Those
    // the plan's vendor reads and the gate asked are not constructed again.
    let names: BTreeSet<&str> = (plan.nodes.iter())
        .filter(|n| runs(n))
        .filter_map(|n| n.runtime.as_deref())
        .collect();
    let runtimes = session.runtimes.some(&session.tree, names)?;
    // The one tokio runtime they run on, held by the context (not by the
    // build's state, which a node may drop last, inside that runtime).
    cx.return_runtimes(std::mem::take(&mut session.runtimes));
    if args.keep_failed && !args.dry_run {
        refuse_keep_failed(&session, &plan, &runtimes)?;
    }

    let cancel = args.cancel.clone();
    let opts = run_options(args, &session, &plan);

    let recorder = cx.recorder()?;
    if !args.dry_run && !shared && plan.nodes.iter().any(|n| n.due && n.kind == NodeKind::Bake) {
        // (On a shared store other runs may be writing their logs here.)
        prune_run_logs(&local, KEPT_RUN_LOGS);
    }
    let tofu_logs = local.logs().join(&run_id);
    // The instances whose nodes this run runs (the selection's due ones):
    // only they are waited for before a root's ephemerals go.
    let running_instances = running_instances(&session, &plan);
    let state = Arc::new(BuildState {
        session: order::order_tofu_nodes(order::order_dispose_nodes(session, &plan), &plan),
        runtimes,
        recorder,
        local,
        store,
        run_id,
        resolved: Mutex::new(HashMap::new()),
        due_bakes,
        built: Mutex::new(HashMap::new()),
        images: tokio::sync::Mutex::new(HashMap::new()),
        renderer: reporter.clone(),
        dry_run: args.dry_run,
        keep_failed: args.keep_failed,
        meta_lock: tokio::sync::Mutex::new(()),
        roots: crate::fleet::tofu::RootRuns::new(
            crate::fleet::tofu::flag_reader(tree.dir.clone(), tree.load_options()),
            tofu_logs,
            running_instances,
        ),
    });

    let capture = noop::Capture::default();
    let rt = cx.runtimes().tokio();
    // What `validate` checks online, for the runtimes this build touches,
    // before anything bakes (a subnet typo never reaches packer). A dry
    // run bakes nothing: it reports what the checks find and goes on.
    if plan
        .nodes
        .iter()
        .any(|n| runs(n) && (n.kind == NodeKind::Bake || n.kind == NodeKind::Emit))
    {
        check_before_baking(rt, &state, args.dry_run, &reporter)?;
    }
    let renderer = reporter;
    let report = rt.block_on(async {
        if !state.dry_run {
            clean_leftovers(&state.runtimes, &*renderer).await;
        }
        execute(&state, &plan, opts, &capture, &renderer).await
    });
    cx.shutdown_runtimes();
    // Everything recorded is in the journal already; write the files now.
    state.recorder.flush()?;
    say_after_run(&state, cx.release_leases());
    if let Some(stamp) = &stamp {
        stamp.record(&state.session, &plan, &capture, &report.summary);
    }

    let outcome = ran(state, plan, &report, &cancel);
    // The runtimes, then the lock.
    drop(cx);
    Ok(outcome)
}

/// Before the run: the compile's warnings, and what each gated fleet node
/// would do (it changes nothing).
fn say_before_run(session: &Session, plan: &Plan, reporter: &dyn Reporter) {
    for w in &session.compiled.warnings {
        reporter.note(&Notice::Warning {
            message: w.to_string(),
        });
    }
    let graph = &session.compiled.graph;
    for n in (plan.nodes.iter()).filter(|n| crate::fleet::plan::is_gated(graph, n)) {
        reporter.note(&Notice::Gated {
            label: n.label.to_string(),
            action: n.code.to_string(),
            reason: n.reason.clone(),
        });
    }
}

/// What `validate` checks online, for the runtimes this build touches,
/// before anything bakes (a subnet typo never reaches packer); a dry run
/// reports what the checks find and goes on. Then the tofu roots.
fn check_before_baking(
    rt: &tokio::runtime::Runtime,
    state: &BuildState,
    dry_run: bool,
    reporter: &Arc<dyn Reporter>,
) -> Result<()> {
    let diags = rt.block_on(crate::validate::online_checks_of(
        &state.session.tree,
        &state.runtimes,
    ));
    let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(|d| d.is_error());
    for w in &warnings {
        reporter.note(&Notice::Warning {
            message: w.to_string(),
        });
    }
    if !errors.is_empty() {
        if !dry_run {
            return Err(crate::NotLoaded {
                diagnostics: errors,
            }
            .into());
        }
        for e in &errors {
            reporter.note(&Notice::DryRunRefusal {
                message: e.to_string(),
            });
        }
    }
    // the roots go under generated/: its .gitignore first, as the
    // original writes it, so a committed emission holds no run-local file
    crate::emission::write_gitignores(&state.session.tree)?;
    tofu_roots(state, reporter, dry_run.then_some(rt));
    Ok(())
}

/// The instances whose nodes this run runs (the selection's due ones).
fn running_instances(session: &Session, plan: &Plan) -> HashSet<String> {
    (plan.nodes.iter())
        .filter(|n| n.due)
        .filter_map(|n| match session.compiled.spec(n.id) {
            NodeSpec::Instance(i) => Some(i.name.clone()),
            _ => None,
        })
        .collect()
}

/// After the run: the leases a renewal found taken (then let go), and the
/// store requests the build made.
fn say_after_run(state: &BuildState, leases: Option<csis_cache::lease::Leases>) {
    if let Some(l) = leases {
        for key in l.lost() {
            state.renderer.note(&Notice::LeaseLost {
                key: key.to_string(),
            });
        }
        drop(l);
    }
    if let Some(store) = &state.store {
        state.renderer.note(&Notice::StoreRequests {
            url: store.url().to_string(),
            requests: csis_cache::remote::total_requests(),
        });
    }
}

/// The run: every due node through the scheduler, each event to the
/// reporter and to the no-op stamp's capture.
async fn execute(
    state: &Arc<BuildState>,
    plan: &Plan,
    opts: RunOptions,
    capture: &noop::Capture,
    renderer: &Arc<dyn Reporter>,
) -> csis_engine::RunReport {
    let r = renderer.clone();
    let cap = capture.clone();
    let events = Events::new(move |e: Event| {
        cap.event(&e);
        r.event(&e)
    });
    let st = state.clone();
    let report = csis_engine::run(
        &state.session.compiled.graph,
        plan,
        opts,
        events,
        move |cx: NodeContext| {
            let st = st.clone();
            async move { st.act(cx).await }
        },
    )
    .await;
    if !state.dry_run {
        state.abandoned_proofs().await;
    }
    report
}

/// How a build that ran ended: the summary, whether Ctrl-C stopped it, the
/// due nodes that did not run.
fn ran(
    state: Arc<BuildState>,
    plan: Plan,
    report: &csis_engine::RunReport,
    cancel: &CancellationToken,
) -> BuildOutcome {
    // Everything is recorded and flushed: leave the tree, the graph and the
    // records to the process exit rather than free them piece by piece (a
    // tenth of a no-op build of thousands of images). One build per process.
    // Runtimes, though, are dropped (these clones here, the runtimes
    // themselves with `Runtimes` once the run returns): they finish their
    // own bookkeeping then (the dummy store compacts its change log;
    // clients close).
    let state = match Arc::try_unwrap(state) {
        Ok(mut st) => {
            drop(std::mem::take(&mut st.runtimes));
            Arc::new(st)
        }
        Err(shared) => shared,
    };
    let state = std::mem::ManuallyDrop::new(state);
    let _plan = std::mem::ManuallyDrop::new(plan);

    let interrupted = report.summary.interrupted && cancel.is_cancelled();
    let not_run = report
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, csis_engine::NodeOutcome::NotRun { .. }))
        .map(|(id, _)| state.session.compiled.graph.node(*id).label().to_string())
        .collect();
    BuildOutcome::Ran {
        summary: report.summary.clone(),
        interrupted,
        not_run,
    }
}

/// The state gate: the state query (unless `--no-state-query`), a
/// launched machine found missing relaunched by this very build; the hard
/// drift the plan does not repair (empty: go).
fn state_gate(args: &BuildOptions, session: &mut Session, plan: &mut Plan) -> Result<Vec<String>> {
    let hard = crate::state::state_query_gate_drift(
        &session.tree,
        &session.runtimes,
        !args.no_state_query,
    )?;
    // a launched machine found missing is relaunched by this very build
    session.relaunch_missing(plan, &hard)?;
    Ok(crate::fleet::plan::unrepaired(
        &session.compiled.graph,
        plan,
        &hard,
    ))
}

/// The scheduler's options: `-j`, fail-fast, the runtimes' pools, each due
/// bake's cost (what its series' last bake on that runtime took), the
/// cancel token, a dry run's rehearsal.
fn run_options(args: &BuildOptions, session: &Session, plan: &Plan) -> RunOptions {
    let mut opts = RunOptions::new(args.jobs.unwrap_or(4))
        .fail_fast(args.fail_fast)
        .count_kind(NodeKind::Bake.as_str());
    for rt in &session.tree.runtimes {
        if let Some(m) = rt.max_parallel() {
            opts = opts.pool_limit(&rt.name, m as usize);
        }
    }
    // A due bake costs what its series' last bake on that runtime took.
    let seconds = session.lineage.bake_seconds();
    for n in plan
        .nodes
        .iter()
        .filter(|n| n.due && n.kind == NodeKind::Bake)
    {
        let (Some(series), Some(rt)) = (n.series.as_deref(), n.runtime.as_deref()) else {
            continue;
        };
        if let Some(secs) = seconds.estimate(series, rt) {
            opts = opts.cost(n.id, (secs * 1000.0).max(1.0) as u64);
        }
    }
    opts = opts.cancel_token(args.cancel.clone());
    if args.dry_run {
        let kinds: Vec<&str> = DRY_RUN_KINDS.iter().map(|k| k.as_str()).collect();
        opts = opts.rehearse(&kinds);
    }

    opts
}

/// Leftovers of a killed run (docker: `csis-bake-<runtime>-*`
/// containers) go before anything bakes, and are reported.
async fn clean_leftovers(runtimes: &BTreeMap<String, DynRuntime>, renderer: &dyn Reporter) {
    for (name, rt) in runtimes {
        match rt.clean_stale_bakes().await {
            Ok(removed) => {
                for leftover in removed {
                    renderer.note(&Notice::LeftoverRemoved {
                        runtime: name.to_string(),
                        leftover: leftover.to_string(),
                    });
                }
            }
            Err(e) => renderer.note(&Notice::LeftoversUnknown {
                runtime: name.to_string(),
                error: e.to_string(),
            }),
        }
    }
}

/// Does the plan keep a launched durable machine standing: an instance
/// node, not gated and not decommissioning, of an instance the records
/// hold launched? A build then asks the runtime whether it still stands.
pub(crate) fn keeps_machines(session: &Session, plan: &Plan) -> bool {
    let graph = &session.compiled.graph;
    let instances: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Instance)
        .filter(|n| {
            graph
                .node(n.id)
                .attr(csis_rules::compile::GATED_ATTR)
                .is_none()
        })
        .filter(|n| {
            graph
                .node(n.id)
                .attr(csis_rules::compile::DECOMMISSION_ATTR)
                != Some("true")
        })
        .filter_map(|n| graph.node(n.id).attr("instance"))
        .collect();
    if instances.is_empty() {
        return false;
    }
    crate::fleet::FleetView::load(&session.meta)
        .map(|v| instances.iter().any(|i| v.launched(i).is_some()))
        .unwrap_or(true)
}

/// `--keep-failed` for a due bake on a runtime that cannot keep a failed
/// bake's machine: one line, before anything runs.
fn refuse_keep_failed(
    session: &Session,
    plan: &Plan,
    runtimes: &BTreeMap<String, DynRuntime>,
) -> Result<()> {
    for n in plan.nodes.iter().filter(|n| n.due) {
        let NodeSpec::Bake(spec) = session.compiled.spec(n.id) else {
            continue;
        };
        let Some(rt) = runtimes.get(&spec.runtime) else {
            continue;
        };
        if !rt.keeps_failed_bakes(&spec.image_builder) {
            anyhow::bail!(
                "--keep-failed: {} bakes on runtime {} (type {}, image builder {}), which cannot keep a failed bake's machine; build it without --keep-failed",
                spec.label,
                spec.runtime,
                rt.kind(),
                spec.image_builder
            );
        }
    }
    Ok(())
}

struct BuildState {
    session: Session,
    runtimes: BTreeMap<String, DynRuntime>,
    recorder: Recorder,
    local: LocalDir,
    /// The shared store, when the records are remote (leases live there).
    store: Option<Arc<csis_cache::objstore::Store>>,
    run_id: String,
    /// resolve node -> vendor image found this run.
    resolved: Mutex<HashMap<NodeId, ResolvedImage>>,
    /// The bake nodes due in this run.
    due_bakes: HashSet<NodeId>,
    /// bake node -> build id made this run.
    built: Mutex<HashMap<NodeId, String>>,
    /// runtime -> its images, asked once per run (recovery of unrecorded bakes).
    images: tokio::sync::Mutex<HashMap<String, Arc<Vec<ImageFacts>>>>,
    renderer: Arc<dyn Reporter>,
    dry_run: bool,
    /// `--keep-failed`.
    keep_failed: bool,
    /// Held by release and dispose nodes while they read and write
    /// `meta-state/` (releases, and lineage and pins through the recorder):
    /// one at a time, never beside another writer of those files.
    meta_lock: tokio::sync::Mutex<()>,
    /// The tofu roots of this run, each sequence run once (fleet::tofu).
    roots: crate::fleet::tofu::RootRuns,
}

/// A runtime's error as the node's: its text (a failed bake's last lines of
/// output among it) with every secret, and every printed piece of one,
/// replaced by its token, as the bake log is: the message reaches the
/// terminal, the JSON lines and the build report.
fn rt_err(e: RuntimeError) -> NodeError {
    match e {
        RuntimeError::Cancelled => NodeError::cancelled(),
        e => NodeError::new(csis_schema::secret::redact_printed(&e.to_string())),
    }
}

#[cfg(test)]
mod tests;

/// Write the tofu roots of the tree's fleet (`csis_ops::tofu_roots`) beside
/// the packer roots, and say which. Their gated sequence runs in the
/// storage and instance nodes of their builders (fleet::tofu), so a root
/// that cannot be written here is a warning: the images still bake, and
/// such a node fails naming why.
fn tofu_roots(
    state: &BuildState,
    reporter: &Arc<dyn Reporter>,
    dry_run: Option<&tokio::runtime::Runtime>,
) {
    let s = &state.session;
    match crate::tofu_roots::emit_for_build(&s.tree, &s.meta, &state.run_id) {
        Ok(None) => {}
        Ok(Some(e)) => {
            let dirs: Vec<String> = e
                .roots
                .iter()
                .map(|r| r.dir.display().to_string())
                .collect();
            reporter.note(&Notice::TofuRoots { dirs });
            // a dry run checks each root as the original's does:
            // `init -backend=false`, `validate` (no state, no plan)
            if let Some(rt) = dry_run {
                let generated = s.tree.root().join("generated");
                let log = state.local.logs().join(&state.run_id);
                let modules = s.tree.root().join(&s.tree.config.config.module_source_base);
                let checked = rt.block_on(crate::fleet::tofu::validate_dry(
                    &e.roots,
                    &generated,
                    &log,
                    &state.local.sub("cache"),
                    &modules,
                ));
                for (dir, verdict) in checked {
                    if let Err(why) = verdict {
                        reporter.note(&Notice::TofuRootNotValid {
                            dir,
                            why: csis_schema::secret::redact_printed(&why).into_owned(),
                        });
                    }
                }
            }
        }
        Err(e) => reporter.note(&Notice::TofuRootsNotWritten {
            error: format!("{e:#}"),
        }),
    }
}
