//! `csis test-mods` (core.md §3.11, §5.4): every modification applied in a
//! throwaway container of its OS family, twice (apply, then idempotence),
//! results in `meta-state/mod-tests.yaml` by the mod's content hash, which
//! release reads under `require_mod_tests`.
//!
//! The tests are the nodes of their own graph (`compile::mod_tests`), run
//! by the engine's scheduler (`-j` at once). A test is due when it has no
//! record, its last record is not an idempotent pass, or its fingerprint
//! (the mod's content and its base) moved; `--force` runs every selected
//! test. They run on the tree's docker runtime (the one the chain root
//! bakes on, else the first declared), else on the local daemon; the
//! container is made from the OS builder's `local_test_image`, else the
//! vendor image its docker entry resolves to, else the family's image.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use csis_cache::mod_tests::ModTestRecord;
use csis_cache::release_rules::ModTests;
use csis_cache::MetaState;
use csis_engine::{
    Events, Fingerprint, Node, NodeError, NodeOutput, Planner, Reason, Record, Records, RunOptions,
};
use csis_rules::compile::{default_test_image, file_hash, mod_tests, ModTestSpec, NodeSpec};
use csis_runtime::recipe::Recipe;
use csis_runtime::{BakeParent, BakeRequest, CancellationToken, DynRuntime, ResolvedImage};
use serde::Serialize;

use crate::session::Session;

/// What `csis test-mods` was asked.
#[derive(Debug, Clone, Default)]
pub struct ModTestOptions {
    /// Only the mods of these images (none: every image).
    pub images: Vec<String>,
    /// Test again what passed.
    pub force: bool,
    /// At most this many tests at once (default 4).
    pub jobs: Option<usize>,
    pub cancel: CancellationToken,
}

/// One mod's test, as the report gives it.
#[derive(Debug, Clone, Serialize)]
pub struct ModTestLine {
    pub image: String,
    #[serde(rename = "mod")]
    pub mod_name: String,
    pub content_hash: String,
    /// `pass`, `fail`, `not-idempotent`, or `current` (a pass on record).
    pub status: String,
    pub detail: Option<String>,
    pub changes: Vec<String>,
}

/// What `csis test-mods` did.
#[derive(Debug, Clone, Serialize)]
pub struct ModTestReport {
    /// Where the tests ran (`docker runtime NAME`, `the local daemon`).
    pub runtime: String,
    /// Why nothing ran (no daemon answers): the tests are skipped.
    pub skipped: Option<String>,
    pub results: Vec<ModTestLine>,
    pub warnings: Vec<String>,
}

impl ModTestReport {
    /// 1 when a mod failed or is not idempotent, or (`strict`) the tests
    /// were skipped.
    pub fn exit_code(&self, strict: bool) -> u8 {
        let bad = self
            .results
            .iter()
            .any(|r| r.status == "fail" || r.status == "not-idempotent");
        if bad || (strict && self.skipped.is_some()) {
            crate::exit::FAILURE
        } else {
            crate::exit::SUCCESS
        }
    }
}

/// The records as the planner of the mod tests reads them.
struct TestRecords(BTreeMap<String, Record>);

impl Records for TestRecords {
    fn record(&self, node: &Node) -> Option<&Record> {
        self.0.get(node.attr("content_hash")?)
    }
}

/// Run the due mod tests of an opened tree and record each.
pub fn run(session: &Session, opts: &ModTestOptions) -> Result<ModTestReport> {
    let tree = &session.tree;
    let compiled = mod_tests(tree, &mut |p: &Path| file_hash(p))?;
    let meta = session.meta.clone();
    let records = recorded_verdicts(&ModTests::load(&meta)?);
    let fps = compiled.graph.fingerprints()?;
    let plan = plan_of(&compiled.graph, opts, &fps, records)?;

    let mut report = ModTestReport {
        runtime: String::new(),
        skipped: None,
        results: Vec::new(),
        warnings: compiled.warnings.clone(),
    };
    for n in plan.nodes.iter().filter(|n| !n.due) {
        if let NodeSpec::ModTest(s) = compiled.spec(n.id) {
            report.results.push(line(s, "current", None, Vec::new()));
        }
    }
    if !plan.nodes.iter().any(|n| n.due) {
        return Ok(report);
    }
    let (name, rt) = test_runtime(session)?;
    report.runtime = name.clone();
    let rtok = session.runtimes.tokio();
    let answers = rtok.block_on(rt.preflight());
    let unreachable = match answers {
        Err(e) => Some(e.to_string()),
        Ok(lines) => lines.into_iter().find(|l| !l.ok).map(|l| l.detail),
    };
    if let Some(why) = unreachable {
        report.skipped = Some(why);
        return Ok(report);
    }
    let lines = Arc::new(Mutex::new(Vec::new()));
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    let run_id = csis_cache::run_id_now();
    let specs: Arc<BTreeMap<usize, ModTestSpec>> = Arc::new(
        plan.nodes
            .iter()
            .filter(|n| n.due)
            .filter_map(|n| match compiled.spec(n.id) {
                NodeSpec::ModTest(s) => Some((n.id.index(), (**s).clone())),
                _ => None,
            })
            .collect(),
    );
    let mut images: BTreeMap<String, String> = BTreeMap::new();
    for s in specs.values() {
        if images.contains_key(&s.os) {
            continue;
        }
        let img = rtok.block_on(test_image(session, &name, &rt, s))?;
        images.insert(s.os.clone(), img);
    }
    let images = Arc::new(images);
    let root = tree.root().to_path_buf();
    let ropts = RunOptions::new(opts.jobs.unwrap_or(4)).cancel_token(opts.cancel.clone());
    let fps2 = Arc::new(fps);
    rtok.block_on(csis_engine::run(
        &compiled.graph,
        &plan,
        ropts,
        Events::new(|_| {}),
        {
            let (lines, lock, specs, images, rt, meta, name, run_id, root, fps2) = (
                lines.clone(),
                lock.clone(),
                specs.clone(),
                images.clone(),
                rt.clone(),
                meta.clone(),
                name.clone(),
                run_id.clone(),
                root.clone(),
                fps2.clone(),
            );
            move |cx: csis_engine::NodeContext| {
                let (lines, lock, specs, images, rt, meta, name, run_id, root, fps2) = (
                    lines.clone(),
                    lock.clone(),
                    specs.clone(),
                    images.clone(),
                    rt.clone(),
                    meta.clone(),
                    name.clone(),
                    run_id.clone(),
                    root.clone(),
                    fps2.clone(),
                );
                async move {
                    let Some(s) = specs.get(&cx.id().index()) else {
                        return Ok(NodeOutput::none());
                    };
                    let image = images.get(&s.os).cloned().unwrap_or_default();
                    let req = request(s, &image, &root, cx.cancel().clone());
                    let out = rt.test_mod(&req).await.map_err(NodeError::new)?;
                    let (status, idempotent, detail) = match (&out.first, &out.second) {
                        (Err(e), _) => ("fail", None, Some(e.clone())),
                        (Ok(()), Some(Err(e))) => {
                            ("fail", None, Some(format!("the second apply failed: {e}")))
                        }
                        (Ok(()), _) if !out.changes.is_empty() => ("pass", Some(false), None),
                        (Ok(()), _) => ("pass", Some(true), None),
                    };
                    let rec = ModTestRecord {
                        status: status.into(),
                        idempotent,
                        image: s.image.clone(),
                        mod_name: s.modification.name.clone(),
                        operation: Some(s.operation.clone()),
                        test_image: Some(out.image.clone()),
                        runtime: Some(name.clone()),
                        fingerprint: Some(fps2.get(cx.id()).to_hex()),
                        run: Some(run_id.clone()),
                        time: Some(crate::image_test::now_rfc3339()),
                        detail: detail
                            .clone()
                            .map(|d| csis_schema::secret::redact(&d).into_owned()),
                        changes: out.changes.clone(),
                        ..Default::default()
                    };
                    {
                        let _g = lock.lock().await;
                        ModTests::record(&meta, &s.content_hash, rec).map_err(NodeError::new)?;
                    }
                    let shown = match (status, idempotent) {
                        ("pass", Some(false)) => "not-idempotent",
                        (s, _) => s,
                    };
                    lines
                        .lock()
                        .unwrap()
                        .push(line(s, shown, detail.clone(), out.changes.clone()));
                    match shown {
                        "pass" => Ok(NodeOutput::none()),
                        other => Err(NodeError::new(format!(
                            "{}/{}: {other}",
                            s.image, s.modification.name
                        ))),
                    }
                }
            }
        },
    ));
    let mut ran = std::mem::take(&mut *lines.lock().unwrap());
    ran.sort_by(|a, b| (&a.image, &a.mod_name).cmp(&(&b.image, &b.mod_name)));
    report.results.extend(ran);
    Ok(report)
}

fn line(
    s: &ModTestSpec,
    status: &str,
    detail: Option<String>,
    changes: Vec<String>,
) -> ModTestLine {
    ModTestLine {
        image: s.image.clone(),
        mod_name: s.modification.name.clone(),
        content_hash: s.content_hash.clone(),
        status: status.to_string(),
        detail: detail.map(|d| csis_schema::secret::redact(&d).into_owned()),
        changes,
    }
}

/// The request of one mod test: the mod's steps as a bake lowers them,
/// from the test image, run as root.
fn request(s: &ModTestSpec, image: &str, root: &Path, cancel: CancellationToken) -> BakeRequest {
    let mut spec_mods = s.modification.clone();
    spec_mods.name = s.modification.name.clone();
    let steps = crate::build::steps_of_mods(std::slice::from_ref(&spec_mods));
    BakeRequest {
        label: s.label.to_string(),
        series: s.image.clone(),
        runtime: String::new(),
        image_builder: String::new(),
        final_name: format!("{}-modtest", s.image),
        prefix: format!("{}-modtest", s.image),
        parent: BakeParent::Vendor(ResolvedImage {
            id: image.to_string(),
            name: None,
            owner: None,
            creation_date: None,
            facts: BTreeMap::new(),
        }),
        machine_type: None,
        disk_size_gb: None,
        bake_user: None,
        package_manager: Some(s.package_manager.clone()),
        family: Some(s.family.clone()),
        architecture: None,
        steps,
        tests: Vec::new(),
        recipe: Recipe::default(),
        required_plugins: Vec::new(),
        tags: BTreeMap::new(),
        tree_root: root.to_path_buf(),
        emit_dir: csis_cache::LocalDir::of_tree(root)
            .dir()
            .join("mod-tests")
            .join(&s.image)
            .join(&s.modification.name),
        log: Arc::new(csis_runtime::NullLog),
        cancel,
        keep_failed: false,
    }
}

/// The recorded verdicts as the planner's records: `pass` or `fail`, with
/// the fingerprint they were for.
fn recorded_verdicts(recorded: &ModTests) -> BTreeMap<String, Record> {
    let mut records = BTreeMap::new();
    for (hash, _) in recorded.results.iter() {
        if let Some(r) = recorded.get(hash) {
            records.insert(
                hash.clone(),
                Record {
                    fingerprint: r
                        .fingerprint
                        .as_deref()
                        .and_then(|f| Fingerprint::from_hex(f).ok()),
                    build: Some(if r.passed() { "pass" } else { "fail" }.to_string()),
                    ..Default::default()
                },
            );
        }
    }
    records
}

/// The mod tests due among the selected images' (all with none named): no
/// verdict, a verdict that is not a pass, or inputs changed since it
/// (`--force`: every one).
fn plan_of(
    graph: &csis_engine::Graph,
    opts: &ModTestOptions,
    fps: &csis_engine::Fingerprints,
    records: BTreeMap<String, Record>,
) -> Result<csis_engine::Plan> {
    let sel = if opts.images.is_empty() {
        graph.select_all()
    } else {
        let pats: Vec<String> = opts
            .images
            .iter()
            .map(|i| format!("//mods/{}/...", csis_rules::tree::normalize_name(i)))
            .collect();
        crate::session::select(graph, &pats)?
    };
    let force = opts.force;
    let planner = Planner::new()
        .forced(move |_| force)
        .rule(csis_engine::plan::rules::no_record())
        .rule(|cx: &csis_engine::RuleCx<'_>| {
            (cx.record?.build.as_deref() != Some("pass"))
                .then(|| Reason::custom("failed", "its last test did not pass"))
        })
        .rule(csis_engine::plan::rules::inputs_changed());
    Ok(planner.plan(graph, &sel, fps, &TestRecords(records))?)
}

/// Where the tests run: the docker runtime (a type that runs mod tests,
/// `RuntimeType::tests_mods`) the chain roots bake on, else the tree's
/// first one, else the local daemon.
fn test_runtime(session: &Session) -> Result<(String, DynRuntime)> {
    let tree = &session.tree;
    let dockers: Vec<&str> = tree
        .runtimes
        .iter()
        .filter(|r| crate::wiring::runtime_type(r).is_ok_and(|t| t.tests_mods))
        .map(|r| r.name.as_str())
        .collect();
    let of_roots = tree.os_builders.iter().find_map(|os| {
        os.active_runtimes()
            .filter_map(|e| e.runtime.as_deref())
            .find(|r| dockers.contains(r))
    });
    match of_roots.or(dockers.first().copied()) {
        Some(name) => Ok((
            format!("docker runtime {name}"),
            session.runtimes.get(tree, name)?,
        )),
        None => Ok((
            "the local daemon".into(),
            crate::wiring::local_mod_test_runtime()?,
        )),
    }
}

/// The image a chain root's mods are tested in.
async fn test_image(
    session: &Session,
    runtime: &str,
    rt: &DynRuntime,
    s: &ModTestSpec,
) -> Result<String> {
    if let Some(i) = &s.local_test_image {
        return Ok(i.clone());
    }
    let name = runtime.strip_prefix("docker runtime ").unwrap_or("");
    let c = &session.compiled;
    if let Some(bake) = c.bake_of(&s.os, name) {
        if let Some(csis_rules::compile::ParentSpec::Vendor { resolve }) =
            c.bake_spec(bake).map(|b| &b.parent)
        {
            if let NodeSpec::Resolve(r) = c.spec(*resolve) {
                let req = crate::vendor::resolve_request(r);
                return Ok(rt.resolve(&req).await?.id);
            }
        }
    }
    Ok(default_test_image(&s.family, &s.family_version))
}

/// The meta-state a report names (for messages).
pub fn file(meta: &MetaState) -> std::path::PathBuf {
    meta.dir().join(csis_cache::release_rules::MOD_TESTS_FILE)
}

/// `csis test-mods` on an opened tree (the caller holds the tree lock).
pub fn test_mods(cx: &crate::Context, opts: &ModTestOptions) -> Result<ModTestReport> {
    let session = crate::session::open_tree(cx.tree().clone())?;
    run(&session, opts)
}
