//! `csis release IMAGE [--build ID] [--model M] [--note T] [--runtime RT]`
//! and `csis release --declared`.

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::release_rules::{declared_candidate, qualify, ImageTests, ModTests, ReleaseRefusal};
use csis_cache::{head_unrevoked, BuildRecord, MetaState, Releases, Revocations};
use csis_ops::release::{release_build, rules_for, Ctx, ReleaseOf};
use csis_ops::state::{load_tree, tokio_rt};
use csis_rules::Tree;

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

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    if args.image.is_none() && !args.declared {
        eprintln!("error: name an IMAGE, or use --declared");
        return Ok(ExitCode::from(2));
    }
    let tree = load_tree(&global.tree())?;
    let _lock = if args.dry_run {
        None
    } else {
        let l = crate::cmd::take_lock(tree.root())?;
        csis_ops::state::settle_journal(tree.root())?;
        Some(l)
    };
    let meta = MetaState::of_tree(tree.root());
    let ctx = Ctx {
        lineage: csis_ops::state::records(tree.root())?.0,
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
        match csis_ops::wiring::runtime(tree, runtime) {
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

