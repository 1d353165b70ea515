//! Revocation (`csis revoke`): writes `meta-state/revocations.yaml`. A
//! revoked build is never baked from, released or chosen as a series head;
//! with `descendants` every recorded build descending from it is revoked too.
//! The report names what the revocation hits (and a dry run what it would):
//! each current release of a revoked build (release another build) and each
//! pin on one (the upgrade that moves it); `csis state query` reports both as
//! hard drift until they are moved.

use anyhow::Result;
use csis_cache::revocations::{descendants, revoke as revoke_in};
use csis_cache::Revocations;
use serde::Serialize;

use crate::Context;

/// A build revoked (or, in a dry run, to be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revoked {
    pub build_id: String,
    pub series: Option<String>,
    pub runtime: Option<String>,
}

/// A current release of a revoked build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseHit {
    pub model: String,
    pub image: String,
    pub build_id: String,
}

/// A pin on a revoked build, and what moves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinHit {
    /// `image` or `instance`.
    pub kind: String,
    /// The pinned image or instance.
    pub name: String,
    /// The image pin's runtime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    pub build_id: String,
    /// The `csis upgrade` arguments that move it (`image web --runtime rt`).
    pub upgrade: String,
}

/// What a revocation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevokeReport {
    pub build_id: String,
    pub dry_run: bool,
    /// Why nothing was revoked (the build is not recorded, ...).
    pub refused: Option<String>,
    /// Newly revoked, the build first.
    pub revoked: Vec<Revoked>,
    /// Recorded descendants left unrevoked (without `descendants`).
    pub unrevoked_descendants: Vec<String>,
    /// Current releases of a build revoked (now or before) by this request.
    pub releases: Vec<ReleaseHit>,
    /// Pins on a build revoked (now or before) by this request.
    pub pins: Vec<PinHit>,
}

impl RevokeReport {
    pub fn exit_code(&self) -> u8 {
        if self.refused.is_some() {
            crate::exit::FAILURE
        } else {
            crate::exit::SUCCESS
        }
    }
}

/// Revoke `build` (with `with_descendants`, what descends from it). The
/// context is opened for writing unless `dry_run`.
pub fn revoke(
    cx: &Context,
    build: &str,
    with_descendants: bool,
    reason: Option<&str>,
    dry_run: bool,
) -> Result<RevokeReport> {
    let lineage = cx.records()?.0;
    let mut revs = Revocations::load(&cx.meta)?;
    let run = csis_cache::run_id_now();
    let mut report = RevokeReport {
        build_id: build.to_string(),
        dry_run,
        refused: None,
        revoked: Vec::new(),
        unrevoked_descendants: Vec::new(),
        releases: Vec::new(),
        pins: Vec::new(),
    };
    let newly = match revoke_in(
        &lineage,
        &mut revs,
        build,
        with_descendants,
        reason,
        Some(&run),
    ) {
        Ok(n) => n,
        Err(e) => {
            report.refused = Some(e.to_string());
            return Ok(report);
        }
    };
    report.revoked = newly
        .iter()
        .map(|id| {
            let r = lineage.find(id);
            Revoked {
                build_id: id.clone(),
                series: r.map(|r| r.series.clone()),
                runtime: r.and_then(|r| r.runtime.clone()),
            }
        })
        .collect();
    if !with_descendants {
        report.unrevoked_descendants = descendants(&lineage, build)
            .into_iter()
            .filter(|b| !revs.is_revoked(b))
            .collect();
    }
    // What the request names (whether revoked now or already).
    let mut named = vec![build.to_string()];
    if with_descendants {
        named.extend(descendants(&lineage, build));
    }
    let (releases, mut pins) = (cx.meta.releases()?, cx.records()?.1);
    // A follow image's pin only records what its head was baked from: its
    // next bake follows the unrevoked head, no upgrade is needed.
    if let Some(root) = cx.meta.dir().parent() {
        if let Ok(tree) = csis_rules::load(root, &Default::default()) {
            let follow = crate::state::follow_images(&tree);
            pins.images
                .retain(|k, _| !follow.contains(k.split_once('@').map_or(k.as_str(), |(i, _)| i)));
        }
    }
    (report.releases, report.pins) = hits(&named, &releases, &pins);
    if !dry_run && !newly.is_empty() {
        revs.save(&cx.meta)?;
    }
    Ok(report)
}

/// The current releases and the pins that name one of `builds`.
pub fn hits(
    builds: &[String],
    releases: &csis_cache::Releases,
    pins: &csis_cache::Pins,
) -> (Vec<ReleaseHit>, Vec<PinHit>) {
    let named = |b: &String| builds.contains(b);
    let mut rel = Vec::new();
    for (model, m) in &releases.current {
        for (image, b) in m.iter().filter(|(_, b)| named(b)) {
            rel.push(ReleaseHit {
                model: model.clone(),
                image: image.clone(),
                build_id: b.clone(),
            });
        }
    }
    let mut out = Vec::new();
    for (key, b) in pins.images.iter().filter(|(_, b)| named(b)) {
        let (name, runtime) = match key.split_once('@') {
            Some((i, r)) => (i.to_string(), Some(r.to_string())),
            None => (key.clone(), None),
        };
        let upgrade = match &runtime {
            Some(r) => format!("image {name} --runtime {r}"),
            None => format!("image {name}"),
        };
        out.push(PinHit {
            kind: "image".into(),
            name,
            runtime,
            build_id: b.clone(),
            upgrade,
        });
    }
    for (inst, b) in pins.instances.iter().filter(|(_, b)| named(b)) {
        out.push(PinHit {
            kind: "instance".into(),
            name: inst.clone(),
            runtime: None,
            build_id: b.clone(),
            upgrade: format!("instance {inst}"),
        });
    }
    (rel, out)
}
