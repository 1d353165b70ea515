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

/// Fold a journal left by an interrupted build into `meta-state/` (call
/// with the tree lock held, before a lineage operation rewrites
/// `lineage.yaml` or `pins.yaml`): otherwise the next build would replay the
/// journal over the operation's changes (e.g. bring back a disposed record).
pub fn settle_journal(root: &Path) -> Result<()> {
    csis_cache::Recorder::open(MetaState::of_tree(root), LocalDir::of_tree(root).journal())?;
    Ok(())
}

/// `lineage.yaml` and `pins.yaml` as the next build will see them (with a
/// journal left by an interrupted build merged in).
pub fn records(root: &Path) -> Result<(csis_cache::Lineage, csis_cache::Pins)> {
    Ok(MetaState::of_tree(root).load_with_journal(&LocalDir::of_tree(root).journal())?)
}

/// A tokio runtime for the hook calls of one command.
pub fn tokio_rt() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
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
                runtime: name.to_string(),
                images: Err(e.clone()),
                instances: Some(Err(e)),
            }
        }
    };
    let images = rt
        .query_images()
        .await
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
        runtime: name.to_string(),
        images,
        instances,
    }
}

/// Ask every declared runtime; a runtime that cannot be constructed
/// (unwired type, unreachable daemon) is an unavailable answer.
pub fn views(tree: &Tree, only: Option<&str>) -> Result<Vec<RuntimeView>> {
    let tokio = tokio_rt()?;
    let mut out = Vec::new();
    for name in declared_runtimes(tree) {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let rt = crate::wiring::runtime(tree, &name).map_err(|e| format!("{e:#}"));
        let v = tokio.block_on(view_of(
            &name,
            rt.as_ref().map_err(Clone::clone),
            &tree.config.id,
        ));
        out.push(v);
    }
    Ok(out)
}

/// Run the state query over every declared runtime.
pub fn state_report(tree: &Tree, meta: &MetaState) -> Result<(StateReport, Vec<RuntimeView>)> {
    let (lineage, pins) = records(tree.root())?;
    let revs = Revocations::load(meta)?;
    meta.releases()?; // a corrupt releases.yaml is reported here, not only by `csis release`
    let parents = image_parents(tree);
    let views = views(tree, None)?;
    let report = drift::judge(
        drift::Records {
            lineage: &lineage,
            pins: &pins,
            revocations: &revs,
            image_parents: &parents,
        },
        &views,
        &declared_runtimes(tree),
        Some(&csis_cache::run_id_now()),
    );
    Ok((report, views))
}

/// `<tree>/<generation_directory>/state-report.json`.
pub fn report_path(tree: &Tree) -> PathBuf {
    tree.root()
        .join(&tree.config.generation_directory)
        .join("state-report.json")
}

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
/// report, no opinion).
#[allow(dead_code)]
pub fn last_report_hard_drift(tree: &Tree) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(report_path(tree)).ok()?;
    let report: StateReport = serde_json::from_str(&text).ok()?;
    Some(
        report
            .drift
            .iter()
            .filter(|d| d.hard)
            .map(|d| format!("{} {}: {}: {}", d.kind, d.name, d.drift, d.detail))
            .collect(),
    )
}

/// The gate at the start of `csis build`: with `run_query` (the default;
/// `--no-state-query` turns it off) run the state query and write the
/// report; then return the hard drift of the report on disk (empty = go;
/// no report = no opinion). The build refuses to start on a non-empty
/// answer, printing the lines and "re-run csis state query after fixing".
#[allow(dead_code)]
pub fn state_query_gate(tree: &Tree, run_query: bool) -> Result<Vec<String>> {
    if run_query {
        let meta = MetaState::of_tree(tree.root());
        let (report, _) = state_report(tree, &meta)?;
        write_report(tree, &report)?;
    }
    Ok(last_report_hard_drift(tree).unwrap_or_default())
}

/// The state query's answer and where it was written.
#[derive(Debug, Clone, Serialize)]
pub struct QueryReport {
    pub report: StateReport,
    pub path: PathBuf,
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

/// `csis state query`: ask every declared runtime, judge, write the report.
pub fn query(cx: &OpContext) -> Result<QueryReport> {
    let (report, _) = state_report(cx.tree(), &cx.meta)?;
    let path = write_report(cx.tree(), &report)?;
    Ok(QueryReport { report, path })
}

/// A foreign image adopted into lineage from its tags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Adopted {
    pub build_id: String,
    pub series: String,
    pub runtime: String,
    pub parent: Option<String>,
}

/// What `csis state import` adopted (or, in a dry run, would).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    pub dry_run: bool,
    pub adopted: Vec<Adopted>,
}

/// `csis state import`: adopt foreign images (tagged as csis's, not
/// recorded) into lineage from their tags. The context is opened for
/// writing unless `dry_run`.
pub fn import(cx: &OpContext, dry_run: bool) -> Result<ImportReport> {
    let tree = cx.tree();
    let (_, views) = state_report(tree, &cx.meta)?;
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
            });
            lineage.add_build(rec);
        }
    }
    if !dry_run && !adopted.is_empty() {
        cx.meta.save_lineage(&lineage)?;
        let (report, _) = state_report(tree, &cx.meta)?;
        write_report(tree, &report)?;
    }
    Ok(ImportReport { dry_run, adopted })
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
/// `revocations.yaml`), e.g. to keep a git copy for review. Replaces them.
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
    Ok(StateSync {
        direction: "pull",
        store: store.location(),
        records: l.builds.len(),
        added: l.builds.len().saturating_sub(before),
        written,
    })
}

/// `csis state push`: add the records of `meta-state/` (with a journal
/// left by an interrupted local build) to the store, to migrate a tree to
/// it. Records the store has are kept; pins are set; `releases.yaml` and
/// `revocations.yaml` replace the store's when the local ones hold anything
/// (conditionally on what was read).
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
    Ok(StateSync {
        direction: "push",
        store: store.location(),
        records: l.builds.len(),
        added,
        written,
    })
}
