//! The state query (`csis state query`), the adoption of foreign images
//! (`csis state import`), and what the lineage operations share: the tree
//! lock, the settled journal, the records, asking runtimes.
//!
//! The query is read-only: it asks every runtime the tree declares for its
//! images (`query_images`) and, where it can, its instances (`inventory`),
//! compares with `meta-state/` (csis_cache::drift) and writes
//! `<generated>/state-report.json`. A runtime or hook that cannot answer is
//! an `unavailable` line, never a claim.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use csis_cache::drift::{self, RuntimeView, SeenImage, SeenInstance, StateReport};
use csis_cache::{LocalDir, MetaState, Revocations, TreeLock};
use csis_rules::{Parent, Tree};
use csis_runtime::{DynRuntime, RuntimeError};
use serde::Serialize;

use crate::context::records;
use crate::wiring::Runtimes;
use crate::{Context as OpContext, TreeArgs};

// ---------------------------------------------------------------------------
// shared by the lineage operations

/// Load the tree (a [`crate::NotLoaded`] when it does not load).
pub fn load_tree(global: &TreeArgs) -> Result<Tree> {
    crate::load_tree(&global.dir, &global.load_options())
}

/// Take the tree lock (waiting, and saying so through `on_wait`, when
/// another csis holds it).
pub fn take_lock(root: &Path, on_wait: impl FnOnce(&str)) -> Result<TreeLock> {
    Ok(LocalDir::of_tree(root).lock(true, on_wait)?)
}

/// The runtimes the tree declares (canonical names).
pub fn declared_runtimes(tree: &Tree) -> BTreeSet<String> {
    tree.runtimes.iter().map(|r| r.name.clone()).collect()
}

/// `image -> parent series` for every declared image.
pub fn image_parents(tree: &Tree) -> BTreeMap<String, String> {
    tree.images
        .iter()
        .map(|i| {
            let p = match &i.parent {
                Parent::Os(p) | Parent::Image(p) => p.clone(),
            };
            (i.name.clone(), p)
        })
        .collect()
}

/// The images under `parent_policy: follow` (their pin records what their
/// head was baked from; their next bake follows the parent's head).
pub fn follow_images(tree: &Tree) -> BTreeSet<String> {
    tree.images
        .iter()
        .filter(|i| i.model.parent_policy == csis_schema::model::ParentPolicy::Follow)
        .map(|i| i.name.clone())
        .collect()
}

/// Does an image the tree declares need the image pin `key`
/// (`image@runtime`, or a legacy bare `image`)? Its next bake on that
/// runtime reads it; a pin of an image the tree no longer declares there
/// protects nothing.
pub fn pin_needed(tree: &Tree, key: &str) -> bool {
    let (image, runtime) = match key.split_once('@') {
        Some((i, r)) => (i, Some(r)),
        None => (key, None),
    };
    let Some(img) = tree.image(image).filter(|i| i.name == image) else {
        return false;
    };
    runtime.is_none_or(|rt| {
        img.active_runtimes()
            .any(|e| e.runtime.as_deref() == Some(rt))
    })
}

/// Builds kept per series on a runtime (core.md §5.1): 0 on an ephemeral
/// runtime, else the image's `retention.keep`, else the runtime's
/// `retention_keep`, else None (keep all). Unknown runtime: None.
pub fn keep_for(tree: &Tree, series: &str, runtime: &str) -> Option<u32> {
    let rt = tree.runtime(runtime)?;
    let image_keep = tree
        .image(series)
        .filter(|i| i.name == series)
        .and_then(|i| i.model.retention.as_ref().map(|r| r.keep));
    csis_cache::retention::keep_for(rt.common.ephemeral, image_keep, rt.common.retention_keep)
}

/// A hook error as an `unavailable` reason.
pub fn why(e: &RuntimeError) -> String {
    match e {
        RuntimeError::Unsupported { .. } => format!("cannot be queried ({e})"),
        other => other.to_string(),
    }
}

/// Ask one runtime for its images and instances. Images another tree baked
/// (their `csis_config` names another config id than `config`, this
/// tree's) are not this tree's to judge: left out, never foreign.
pub async fn view_of(name: &str, rt: Result<&DynRuntime, String>, config: &str) -> RuntimeView {
    let rt = match rt {
        Ok(r) => r,
        Err(e) => {
            return RuntimeView {
                held_tags: Vec::new(),
                runtime: name.to_string(),
                images: Err(e.clone()),
                instances: Some(Err(e)),
            }
        }
    };
    let all = rt.query_images().await;
    let held_tags = held_tags(all.as_deref().unwrap_or_default(), config);
    let images = all
        .map(|v| {
            v.into_iter()
                .filter(|i| !csis_runtime::of_other_tree(&i.tags, config))
                .map(|i| SeenImage {
                    build_id: i.build_id,
                    name: i.name,
                    created: i.created,
                    tags: i.tags,
                })
                .collect()
        })
        .map_err(|e| why(&e));
    let instances = Some(
        rt.inventory()
            .await
            .map(|inv| {
                inv.instances
                    .into_iter()
                    .map(|i| SeenInstance {
                        id: i.id,
                        name: i.name,
                        image: i.image,
                        power: serde_json::to_value(i.power)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_else(|| "unknown".into()),
                    })
                    .collect()
            })
            .map_err(|e| why(&e)),
    );
    RuntimeView {
        held_tags,
        runtime: name.to_string(),
        images,
        instances,
    }
}

/// The series tags another tree's builds hold on a runtime.
fn held_tags(images: &[csis_runtime::ImageFacts], config: &str) -> Vec<csis_cache::drift::HeldTag> {
    images
        .iter()
        .filter(|i| csis_runtime::of_other_tree(&i.tags, config))
        .flat_map(|i| {
            i.series_tags.iter().map(|t| csis_cache::drift::HeldTag {
                tag: t.clone(),
                series: i
                    .tags
                    .get(csis_schema::tags::SERIES)
                    .cloned()
                    .unwrap_or_default(),
                build_id: i.build_id.clone(),
                config: i
                    .tags
                    .get(csis_schema::tags::CONFIG)
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Ask every declared runtime; a runtime that cannot be constructed
/// (unwired type, unreachable daemon) is an unavailable answer.
pub fn views(tree: &Tree, made: &Runtimes, only: Option<&str>) -> Vec<RuntimeView> {
    let mut out = Vec::new();
    for name in declared_runtimes(tree) {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let rt = made.get(tree, &name).map_err(|e| format!("{e:#}"));
        let v = made.block_on(view_of(
            &name,
            rt.as_ref().map_err(Clone::clone),
            &tree.config.id,
        ));
        out.push(v);
    }
    out
}

/// Run the state query over every declared runtime.
pub fn state_report(
    tree: &Tree,
    meta: &MetaState,
    made: &Runtimes,
) -> Result<(StateReport, Vec<RuntimeView>)> {
    let (lineage, pins) = records(tree.root())?;
    let revs = Revocations::load(meta)?;
    // a corrupt releases.yaml is reported here, not only by `csis release`
    let releases = meta.releases()?;
    let parents = image_parents(tree);
    let views = views(tree, made, None);
    let report = drift::judge(
        drift::Records {
            lineage: &lineage,
            pins: &pins,
            revocations: &revs,
            releases: &releases,
            follow: &follow_images(tree),
            image_parents: &parents,
        },
        &views,
        &declared_runtimes(tree),
        Some(&csis_cache::run_id_now()),
    );
    let mut report = report;
    add_fleet_drift(tree, meta, made, &mut report)?;
    Ok((report, views))
}

/// The fleet's drift (crate::fleet::drift) in the report, counted in its summary.
fn add_fleet_drift(
    tree: &Tree,
    meta: &MetaState,
    made: &Runtimes,
    report: &mut StateReport,
) -> Result<()> {
    if tree.instances.is_empty() && tree.storages.is_empty() {
        let f = csis_cache::fleet::FleetRecords::load(meta)?;
        if f.launch.instances.is_empty() && f.storages.storages.is_empty() {
            return Ok(());
        }
    }
    let view = crate::fleet::FleetView::load(meta)?;
    let (drift, unavailable) = made.block_on(crate::fleet::drift::fleet_drift(tree, &view, made));
    for d in &drift {
        *report.summary.entry(d.drift.clone()).or_default() += 1;
    }
    report.drift.extend(drift);
    report.unavailable.extend(unavailable);
    Ok(())
}

pub use crate::state_file::{last_report_drift, report_path};

pub fn write_report(tree: &Tree, report: &StateReport) -> Result<PathBuf> {
    let path = report_path(tree);
    // a run-local file: generated/.gitignore names it
    crate::emission::write_gitignores(tree)?;
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    csis_cache::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The last report's hard drift, for `csis build` to refuse on (None = no
/// report, no opinion). Drift a new build is the way out of does not stop
/// one: a release on a revoked or gone build (release another build, which
/// may have to be baked first) and a pin on a revoked build (the plan holds
/// that child; `csis upgrade` moves the pin once a new parent build exists).
pub fn last_report_hard(tree: &Tree) -> Option<Vec<drift::Drift>> {
    let mut d = last_report_drift(tree)?;
    d.retain(|d| d.hard && d.kind != "release" && d.drift != "revoked");
    Some(d)
}

/// The gate at the start of `csis build`: with `run_query` (the default;
/// `--no-state-query` turns it off) run the state query and write the
/// report; then answer the hard drift of the report on disk (empty = go;
/// no report = no opinion). The build lets through what its plan repairs
/// and refuses to start on the rest.
pub fn state_query_gate_drift(
    tree: &Tree,
    made: &Runtimes,
    run_query: bool,
) -> Result<Vec<drift::Drift>> {
    if run_query {
        let meta = MetaState::of_tree(tree.root());
        let (report, _) = state_report(tree, &meta, made)?;
        write_report(tree, &report)?;
    }
    Ok(last_report_hard(tree).unwrap_or_default())
}

/// The state query's answer and where it was written.
#[derive(Debug, Clone, Serialize)]
pub struct QueryReport {
    pub report: StateReport,
    /// `<generated>/state-report.json`, or why it could not be written (a
    /// read-only checkout): the answer stands either way.
    pub path: Result<PathBuf, String>,
}

impl QueryReport {
    /// 1 on hard drift (with `strict`, also on missing, foreign, changed).
    pub fn exit_code(&self, strict: bool) -> u8 {
        let fail = if strict {
            self.report.strict_fails()
        } else {
            self.report.has_hard()
        };
        if fail {
            crate::exit::FAILURE
        } else {
            crate::exit::SUCCESS
        }
    }
}

/// `csis state query`: ask every declared runtime, judge, write the report
/// (where it can: a checkout it cannot write still gets its answer).
pub fn query(cx: &OpContext) -> Result<QueryReport> {
    let (report, _) = state_report(cx.tree(), &cx.meta, cx.runtimes())?;
    let path = write_report(cx.tree(), &report).map_err(|e| format!("{e:#}"));
    Ok(QueryReport { report, path })
}

/// A foreign image adopted into lineage from its tags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Adopted {
    pub build_id: String,
    pub series: String,
    pub runtime: String,
    pub parent: Option<String>,
    /// What adopting it named on the runtime (a build an interrupted bake
    /// committed and never tagged gets the tags its bake would have given
    /// it), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub named: Vec<String>,
}

/// What `csis state import` adopted (or, in a dry run, would).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    pub dry_run: bool,
    pub adopted: Vec<Adopted>,
    /// With `--instances` / `--storages`: the fleet's part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::import::FleetImport>,
}

/// `csis state import`: adopt foreign images (tagged as csis's, not
/// recorded) into lineage from their tags, and with `parts` the machines
/// and volumes labelled as this tree's declared instances and storages
/// ([`crate::fleet::import`]). The context is opened for writing unless
/// `dry_run`.
pub fn import(
    cx: &OpContext,
    dry_run: bool,
    parts: crate::fleet::import::Parts,
) -> Result<ImportReport> {
    let mut report = import_images(cx, dry_run)?;
    if parts.instances || parts.storages {
        report.fleet = Some(import_fleet(cx, dry_run, parts)?);
    }
    Ok(report)
}

fn import_fleet(
    cx: &OpContext,
    dry_run: bool,
    parts: crate::fleet::import::Parts,
) -> Result<crate::fleet::import::FleetImport> {
    use crate::fleet::import;
    let tree = cx.tree();
    let runtimes: BTreeSet<String> = tree
        .instances
        .iter()
        .filter(|_| parts.instances)
        .map(|i| i.runtime.clone())
        .chain(
            tree.storages
                .iter()
                .filter(|_| parts.storages)
                .map(|s| s.runtime.clone()),
        )
        .collect();
    let mut inventories = BTreeMap::new();
    for name in runtimes {
        let rt = cx.runtime(&name)?;
        let inv = cx
            .block_on(rt.inventory())
            .map_err(|e| anyhow::anyhow!("runtime {name}: {e}"))?;
        inventories.insert(name, inv);
    }
    let view = crate::fleet::FleetView::load(&cx.meta)?;
    let mut out = import::decide(tree, &view, &inventories, parts);
    if !dry_run && (!out.instances.is_empty() || !out.storages.is_empty()) {
        let root = tree.root();
        let recorder =
            csis_cache::Recorder::open(cx.meta.clone(), LocalDir::of_tree(root).journal())?;
        import::record(
            tree,
            &cx.meta,
            &recorder,
            &csis_cache::run_id_now(),
            &mut out,
        )?;
    }
    Ok(out)
}

fn import_images(cx: &OpContext, dry_run: bool) -> Result<ImportReport> {
    let tree = cx.tree();
    let (_, views) = state_report(tree, &cx.meta, cx.runtimes())?;
    let mut lineage = cx.records()?.0;
    let run = csis_cache::run_id_now();
    let mut adopted = Vec::new();
    let current: BTreeMap<_, _> = crate::session::open_tree(tree.clone())?
        .bake_fingerprints()
        .into_iter()
        .collect();
    for v in &views {
        let Ok(images) = &v.images else { continue };
        for img in images {
            if lineage.find(&img.build_id).is_some() {
                continue;
            }
            let Some(mut rec) = drift::record_from_tags(img, &v.runtime, &run) else {
                continue;
            };
            complete_fingerprint(&mut rec, &current);
            adopted.push(Adopted {
                build_id: rec.build_id.clone(),
                series: rec.series.clone(),
                runtime: v.runtime.clone(),
                parent: rec.parent.clone(),
                named: Vec::new(),
            });
            lineage.add_build(rec);
        }
    }
    if !dry_run && !adopted.is_empty() {
        cx.meta.save_lineage(&lineage)?;
        name_unnamed(cx, &mut adopted);
        let (report, _) = state_report(tree, &cx.meta, cx.runtimes())?;
        write_report(tree, &report)?;
    }
    Ok(ImportReport {
        dry_run,
        adopted,
        fleet: None,
    })
}

/// Adopted builds a runtime holds unnamed (committed by an interrupted
/// bake, never tagged) get the name that bake would have given them
/// (`Runtime::adopt`; not the series' movable tag: an adopted build is not
/// made the series' newest here), else a child standing on one hides it.
/// A naming that fails is said in the adopted build's lines.
fn name_unnamed(cx: &OpContext, adopted: &mut [Adopted]) {
    let runtimes: BTreeSet<String> = adopted.iter().map(|a| a.runtime.clone()).collect();
    for name in runtimes {
        let Ok(rt) = cx.runtime(&name) else {
            continue;
        };
        let Ok(images) = cx.block_on(rt.query_images()) else {
            continue;
        };
        for a in adopted.iter_mut().filter(|a| a.runtime == name) {
            if !images.iter().any(|i| i.build_id == a.build_id && i.unnamed) {
                continue;
            }
            a.named = match cx.block_on(rt.adopt(&a.build_id, false)) {
                Ok(lines) => lines,
                Err(e) => vec![format!("not named: {e}")],
            };
        }
    }
}

/// An image's tag carries a prefix of its fingerprint: when the tree's
/// fingerprint of its (series, runtime) starts with it, the build was baked
/// from the tree's inputs, and its record gets them whole (so the plan sees
/// it current and a restamp has nothing to do).
fn complete_fingerprint(
    rec: &mut csis_cache::BuildRecord,
    current: &BTreeMap<(String, String), (String, serde_json::Value)>,
) {
    let (Some(prefix), Some(runtime)) = (rec.input_fingerprint.as_deref(), rec.runtime.as_deref())
    else {
        return;
    };
    let Some((fp, canonical)) = current.get(&(rec.series.clone(), runtime.to_string())) else {
        return;
    };
    if !prefix.is_empty() && fp.starts_with(prefix) {
        rec.input_fingerprint = Some(fp.clone());
        rec.inputs = Some(canonical.clone());
        rec.fingerprint_recipe = Some(csis_rules::compile::BAKE_RECIPE.to_string());
    }
}

/// What `csis state pull` / `csis state push` moved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StateSync {
    /// `pull` (store -> meta-state/) or `push` (meta-state/ -> store).
    pub direction: &'static str,
    /// The store's URL.
    pub store: String,
    /// Records in the source.
    pub records: usize,
    /// Records the destination did not have.
    pub added: usize,
    /// The files (or objects) written.
    pub written: Vec<String>,
}

fn shared_store(root: &Path) -> Result<MetaState> {
    let m = MetaState::of_tree(root);
    if !m.is_remote() {
        anyhow::bail!(
            "the records of this tree are local (meta-state/): name a store with --meta-state URL or `meta_state:` in cfg/_config.yml"
        );
    }
    Ok(m)
}

/// `csis state pull`: write the store's records into `meta-state/` (the
/// original's `lineage.yaml`, `pins.yaml`, `releases.yaml`,
/// `revocations.yaml`; `image-tests.yaml` and `verifications.yaml` are
/// merged in; the fleet's records when the store holds any), e.g. to keep a git copy for review. Replaces them.
pub fn pull(root: &Path) -> Result<StateSync> {
    let store = shared_store(root)?;
    let local = MetaState::local_of_tree(root);
    let _lock = LocalDir::of_tree(root).lock(true, |_| {})?;
    let (l, p) = store.lineage_and_pins()?;
    let before = local.lineage().map(|x| x.builds.len()).unwrap_or(0);
    let mut written = Vec::new();
    if local.save_lineage(&l)? {
        written.push(csis_cache::LINEAGE_FILE.to_string());
    }
    if local.save_pins(&p)? {
        written.push(csis_cache::PINS_FILE.to_string());
    }
    if local.save_releases(&store.releases()?)? {
        written.push(csis_cache::RELEASES_FILE.to_string());
    }
    if Revocations::load(&store)?.save(&local)? {
        written.push("revocations.yaml".to_string());
    }
    written.extend(copy_verdicts(&store, &local)?);
    written.extend(copy_fleet(&store, &local)?);
    Ok(StateSync {
        direction: "pull",
        store: store.location(),
        records: l.builds.len(),
        added: l.builds.len().saturating_sub(before),
        written,
    })
}

/// The verdicts a release reads, from one side to the other when the
/// source holds any: `image-tests.yaml` (post-bake tests, `csis test`) and
/// `verifications.yaml` (`csis verify instance`). Returns the files written.
fn copy_verdicts(from: &MetaState, to: &MetaState) -> Result<Vec<String>> {
    use csis_cache::release_rules::{ImageTests, IMAGE_TESTS_FILE};
    use csis_cache::verifications::{Verifications, VERIFICATIONS_FILE};
    let mut written = Vec::new();
    let tests = ImageTests::load(from)?;
    if !tests.builds.is_empty() {
        let mut all = ImageTests::load(to)?;
        all.builds.extend(tests.builds);
        if all.save(to)? {
            written.push(IMAGE_TESTS_FILE.to_string());
        }
    }
    let v = Verifications::load(from)?;
    if !v.verifications.is_empty() {
        let mut all = Verifications::load(to)?;
        for e in v.verifications {
            if !all.verifications.contains(&e) {
                all.verifications.push(e);
            }
        }
        if all.save(to)? {
            written.push(VERIFICATIONS_FILE.to_string());
        }
    }
    Ok(written)
}

/// The fleet's records (`launch-params.yaml`, `instance-state.yaml`,
/// `storage-state.yaml`), from one side to the other when the source holds
/// any (the instance pins travel with `pins.yaml`). Returns the files
/// written.
fn copy_fleet(from: &MetaState, to: &MetaState) -> Result<Vec<String>> {
    let f = from.fleet()?;
    let holds_any = !f.launch.instances.is_empty()
        || !f.instances.instances.is_empty()
        || !f.storages.storages.is_empty();
    if !holds_any || !to.save_fleet(&f)? {
        return Ok(Vec::new());
    }
    Ok(vec![
        csis_cache::LAUNCH_PARAMS_FILE.to_string(),
        csis_cache::INSTANCE_STATE_FILE.to_string(),
        csis_cache::storage_state::STORAGE_STATE_FILE.to_string(),
    ])
}

/// `csis state push`: add the records of `meta-state/` (with a journal
/// left by an interrupted local build) to the store, to migrate a tree to
/// it. Records the store has are kept; pins are set; `releases.yaml` and
/// `revocations.yaml` replace the store's when the local ones hold anything
/// (conditionally on what was read); the post-bake test results and the
/// verdicts are merged in.
pub fn push(root: &Path) -> Result<StateSync> {
    let store = shared_store(root)?;
    let local = MetaState::local_of_tree(root);
    let _lock = LocalDir::of_tree(root).lock(true, |_| {})?;
    csis_cache::Recorder::open(local.clone(), LocalDir::of_tree(root).journal())?;
    let (l, p) = local.load_with_journal(&LocalDir::of_tree(root).journal())?;
    let added = store.push_records(&l, &p)?;
    let mut written = Vec::new();
    if added > 0 {
        written.push("series/".to_string());
    }
    let rel = local.releases()?;
    if !rel.releases.is_empty() || !rel.current.is_empty() {
        let _ = store.releases()?;
        if store.save_releases(&rel)? {
            written.push(csis_cache::RELEASES_FILE.to_string());
        }
    }
    let revs = Revocations::load(&local)?;
    if !revs.revocations.is_empty() {
        let _ = Revocations::load(&store)?;
        if revs.save(&store)? {
            written.push("revocations.yaml".to_string());
        }
    }
    written.extend(copy_verdicts(&local, &store)?);
    written.extend(copy_fleet(&local, &store)?);
    Ok(StateSync {
        direction: "push",
        store: store.location(),
        records: l.builds.len(),
        added,
        written,
    })
}
