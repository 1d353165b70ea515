//! Retention and disposal plans (core.md §5.1, §5.2, §5.5, §5.6).
//!
//! Pure logic over the records: nothing here talks to a runtime. The CLI
//! (`csis dispose image`, the retention at the end of `csis build`) computes
//! a [`DisposePlan`] with [`plan_dispose`], checks live references, then
//! disposes in the plan's order (children before parents) and, for each
//! disposal read back from the runtime, calls [`forget_build`].
//!
//! Invariants (held by [`plan_dispose`], checked by a property test):
//! - no plan holds a build that is a current release (any model), pinned by
//!   an instance or by an image the tree still declares, recorded as
//!   launched, or covered by another runner's lease ([`Protections`]): a
//!   retention plan keeps them as *debt* (kept and reported, with every
//!   reason); an explicit plan (ids, `--all`) is refused, naming each reason,
//!   before anything is deleted (a deliberate difference from the original,
//!   whose explicit id disposed a current release);
//! - a retention plan counts only unrevoked builds among the N it keeps: a
//!   revoked build is never kept in place of a good one;
//! - every refusal is found before anything is deleted;
//! - a build whose parent is also in the plan comes before its parent.
//!
//! An image pin held by an image the tree no longer declares (on that
//! runtime) protects nothing: it is removed with the build it names
//! ([`DisposeItem::image_pins`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::Serialize;

use crate::age_days;
use crate::lineage::{BuildRecord, Lineage};
use crate::pins::{PinMove, Pins};
use crate::releases::Releases;

pub use crate::launch_params::{LaunchParams, LAUNCH_PARAMS_FILE};

/// How many builds of a series survive on a runtime: 0 on an ephemeral
/// runtime, else the image's `retention.keep`, else the runtime's
/// `retention_keep`, else `None` (keep all). Base-image series have no
/// `retention` field: pass `None` as `image_keep`.
pub fn keep_for(
    ephemeral: bool,
    image_keep: Option<u32>,
    runtime_keep: Option<u32>,
) -> Option<u32> {
    if ephemeral {
        Some(0)
    } else {
        image_keep.or(runtime_keep)
    }
}

/// What protects builds from disposal, gathered from the records.
#[derive(Debug, Clone, Default)]
pub struct Protections {
    /// build -> models it is the current release of.
    pub released: BTreeMap<String, Vec<String>>,
    /// build -> instances pinned to it.
    pub instance_pins: BTreeMap<String, Vec<String>>,
    /// build -> image pin keys (`image@runtime`) pinned to it, held by an
    /// image the tree declares there (so its next bake reads the pin).
    pub image_pins: BTreeMap<String, Vec<String>>,
    /// build -> image pin keys held by an image the tree no longer declares
    /// there: they protect nothing and are removed with the build.
    pub unneeded_pins: BTreeMap<String, Vec<String>>,
    /// build -> instances launched from it.
    pub launched: BTreeMap<String, Vec<String>>,
    /// build -> other runners whose live lease covers it.
    pub leased: BTreeMap<String, Vec<String>>,
    /// Images under `parent_policy: follow` (their pin moves with their
    /// next bake; a pinned image's moves with `csis upgrade image`).
    pub follow: BTreeSet<String>,
}

impl Protections {
    /// Every image pin counts as needed; see [`Protections::needing`].
    pub fn from_records(pins: &Pins, releases: &Releases, launches: &LaunchParams) -> Self {
        let mut p = Protections::default();
        for (model, m) in &releases.current {
            for b in m.values() {
                p.released.entry(b.clone()).or_default().push(model.clone());
            }
        }
        for (inst, b) in &pins.instances {
            p.instance_pins
                .entry(b.clone())
                .or_default()
                .push(inst.clone());
        }
        for (key, b) in &pins.images {
            p.image_pins.entry(b.clone()).or_default().push(key.clone());
        }
        p.launched = launches.launched();
        p
    }

    /// Only the image pins `needed` answers true for (by their key,
    /// `image@runtime` or a legacy bare `image`) protect; the others move to
    /// [`Protections::unneeded_pins`].
    pub fn needing(mut self, needed: &dyn Fn(&str) -> bool) -> Self {
        let mut keep: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (build, keys) in std::mem::take(&mut self.image_pins) {
            for k in keys {
                if needed(&k) {
                    keep.entry(build.clone()).or_default().push(k);
                } else {
                    self.unneeded_pins.entry(build.clone()).or_default().push(k);
                }
            }
        }
        self.image_pins = keep;
        self
    }

    /// Name the images under `parent_policy: follow` (for the hints).
    pub fn with_follow(mut self, follow: BTreeSet<String>) -> Self {
        self.follow = follow;
        self
    }

    /// A build another live runner's lease covers (`holder`).
    pub fn lease(&mut self, build: &str, holder: &str) {
        self.leased
            .entry(build.to_string())
            .or_default()
            .push(holder.to_string());
    }

    /// Every reason the build may not be disposed, in a fixed order
    /// (released, pinned by an image, pinned by an instance, launched,
    /// leased); empty when nothing protects it.
    pub fn reasons(&self, build: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = self.released.get(build) {
            out.push(format!(
                "released on {} {}: release another build there first",
                if m.len() == 1 { "model" } else { "models" },
                m.join(", ")
            ));
        }
        if let Some(keys) = self.image_pins.get(build) {
            for k in keys {
                let image = k.split_once('@').map_or(k.as_str(), |(i, _)| i);
                if self.follow.contains(image) {
                    out.push(format!(
                        "pinned by image {k} (its parent build): {image} follows its parent, its next bake moves the pin"
                    ));
                } else {
                    out.push(format!(
                        "pinned by image {k} (its parent build): move the pin first (`csis upgrade image {image}`)"
                    ));
                }
            }
        }
        if let Some(i) = self.instance_pins.get(build) {
            out.push(format!(
                "pinned by instance {}: decommission first",
                i.join(", ")
            ));
        }
        if let Some(i) = self.launched.get(build) {
            out.push(format!(
                "launched by instance {}: decommission first",
                i.join(", ")
            ));
        }
        if let Some(h) = self.leased.get(build) {
            out.push(format!(
                "covered by the live lease of {} (another runner bakes on it)",
                h.join(", ")
            ));
        }
        out
    }

    /// Why an automatic plan (retention) keeps this build, if it does.
    pub fn retention_keeps(&self, build: &str) -> Option<String> {
        let r = self.reasons(build);
        (!r.is_empty()).then(|| r.join("; "))
    }
}

/// What to dispose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Explicit build ids.
    Ids(Vec<String>),
    /// Every recorded build on `--runtime`.
    All,
    /// The retention plan.
    Retention,
}

/// A `dispose image` request.
#[derive(Debug, Clone)]
pub struct DisposeRequest {
    pub selection: Selection,
    /// `--runtime RT`.
    pub runtime: Option<String>,
    /// `--min-age DAYS`: never dispose a build younger than this.
    pub min_age_days: Option<u64>,
}

/// One build in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisposeItem {
    pub build_id: String,
    pub series: String,
    pub runtime: String,
    pub parent: Option<String>,
    pub run: Option<String>,
    /// Image pin keys that will be removed with it: held by images the tree
    /// no longer declares there (a pin some image needs refuses the plan).
    pub image_pins: Vec<String>,
}

/// A build kept although a plan would drop it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Debt {
    pub build_id: String,
    pub series: String,
    pub runtime: String,
    pub reason: String,
}

/// The plan: what to dispose, in order (children first), and what is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DisposePlan {
    pub items: Vec<DisposeItem>,
    pub debt: Vec<Debt>,
}

impl DisposePlan {
    /// Runtimes the plan touches.
    pub fn runtimes(&self) -> BTreeSet<String> {
        self.items.iter().map(|i| i.runtime.clone()).collect()
    }
}

/// Why a dispose request was refused (all found before anything is deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The records a plan reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInputs<'a> {
    pub lineage: &'a Lineage,
    pub protections: &'a Protections,
    /// Runtimes declared in the tree (a record naming another is refused).
    pub configured_runtimes: &'a BTreeSet<String>,
    /// Revoked builds: never one of the N a retention keeps.
    pub revoked: &'a BTreeSet<String>,
    pub now: SystemTime,
}

fn too_young(rec: &BuildRecord, min_age: Option<u64>, now: SystemTime) -> Option<String> {
    let min = min_age?;
    match rec.run.as_deref().and_then(|r| age_days(r, now)) {
        Some(age) if age >= min => None,
        Some(age) => Some(format!("{age} day(s) old, younger than --min-age {min}")),
        None => Some(format!("age unknown (run {:?}), --min-age {min}", rec.run)),
    }
}

fn item(rec: &BuildRecord, runtime: &str, p: &Protections) -> DisposeItem {
    DisposeItem {
        build_id: rec.build_id.clone(),
        series: rec.series.clone(),
        runtime: runtime.to_string(),
        parent: rec.parent.clone(),
        run: rec.run.clone(),
        image_pins: p
            .unneeded_pins
            .get(&rec.build_id)
            .cloned()
            .unwrap_or_default(),
    }
}

fn debt(rec: &BuildRecord, runtime: &str, reason: String) -> Debt {
    Debt {
        build_id: rec.build_id.clone(),
        series: rec.series.clone(),
        runtime: runtime.to_string(),
        reason,
    }
}

/// The retention plan (core.md §5.2): per (series, runtime) with a keep
/// count, the newest `keep` unrevoked builds (by run id, then append order)
/// are kept and every other is dropped (a revoked build never counts among
/// the kept); each dropped build is disposable unless protected (debt).
/// `keep(series, runtime)` answers [`keep_for`]. Records without a runtime
/// are never planned (where they live is unknown).
pub fn retention_plan(
    inp: PlanInputs<'_>,
    runtime: Option<&str>,
    min_age: Option<u64>,
    keep: &dyn Fn(&str, &str) -> Option<u32>,
) -> DisposePlan {
    let mut groups: BTreeMap<(String, String), Vec<(usize, &BuildRecord)>> = BTreeMap::new();
    for (i, b) in inp.lineage.builds.iter().enumerate() {
        let Some(rt) = b.runtime.as_deref() else {
            continue;
        };
        if runtime.is_some_and(|r| r != rt) {
            continue;
        }
        groups
            .entry((b.series.clone(), rt.to_string()))
            .or_default()
            .push((i, b));
    }
    let mut plan = DisposePlan::default();
    for ((series, rt), mut builds) in groups {
        let Some(k) = keep(&series, &rt) else {
            continue;
        };
        builds.sort_by(|a, b| crate::lineage::run_order(a.1, b.1).then(a.0.cmp(&b.0)));
        let kept: BTreeSet<usize> = builds
            .iter()
            .rev()
            .filter(|(_, b)| !inp.revoked.contains(&b.build_id))
            .take(k as usize)
            .map(|(i, _)| *i)
            .collect();
        for (_, rec) in builds.into_iter().filter(|(i, _)| !kept.contains(i)) {
            if let Some(why) = inp.protections.retention_keeps(&rec.build_id) {
                plan.debt.push(debt(rec, &rt, why));
            } else if let Some(why) = too_young(rec, min_age, inp.now) {
                plan.debt.push(debt(rec, &rt, why));
            } else {
                plan.items.push(item(rec, &rt, inp.protections));
            }
        }
    }
    plan.items = children_first(plan.items, inp.lineage);
    plan
}

/// Plan a `dispose image` request; every refusal is collected before
/// returning, so nothing is deleted when any applies.
pub fn plan_dispose(
    inp: PlanInputs<'_>,
    req: &DisposeRequest,
    keep: &dyn Fn(&str, &str) -> Option<u32>,
) -> Result<DisposePlan, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let mut plan = DisposePlan::default();
    let rt_filter = req.runtime.as_deref();
    if let Some(rt) = rt_filter {
        if !inp.configured_runtimes.contains(rt) {
            refusals.push(Refusal(format!(
                "runtime {rt} is not configured in this tree"
            )));
        }
    }
    match &req.selection {
        Selection::Retention => {
            plan = retention_plan(inp, rt_filter, req.min_age_days, keep);
        }
        Selection::All => {
            let Some(rt) = rt_filter else {
                refusals.push(Refusal(
                    "--all needs --runtime RT (disposing every build everywhere is never implied)"
                        .into(),
                ));
                return Err(refusals);
            };
            for rec in inp
                .lineage
                .builds
                .iter()
                .filter(|b| b.runtime.as_deref() == Some(rt))
            {
                if let Some(why) = too_young(rec, req.min_age_days, inp.now) {
                    plan.debt.push(debt(rec, rt, why));
                    continue;
                }
                refuse_protected(rec, inp.protections, &mut refusals);
                plan.items.push(item(rec, rt, inp.protections));
            }
        }
        Selection::Ids(ids) => {
            let mut seen = BTreeSet::new();
            for id in ids {
                if !seen.insert(id.as_str()) {
                    continue;
                }
                let Some(rec) = inp.lineage.find(id) else {
                    refusals.push(Refusal(format!(
                        "build {id} is not recorded in lineage: adopt it with `csis state import` \
                         or leave it to the orphan sweep; an unrecorded image is never deleted blind"
                    )));
                    continue;
                };
                let Some(rt) = rec.runtime.as_deref() else {
                    refusals.push(Refusal(format!(
                        "build {id} ({}) records no runtime: cannot tell where it lives",
                        rec.series
                    )));
                    continue;
                };
                if let Some(f) = rt_filter {
                    if f != rt {
                        refusals.push(Refusal(format!(
                            "build {id} ({}) is on runtime {rt}, not {f}",
                            rec.series
                        )));
                        continue;
                    }
                }
                if !inp.configured_runtimes.contains(rt) {
                    refusals.push(Refusal(format!(
                        "build {id} ({}) is recorded on runtime {rt}, which is not configured in this tree",
                        rec.series
                    )));
                    continue;
                }
                if let Some(why) = too_young(rec, req.min_age_days, inp.now) {
                    refusals.push(Refusal(format!("build {id} ({}): {why}", rec.series)));
                    continue;
                }
                refuse_protected(rec, inp.protections, &mut refusals);
                plan.items.push(item(rec, rt, inp.protections));
            }
        }
    }
    // A record on an unconfigured runtime never reaches a plan.
    for it in &plan.items {
        if !inp.configured_runtimes.contains(&it.runtime)
            && !refusals.iter().any(|r| r.0.contains(&it.runtime))
        {
            refusals.push(Refusal(format!(
                "build {} ({}) is recorded on runtime {}, which is not configured in this tree",
                it.build_id, it.series, it.runtime
            )));
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    plan.items = children_first(plan.items, inp.lineage);
    Ok(plan)
}

/// One refusal per reason that protects the build (released, pinned,
/// launched, leased): an explicit plan never disposes it.
fn refuse_protected(rec: &BuildRecord, p: &Protections, refusals: &mut Vec<Refusal>) {
    for why in p.reasons(&rec.build_id) {
        refusals.push(Refusal(format!(
            "build {} ({}) is {why}",
            rec.build_id, rec.series
        )));
    }
}

/// Order items so that a build with an ancestor (through the lineage's
/// `parent` links, planned or not) in the list comes before that ancestor.
/// Stable otherwise: more planned ancestors first, then the newer run first,
/// then build id.
pub fn children_first(items: Vec<DisposeItem>, lineage: &Lineage) -> Vec<DisposeItem> {
    let planned: BTreeSet<&str> = items.iter().map(|i| i.build_id.as_str()).collect();
    let depth = |it: &DisposeItem| {
        let mut d = 0usize;
        let mut cur = it.parent.clone();
        let mut seen = BTreeSet::new();
        while let Some(p) = cur {
            if !seen.insert(p.clone()) {
                break;
            }
            if planned.contains(p.as_str()) {
                d += 1;
            }
            cur = lineage.find(&p).and_then(|r| r.parent.clone());
        }
        d
    };
    let mut keyed: Vec<(usize, DisposeItem)> =
        items.iter().map(|i| (depth(i), i.clone())).collect();
    keyed.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| b.1.run.cmp(&a.1.run))
            .then_with(|| a.1.build_id.cmp(&b.1.build_id))
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// After a disposal read back from the runtime: remove the record, and the
/// image pins `unneeded` names that still point at the build (those its plan
/// found held by images the tree no longer declares; journaled `op:
/// dispose`). A pin some image needs never reaches here: its build is not
/// disposed. Returns the image pin keys removed. The record goes (git
/// history keeps it), as in the original.
pub fn forget_build(
    lineage: &mut Lineage,
    pins: &mut Pins,
    build_id: &str,
    unneeded: &[String],
    run: Option<&str>,
) -> Vec<String> {
    lineage.builds.retain(|b| b.build_id != build_id);
    let keys: Vec<String> = pins
        .images
        .iter()
        .filter(|(k, b)| b.as_str() == build_id && unneeded.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &keys {
        pins.images.remove(k);
        let (name, runtime) = match k.split_once('@') {
            Some((n, r)) => (n.to_string(), Some(r.to_string())),
            None => (k.clone(), None),
        };
        pins.upgrades.push(PinMove {
            kind: "image".into(),
            name,
            from: Some(build_id.to_string()),
            to: String::new(),
            run: run.map(str::to_string),
            op: "dispose".into(),
            runtime,
            extra: BTreeMap::new(),
        });
    }
    keys
}

#[cfg(test)]
mod tests;
