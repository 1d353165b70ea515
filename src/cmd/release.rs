//! `csis release IMAGE [--build ID] [--model M] [--note T] [--runtime RT]`
//! and `csis release --declared`.
//!
//! A release is refused unless the build is recorded, belongs to the
//! series, passed its in-bake tests, passed its post-bake tests where the
//! image declares them and `require_image_tests` holds, and is not revoked
//! (csis_cache::release_rules). `releases.yaml` keeps the history and the
//! current build per model; with `config.apply_release` (for the runtime) the
//! runtime's `release` hook marks the artifact, before the record is written.

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::release_rules::{
    declared_candidate, qualify, record_release, ImageTests, ModTests, ReleaseRecords,
    ReleaseRefusal, ReleaseRules,
};
use csis_cache::{head_unrevoked, BuildRecord, MetaState, Releases, Revocations};
use csis_rules::Tree;
use csis_runtime::DynRuntime;

use super::state::{load_tree, take_lock, tokio_rt};
use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image (series) to release.
    pub image: Option<String>,
    /// The build to release (default: the series head on the runtime).
    #[arg(long, value_name = "ID")]
    pub build: Option<String>,
    /// The release model.
    #[arg(long, value_name = "M", default_value = "default")]
    pub model: String,
    /// A note kept with the release.
    #[arg(long, value_name = "T")]
    pub note: Option<String>,
    /// The runtime (needed when the image bakes on several).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Release, per image with `release: {model}` and runtime, the head that qualifies.
    #[arg(long, conflicts_with_all = ["image", "build"])]
    pub declared: bool,
    /// Print what would be released; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

struct Ctx {
    meta: MetaState,
    lineage: csis_cache::Lineage,
    revs: Revocations,
    image_tests: ImageTests,
    mod_tests: ModTests,
}

impl Ctx {
    fn recs(&self) -> ReleaseRecords<'_> {
        ReleaseRecords {
            lineage: &self.lineage,
            revocations: &self.revs,
            image_tests: &self.image_tests,
            mod_tests: &self.mod_tests,
        }
    }
}

fn rules_for(tree: &Tree, series: &str) -> ReleaseRules {
    let cfg = &tree.config.config;
    ReleaseRules {
        post_bake_declared: tree
            .image(series)
            .filter(|i| i.name == series)
            .is_some_and(|i| i.model.tests.post_bake.is_some()),
        require_image_tests: cfg.require_image_tests,
        require_mod_tests: cfg.require_mod_tests,
    }
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    if args.image.is_none() && !args.declared {
        eprintln!("error: name an IMAGE, or use --declared");
        return Ok(ExitCode::from(2));
    }
    let tree = load_tree(global)?;
    let _lock = if args.dry_run {
        None
    } else {
        let l = take_lock(tree.root())?;
        super::state::settle_journal(tree.root())?;
        Some(l)
    };
    let meta = MetaState::of_tree(tree.root());
    let ctx = Ctx {
        lineage: super::state::records(tree.root())?.0,
        revs: Revocations::load(&meta)?,
        image_tests: ImageTests::load(&meta)?,
        mod_tests: ModTests::load(&meta)?,
        meta,
    };
    let mut releases = ctx.meta.releases()?;
    if args.declared {
        return declared(&tree, &ctx, &mut releases, &args);
    }
    let name = args.image.as_deref().unwrap_or_default();
    let series = match (tree.image(name), tree.os_builder(name)) {
        (Some(i), _) => i.name.clone(),
        (None, Some(o)) => o.name.clone(),
        (None, None) => {
            eprintln!("refused: {name} is neither an image nor an OS builder of this tree");
            return Ok(ExitCode::from(1));
        }
    };
    // Which runtime.
    let runtime = if let Some(rt) = &args.runtime {
        match tree.runtime(rt) {
            Some(r) => r.name.clone(),
            None => {
                eprintln!("refused: runtime {rt} is not declared in this tree");
                return Ok(ExitCode::from(1));
            }
        }
    } else if let Some(rec) = args.build.as_deref().and_then(|b| ctx.lineage.find(b)) {
        rec.runtime.clone().unwrap_or_default()
    } else {
        let rts: Vec<String> = match tree.image(&series).filter(|i| i.name == series) {
            Some(i) => i
                .active_runtimes()
                .filter_map(|r| r.runtime.clone())
                .collect(),
            None => tree
                .os_builder(&series)
                .map(|o| {
                    o.active_runtimes()
                        .filter_map(|r| r.runtime.clone())
                        .collect()
                })
                .unwrap_or_default(),
        };
        match rts.as_slice() {
            [one] => one.clone(),
            [] => {
                eprintln!("refused: {series} bakes on no runtime");
                return Ok(ExitCode::from(1));
            }
            _ => {
                eprintln!(
                    "refused: {series} bakes on several runtimes ({}); name one with --runtime",
                    rts.join(", ")
                );
                return Ok(ExitCode::from(1));
            }
        }
    };
    let build = match &args.build {
        Some(b) => b.clone(),
        None => match head_unrevoked(&ctx.lineage, &ctx.revs, &series, &runtime) {
            Some(h) => h.build_id.clone(),
            None => {
                eprintln!("refused: {series} has no (unrevoked) build on {runtime} to release");
                return Ok(ExitCode::from(1));
            }
        },
    };
    let rec = match qualify(ctx.recs(), &series, &build, rules_for(&tree, &series)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("refused: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if let Some(rt) = rec.runtime.as_deref() {
        if rt != runtime {
            eprintln!("refused: build {build} is on runtime {rt}, not {runtime}");
            return Ok(ExitCode::from(1));
        }
    }
    let rec = rec.clone();
    let code = do_release(
        &tree,
        &ctx,
        &mut releases,
        &rec,
        &series,
        &runtime,
        &args.model,
        args.note.as_deref(),
        args.dry_run,
        &|line| println!("{line}"),
    )?;
    Ok(ExitCode::from(code))
}

#[allow(clippy::too_many_arguments)]
fn do_release(
    tree: &Tree,
    ctx: &Ctx,
    releases: &mut Releases,
    rec: &BuildRecord,
    series: &str,
    runtime: &str,
    model: &str,
    note: Option<&str>,
    dry_run: bool,
    out: &dyn Fn(String),
) -> Result<u8> {
    let apply = tree.config.config.apply_release.allows(&[runtime]);
    if releases.current.get(model).and_then(|m| m.get(series)) == Some(&rec.build_id) {
        out(format!(
            "{} is already the current {model} release of {series}",
            rec.build_id
        ));
        return Ok(0);
    }
    let rt = if apply {
        match crate::wiring::runtime(tree, runtime) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("refused: {e:#} (apply_release is on for {runtime})");
                return Ok(1);
            }
        }
    } else {
        None
    };
    if dry_run {
        out(format!(
            "would release {} as {model} of {series} on {runtime}",
            rec.build_id
        ));
        if let Some(rt) = &rt {
            for c in rt.release_commands(&rec.build_id, series, model) {
                out(format!("  would run: {c}"));
            }
        }
        return Ok(0);
    }
    let run = csis_cache::run_id_now();
    let what = ReleaseOf {
        rec,
        series,
        runtime,
        model,
        note,
        run: &run,
    };
    match tokio_rt()?.block_on(release_build(&ctx.meta, releases, what, rt.as_ref()))? {
        Ok(line) => {
            out(line);
            Ok(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}

/// One release to carry out.
struct ReleaseOf<'a> {
    rec: &'a BuildRecord,
    series: &'a str,
    runtime: &'a str,
    model: &'a str,
    note: Option<&'a str>,
    run: &'a str,
}

/// Mark the build released on its runtime (`apply`: `config.apply_release`
/// holds for the runtime), then record the release in `releases.yaml`
/// (atomically). `Ok(Ok(line))` says what was done; `Ok(Err(why))` is a
/// failed mark, with nothing recorded.
async fn release_build(
    meta: &MetaState,
    releases: &mut Releases,
    r: ReleaseOf<'_>,
    apply: Option<&DynRuntime>,
) -> Result<Result<String, String>> {
    let (id, series, runtime, model) = (&r.rec.build_id, r.series, r.runtime, r.model);
    if let Some(rt) = apply {
        if let Err(e) = rt.release(id, series, model).await {
            return Ok(Err(format!(
                "the release mark of {id} on {runtime} failed: {e}; nothing recorded"
            )));
        }
    }
    record_release(releases, r.rec, series, model, Some(r.run), r.note);
    meta.save_releases(releases)?;
    Ok(Ok(format!(
        "released {id} as {model} of {series} on {runtime}{}",
        if apply.is_some() {
            " (marked on the runtime)"
        } else {
            ""
        }
    )))
}

fn declared(tree: &Tree, ctx: &Ctx, releases: &mut Releases, args: &Args) -> Result<ExitCode> {
    let mut worst = 0u8;
    let mut any = false;
    for image in &tree.images {
        let Some(rel) = &image.model.release else {
            continue;
        };
        for entry in image.active_runtimes() {
            let Some(rt) = entry.runtime.as_deref() else {
                continue;
            };
            let rules = rules_for(tree, &image.name);
            match declared_candidate(ctx.recs(), releases, &image.name, rt, &rel.model, rules) {
                Ok(Some(rec)) => {
                    any = true;
                    let rec = rec.clone();
                    let code = do_release(
                        tree,
                        ctx,
                        releases,
                        &rec,
                        &image.name,
                        rt,
                        &rel.model,
                        args.note.as_deref(),
                        args.dry_run,
                        &|line| println!("{line}"),
                    )?;
                    worst = worst.max(code);
                }
                Ok(None) => println!(
                    "{} on {rt}: the head is already the current {} release",
                    image.name, rel.model
                ),
                Err(ReleaseRefusal::NoHead { .. }) => {
                    println!("{} on {rt}: no build to release yet", image.name)
                }
                Err(e) => println!("{} on {rt}: not released: {e}", image.name),
            }
        }
    }
    if !any {
        println!("nothing qualifies for release");
    }
    Ok(ExitCode::from(worst))
}

/// The release node of `csis build` (core.md §5.4) for `series` on
/// `runtime`, run as soon as the build's bake of it is recorded (after its
/// retag): release, as `model`, the series head if it qualifies (in-bake
/// tests passed, post-bake tests where required, not revoked) and is not
/// the current release of that model already.
///
/// `lineage` holds (at least) the series' records as the build's
/// `Recorder` holds them, this run's bakes included; the other records are
/// read from `meta-state/`.
/// The caller holds the tree lock and serializes the writers of
/// `meta-state/` (`releases.yaml` is read and written here). `rt` is the
/// runtime the build constructed, for the release mark (`apply_release`).
///
/// `Ok(Ok(line))`: what was released, or why nothing was (a head that does
/// not qualify yet is not an error). `Ok(Err(why))`: the release failed
/// (the mark on the runtime, or the runtime cannot be reached): nothing is
/// recorded and the node fails.
pub(crate) async fn release_in_build(
    tree: &Tree,
    lineage: csis_cache::Lineage,
    series: &str,
    runtime: &str,
    model: &str,
    run: &str,
    rt: Option<DynRuntime>,
) -> Result<Result<String, String>> {
    let meta = MetaState::of_tree(tree.root());
    let ctx = Ctx {
        lineage,
        revs: Revocations::load(&meta)?,
        image_tests: ImageTests::load(&meta)?,
        mod_tests: ModTests::load(&meta)?,
        meta,
    };
    let mut releases = ctx.meta.releases()?;
    let rules = rules_for(tree, series);
    let rec = match declared_candidate(ctx.recs(), &releases, series, runtime, model, rules) {
        Ok(Some(rec)) => rec.clone(),
        Ok(None) => {
            let head = head_unrevoked(&ctx.lineage, &ctx.revs, series, runtime)
                .map(|h| h.build_id.clone())
                .unwrap_or_default();
            return Ok(Ok(format!(
                "{head} is already the current {model} release of {series}"
            )));
        }
        Err(e) => return Ok(Ok(format!("{series} on {runtime}: not released: {e}"))),
    };
    let apply = if tree.config.config.apply_release.allows(&[runtime]) {
        match rt {
            Some(r) => Some(r),
            None => match crate::wiring::runtime(tree, runtime) {
                Ok(r) => Some(r),
                Err(e) => {
                    return Ok(Err(format!(
                        "refused: {e:#} (apply_release is on for {runtime})"
                    )))
                }
            },
        }
    } else {
        None
    };
    let what = ReleaseOf {
        rec: &rec,
        series,
        runtime,
        model,
        note: None,
        run,
    };
    release_build(&ctx.meta, &mut releases, what, apply.as_ref()).await
}
