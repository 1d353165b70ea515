//! The plan policy: when a bake is due beyond the engine's own rules
//! (`--force-bake` ([`ForceBake`]), the update policy's `refresh_days`, a
//! moved pin, a vendor tag that moved) and the planner csis uses
//! ([`planner`], [`planner_with`]).

use std::collections::HashMap;
use std::time::Duration;

use csis_engine::{Node, Planner, Reason, RuleCx};

use super::vocabulary::{NodeKind, PINNED_PARENT_ATTR};

/// `--force-bake` values: `all`, `SERIES`, `SERIES@RUNTIME` (repeatable).
#[derive(Debug, Clone, Default)]
pub struct ForceBake {
    pub all: bool,
    pub items: Vec<(String, Option<String>)>,
}

impl ForceBake {
    pub fn parse(values: &[String]) -> ForceBake {
        let mut f = ForceBake::default();
        for v in values.iter().flat_map(|v| v.split(',')) {
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            if v == "all" {
                f.all = true;
                continue;
            }
            match v.split_once('@') {
                Some((s, r)) => f.items.push((
                    crate::tree::normalize_name(s),
                    Some(crate::tree::normalize_name(r)),
                )),
                None => f.items.push((crate::tree::normalize_name(v), None)),
            }
        }
        f
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.items.is_empty()
    }

    /// Does this force the bake node `node`?
    pub fn forces(&self, node: &Node) -> bool {
        if node.kind() != NodeKind::Bake {
            return false;
        }
        if self.all {
            return true;
        }
        let (Some(s), Some(r)) = (node.attr("series"), node.attr("runtime")) else {
            return false;
        };
        self.items
            .iter()
            .any(|(fs, fr)| fs == s && fr.as_deref().is_none_or(|fr| fr == r))
    }
}

/// The update-policy rule: a base image whose head is at least
/// `update.refresh_days` old is due (`update policy: head <b> is <n> days old`).
pub fn refresh_rule() -> impl csis_engine::Rule {
    |cx: &RuleCx<'_>| {
        let days: u64 = cx.node.attr("refresh_days")?.parse().ok()?;
        let rec = cx.record?;
        let age = rec.age?;
        let age_days = age.as_secs() / 86_400;
        (age >= Duration::from_secs(days * 86_400)).then(|| {
            Reason::custom(
                "update-policy",
                format!(
                    "update policy: head {} is {age_days} days old (refresh_days: {days})",
                    rec.build.as_deref().unwrap_or("?")
                ),
            )
        })
    }
}

/// The upgrade rule: a pinned image whose pin names another parent build
/// than its head was baked from is due (`parent pin moved <from> -> <to>`;
/// `csis upgrade image` moves a pin).
pub fn pin_moved_rule() -> impl csis_engine::Rule {
    |cx: &RuleCx<'_>| {
        let pin = cx.node.attr(PINNED_PARENT_ATTR)?;
        let from = cx.record?.deps.get("parent")?;
        (from != pin)
            .then(|| Reason::custom("pin-moved", format!("parent pin moved {from} -> {pin}")))
    }
}

/// The plan's code for a bake whose inputs were built before
/// ([`reinstate_rule`]).
pub const REINSTATE: &str = "reinstate";

/// The build a bake would start from, as this run will leave its parent:
/// the parent's head when the parent is current, the build it reinstates,
/// or none when the parent really bakes (a build that does not exist yet).
fn parent_after_run<'a>(cx: &RuleCx<'a>) -> Option<Option<&'a str>> {
    let Some(pin) = cx.node.attr(PINNED_PARENT_ATTR) else {
        let Some((_, d)) = cx.hashed_deps().find(|(name, _)| *name == "parent") else {
            // A base image: its parent is the vendor image.
            return Some(None);
        };
        let rec = cx.record_of(d)?;
        return match cx.decision(d) {
            Some(dec) if dec.is_due() => {
                if dec.reason().map(Reason::code) != Some(REINSTATE) {
                    return None;
                }
                Some(rec.earlier_with(cx.fingerprint_of(d))?.build.as_deref())
            }
            _ => Some(rec.build.as_deref()),
        };
    };
    Some(Some(pin))
}

/// Nothing is baked twice: a bake whose fingerprint differs from its head's
/// but equals the one of an earlier build of the series, made from the same
/// parent build the bake would start from (an input changed, then changed
/// back), takes that build as the head again instead of baking it anew
/// (`inputs of build <b> (run <r>): it becomes the head again, nothing
/// bakes`). Not for a build the update policy would re-bake for its age.
/// The bake checks again that the build stands before it takes it.
pub fn reinstate_rule() -> impl csis_engine::Rule {
    |cx: &RuleCx<'_>| {
        let rec = cx.record?;
        if rec.fingerprint == Some(cx.fingerprint) {
            return None;
        }
        let e = rec.earlier_with(cx.fingerprint)?;
        let build = e.build.as_deref()?;
        if let (Some(days), Some(age)) = (
            cx.node
                .attr("refresh_days")
                .and_then(|d| d.parse::<u64>().ok()),
            e.age,
        ) {
            if age >= Duration::from_secs(days * 86_400) {
                return None;
            }
        }
        let parent = parent_after_run(cx)?;
        if e.deps.get("parent").map(String::as_str) != parent {
            return None;
        }
        Some(Reason::custom(
            REINSTATE,
            format!("inputs of build {build} again: it becomes the head again, nothing bakes"),
        ))
    }
}

/// The vendor tags that name another image than their base's head was
/// baked from: the head's build id -> `(reference, recorded id, id now)`.
/// Read from the runtimes before planning (`csis_ops::vendor`); the
/// compile knows none.
pub type VendorMoves = HashMap<String, (String, String, String)>;

/// The moved-vendor rule: a base image whose head was baked from a vendor
/// tag that names another image now is due (`vendor image <ref> moved:
/// <old id> -> <new id>`).
pub fn vendor_moved_rule(moved: &VendorMoves) -> impl csis_engine::Rule + '_ {
    move |cx: &RuleCx<'_>| {
        if moved.is_empty() || cx.node.kind() != NodeKind::Bake.as_str() {
            return None;
        }
        let (reference, old, new) = moved.get(cx.record?.build.as_deref()?)?;
        Some(Reason::custom(
            "vendor-moved",
            format!("vendor image {reference} moved: {old} -> {new}"),
        ))
    }
}

/// The planner csis uses without vendor reads ([`planner_with`]).
pub fn planner(force: &ForceBake) -> Planner<'_> {
    static NONE: std::sync::OnceLock<VendorMoves> = std::sync::OnceLock::new();
    planner_with(force, NONE.get_or_init(VendorMoves::new))
}

/// The planner csis uses: forced, no build yet, inputs built before
/// (reinstate), parent moved (follow), parent re-bakes this run (follow),
/// vendor tag moved (a base), parent pin moved (pinned), inputs changed,
/// update policy.
pub fn planner_with<'a>(force: &'a ForceBake, vendor: &'a VendorMoves) -> Planner<'a> {
    let mut p = Planner::new();
    if !force.is_empty() {
        p = p.forced(move |n| force.forces(n));
    }
    p.rule(csis_engine::plan::rules::no_record())
        .rule(reinstate_rule())
        .rule(csis_engine::plan::rules::dep_moved())
        .rule(csis_engine::plan::rules::dep_due())
        .rule(vendor_moved_rule(vendor))
        .rule(pin_moved_rule())
        .rule(csis_engine::plan::rules::inputs_changed())
        .rule(refresh_rule())
}
