//! The node executor of `csis build`: plan under the tree lock, run the
//! due nodes with the engine's scheduler, and record every successful bake
//! at once. What the run does is reported as engine events and notes to a
//! [`Reporter`]; the outcome is a [`BuildOutcome`].
//!
//! A build of an unchanged tree constructs no runtime, so it spawns no
//! process and makes no cloud call.

mod steps;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use csis_cache::{BuildRecord, Capabilities, LocalDir, PinBinding, RecordTests, Recorder};
use csis_engine::{
    Event, Events, NodeContext, NodeError, NodeId, NodeOutput, Plan, Reason, RunOptions, Summary,
};
use csis_rules::compile::{BakeSpec, ForceBake, NodeSpec, ParentSpec, BAKE_RECIPE};
use csis_runtime::{
    BakeOutcome, BakeParent, BakeRequest, CancellationToken, DynRuntime, ImageFacts, LogSink,
    ResolveRequest, ResolvedImage, RuntimeError, TestCommand,
};
use csis_schema::model::ParentPolicy;
use serde_json::json;

use crate::exit;
use crate::session::Session;
use crate::TreeArgs;

pub use steps::steps;

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
}

/// Where a build's progress goes (the binary renders it).
pub trait Reporter: Send + Sync {
    /// A message for people.
    fn note(&self, msg: &str);
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
    Replayed(crate::noop::Replay),
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

/// Run one build. The caller holds the tree lock.
pub fn run(
    tree: &TreeArgs,
    args: &BuildOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<BuildOutcome> {
    let local = LocalDir::of_tree(&tree.dir);
    // A build of an unchanged tree answers from its no-op stamp (noop.rs),
    // unless the records are on a shared store (other runners change them
    // without touching this tree).
    let shared = csis_cache::MetaState::of_tree(&tree.dir).is_remote();
    let stamp = if shared {
        None
    } else {
        crate::noop::NoopStamp::for_build(tree, args)
    };
    if let Some(replay) = stamp.as_ref().and_then(|s| s.replay()) {
        return Ok(BuildOutcome::Replayed(replay));
    }
    let mut session = crate::session::open(&tree.dir, &tree.load_options())?;
    let sel = session.select(&args.patterns)?;
    let force = ForceBake::parse(&args.force_bake);
    let mut plan = session.plan(&sel, &force)?;
    for w in &session.compiled.warnings {
        reporter.note(&format!("warning: {w}"));
    }
    let run_id = csis_cache::run_id_now();
    // On a shared store: a lease per (series, runtime) this build bakes,
    // releases or disposes, then the plan again on the records as they are
    // now (a runner that held one of them may have baked it meanwhile).
    let store = session.meta.store()?;
    let mut leases: Option<csis_cache::lease::Leases> = None;
    if let Some(store) = store.as_ref().filter(|_| !args.dry_run) {
        let l = csis_cache::lease::Leases::new(store.clone(), &run_id);
        loop {
            let (keys, covers) = lease_keys(&session, &plan);
            if keys.iter().all(|(s, r)| l.holds(s, r)) {
                break;
            }
            let note = |e: &csis_cache::lease::LeaseEvent| reporter.note(&e.message());
            match l.acquire(&keys, &covers, !args.no_wait, &note) {
                Ok(_) => {}
                Err(e @ csis_cache::CacheError::Locked { .. }) => {
                    return Ok(BuildOutcome::Locked(e.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
            session = crate::session::open(&tree.dir, &tree.load_options())?;
            let sel = session.select(&args.patterns)?;
            plan = session.plan(&sel, &force)?;
        }
        leases = Some(l);
    }
    // The bakes due in this run (before a dry run keeps only its emits):
    // a child emitted while its parent still has to bake finds the parent
    // by name (`BakeParent::Deferred`).
    let due_bakes: HashSet<NodeId> = plan
        .nodes
        .iter()
        .filter(|n| n.due && n.kind == "bake")
        .map(|n| n.id)
        .collect();
    if args.dry_run {
        // Plan + emit only; the vendor images are resolved (a read-only
        // query) so that no emitted file holds a placeholder.
        reporter.dry_run_plan(&plan);
        for n in plan.nodes.iter_mut() {
            if n.kind != "emit" && n.kind != "resolve" {
                n.due = false;
            }
        }
    }

    // The state gate (lineage operations): only when something will run, so
    // a no-op build talks to no runtime at all.
    if !args.dry_run && plan.nodes.iter().any(|n| n.due) {
        let hard = crate::state::state_query_gate(&session.tree, !args.no_state_query)?;
        if !hard.is_empty() {
            return Ok(BuildOutcome::HardDrift(hard));
        }
    }

    // Runtimes only for what runs: a no-op build constructs none.
    let mut names: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| n.due)
        .filter_map(|n| n.runtime.as_deref())
        .collect();
    names.sort();
    names.dedup();
    let runtimes = crate::wiring::runtimes(&session.tree, names.iter().copied())?;

    let mut opts = RunOptions::new(args.jobs.unwrap_or(4))
        .fail_fast(args.fail_fast)
        .count_kind("bake");
    for rt in &session.tree.runtimes {
        if let Some(m) = rt.max_parallel() {
            opts = opts.pool_limit(&rt.name, m as usize);
        }
    }
    let cancel = args.cancel.clone();
    opts = opts.cancel_token(cancel.clone());

    let recorder = Recorder::open(session.meta.clone(), local.journal())?;
    if !args.dry_run && !shared && plan.nodes.iter().any(|n| n.due && n.kind == "bake") {
        // (On a shared store other runs may be writing their logs here.)
        prune_run_logs(&local, KEPT_RUN_LOGS);
    }
    let state = Arc::new(BuildState {
        session: order_dispose_nodes(session, &plan),
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
        meta_lock: tokio::sync::Mutex::new(()),
    });

    let capture = crate::noop::Capture::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // What `validate` checks online, for the runtimes this build touches,
    // before anything bakes (a subnet typo never reaches packer). A dry
    // run bakes nothing: it reports what the checks find and goes on.
    if plan
        .nodes
        .iter()
        .any(|n| n.due && (n.kind == "bake" || n.kind == "emit"))
    {
        let diags = rt.block_on(crate::validate::online_checks_of(
            &state.session.tree,
            &state.runtimes,
        ));
        let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(|d| d.is_error());
        for w in &warnings {
            reporter.note(&format!("warning: {w}"));
        }
        if !errors.is_empty() {
            if !args.dry_run {
                return Err(crate::NotLoaded {
                    diagnostics: errors,
                }
                .into());
            }
            for e in &errors {
                reporter.note(&format!("{e} (a bake would be refused; --dry-run goes on)"));
            }
        }
    }
    let renderer = reporter;
    let report = rt.block_on(async {
        // Leftovers of a killed run (docker: `csis-bake-<runtime>-*`
        // containers) go before anything bakes, and are reported.
        if !state.dry_run {
            for (name, rt) in &state.runtimes {
                match rt.clean_stale_bakes().await {
                    Ok(removed) => {
                        for leftover in removed {
                            renderer.note(&format!(
                                "{name}: removed {leftover}, left by an interrupted bake"
                            ));
                        }
                    }
                    Err(e) => renderer.note(&format!("{name}: could not look for leftovers: {e}")),
                }
            }
        }
        let r = renderer.clone();
        let cap = capture.clone();
        let events = Events::new(move |e: Event| {
            cap.event(&e);
            r.event(&e)
        });
        let st = state.clone();
        csis_engine::run(
            &state.session.compiled.graph,
            &plan,
            opts,
            events,
            move |cx: NodeContext| {
                let st = st.clone();
                async move { st.act(cx).await }
            },
        )
        .await
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    // Everything recorded is in the journal already; write the files now.
    state.recorder.flush()?;
    if let Some(l) = leases.take() {
        for key in l.lost() {
            state.renderer.note(&format!(
                "warning: the lease {key} was taken over by another runner while this build held it (it was not renewed in time)"
            ));
        }
        drop(l);
    }
    if let Some(store) = &state.store {
        state.renderer.note(&format!(
            "meta-state store {}: {} requests",
            store.url(),
            csis_cache::remote::total_requests()
        ));
    }
    if let Some(stamp) = &stamp {
        stamp.record(&state.session, &plan, &capture, &report.summary);
    }

    // Everything is recorded and flushed: leave the tree, the graph and the
    // records to the process exit rather than free them piece by piece (a
    // tenth of a no-op build of thousands of images). One build per process.
    // Runtimes, though, are dropped: they finish their own bookkeeping then
    // (the dummy store compacts its change log; clients close).
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
    Ok(BuildOutcome::Ran {
        summary: report.summary.clone(),
        interrupted,
        not_run,
    })
}

/// The leases a plan needs: (series, runtime) of every due bake, release
/// and dispose node, and per key the parent builds its bake stands on.
#[allow(clippy::type_complexity)]
fn lease_keys(
    session: &Session,
    plan: &Plan,
) -> (
    Vec<(String, String)>,
    BTreeMap<(String, String), Vec<String>>,
) {
    let c = &session.compiled;
    let mut keys = Vec::new();
    let mut covers: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        match c.spec(n.id) {
            NodeSpec::Bake(spec) => {
                let key = (spec.series.clone(), spec.runtime.clone());
                if let ParentSpec::Image {
                    series,
                    pinned_build,
                    ..
                } = &spec.parent
                {
                    let parent = pinned_build.clone().or_else(|| {
                        session
                            .lineage
                            .head(series, &spec.runtime)
                            .map(|b| b.build_id.clone())
                    });
                    if let Some(p) = parent {
                        covers.entry(key.clone()).or_default().push(p);
                    }
                }
                keys.push(key);
            }
            NodeSpec::Release { bake, .. } => {
                if let Some(spec) = c.bake_spec(*bake) {
                    keys.push((spec.series.clone(), spec.runtime.clone()));
                }
            }
            NodeSpec::Dispose {
                series, runtime, ..
            } => keys.push((series.clone(), runtime.clone())),
            _ => {}
        }
    }
    keys.sort();
    keys.dedup();
    (keys, covers)
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
    /// Held by release and dispose nodes while they read and write
    /// `meta-state/` (releases, and lineage and pins through the recorder):
    /// one at a time, never beside another writer of those files.
    meta_lock: tokio::sync::Mutex<()>,
}

fn rt_err(e: RuntimeError) -> NodeError {
    match e {
        RuntimeError::Cancelled => NodeError::cancelled(),
        e => NodeError::new(e),
    }
}

/// How many runs' logs `.csis/logs/` keeps (this run's included).
pub const KEPT_RUN_LOGS: usize = 5;

/// The log of a bake: `.csis/logs/<run id>/<label-as-file>.log`.
pub fn run_log(local: &LocalDir, run_id: &str, label: &str) -> PathBuf {
    local
        .logs()
        .join(run_id)
        .join(format!("{}.log", csis_cache::label_as_file(label)))
}

/// Remove the log directories of all but the newest `keep - 1` earlier
/// runs (run ids sort chronologically), making room for this run's.
/// Anything in `.csis/logs/` that is not a run's directory stays.
pub fn prune_run_logs(local: &LocalDir, keep: usize) {
    let Ok(rd) = std::fs::read_dir(local.logs()) else {
        return;
    };
    let mut runs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| csis_cache::parse_run_id(n).is_some())
        })
        .map(|e| e.path())
        .collect();
    runs.sort();
    let extra = runs.len().saturating_sub(keep.saturating_sub(1));
    for old in runs.into_iter().take(extra) {
        let _ = std::fs::remove_dir_all(old);
    }
}

/// A bake's log: every line to its run's log file, the last one to the bar.
struct BakeLog {
    label: String,
    file: Mutex<Option<File>>,
    renderer: Arc<dyn Reporter>,
}

impl LogSink for BakeLog {
    fn line(&self, line: &str) {
        let line = &*csis_schema::secret::redact(line);
        if let Some(f) = self.file.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = writeln!(f, "{line}");
        }
        self.renderer.log_line(&self.label, line);
    }
}

impl BuildState {
    fn runtime(&self, name: &str) -> Result<&DynRuntime, NodeError> {
        self.runtimes
            .get(name)
            .ok_or_else(|| NodeError::new(format!("runtime {name} is not constructed")))
    }

    async fn act(self: Arc<Self>, cx: NodeContext) -> Result<NodeOutput, NodeError> {
        let c = &self.session.compiled;
        match c.spec(cx.id()).clone() {
            NodeSpec::Resolve(r) => {
                let rt = self.runtime(&r.runtime)?;
                let req = ResolveRequest {
                    label: r.label.to_string(),
                    series: r.series.clone(),
                    family: r.family.clone(),
                    family_version: r.family_version.clone(),
                    architecture: r.architecture.clone(),
                    owners: r.owners.clone(),
                    query: r.query.clone(),
                    image_id: r.image_id.clone(),
                };
                let img = rt.resolve(&req).await.map_err(rt_err)?;
                cx.log(format!("resolved {}", img.id));
                let out = json!({"id": img.id});
                self.resolved.lock().unwrap().insert(cx.id(), img);
                Ok(NodeOutput::new(out))
            }
            NodeSpec::Emit { bake } => {
                let spec = self.spec_of(bake, "emit")?;
                let rt = self.runtime(&spec.runtime)?;
                let parent = self.parent_for_emit(&spec)?;
                let fp = self.session.fps.get(bake).to_hex();
                let req = self.request(&spec, parent, fp, None, cx.cancel().clone());
                let files = rt.emit(&req).await.map_err(rt_err)?;
                Ok(NodeOutput::new(json!({"files": files})))
            }
            NodeSpec::Bake(spec) => self.bake(&cx, &spec).await,
            NodeSpec::Retag { bake } => {
                let Some(build) = self.built_by(bake) else {
                    return Ok(NodeOutput::none());
                };
                let spec = self.spec_of(bake, "retag")?;
                let rt = self.runtime(&spec.runtime)?;
                let rec = self.recorder.find(&build);
                let mut tags = BTreeMap::new();
                if let Some(r) = rec {
                    tags.insert(
                        "csis_parent".to_string(),
                        r.parent.clone().unwrap_or_else(|| "vendor".into()),
                    );
                    if let Some(fp) = &r.input_fingerprint {
                        tags.insert(
                            "csis_fingerprint".to_string(),
                            fp.chars().take(16).collect(),
                        );
                    }
                }
                match rt.retag_image(&build, &tags).await {
                    Ok(()) => Ok(NodeOutput::new(json!({"build_id": build}))),
                    Err(RuntimeError::Unsupported { .. }) => Ok(NodeOutput::none()),
                    Err(e) => Err(rt_err(e)),
                }
            }
            NodeSpec::Test { bake, tests } => self.test(&cx, bake, &tests).await,
            NodeSpec::Release { bake, model } => self.release(&cx, bake, &model).await,
            NodeSpec::Dispose {
                series,
                runtime,
                keep,
                ephemeral,
            } => {
                let keep = csis_cache::retention::keep_for(ephemeral, keep, None);
                self.dispose(&cx, &series, &runtime, keep).await
            }
        }
    }

    /// A post-bake test node (`tests.post_bake`): after its image's retag,
    /// launch the build this run made, run the declared tests in it, and
    /// record the outcome in `meta-state/image-tests.yaml` (crate::image_test).
    /// A failed test fails the node (and so its release); the bake's record
    /// stays. The machine is removed whatever happens.
    async fn test(
        &self,
        cx: &NodeContext,
        bake: NodeId,
        tests: &[csis_rules::tree::InBakeTest],
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let spec = self.spec_of(bake, "test")?;
        let Some(build) = self.built_by(bake) else {
            cx.log(format!(
                "{} on {}: no build made in this run, nothing to test",
                spec.series, spec.runtime
            ));
            return Ok(NodeOutput::none());
        };
        let rt = self.runtime(&spec.runtime)?.clone();
        let label = cx.label().to_string();
        let log_path = run_log(&self.local, &self.run_id, &label);
        if let Some(d) = log_path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let log = BakeLog {
            label: label.clone(),
            file: Mutex::new(File::create(&log_path).ok()),
            renderer: self.renderer.clone(),
        };
        let outcome = crate::image_test::run_post_bake(
            crate::image_test::PostBake {
                rt: &rt,
                runtime: &spec.runtime,
                series: &spec.series,
                build_id: &build,
                tests,
                run: &self.run_id,
                cancel: cx.cancel().clone(),
            },
            &|line: &str| log.line(line),
        )
        .await
        .map_err(|e| {
            log.line(&format!("test failed: {e}"));
            rt_err(e)
        })?;
        {
            let _meta = self.meta_lock.lock().await;
            crate::image_test::record(&self.session.meta, &outcome).map_err(|e| {
                NodeError::new(format!(
                    "the post-bake tests of {build} ran but could not be recorded: {e:#}"
                ))
            })?;
        }
        let line = outcome.summary();
        log.line(&line);
        cx.log(line.clone());
        if !outcome.ok {
            let failed: Vec<String> = outcome
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| format!("{}: {}", c.name, c.detail))
                .collect();
            return Err(NodeError::new(format!(
                "post-bake tests of {build} FAILED ({}); log {}",
                failed.join("; "),
                log_path.display()
            )));
        }
        Ok(NodeOutput::new(json!({
            "build_id": build,
            "ok": outcome.ok,
            "checks": outcome.checks.len(),
            "instance": outcome.instance,
        })))
    }

    /// A release node (core.md §5.4): after its image's retag, release the
    /// build this run made if it qualifies. A head that does not qualify
    /// yet is reported, not a failure; a failed release (the mark on the
    /// runtime) fails the node, and with it the build's exit code.
    async fn release(
        &self,
        cx: &NodeContext,
        bake: NodeId,
        model: &str,
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let spec = self.spec_of(bake, "release")?;
        let (series, runtime) = (spec.series.as_str(), spec.runtime.as_str());
        let Some(build) = self.built_by(bake) else {
            cx.log(format!(
                "{series} on {runtime}: no build made in this run, nothing to release"
            ));
            return Ok(NodeOutput::none());
        };
        let _meta = self.meta_lock.lock().await;
        if self.store.is_some() {
            self.recorder.refresh().map_err(NodeError::new)?;
        }
        // The series' records as recorded so far (this run's bakes included).
        let lineage = self
            .recorder
            .read(|l, _| records_of(l, series, None))
            .map_err(NodeError::new)?;
        let rt = self.runtimes.get(runtime).cloned();
        let tree = &self.session.tree;
        let outcome = crate::release::release_in_build(
            tree,
            lineage,
            series,
            runtime,
            model,
            &self.run_id,
            rt,
        )
        .await
        .map_err(|e| NodeError::new(format!("{e:#}")))?;
        if outcome.is_problem() {
            let why = match &outcome {
                crate::release::ReleaseEvent::Refused { .. } => outcome.lines().join("; "),
                _ => outcome.message(),
            };
            cx.log(why.clone());
            return Err(NodeError::new(why));
        }
        let line = outcome.message();
        cx.log(line.clone());
        self.renderer.note(&format!("{}: {line}", cx.label()));
        let released = matches!(outcome, crate::release::ReleaseEvent::Released { .. });
        Ok(NodeOutput::new(json!({
            "build_id": build,
            "model": model,
            "released": released,
            "message": line,
        })))
    }

    /// A dispose node (core.md §5.3): the retention of its (series,
    /// runtime) once its bake is recorded. Never a build in use: the plan
    /// keeps releases and pinned or launched builds (as debt), the runtime
    /// is asked for live references, and [`order_dispose_nodes`] runs this
    /// node after every bake of this run that stands on a build of the
    /// series (the compiled graph puts it after the series' release).
    async fn dispose(
        &self,
        cx: &NodeContext,
        series: &str,
        runtime: &str,
        keep: Option<u32>,
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let _meta = self.meta_lock.lock().await;
        // On a shared store: the records as they are now (what other
        // runners recorded since this run read them), and what their
        // leases cover (the parents their bakes stand on).
        let covered = match &self.store {
            Some(store) => {
                self.recorder.refresh().map_err(NodeError::new)?;
                csis_cache::lease::covered_by_others(store, &self.run_id).map_err(NodeError::new)?
            }
            None => BTreeMap::new(),
        };
        let (lineage, mut pins) = self
            .recorder
            .read(|l, p| {
                let l = records_of(l, series, Some(runtime));
                let ids: std::collections::BTreeSet<&str> =
                    l.builds.iter().map(|b| b.build_id.as_str()).collect();
                // Only what protects these builds (the retention reads no more).
                let to_these = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
                    m.iter()
                        .filter(|(_, b)| ids.contains(b.as_str()))
                        .map(|(k, b)| (k.clone(), b.clone()))
                        .collect()
                };
                let pins = csis_cache::Pins {
                    images: to_these(&p.images),
                    instances: to_these(&p.instances),
                    ..Default::default()
                };
                (l, pins)
            })
            .map_err(NodeError::new)?;
        // A build another runner's lease covers is kept as an instance pin is.
        for (build, holder) in covered {
            if lineage.builds.iter().any(|b| b.build_id == build) {
                pins.instances
                    .insert(format!("lease of {holder} on {build}"), build);
            }
        }
        let rt = self.runtime(runtime)?.clone();
        let runtime_of = |name: &str| {
            if name == runtime {
                Ok(rt.clone())
            } else {
                Err(format!("runtime {name} is not this node's ({runtime})"))
            }
        };
        let disposed = Mutex::new(Vec::<String>::new());
        let forget = |build_id: &str| -> Result<Vec<String>> {
            let removed = self.recorder.update(|l, p| {
                csis_cache::retention::forget_build(l, p, build_id, Some(&self.run_id))
            })?;
            disposed.lock().unwrap().push(build_id.to_string());
            Ok(removed)
        };
        let d = crate::dispose::Disposer {
            runtime: &runtime_of,
            forget: &forget,
        };
        let label = cx.label().to_string();
        let each = |e: &crate::dispose::DisposeEvent| {
            for line in e.lines() {
                cx.log(line.clone());
                self.renderer.note(&format!("{label}: {line}"));
            }
        };
        let report = crate::dispose::retention_in_build(
            &self.session.tree,
            &lineage,
            &pins,
            (series, runtime, keep),
            &d,
            &each,
        )
        .await
        .map_err(|e| NodeError::new(format!("{e:#}")));
        // What the runtime held may be gone now: recovery asks again.
        self.images.lock().await.remove(runtime);
        let disposed = disposed.into_inner().unwrap();
        let report = report?;
        if !report.ok() {
            let problems: Vec<String> = report
                .events
                .iter()
                .filter(|e| e.is_problem())
                .flat_map(|e| e.lines())
                .collect();
            return Err(NodeError::new(problems.join("; ")));
        }
        Ok(NodeOutput::new(json!({ "disposed": disposed })))
    }

    /// The parent an emission names, before the bake: the vendor image the
    /// resolve node found; the pinned build; a build made earlier in this
    /// run; for a parent that still bakes in this run, a lookup of its
    /// newest output by name ([`BakeParent::Deferred`], the original's
    /// name-pattern query); otherwise the parent's head build. Never a
    /// placeholder.
    fn parent_for_emit(&self, spec: &BakeSpec) -> Result<BakeParent, NodeError> {
        let c = &self.session.compiled;
        match &spec.parent {
            ParentSpec::Vendor { .. } => Ok(self.parent_for_bake(spec)?.0),
            ParentSpec::Image {
                series,
                bake,
                policy,
                pinned_build,
            } => {
                let build = |build_id: String| BakeParent::Build {
                    series: series.clone(),
                    build_id,
                };
                if let (ParentPolicy::Pinned, Some(pin)) = (policy, pinned_build) {
                    return Ok(build(pin.clone()));
                }
                if let Some(id) = self.built.lock().unwrap().get(bake).cloned() {
                    return Ok(build(id));
                }
                if self.due_bakes.contains(bake) {
                    let name_prefix = c
                        .bake_spec(*bake)
                        .map(name_prefix)
                        .unwrap_or_else(|| series.clone());
                    return Ok(BakeParent::Deferred {
                        series: series.clone(),
                        name_prefix,
                    });
                }
                Ok(self.parent_for_bake(spec)?.0)
            }
            ParentSpec::Fixed { .. } => Ok(self.parent_for_bake(spec)?.0),
        }
    }

    /// The parent build a bake starts from, known only now (the parent may
    /// have baked earlier in this run).
    fn parent_for_bake(&self, spec: &BakeSpec) -> Result<(BakeParent, String), NodeError> {
        match &spec.parent {
            ParentSpec::Vendor { resolve } => {
                let img = self
                    .resolved
                    .lock()
                    .unwrap()
                    .get(resolve)
                    .cloned()
                    .ok_or_else(|| NodeError::new("the vendor image was not resolved"))?;
                Ok((BakeParent::Vendor(img), "vendor".into()))
            }
            ParentSpec::Image {
                series,
                policy,
                pinned_build,
                ..
            } => {
                let build = match (policy, pinned_build) {
                    (ParentPolicy::Pinned, Some(pin)) => pin.clone(),
                    _ => self
                        .recorder
                        .head_build(series, &spec.runtime)
                        .ok_or_else(|| {
                            NodeError::new(format!(
                                "parent {series} has no build on {} yet",
                                spec.runtime
                            ))
                        })?,
                };
                Ok((
                    BakeParent::Build {
                        series: series.clone(),
                        build_id: build.clone(),
                    },
                    build,
                ))
            }
            ParentSpec::Fixed { id } => Ok((
                BakeParent::Build {
                    series: String::new(),
                    build_id: id.clone(),
                },
                id.clone(),
            )),
        }
    }

    fn request(
        &self,
        spec: &BakeSpec,
        parent: BakeParent,
        fingerprint: String,
        log: Option<Arc<dyn LogSink>>,
        cancel: CancellationToken,
    ) -> BakeRequest {
        // As the original tags: `vendor`, the parent build, or `series:<parent>`
        // while the parent's build is not known (the bake re-emits with it).
        let parent_id = match &parent {
            BakeParent::Vendor(_) => "vendor".to_string(),
            BakeParent::Build { build_id, .. } => build_id.clone(),
            BakeParent::Deferred { series, .. } => format!("series:{series}"),
        };
        let caps: Capabilities =
            serde_json::from_value(spec.capabilities.clone()).unwrap_or_default();
        let mut tags = spec.tags.clone();
        // The tree's config id on every image and bake machine: what tells
        // this tree's builds from another tree's in one account or daemon.
        tags.insert(
            csis_runtime::CONFIG_TAG.into(),
            self.session.tree.config.id.clone(),
        );
        tags.insert("csis_series".into(), spec.series.clone());
        tags.insert("csis_parent".into(), parent_id);
        tags.insert("csis_run".into(), self.run_id.clone());
        tags.insert(
            "csis_fingerprint".into(),
            fingerprint.chars().take(16).collect(),
        );
        tags.insert("csis_identity_types".into(), caps.identity_types.join(","));
        tags.insert("csis_storage_types".into(), caps.storage_types.join(","));
        let root = self.session.root.clone();
        let emit_dir: PathBuf = root
            .join("generated")
            .join(if spec.base {
                "base-image"
            } else {
                "instance-image"
            })
            .join(format!("{}@{}", spec.series, spec.runtime));
        BakeRequest {
            label: spec.label.to_string(),
            series: spec.series.clone(),
            runtime: spec.runtime.clone(),
            image_builder: spec.image_builder.clone(),
            final_name: spec.final_name.clone(),
            prefix: spec.series.clone(),
            parent,
            machine_type: spec.machine_type.clone(),
            disk_size_gb: Some(spec.disk_size_gb),
            bake_user: spec.bake_user.clone(),
            package_manager: spec.package_manager.clone(),
            family: spec.family.clone(),
            architecture: spec.architecture.clone(),
            steps: steps(spec),
            tests: spec
                .tests
                .iter()
                .map(|t| TestCommand {
                    description: t.description.clone(),
                    run: t.run.clone(),
                    expect_rc: t.expect_rc,
                    contains: t.contains.clone(),
                })
                .collect(),
            recipe: steps::recipe_of(spec),
            required_plugins: spec
                .required_plugins
                .iter()
                .map(
                    |(name, version, source)| csis_runtime::recipe::RequiredPlugin {
                        name: name.clone(),
                        version: version.clone(),
                        source: source.clone(),
                    },
                )
                .collect(),
            tags,
            tree_root: root,
            emit_dir,
            log: log.unwrap_or_else(|| Arc::new(csis_runtime::NullLog)),
            cancel,
        }
    }

    /// A build on the runtime with this bake's lineage tags (series, parent,
    /// fingerprint) that no record names: a bake that finished in the
    /// runtime while the csis that started it was killed before recording
    /// it. Adopting it instead of baking again is what makes "nothing is
    /// baked twice" hold across a kill. The runtime is asked once per run;
    /// a runtime that cannot answer means no recovery, never a failure.
    async fn unrecorded_build(
        &self,
        runtime: &str,
        tags: &BTreeMap<String, String>,
    ) -> Option<(BakeOutcome, Option<String>)> {
        let images = {
            let mut cache = self.images.lock().await;
            match cache.get(runtime) {
                Some(images) => images.clone(),
                None => {
                    let rt = self.runtimes.get(runtime)?;
                    let images = Arc::new(rt.query_images().await.unwrap_or_default());
                    cache.insert(runtime.to_string(), images.clone());
                    images
                }
            }
        };
        let same =
            |k: &str, img: &ImageFacts| tags.get(k).is_some() && img.tags.get(k) == tags.get(k);
        // Another tree's build (another config id, or none) is never adopted.
        images
            .iter()
            .filter(|img| {
                [
                    csis_runtime::CONFIG_TAG,
                    "csis_series",
                    "csis_parent",
                    "csis_fingerprint",
                ]
                .iter()
                .all(|k| same(k, img))
            })
            .find(|img| self.recorder.find(&img.build_id).is_none())
            .map(|img| {
                let outcome = BakeOutcome {
                    build_id: img.build_id.clone(),
                    name: img.name.clone().unwrap_or_else(|| img.build_id.clone()),
                    assertions: 0,
                };
                (outcome, img.tags.get("csis_run").cloned())
            })
    }

    /// The compiled bake that the `node` (emit, retag, test, release) of
    /// `bake` stands on.
    fn spec_of(&self, bake: NodeId, node: &str) -> Result<BakeSpec, NodeError> {
        self.session
            .compiled
            .bake_spec(bake)
            .cloned()
            .ok_or_else(|| NodeError::new(format!("{node} without bake")))
    }

    /// The build `bake` made in this run, if it made one.
    fn built_by(&self, bake: NodeId) -> Option<String> {
        self.built.lock().unwrap().get(&bake).cloned()
    }

    async fn bake(&self, cx: &NodeContext, spec: &BakeSpec) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        if let Some(f) = self.recorder.failure() {
            return Err(NodeError::new(format!(
                "not baked: records cannot be written ({f})"
            )));
        }
        let rt = self.runtime(&spec.runtime)?;
        let (parent, parent_build) = self.parent_for_bake(spec)?;
        let log_path = run_log(&self.local, &self.run_id, &cx.label().to_string());
        self.renderer.bake_log(&cx.label().to_string(), &log_path);
        if let Some(d) = log_path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let log = Arc::new(BakeLog {
            label: cx.label().to_string(),
            file: Mutex::new(File::create(&log_path).ok()),
            renderer: self.renderer.clone(),
        });
        log.line(&format!("{} ({})", cx.label(), cx.reason()));
        let fp = cx.fingerprint().to_hex();
        let req = self.request(
            spec,
            parent,
            fp.clone(),
            Some(log.clone()),
            cx.cancel().clone(),
        );
        let recovered = if matches!(cx.reason(), Reason::Forced) {
            None
        } else {
            self.unrecorded_build(&spec.runtime, &req.tags).await
        };
        // An adopted build keeps the run that baked it (its `csis_run` tag).
        let baked_by = recovered.as_ref().and_then(|r| r.1.clone());
        let outcome = match recovered.map(|r| r.0) {
            Some(outcome) => {
                log.line(&format!(
                    "recovered {}: an earlier, interrupted run baked it with these very inputs and did not record it",
                    outcome.build_id
                ));
                outcome
            }
            None => {
                let baked = rt.bake(&req).await;
                csis_runtime::recipe::remove_private_vars(&req);
                baked.map_err(|e| {
                    log.line(&format!("bake failed: {e}"));
                    rt_err(e)
                })?
            }
        };
        // Record at once, before the node is reported finished.
        let canonical = self
            .session
            .compiled
            .graph
            .canonical(cx.id(), &self.session.fps);
        let mut rec = BuildRecord::new(&outcome.build_id, &spec.series, &spec.runtime);
        rec.name = Some(outcome.name.clone());
        rec.parent = Some(parent_build.clone());
        rec.input_fingerprint = Some(fp);
        rec.run = Some(baked_by.unwrap_or_else(|| self.run_id.clone()));
        rec.capabilities = serde_json::from_value(spec.capabilities.clone()).unwrap_or_default();
        rec.mods = spec
            .mod_records
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m["run"] = json!(self.run_id);
                m
            })
            .collect();
        rec.local_mods = !spec.base && !spec.mods.is_empty();
        rec.tests = RecordTests {
            in_bake: true,
            assertions: outcome.assertions as u64,
        };
        rec.update = spec.update.clone();
        rec.chain = spec.chain.clone();
        rec.parent_fingerprint = canonical["deps"]["parent"].as_str().map(str::to_string);
        rec.inputs = Some(canonical);
        rec.fingerprint_recipe = Some(format!("{}+{}", csis_engine::RECIPE, BAKE_RECIPE));
        let pin = match &spec.parent {
            ParentSpec::Image { .. } => Some(PinBinding {
                image: spec.series.clone(),
                runtime: spec.runtime.clone(),
                parent_build: parent_build.clone(),
            }),
            _ => None,
        };
        self.recorder.record(rec, pin).map_err(|e| {
            NodeError::new(format!(
                "the bake of {} succeeded as {} but could not be recorded: {e}",
                cx.label(),
                outcome.build_id
            ))
        })?;
        self.built
            .lock()
            .unwrap()
            .insert(cx.id(), outcome.build_id.clone());
        log.line(&format!("recorded {}", outcome.build_id));
        Ok(NodeOutput::new(json!({"build_id": outcome.build_id})))
    }
}

/// A build's final name without its timestamp: what a child baking in
/// the same run looks its parent up by (`<os>-<runtime>` for a base image,
/// `<image>-<image builder>`; emission.md §3.1).
pub fn name_prefix(spec: &BakeSpec) -> String {
    if spec.base {
        format!("{}-{}", spec.display, spec.runtime)
    } else {
        format!("{}-{}", spec.display, spec.image_builder)
    }
}

/// The builds of `series` (on `runtime`, or every runtime): all a release
/// or a retention of that series reads, copied out of the recorder.
fn records_of(l: &csis_cache::Lineage, series: &str, runtime: Option<&str>) -> csis_cache::Lineage {
    let mut out = csis_cache::Lineage::default();
    for b in &l.builds {
        if b.series == series && runtime.is_none_or(|r| b.runtime.as_deref() == Some(r)) {
            out.builds.push(b.clone());
        }
    }
    out
}

/// Ordering edges the compiled graph does not carry, for the dispose nodes
/// that will run: a dispose node of (series, runtime) runs after
/// every due bake on that runtime whose parent is a build of the series
/// (`source_image` under either policy, or a fixed `image_identifier` that
/// is one of its recorded builds): those bakes stand on a build of the
/// series until they are recorded, and a follow child moves its pin off the
/// old parent build only when its bake is recorded. (After the series' own
/// release the compiled graph already orders it.)
///
/// Nothing depends on a dispose node, so no edge can close a cycle. The
/// edges are `Order` (never hashed) and added after fingerprints and plan;
/// the scheduler counts only due dependencies, so a bake that is current
/// or not selected holds nothing up.
fn order_dispose_nodes(mut session: Session, plan: &csis_engine::Plan) -> Session {
    let c = &session.compiled;
    let mut disposes: HashMap<(&str, &str), NodeId> = HashMap::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        if let NodeSpec::Dispose {
            series, runtime, ..
        } = c.spec(n.id)
        {
            disposes.insert((series.as_str(), runtime.as_str()), n.id);
        }
    }
    if disposes.is_empty() {
        return session;
    }
    let mut edges = Vec::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        let key = match c.spec(n.id) {
            NodeSpec::Bake(b) => match &b.parent {
                ParentSpec::Image { series, .. } => Some((series.clone(), b.runtime.clone())),
                ParentSpec::Fixed { id } => session
                    .lineage
                    .find(id)
                    .map(|r| (r.series.clone(), b.runtime.clone())),
                ParentSpec::Vendor { .. } => None,
            },
            _ => None,
        };
        if let Some(d) = key.and_then(|(s, r)| disposes.get(&(s.as_str(), r.as_str())).copied()) {
            edges.push((d, n.id));
        }
    }
    for (d, dep) in edges {
        session
            .compiled
            .graph
            .add_dep(d, dep, csis_engine::Dep::Order)
            .expect("both nodes are in the graph");
    }
    session
}

#[cfg(test)]
mod tests;
