//! `csis release IMAGE [--build ID] [--model M] [--note T] [--runtime RT]`
//! and `csis release --declared`.
//!
//! A release is refused unless the build is recorded, belongs to the
//! series, passed its in-bake tests, passed its post-bake tests where the
//! image declares them and `require_image_tests` holds, and is not revoked
//! (csis_cache::release_rules). `releases.yaml` keeps the history and the
//! current build per model; with `config.apply_release` (for the runtime) the
//! runtime's `release` hook marks the artifact, before the record is written.

use anyhow::Result;
use csis_cache::release_rules::{
    declared_candidate, record_release, ImageTests, ModTests, ReleaseRecords, ReleaseRules,
};
use csis_cache::{head_unrevoked, BuildRecord, MetaState, Releases, Revocations};
use csis_rules::Tree;
use csis_runtime::DynRuntime;


pub struct Ctx {
    pub meta: MetaState,
    pub lineage: csis_cache::Lineage,
    pub revs: Revocations,
    pub image_tests: ImageTests,
    pub mod_tests: ModTests,
}

impl Ctx {
    pub fn recs(&self) -> ReleaseRecords<'_> {
        ReleaseRecords {
            lineage: &self.lineage,
            revocations: &self.revs,
            image_tests: &self.image_tests,
            mod_tests: &self.mod_tests,
        }
    }
}

pub fn rules_for(tree: &Tree, series: &str) -> ReleaseRules {
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

/// One release to carry out.
pub struct ReleaseOf<'a> {
    pub rec: &'a BuildRecord,
    pub series: &'a str,
    pub runtime: &'a str,
    pub model: &'a str,
    pub note: Option<&'a str>,
    pub run: &'a str,
}

/// Mark the build released on its runtime (`apply`: `config.apply_release`
/// holds for the runtime), then record the release in `releases.yaml`
/// (atomically). `Ok(Ok(line))` says what was done; `Ok(Err(why))` is a
/// failed mark, with nothing recorded.
pub async fn release_build(
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
pub async fn release_in_build(
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
