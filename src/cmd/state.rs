//! `csis state query` and `csis state import`, and what the lineage
//! operations (`dispose`, `release`, `revoke`, `lineage`, `empty`,
//! `preflight`) share: loading the tree, the tree lock, asking runtimes.
//!
//! The query is read-only: it asks every runtime the tree declares for its
//! images (`query_images`) and, where it can, its instances (`inventory`),
//! compares with `meta-state/` (csis_cache::drift) and writes
//! `<generated>/state-report.json`. A runtime or hook that cannot answer is
//! an `unavailable` line, never a claim.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use csis_cache::drift::{self, RuntimeView, SeenImage, SeenInstance, StateReport};
use csis_cache::{LocalDir, MetaState, Revocations, TreeLock};
use csis_rules::{Parent, Tree};
use csis_runtime::{DynRuntime, RuntimeError};

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Compare meta-state with what every runtime holds (read-only).
    Query(QueryArgs),
    /// Adopt foreign images (tagged as csis's, not recorded) into lineage from their tags.
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Exit 1 also on any missing, foreign or changed entry (not on stale).
    #[arg(long)]
    pub strict: bool,
    /// Print the report as JSON (`{reality, drift, unavailable, notes, summary}`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Print what would be adopted; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(global: &GlobalArgs, cmd: StateCommand) -> Result<ExitCode> {
    match cmd {
        StateCommand::Query(a) => query(global, a),
        StateCommand::Import(a) => import(global, a),
    }
}

fn query(global: &GlobalArgs, args: QueryArgs) -> Result<ExitCode> {
    let tree = load_tree(global)?;
    let meta = MetaState::of_tree(tree.root());
    let (report, _) = state_report(&tree, &meta)?;
    let path = write_report(&tree, &report)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for l in report.lines() {
            println!("{l}");
        }
        eprintln!("report: {}", path.display());
    }
    let fail = if args.strict {
        report.strict_fails()
    } else {
        report.has_hard()
    };
    Ok(if fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn import(global: &GlobalArgs, args: ImportArgs) -> Result<ExitCode> {
    let tree = load_tree(global)?;
    let _lock = if args.dry_run {
        None
    } else {
        let l = take_lock(tree.root())?;
        settle_journal(tree.root())?;
        Some(l)
    };
    let meta = MetaState::of_tree(tree.root());
    let (_, views) = state_report(&tree, &meta)?;
    let mut lineage = records(tree.root())?.0;
    let run = csis_cache::run_id_now();
    let mut adopted = 0usize;
    for v in &views {
        let Ok(images) = &v.images else { continue };
        for img in images {
            if lineage.find(&img.build_id).is_some() {
                continue;
            }
            let Some(rec) = drift::record_from_tags(img, &v.runtime, &run) else {
                continue;
            };
            let verb = if args.dry_run {
                "would adopt"
            } else {
                "adopted"
            };
            println!(
                "{verb} {} ({} on {}, parent {}, from its tags; not verified: verify before releasing)",
                rec.build_id,
                rec.series,
                v.runtime,
                rec.parent.as_deref().unwrap_or("unknown")
            );
            lineage.add_build(rec);
            adopted += 1;
        }
    }
    if adopted == 0 {
        println!("nothing to import: no foreign images");
    }
    if !args.dry_run && adopted > 0 {
        meta.save_lineage(&lineage)?;
        let (report, _) = state_report(&tree, &meta)?;
        write_report(&tree, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------
// shared by the lineage operations

/// Load the tree, printing diagnostics when it does not load.
pub(crate) fn load_tree(global: &GlobalArgs) -> Result<Tree> {
    let opts = crate::cmd::validate::load_options(global);
    match csis_rules::load(&global.dir, &opts) {
        Ok(t) => Ok(t),
        Err(diags) => {
            crate::cmd::validate::print_human(&diags);
            let errors = diags.iter().filter(|d| d.is_error()).count();
            bail!("the tree does not load ({errors} error(s))");
        }
    }
}

/// Take the tree lock (waiting, and saying so, when another csis holds it).
pub(crate) fn take_lock(root: &Path) -> Result<TreeLock> {
    Ok(LocalDir::of_tree(root).lock(true, |holder| {
        eprintln!("waiting for another csis to release the tree lock ({holder})");
    })?)
}

/// Fold a journal left by an interrupted build into `meta-state/` (call
/// with the tree lock held, before a lineage operation rewrites
/// `lineage.yaml` or `pins.yaml`): otherwise the next build would replay the
/// journal over the operation's changes (e.g. bring back a disposed record).
pub(crate) fn settle_journal(root: &Path) -> Result<()> {
    csis_cache::Recorder::open(MetaState::of_tree(root), LocalDir::of_tree(root).journal())?;
    Ok(())
}

/// `lineage.yaml` and `pins.yaml` as the next build will see them (with a
/// journal left by an interrupted build merged in).
pub(crate) fn records(root: &Path) -> Result<(csis_cache::Lineage, csis_cache::Pins)> {
    Ok(MetaState::of_tree(root).load_with_journal(&LocalDir::of_tree(root).journal())?)
}

/// A tokio runtime for the hook calls of one command.
pub(crate) fn tokio_rt() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The runtimes the tree declares (canonical names).
pub(crate) fn declared_runtimes(tree: &Tree) -> BTreeSet<String> {
    tree.runtimes.iter().map(|r| r.name.clone()).collect()
}

/// `image -> parent series` for every declared image.
pub(crate) fn image_parents(tree: &Tree) -> BTreeMap<String, String> {
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
pub(crate) fn keep_for(tree: &Tree, series: &str, runtime: &str) -> Option<u32> {
    let rt = tree.runtime(runtime)?;
    let image_keep = tree
        .image(series)
        .filter(|i| i.name == series)
        .and_then(|i| i.model.retention.as_ref().map(|r| r.keep));
    csis_cache::retention::keep_for(rt.common.ephemeral, image_keep, rt.common.retention_keep)
}

/// A hook error as an `unavailable` reason.
pub(crate) fn why(e: &RuntimeError) -> String {
    match e {
        RuntimeError::Unsupported { .. } => format!("cannot be queried ({e})"),
        other => other.to_string(),
    }
}

/// Ask one runtime for its images and instances.
pub(crate) async fn view_of(name: &str, rt: Result<&DynRuntime, String>) -> RuntimeView {
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
pub(crate) fn views(tree: &Tree, only: Option<&str>) -> Result<Vec<RuntimeView>> {
    let tokio = tokio_rt()?;
    let mut out = Vec::new();
    for name in declared_runtimes(tree) {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let rt = crate::wiring::runtime(tree, &name).map_err(|e| format!("{e:#}"));
        let v = tokio.block_on(view_of(&name, rt.as_ref().map_err(Clone::clone)));
        out.push(v);
    }
    Ok(out)
}

/// Run the state query over every declared runtime.
pub(crate) fn state_report(
    tree: &Tree,
    meta: &MetaState,
) -> Result<(StateReport, Vec<RuntimeView>)> {
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
pub(crate) fn report_path(tree: &Tree) -> PathBuf {
    tree.root()
        .join(&tree.config.generation_directory)
        .join("state-report.json")
}

pub(crate) fn write_report(tree: &Tree, report: &StateReport) -> Result<PathBuf> {
    let path = report_path(tree);
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
pub(crate) fn state_query_gate(tree: &Tree, run_query: bool) -> Result<Vec<String>> {
    if run_query {
        let meta = MetaState::of_tree(tree.root());
        let (report, _) = state_report(tree, &meta)?;
        write_report(tree, &report)?;
    }
    Ok(last_report_hard_drift(tree).unwrap_or_default())
}
