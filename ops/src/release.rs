//! Release (`csis release`, `csis release --declared`, and the release
//! nodes of `csis build`).
//!
//! A release is refused unless the build is recorded, belongs to the
//! series, passed its in-bake tests, passed its post-bake tests where the
//! image declares them and `require_image_tests` holds, and is not revoked
//! (csis_cache::release_rules). `releases.yaml` keeps the history and the
//! current build per model; with `config.apply_release` (for the runtime) the
//! runtime's `release` hook marks the artifact, before the record is written.

use anyhow::Result;
use csis_cache::release_rules::{
    declared_candidate, qualify, record_release, ImageTests, ModTests, ReleaseRecords,
    ReleaseRefusal, ReleaseRules,
};
use csis_cache::{head_unrevoked, BuildRecord, MetaState, Releases, Revocations};
use csis_rules::Tree;
use csis_runtime::DynRuntime;
use serde::Serialize;

use crate::Context;

/// One thing a release did, refused or found already done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ReleaseEvent {
    /// The build is the model's current release already.
    AlreadyCurrent {
        build_id: String,
        model: String,
        series: String,
    },
    /// A dry run's release (and the runtime commands it would run).
    WouldRelease {
        build_id: String,
        model: String,
        series: String,
        runtime: String,
        commands: Vec<String>,
    },
    /// Released (and `marked` on the runtime under `apply_release`).
    Released {
        build_id: String,
        model: String,
        series: String,
        runtime: String,
        marked: bool,
    },
    /// The head does not qualify (yet).
    NotQualified {
        series: String,
        runtime: String,
        reason: String,
    },
    /// `--declared`: no build of the series on the runtime yet.
    NoBuildYet { series: String, runtime: String },
    /// `--declared`: the head is the current release already.
    HeadAlreadyCurrent {
        series: String,
        runtime: String,
        model: String,
    },
    /// `--declared`: nothing qualified anywhere.
    NothingQualifies,
    /// Refused: nothing recorded.
    Refused { reason: String },
    /// The release mark on the runtime failed: nothing recorded.
    MarkFailed {
        build_id: String,
        runtime: String,
        error: String,
    },
}

impl ReleaseEvent {
    /// A refusal or a failure.
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            ReleaseEvent::Refused { .. } | ReleaseEvent::MarkFailed { .. }
        )
    }
}

/// What a release did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    pub dry_run: bool,
    pub events: Vec<ReleaseEvent>,
}

impl ReleaseReport {
    pub fn exit_code(&self) -> u8 {
        if self.events.iter().any(ReleaseEvent::is_problem) {
            crate::exit::FAILURE
        } else {
            crate::exit::SUCCESS
        }
    }
}

/// What to release.
#[derive(Debug, Clone, Default)]
pub struct ReleaseArgs {
    /// The image or OS builder (series); None with `declared`.
    pub image: Option<String>,
    /// The build (default: the series head on the runtime).
    pub build: Option<String>,
    /// The model (default: the image's declared `release: {model}`, else
    /// `default`).
    pub model: Option<String>,
    pub note: Option<String>,
    pub runtime: Option<String>,
    /// Per image with `release: {model}` and runtime, the head that qualifies.
    pub declared: bool,
    pub dry_run: bool,
}

/// The records a release reads.
struct Ctx {
    meta: MetaState,
    lineage: csis_cache::Lineage,
    revs: Revocations,
    image_tests: ImageTests,
    mod_tests: ModTests,
}

impl Ctx {
    fn load(meta: MetaState, lineage: csis_cache::Lineage) -> Result<Ctx> {
        Ok(Ctx {
            revs: Revocations::load(&meta)?,
            image_tests: ImageTests::load(&meta)?,
            mod_tests: ModTests::load(&meta)?,
            lineage,
            meta,
        })
    }

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

/// `csis release`: one build (`args.image`) or every declared release.
/// The context is opened for writing unless a dry run.
pub fn release(cx: &Context, args: &ReleaseArgs) -> Result<ReleaseReport> {
    let tree = cx.tree();
    let ctx = Ctx::load(cx.meta.clone(), cx.records()?.0)?;
    let mut releases = ctx.meta.releases()?;
    let mut report = ReleaseReport {
        dry_run: args.dry_run,
        events: Vec::new(),
    };
    if args.declared {
        declared(cx, &ctx, &mut releases, args, &mut report.events)?;
        return Ok(report);
    }
    match choose(tree, &ctx, args) {
        Err(reason) => report.events.push(ReleaseEvent::Refused { reason }),
        Ok((rec, series, runtime)) => {
            let model = match &args.model {
                Some(m) => m.clone(),
                None => declared_model(tree, &series),
            };
            let e = do_release(
                cx,
                &ctx,
                &mut releases,
                &rec,
                (&series, &runtime, &model),
                args,
            )?;
            report.events.push(e);
        }
    }
    Ok(report)
}

/// The model a release of `series` uses when none is named: the image's
/// declared `release: {model}`, else `default` (the original's).
pub fn declared_model(tree: &Tree, series: &str) -> String {
    tree.image(series)
        .filter(|i| i.name == series)
        .and_then(|i| i.model.release.as_ref())
        .map(|r| r.model.clone())
        .unwrap_or_else(|| "default".to_string())
}

/// The build, series and runtime `args` name, or why not.
fn choose(
    tree: &Tree,
    ctx: &Ctx,
    args: &ReleaseArgs,
) -> std::result::Result<(BuildRecord, String, String), String> {
    let name = args.image.as_deref().unwrap_or_default();
    let series = match (tree.image(name), tree.os_builder(name)) {
        (Some(i), _) => i.name.clone(),
        (None, Some(o)) => o.name.clone(),
        (None, None) => {
            return Err(format!(
                "{name} is neither an image nor an OS builder of this tree"
            ))
        }
    };
    let runtime = if let Some(rt) = &args.runtime {
        match tree.runtime(rt) {
            Some(r) => r.name.clone(),
            None => return Err(format!("runtime {rt} is not declared in this tree")),
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
            [] => return Err(format!("{series} bakes on no runtime")),
            _ => {
                return Err(format!(
                    "{series} bakes on several runtimes ({}); name one with --runtime",
                    rts.join(", ")
                ))
            }
        }
    };
    let build = match &args.build {
        Some(b) => b.clone(),
        None => match head_unrevoked(&ctx.lineage, &ctx.revs, &series, &runtime) {
            Some(h) => h.build_id.clone(),
            None => return Err(no_head(ctx, &series, &runtime)),
        },
    };
    let rec = qualify(ctx.recs(), &series, &build, rules_for(tree, &series))
        .map_err(|e| e.to_string())?;
    if let Some(rt) = rec.runtime.as_deref() {
        if rt != runtime {
            return Err(format!("build {build} is on runtime {rt}, not {runtime}"));
        }
    }
    Ok((rec.clone(), series, runtime))
}

/// Why `release SERIES` without `--build` has nothing to release: no build
/// on the runtime, or its head is revoked (an older build is never promoted
/// silently: name it with `--build`, or bake a new one).
fn no_head(ctx: &Ctx, series: &str, runtime: &str) -> String {
    let Some(head) = ctx.lineage.head(series, runtime) else {
        return format!("{series} has no build on {runtime} to release yet");
    };
    let good: Vec<&str> = ctx
        .lineage
        .series_builds(series, runtime)
        .filter(|b| !ctx.revs.is_revoked(&b.build_id))
        .map(|b| b.build_id.as_str())
        .collect();
    let older = if good.is_empty() {
        String::new()
    } else {
        format!(
            "name an unrevoked build with --build ({}), or ",
            good.join(", ")
        )
    };
    format!(
        "the head of {series} on {runtime}, {}, is revoked: {older}bake a new one (`csis build`)",
        head.build_id
    )
}

fn do_release(
    cx: &Context,
    ctx: &Ctx,
    releases: &mut Releases,
    rec: &BuildRecord,
    (series, runtime, model): (&str, &str, &str),
    args: &ReleaseArgs,
) -> Result<ReleaseEvent> {
    let tree = cx.tree();
    if releases.current.get(model).and_then(|m| m.get(series)) == Some(&rec.build_id) {
        return Ok(ReleaseEvent::AlreadyCurrent {
            build_id: rec.build_id.clone(),
            model: model.into(),
            series: series.into(),
        });
    }
    let rt = if tree.config.config.apply_release.allows(&[runtime]) {
        match cx.runtime(runtime) {
            Ok(r) => Some(r),
            Err(e) => {
                return Ok(ReleaseEvent::Refused {
                    reason: format!("{e:#} (apply_release is on for {runtime})"),
                })
            }
        }
    } else {
        None
    };
    if args.dry_run {
        return Ok(ReleaseEvent::WouldRelease {
            build_id: rec.build_id.clone(),
            model: model.into(),
            series: series.into(),
            runtime: runtime.into(),
            commands: rt
                .as_ref()
                .map(|rt| rt.release_commands(&rec.build_id, series, model))
                .unwrap_or_default(),
        });
    }
    let run = csis_cache::run_id_now();
    let what = ReleaseOf {
        rec,
        series,
        runtime,
        model,
        note: args.note.as_deref(),
        run: &run,
    };
    cx.block_on(release_build(&ctx.meta, releases, what, rt.as_ref()))
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
/// (atomically). A failed mark records nothing.
async fn release_build(
    meta: &MetaState,
    releases: &mut Releases,
    r: ReleaseOf<'_>,
    apply: Option<&DynRuntime>,
) -> Result<ReleaseEvent> {
    let (id, series, runtime, model) = (&r.rec.build_id, r.series, r.runtime, r.model);
    if let Some(rt) = apply {
        if let Err(e) = rt.release(id, series, model).await {
            return Ok(ReleaseEvent::MarkFailed {
                build_id: id.clone(),
                runtime: runtime.into(),
                error: e.to_string(),
            });
        }
    }
    record_release(releases, r.rec, series, model, Some(r.run), r.note);
    meta.save_releases(releases)?;
    Ok(ReleaseEvent::Released {
        build_id: id.clone(),
        model: model.into(),
        series: series.into(),
        runtime: runtime.into(),
        marked: apply.is_some(),
    })
}

fn declared(
    cx: &Context,
    ctx: &Ctx,
    releases: &mut Releases,
    args: &ReleaseArgs,
    out: &mut Vec<ReleaseEvent>,
) -> Result<()> {
    let tree = cx.tree();
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
            let (series, runtime) = (image.name.clone(), rt.to_string());
            match declared_candidate(ctx.recs(), releases, &image.name, rt, &rel.model, rules) {
                Ok(Some(rec)) => {
                    any = true;
                    let rec = rec.clone();
                    let what = (image.name.as_str(), rt, rel.model.as_str());
                    out.push(do_release(cx, ctx, releases, &rec, what, args)?);
                }
                Ok(None) => out.push(ReleaseEvent::HeadAlreadyCurrent {
                    series,
                    runtime,
                    model: rel.model.clone(),
                }),
                Err(ReleaseRefusal::NoHead { .. }) => {
                    out.push(ReleaseEvent::NoBuildYet { series, runtime })
                }
                Err(e) => out.push(ReleaseEvent::NotQualified {
                    series,
                    runtime,
                    reason: e.to_string(),
                }),
            }
        }
    }
    if !any {
        out.push(ReleaseEvent::NothingQualifies);
    }
    Ok(())
}

/// The release node of `csis build` (core.md §5.4) for `series` on
/// `runtime`, run as soon as the build's bake of it is recorded (after its
/// retag): release, as `model`, the series head if it qualifies (in-bake
/// tests passed, post-bake tests where required, not revoked) and is not
/// the current release of that model already.
///
/// `lineage` holds (at least) the series' records as the build's
/// `Recorder` holds them, this run's bakes included; the other records are
/// read from `meta-state/`. The caller holds the tree lock and serializes
/// the writers of `meta-state/` (`releases.yaml` is read and written
/// here). `rt` is the runtime the build constructed, for the release mark
/// (`apply_release`).
///
/// A head that does not qualify yet is a `NotQualified` event, not a
/// problem; a `Refused` (the runtime cannot be constructed) or
/// `MarkFailed` event fails the node: nothing is recorded.
pub async fn release_in_build(
    tree: &Tree,
    lineage: csis_cache::Lineage,
    series: &str,
    runtime: &str,
    model: &str,
    run: &str,
    rt: Option<DynRuntime>,
) -> Result<ReleaseEvent> {
    let ctx = Ctx::load(MetaState::of_tree(tree.root()), lineage)?;
    let mut releases = ctx.meta.releases()?;
    let rules = rules_for(tree, series);
    let rec = match declared_candidate(ctx.recs(), &releases, series, runtime, model, rules) {
        Ok(Some(rec)) => rec.clone(),
        Ok(None) => {
            let head = head_unrevoked(&ctx.lineage, &ctx.revs, series, runtime)
                .map(|h| h.build_id.clone())
                .unwrap_or_default();
            return Ok(ReleaseEvent::AlreadyCurrent {
                build_id: head,
                model: model.into(),
                series: series.into(),
            });
        }
        Err(e) => {
            return Ok(ReleaseEvent::NotQualified {
                series: series.into(),
                runtime: runtime.into(),
                reason: e.to_string(),
            })
        }
    };
    let apply = if tree.config.config.apply_release.allows(&[runtime]) {
        match rt {
            Some(r) => Some(r),
            None => match crate::wiring::runtime(tree, runtime) {
                Ok(r) => Some(r),
                Err(e) => {
                    return Ok(ReleaseEvent::Refused {
                        reason: format!("{e:#} (apply_release is on for {runtime})"),
                    })
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
