//! Lineage repair: `relabel` re-tags recorded builds whose tags disagree
//! with their record (series, parent, run, fingerprint prefix; a tag never
//! carried is not drift; the record is the truth, no meta-state change).
//! `restamp` records, for each series head on a runtime whose recorded
//! fingerprint differs from the tree's current one, the current
//! fingerprint (the old one kept under `fingerprint_restamped`) and
//! re-tags `csis_fingerprint`: for recipe changes only (`csis build
//! --force-bake` re-bakes). Repeats until no head moves (a pinned child
//! hashes its parent's recorded fingerprint).

use std::collections::BTreeSet;

use anyhow::Result;
use csis_cache::drift::{record_tags, tag_disagreements, FINGERPRINT_TAG_LEN};
use csis_cache::Restamp;
use csis_schema::tags;
use serde::Serialize;

use crate::Context;

/// One tag that disagrees with its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagChange {
    pub field: String,
    /// What the image carries.
    pub tag: String,
    /// What the record says (what the tag becomes).
    pub record: String,
}

/// One thing `relabel` did or found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RelabelEvent {
    /// A named build is not recorded, or on another runtime: nothing ran.
    Refused { reason: String },
    /// The runtime cannot list its images: nothing ran.
    CannotList { runtime: String, error: String },
    /// A named build is not on the runtime.
    NotOnRuntime { build_id: String, runtime: String },
    /// Re-tagged (a dry run: would be).
    Relabelled {
        build_id: String,
        series: String,
        changes: Vec<TagChange>,
    },
    /// The re-tag failed.
    RetagFailed { build_id: String, error: String },
    /// Every recorded build's tags agree.
    NothingToRelabel { runtime: String },
}

/// What `relabel` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelabelReport {
    pub runtime: String,
    pub dry_run: bool,
    pub events: Vec<RelabelEvent>,
}

impl RelabelEvent {
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            RelabelEvent::Refused { .. }
                | RelabelEvent::CannotList { .. }
                | RelabelEvent::RetagFailed { .. }
        )
    }
}

fn exit_of(problem: bool) -> u8 {
    if problem {
        crate::exit::FAILURE
    } else {
        crate::exit::SUCCESS
    }
}

impl RelabelReport {
    pub fn exit_code(&self) -> u8 {
        exit_of(self.events.iter().any(RelabelEvent::is_problem))
    }
}

/// `csis lineage relabel`: `runtime` is the canonical name of a declared
/// runtime; `builds` limits it to those (each must be recorded there).
pub fn relabel(
    cx: &Context,
    runtime: &str,
    builds: &[String],
    dry_run: bool,
) -> Result<RelabelReport> {
    let mut report = RelabelReport {
        runtime: runtime.to_string(),
        dry_run,
        events: Vec::new(),
    };
    let ev = &mut report.events;
    let lineage = cx.records()?.0;
    for b in builds {
        match lineage.find(b) {
            None => ev.push(RelabelEvent::Refused {
                reason: format!("build {b} is not recorded in lineage"),
            }),
            Some(r) if r.runtime.as_deref().is_some_and(|x| x != runtime) => {
                ev.push(RelabelEvent::Refused {
                    reason: format!(
                        "build {b} is on runtime {}, not {runtime}",
                        r.runtime.as_deref().unwrap_or("?")
                    ),
                })
            }
            _ => {}
        }
    }
    if !ev.is_empty() {
        return Ok(report);
    }
    let rt = cx.runtime(runtime)?;
    let images = match cx.block_on(rt.query_images()) {
        Ok(i) => i,
        Err(e) => {
            ev.push(RelabelEvent::CannotList {
                runtime: runtime.into(),
                error: e.to_string(),
            });
            return Ok(report);
        }
    };
    let only: BTreeSet<&str> = builds.iter().map(String::as_str).collect();
    let mut n = 0;
    for rec in lineage
        .builds
        .iter()
        .filter(|b| b.runtime.as_deref() == Some(runtime))
    {
        if !only.is_empty() && !only.contains(rec.build_id.as_str()) {
            continue;
        }
        let Some(img) = images.iter().find(|i| i.build_id == rec.build_id) else {
            if only.contains(rec.build_id.as_str()) {
                ev.push(RelabelEvent::NotOnRuntime {
                    build_id: rec.build_id.clone(),
                    runtime: runtime.into(),
                });
            }
            continue;
        };
        let d = tag_disagreements(rec, &img.tags);
        if d.is_empty() {
            continue;
        }
        n += 1;
        let changes = d
            .iter()
            .map(|(f, r, t)| TagChange {
                field: f.to_string(),
                tag: t.to_string(),
                record: r.to_string(),
            })
            .collect();
        let done = RelabelEvent::Relabelled {
            build_id: rec.build_id.clone(),
            series: rec.series.clone(),
            changes,
        };
        if dry_run {
            ev.push(done);
            continue;
        }
        match cx.block_on(rt.retag_image(&rec.build_id, &record_tags(rec))) {
            Ok(()) => ev.push(done),
            Err(e) => ev.push(RelabelEvent::RetagFailed {
                build_id: rec.build_id.clone(),
                error: e.to_string(),
            }),
        }
    }
    if n == 0 {
        ev.push(RelabelEvent::NothingToRelabel {
            runtime: runtime.into(),
        });
    }
    Ok(report)
}

/// One thing `restamp` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RestampEvent {
    /// The head's recorded fingerprint moved to the tree's (a dry run: would).
    Restamped {
        build_id: String,
        series: String,
        previous: String,
        current: String,
    },
    /// The record moved, the `csis_fingerprint` tag did not.
    RetagFailed { build_id: String, error: String },
    /// A dry run shows the first pass only.
    FirstPassOnly,
    /// Every head matches.
    NothingToRestamp { runtime: String },
}

impl RestampEvent {
    pub fn is_problem(&self) -> bool {
        matches!(self, RestampEvent::RetagFailed { .. })
    }
}

/// What `restamp` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestampReport {
    pub runtime: String,
    pub dry_run: bool,
    pub events: Vec<RestampEvent>,
}

impl RestampReport {
    pub fn exit_code(&self) -> u8 {
        exit_of(self.events.iter().any(RestampEvent::is_problem))
    }
}

/// `csis lineage restamp` on the canonical runtime `runtime`, for the
/// series in `only` (none = all). The context is opened for writing
/// unless `dry_run`.
pub fn restamp(
    cx: &Context,
    runtime: &str,
    only: &[String],
    dry_run: bool,
) -> Result<RestampReport> {
    let tree = cx.tree();
    let only: BTreeSet<String> = only.iter().map(|s| csis_rules::normalize_name(s)).collect();
    let rt = if dry_run {
        None
    } else {
        Some(cx.runtime(runtime)?)
    };
    let run = csis_cache::run_id_now();
    let mut ev = Vec::new();
    let mut total = 0usize;
    // Each pass restamps the heads that differ; a pinned child hashes its
    // parent's recorded fingerprint, so it can move in the next pass.
    for _pass in 0..32 {
        let session = crate::session::open_tree(tree.clone())?;
        // The records themselves (the session's lineage is the planning
        // view, without revoked heads): what is rewritten.
        let mut lineage = cx.records()?.0;
        let revs = csis_cache::Revocations::load(&session.meta)?;
        let mut moved = Vec::new();
        for ((series, rt), (current, canonical)) in session.bake_fingerprints() {
            if rt != runtime || (!only.is_empty() && !only.contains(&series)) {
                continue;
            }
            let Some(head) = csis_cache::head_unrevoked(&lineage, &revs, &series, runtime) else {
                continue;
            };
            if head.input_fingerprint.as_deref() == Some(current.as_str()) {
                continue;
            }
            moved.push((head.build_id.clone(), series, current, canonical));
        }
        if moved.is_empty() {
            break;
        }
        for (build, series, current, canonical) in &moved {
            let rec = lineage
                .builds
                .iter_mut()
                .find(|b| &b.build_id == build)
                .expect("head is recorded");
            let previous = rec.input_fingerprint.clone().unwrap_or_default();
            ev.push(RestampEvent::Restamped {
                build_id: build.clone(),
                series: series.clone(),
                previous: previous.clone(),
                current: current.clone(),
            });
            total += 1;
            if dry_run {
                continue;
            }
            rec.fingerprint_restamped.push(Restamp {
                run: run.clone(),
                previous,
                reason: Some("lineage restamp (fingerprint recipe change)".into()),
                extra: Default::default(),
            });
            rec.input_fingerprint = Some(current.clone());
            if rec.inputs.is_some() {
                rec.inputs = Some(canonical.clone());
            }
        }
        if dry_run {
            ev.push(RestampEvent::FirstPassOnly);
            break;
        }
        session.meta.save_lineage(&lineage)?;
        if let Some(rt) = &rt {
            for (build, _, current, _) in &moved {
                let tags = [(
                    tags::FINGERPRINT.to_string(),
                    current
                        .chars()
                        .take(FINGERPRINT_TAG_LEN)
                        .collect::<String>(),
                )]
                .into();
                if let Err(e) = cx.block_on(rt.retag_image(build, &tags)) {
                    ev.push(RestampEvent::RetagFailed {
                        build_id: build.clone(),
                        error: e.to_string(),
                    });
                }
            }
        }
    }
    if total == 0 {
        ev.push(RestampEvent::NothingToRestamp {
            runtime: runtime.into(),
        });
    }
    Ok(RestampReport {
        runtime: runtime.into(),
        dry_run,
        events: ev,
    })
}
