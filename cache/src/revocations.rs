//! `meta-state/revocations.yaml`: builds that must never be baked from,
//! released or chosen as a series head (csis's `csis revoke`, after HCP
//! Packer's revocation).
//!
//! Shape: `revocations: [ {build_id, series, runtime, reason, run, via?} ]`,
//! append-only; `via` names the build whose `--descendants` revocation
//! reached this one. Unknown keys are kept.
//!
//! The graph compile and the planner use [`Revocations::is_revoked`] and
//! [`head_unrevoked`]: a series whose head is revoked has no usable head, so
//! its children cannot bake until a new build of it exists.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lineage::{BuildRecord, Lineage};

pub const REVOCATIONS_FILE: &str = "revocations.yaml";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Revocations {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub revocations: Vec<Revocation>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revocation {
    pub build_id: String,
    #[serde(default)]
    pub series: Option<String>,
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub run: Option<String>,
    /// The build whose `--descendants` revocation reached this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Why a revocation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevokeError {
    #[error("build {0} is not recorded in lineage: nothing to revoke")]
    Unrecorded(String),
}

impl Revocations {
    /// Is this build revoked?
    pub fn is_revoked(&self, build_id: &str) -> bool {
        self.revocations.iter().any(|r| r.build_id == build_id)
    }

    /// The revocation of a build, if any.
    pub fn get(&self, build_id: &str) -> Option<&Revocation> {
        self.revocations.iter().find(|r| r.build_id == build_id)
    }

    /// Every revoked build id.
    pub fn ids(&self) -> BTreeSet<String> {
        self.revocations
            .iter()
            .map(|r| r.build_id.clone())
            .collect()
    }
}

/// Every recorded build that descends from `build_id` (children,
/// grandchildren, ... through the records' `parent`), in a stable order
/// (breadth first, then append order). Does not include `build_id`.
pub fn descendants(lineage: &Lineage, build_id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    seen.insert(build_id);
    let mut frontier = vec![build_id.to_string()];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for b in &lineage.builds {
            if let Some(p) = &b.parent {
                if frontier.iter().any(|f| f == p) && seen.insert(&b.build_id) {
                    next.push(b.build_id.clone());
                }
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

/// Revoke `build_id` (and, with `with_descendants`, every recorded build
/// descending from it). Returns the builds newly revoked, in order; builds
/// already revoked are left as they are. Refused for an unrecorded build.
pub fn revoke(
    lineage: &Lineage,
    revs: &mut Revocations,
    build_id: &str,
    with_descendants: bool,
    reason: Option<&str>,
    run: Option<&str>,
) -> Result<Vec<String>, RevokeError> {
    let Some(root) = lineage.find(build_id) else {
        return Err(RevokeError::Unrecorded(build_id.to_string()));
    };
    let mut targets: Vec<(&BuildRecord, Option<String>)> = vec![(root, None)];
    if with_descendants {
        for d in descendants(lineage, build_id) {
            if let Some(r) = lineage.find(&d) {
                targets.push((r, Some(build_id.to_string())));
            }
        }
    }
    let mut newly = Vec::new();
    for (rec, via) in targets {
        if revs.is_revoked(&rec.build_id) {
            continue;
        }
        revs.revocations.push(Revocation {
            build_id: rec.build_id.clone(),
            series: Some(rec.series.clone()),
            runtime: rec.runtime.clone(),
            reason: reason.map(str::to_string),
            run: run.map(str::to_string),
            via,
            extra: BTreeMap::new(),
        });
        newly.push(rec.build_id.clone());
    }
    Ok(newly)
}

/// The series head on a runtime that is not revoked: the last-appended
/// record of the series on the runtime, unless that one is revoked, in which
/// case the series has NO usable head (an older build is never silently
/// promoted back: a revocation means "bake a new one").
pub fn head_unrevoked<'a>(
    lineage: &'a Lineage,
    revs: &Revocations,
    series: &str,
    runtime: &str,
) -> Option<&'a BuildRecord> {
    lineage
        .head(series, runtime)
        .filter(|h| !revs.is_revoked(&h.build_id))
}

/// The records as the planner and the graph compile must see them once
/// revocations apply: every record of a (series, runtime) whose head is
/// revoked is left out (so the series has no head there and its bake is due:
/// "no build yet"). Image pins are kept as they are: a pinned child whose
/// pin names a revoked build is held by the plan (never baked from it, never
/// moved unasked) until `csis upgrade image` moves the pin. `meta-state/`
/// itself is not changed.
pub fn planning_view(
    lineage: &Lineage,
    pins: &crate::Pins,
    revs: &Revocations,
) -> (Lineage, crate::Pins) {
    if revs.revocations.is_empty() {
        return (lineage.clone(), pins.clone());
    }
    // The head of each (series, runtime): the newest by run id.
    let mut heads: std::collections::HashMap<(&str, Option<&str>), &BuildRecord> =
        Default::default();
    for b in &lineage.builds {
        let e = heads
            .entry((b.series.as_str(), b.runtime.as_deref()))
            .or_insert(b);
        if crate::lineage::run_order(b, e).is_ge() {
            *e = b;
        }
    }
    let blocked: BTreeSet<(String, Option<String>)> = heads
        .into_iter()
        .filter(|(_, h)| revs.is_revoked(&h.build_id))
        .map(|((s, r), _)| (s.to_string(), r.map(str::to_string)))
        .collect();
    let mut l = lineage.clone();
    l.builds
        .retain(|b| !blocked.contains(&(b.series.clone(), b.runtime.clone())));
    (l, pins.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, series: &str, parent: &str) -> BuildRecord {
        let mut r = BuildRecord::new(id, series, "rt");
        r.parent = Some(parent.into());
        r
    }

    fn lineage() -> Lineage {
        let mut l = Lineage::default();
        l.add_build(rec("b1", "base", "vendor"));
        l.add_build(rec("w1", "web", "b1"));
        l.add_build(rec("a1", "app", "w1"));
        l.add_build(rec("b2", "base", "vendor"));
        l.add_build(rec("w2", "web", "b2"));
        l
    }

    #[test]
    fn descendants_follow_parents_transitively() {
        let l = lineage();
        assert_eq!(descendants(&l, "b1"), vec!["w1", "a1"]);
        assert_eq!(descendants(&l, "b2"), vec!["w2"]);
        assert!(descendants(&l, "a1").is_empty());
    }

    #[test]
    fn revoke_with_and_without_descendants() {
        let l = lineage();
        let mut r = Revocations::default();
        assert_eq!(
            revoke(&l, &mut r, "b1", false, Some("cve"), None).unwrap(),
            vec!["b1"]
        );
        assert!(r.is_revoked("b1"));
        assert!(!r.is_revoked("w1"));
        let more = revoke(&l, &mut r, "b1", true, None, None).unwrap();
        assert_eq!(more, vec!["w1", "a1"]);
        assert_eq!(r.get("a1").unwrap().via.as_deref(), Some("b1"));
        assert!(!r.is_revoked("w2"));
        assert_eq!(
            revoke(&l, &mut r, "nope", false, None, None),
            Err(RevokeError::Unrecorded("nope".into()))
        );
    }

    #[test]
    fn a_revoked_head_leaves_no_head() {
        let l = lineage();
        let mut r = Revocations::default();
        assert_eq!(head_unrevoked(&l, &r, "base", "rt").unwrap().build_id, "b2");
        revoke(&l, &mut r, "b2", false, None, None).unwrap();
        assert!(head_unrevoked(&l, &r, "base", "rt").is_none());
        // revoking an older build does not affect the head
        let mut r2 = Revocations::default();
        revoke(&l, &mut r2, "b1", false, None, None).unwrap();
        assert_eq!(
            head_unrevoked(&l, &r2, "base", "rt").unwrap().build_id,
            "b2"
        );
    }

    #[test]
    fn planning_view_drops_revoked_heads_and_pins() {
        let l = lineage();
        let mut pins = crate::Pins::default();
        pins.images.insert("web@rt".into(), "b2".into());
        pins.images.insert("app@rt".into(), "w1".into());
        let mut r = Revocations::default();
        let (same, p) = planning_view(&l, &pins, &r);
        assert_eq!(same, l);
        assert_eq!(p, pins);
        revoke(&l, &mut r, "b2", false, None, None).unwrap();
        revoke(&l, &mut r, "w1", false, None, None).unwrap();
        let (v, p) = planning_view(&l, &pins, &r);
        // base's head b2 is revoked: no base record is left (no head)
        assert!(v.head("base", "rt").is_none());
        // web's head w2 is not revoked: web keeps its records (w1 too)
        assert_eq!(v.head("web", "rt").unwrap().build_id, "w2");
        assert!(v.find("w1").is_some());
        // the pins stay: the plan holds a child pinned to a revoked build
        assert_eq!(p, pins);
    }

    #[test]
    fn round_trips_through_meta_state() {
        use crate::MetaState;
        let t = tempfile::tempdir().unwrap();
        let m = MetaState::of_tree(t.path());
        assert!(Revocations::load(&m).unwrap().revocations.is_empty());
        let mut r = Revocations::default();
        revoke(&lineage(), &mut r, "w1", true, Some("bad"), Some("run1")).unwrap();
        assert!(r.save(&m).unwrap());
        let back = Revocations::load(&m).unwrap();
        assert_eq!(back, r);
        assert!(back.is_revoked("a1"));
    }
}
