//! Revocation (`csis revoke`): writes `meta-state/revocations.yaml`. A
//! revoked build is never baked from, released or chosen as a series head;
//! with `descendants` every recorded build descending from it is revoked too.

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
    if !dry_run && !newly.is_empty() {
        revs.save(&cx.meta)?;
    }
    Ok(report)
}
