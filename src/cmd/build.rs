//! `csis build [PATTERNS] [-j N] [--dry-run] [--force-bake X] [--fail-fast]
//! [--json] [--no-wait]`: take the tree lock, plan, run the due nodes with
//! the engine's scheduler, and record every successful bake at once.
//!
//! A build of an unchanged tree constructs no runtime, so it spawns no
//! process and makes no cloud call.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use csis_cache::{
    BuildRecord, CacheError, Capabilities, LocalDir, PinBinding, RecordTests, Recorder,
};
use csis_engine::{Event, Events, NodeContext, NodeError, NodeId, NodeOutput, Reason, RunOptions};
use csis_rules::compile::{BakeSpec, ForceBake, NodeSpec, ParentSpec, BAKE_RECIPE};
use csis_rules::model::{ModKind, ParentPolicy};
use csis_runtime::{
    BakeOutcome, BakeParent, BakeRequest, BakeStep, CancellationToken, DynRuntime, Ensure,
    EnsureCommand, EnsureFile, ImageFacts, LogSink, ResolveRequest, ResolvedImage, RuntimeError,
    TestCommand,
};
use serde_json::json;

use crate::progress::Renderer;
use crate::session::Session;
use crate::GlobalArgs;

/// Exit code when the tree is locked and `--no-wait` was given (EX_TEMPFAIL).
pub const EXIT_LOCKED: u8 = 75;
/// Exit code after Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns (`//...`, `//images/...`, `//images/dask@rt`, `@rt`); default `//...`.
    pub patterns: Vec<String>,
    /// Run at most N nodes at once (default: 4).
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Plan and emit only: no resolve, bake, retag, release or dispose; no record.
    #[arg(long)]
    pub dry_run: bool,
    /// Bake these even when current: `SERIES`, `SERIES@RUNTIME` or `all` (repeatable).
    #[arg(long = "force-bake", value_name = "SERIES[@RT]|all")]
    pub force_bake: Vec<String>,
    /// Stop everything at the first failure (default: independent branches go on).
    #[arg(long)]
    pub fail_fast: bool,
    /// JSON lines: `{"event":"started"|"finished"|"skipped"|"failed"|"not_run",...}`, then a summary.
    #[arg(long)]
    pub json: bool,
    /// When another csis holds the tree lock, exit 75 at once instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
    /// Do not run the state query (reality vs records) before baking.
    #[arg(long)]
    pub no_state_query: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let local = LocalDir::of_tree(&global.dir);
    let _lock = match local.lock(!args.no_wait, |holder| {
        eprintln!("waiting for another csis to release the tree lock ({holder})");
    }) {
        Ok(l) => l,
        Err(e @ CacheError::Locked { .. }) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_LOCKED));
        }
        Err(e) => return Err(e.into()),
    };
    // A build of an unchanged tree answers from its no-op stamp (src/noop.rs).
    let renderer = Renderer::new(args.json);
    let stamp = crate::noop::NoopStamp::for_build(global, &args);
    if stamp.as_ref().is_some_and(|s| s.replay(&renderer)) {
        return Ok(ExitCode::SUCCESS);
    }
    let session = crate::session::open(global)?;
    let sel = session.select(&args.patterns)?;
    let mut plan = session.plan(&sel, &ForceBake::parse(&args.force_bake))?;
    for w in &session.compiled.warnings {
        renderer.note(&format!("warning: {w}"));
    }
    if args.dry_run {
        // Plan + emit only.
        if renderer.is_json() {
            eprint!("{}", crate::cmd::plan::plan_text(&plan, false, false));
        } else {
            print!("{}", crate::cmd::plan::plan_text(&plan, false, false));
        }
        for n in plan.nodes.iter_mut() {
            if n.kind != "emit" {
                n.due = false;
            }
        }
    }

    // The state gate (lineage operations): only when something will run, so
    // a no-op build talks to no runtime at all.
    if !args.dry_run && plan.nodes.iter().any(|n| n.due) {
        let hard = crate::cmd::state::state_query_gate(&session.tree, !args.no_state_query)?;
        if !hard.is_empty() {
            for l in &hard {
                eprintln!("hard drift: {l}");
            }
            eprintln!("error: the records disagree with the runtimes; re-run `csis state query` after fixing");
            return Ok(ExitCode::from(1));
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
    let cancel = CancellationToken::new();
    opts = opts.cancel_token(cancel.clone());

    let recorder = Recorder::open(session.meta.clone(), local.journal())?;
    let state = Arc::new(BuildState {
        session: order_dispose_nodes(session, &plan),
        runtimes,
        recorder,
        local,
        run_id: csis_cache::run_id_now(),
        resolved: Mutex::new(HashMap::new()),
        built: Mutex::new(HashMap::new()),
        images: tokio::sync::Mutex::new(HashMap::new()),
        renderer: renderer.clone(),
        dry_run: args.dry_run,
        meta_lock: tokio::sync::Mutex::new(()),
    });

    let capture = crate::noop::Capture::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        let c = cancel.clone();
        let r2 = renderer.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                r2.note("interrupted: stopping running bakes (finished ones are recorded); Ctrl-C again to quit at once");
                c.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(EXIT_INTERRUPTED as i32);
                }
            }
        });
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

    let s = &report.summary;
    if s.interrupted && cancel.is_cancelled() {
        if !renderer.is_json() {
            for (id, o) in &report.outcomes {
                if let csis_engine::NodeOutcome::NotRun { .. } = o {
                    renderer.note(&format!(
                        "did not run: {}",
                        state.session.compiled.graph.node(*id).label()
                    ));
                }
            }
        }
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if s.failed > 0 || s.cancelled > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

struct BuildState {
    session: Session,
    runtimes: BTreeMap<String, DynRuntime>,
    recorder: Recorder,
    local: LocalDir,
    run_id: String,
    /// resolve node -> vendor image found this run.
    resolved: Mutex<HashMap<NodeId, ResolvedImage>>,
    /// bake node -> build id made this run.
    built: Mutex<HashMap<NodeId, String>>,
    /// runtime -> its images, asked once per run (recovery of unrecorded bakes).
    images: tokio::sync::Mutex<HashMap<String, Arc<Vec<ImageFacts>>>>,
    renderer: Renderer,
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

/// A bake's log: every line to `.csis/logs/<label>.log`, the last one to the bar.
struct BakeLog {
    label: String,
    file: Mutex<Option<File>>,
    renderer: Renderer,
}

impl LogSink for BakeLog {
    fn line(&self, line: &str) {
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
                let spec = c
                    .bake_spec(bake)
                    .cloned()
                    .ok_or_else(|| NodeError::new("emit without bake"))?;
                let rt = self.runtime(&spec.runtime)?;
                let parent = self.placeholder_parent(&spec);
                let fp = self.session.fps.get(bake).to_hex();
                let req = self.request(&spec, parent, fp, None, cx.cancel().clone());
                let files = rt.emit(&req).await.map_err(rt_err)?;
                Ok(NodeOutput::new(json!({"files": files})))
            }
            NodeSpec::Bake(spec) => self.bake(&cx, &spec).await,
            NodeSpec::Retag { bake } => {
                let Some(build) = self.built.lock().unwrap().get(&bake).cloned() else {
                    return Ok(NodeOutput::none());
                };
                let spec = c
                    .bake_spec(bake)
                    .cloned()
                    .ok_or_else(|| NodeError::new("retag without bake"))?;
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
        let spec = self
            .session
            .compiled
            .bake_spec(bake)
            .cloned()
            .ok_or_else(|| NodeError::new("release without bake"))?;
        let (series, runtime) = (spec.series.as_str(), spec.runtime.as_str());
        let Some(build) = self.built.lock().unwrap().get(&bake).cloned() else {
            cx.log(format!(
                "{series} on {runtime}: no build made in this run, nothing to release"
            ));
            return Ok(NodeOutput::none());
        };
        let _meta = self.meta_lock.lock().await;
        // The series' records as recorded so far (this run's bakes included).
        let lineage = self
            .recorder
            .read(|l, _| records_of(l, series, None))
            .map_err(NodeError::new)?;
        let rt = self.runtimes.get(runtime).cloned();
        let tree = &self.session.tree;
        let outcome = crate::cmd::release::release_in_build(
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
        match outcome {
            Ok(line) => {
                cx.log(line.clone());
                self.renderer.note(&format!("{}: {line}", cx.label()));
                let released = line.starts_with("released ");
                Ok(NodeOutput::new(json!({
                    "build_id": build,
                    "model": model,
                    "released": released,
                    "message": line,
                })))
            }
            Err(why) => {
                cx.log(why.clone());
                Err(NodeError::new(why))
            }
        }
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
        let (lineage, pins) = self
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
        let d = crate::cmd::dispose::Disposer {
            runtime: &runtime_of,
            forget: &forget,
        };
        let problems = Mutex::new(Vec::<String>::new());
        let label = cx.label().to_string();
        let out = |line: String| {
            if line.starts_with("refused:")
                || line.starts_with("error:")
                || line == "nothing was deleted"
            {
                problems.lock().unwrap().push(line.clone());
            }
            cx.log(line.clone());
            self.renderer.note(&format!("{label}: {line}"));
        };
        let code = crate::cmd::dispose::retention_in_build(
            &self.session.tree,
            &lineage,
            &pins,
            (series, runtime, keep),
            &d,
            &out,
        )
        .await
        .map_err(|e| NodeError::new(format!("{e:#}")));
        // What the runtime held may be gone now: recovery asks again.
        self.images.lock().await.remove(runtime);
        let disposed = disposed.into_inner().unwrap();
        if code? != 0 {
            let problems = problems.into_inner().unwrap();
            return Err(NodeError::new(problems.join("; ")));
        }
        Ok(NodeOutput::new(json!({ "disposed": disposed })))
    }

    fn placeholder_parent(&self, spec: &BakeSpec) -> BakeParent {
        match &spec.parent {
            ParentSpec::Vendor { .. } => BakeParent::Vendor(ResolvedImage {
                id: "vendor".into(),
                name: None,
                owner: None,
                creation_date: None,
                facts: BTreeMap::new(),
            }),
            ParentSpec::Image { series, .. } => BakeParent::Build {
                series: series.clone(),
                build_id: self
                    .recorder
                    .head_build(series, &spec.runtime)
                    .unwrap_or_else(|| format!("series:{series}")),
            },
            ParentSpec::Fixed { id } => BakeParent::Build {
                series: String::new(),
                build_id: id.clone(),
            },
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
        let parent_id = match &parent {
            BakeParent::Vendor(_) => "vendor".to_string(),
            BakeParent::Build { build_id, .. } => build_id.clone(),
        };
        let caps: Capabilities =
            serde_json::from_value(spec.capabilities.clone()).unwrap_or_default();
        let mut tags = spec.tags.clone();
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
            recipe: recipe_of(spec),
            required_plugins: spec
                .required_plugins
                .iter()
                .map(|(name, version, source)| csis_runtime::recipe::RequiredPlugin {
                    name: name.clone(),
                    version: version.clone(),
                    source: source.clone(),
                })
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
    ) -> Option<BakeOutcome> {
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
        images
            .iter()
            .filter(|img| {
                ["csis_series", "csis_parent", "csis_fingerprint"]
                    .iter()
                    .all(|k| same(k, img))
            })
            .find(|img| self.recorder.find(&img.build_id).is_none())
            .map(|img| BakeOutcome {
                build_id: img.build_id.clone(),
                name: img.name.clone().unwrap_or_else(|| img.build_id.clone()),
                assertions: 0,
            })
    }

    async fn bake(&self, cx: &NodeContext, spec: &BakeSpec) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let rt = self.runtime(&spec.runtime)?;
        let (parent, parent_build) = self.parent_for_bake(spec)?;
        let log_path = self.local.log_file(&cx.label().to_string());
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
        let outcome = match recovered {
            Some(outcome) => {
                log.line(&format!(
                    "recovered {}: an earlier, interrupted run baked it with these very inputs and did not record it",
                    outcome.build_id
                ));
                outcome
            }
            None => rt.bake(&req).await.map_err(|e| {
                log.line(&format!("bake failed: {e}"));
                rt_err(e)
            })?,
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
        rec.run = Some(self.run_id.clone());
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

fn ensure_of(e: &csis_rules::model::EnsureModel) -> Ensure {
    Ensure {
        packages: e.packages.clone(),
        files: e
            .files
            .iter()
            .map(|f| EnsureFile {
                path: f.path.clone(),
                content: f.content.clone(),
                mode: match &f.mode {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "0644".into(),
                },
            })
            .collect(),
        services: e.services.clone(),
        commands: e
            .commands
            .iter()
            .map(|c| EnsureCommand {
                run: c.run.clone(),
                unless: c.unless.clone(),
            })
            .collect(),
    }
}

/// The recipe of a bake beyond its steps and tests (lowered by the runtime).
fn recipe_of(spec: &BakeSpec) -> csis_runtime::recipe::Recipe {
    use csis_runtime::recipe as r;
    let str_of = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    r::Recipe {
        base: spec.base_recipe.as_ref().map(|b| r::BaseRecipe {
            os_type: b.os_type.clone(),
            family: b.family.clone(),
            family_version: b.family_version.clone(),
            architecture: spec.architecture.clone().unwrap_or_default(),
            update: r::UpdateRecipe {
                policy: serde_json::to_value(b.update.policy)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                packages: b.update.packages.clone(),
                exclude: b.update.exclude.clone(),
                pin: b.update.pin.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            },
            admin_user: b.admin_user.clone(),
            admin_public_keys: b.admin_public_keys.clone(),
            identity: b
                .identity_types
                .iter()
                .map(|t| r::IdentityPrereq {
                    identity_type: t.clone(),
                    builder: String::new(),
                })
                .collect(),
            storage: b
                .storage_types
                .iter()
                .map(|t| r::StoragePrereq {
                    storage_type: t.clone(),
                    builder: None,
                })
                .collect(),
        }),
        image: (!spec.base).then(|| r::ImageRecipe {
            group: None,
            bundle: spec
                .mod_records
                .iter()
                .map(|m| r::BundleMod {
                    name: str_of(m, "name"),
                    builder: str_of(m, "type"),
                    operation: str_of(m, "operation"),
                    idempotent: str_of(m, "idempotent"),
                    content_hash: str_of(m, "content_hash"),
                })
                .collect(),
        }),
    }
}

fn steps(spec: &BakeSpec) -> Vec<BakeStep> {
    spec.mods
        .iter()
        .map(|m| match m.kind {
            ModKind::Ansible => BakeStep::Ansible {
                name: m.name.clone(),
                playbooks: m.files.clone(),
                extra_arguments: m.extra_arguments.clone(),
                binary: m
                    .binary
                    .clone()
                    .unwrap_or_else(|| "ansible-playbook".into()),
                extra_vars: m.config.clone().into_iter().collect(),
            },
            ModKind::BashRemote => BakeStep::Shell {
                name: m.name.clone(),
                inline: m.inline.clone(),
                scripts: m.files.clone(),
                ensure: m.ensure.as_ref().map(ensure_of),
                env: m.environment_vars.clone(),
                execute_command: m.execute_command.clone(),
            },
        })
        .collect()
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
