//! The state query's judgement (core.md §6): records (`meta-state/`) against
//! what each runtime answered. Pure: the CLI asks the runtimes and hands the
//! answers in as [`RuntimeView`]s; a runtime or hook that could not answer
//! becomes an `unavailable` line and never a claim (silence is never a claim).
//!
//! Image rules (per runtime that answered):
//! - **missing**: a recorded build on R is not among R's tagged images;
//!   hard iff an instance or image pin names it, a model releases it, or it
//!   is its series' head on R (the next child would bake from it);
//! - **foreign**: a tagged image on R that lineage does not record;
//! - **changed**: recorded and present, but the tag `csis_series`,
//!   `csis_parent` or `csis_run` differs from the record, or `csis_fingerprint`
//!   is not a prefix of the recorded fingerprint (a tag the image never
//!   carried is not drift);
//! - **stale**: an image pin `img@rt` is behind its parent series' head on rt;
//! - **held**: a tag naming one of this tree's series on R (docker:
//!   `<repository>:<series>`, `<repository>:<series>--<model>`) is held by
//!   another tree's build (two trees on one repository); soft.
//!
//! Pin and release rules: a pin or a current release naming a build lineage
//! does not record is **missing** and hard; one naming a revoked build is
//! **revoked** and hard (a pinned child would bake from it, a model hands
//! it out). Instances (where the runtime lists them): one running a revoked
//! build is drift `revoked`; one booted from another build than its pin is
//! `changed` (a note when a pending replacement onto the pin explains it);
//! a stopped one is a note.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::releases::Releases;
use crate::revocations::{head_unrevoked, Revocations};
use csis_schema::tags;

/// Length of the fingerprint prefix carried in `csis_fingerprint`.
pub const FINGERPRINT_TAG_LEN: usize = 16;

/// One image as a runtime reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenImage {
    pub build_id: String,
    pub name: Option<String>,
    pub created: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// One instance/container as a runtime reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenInstance {
    pub id: String,
    pub name: Option<String>,
    pub image: Option<String>,
    /// `running`, `stopped`, `absent`, `unknown`.
    pub power: String,
}

/// What one runtime answered. `Err(why)` = it could not answer.
#[derive(Debug, Clone)]
pub struct RuntimeView {
    pub runtime: String,
    pub images: Result<Vec<SeenImage>, String>,
    /// None = the runtime does not list instances (no claim either way).
    pub instances: Option<Result<Vec<SeenInstance>, String>>,
    /// Tags naming a series (docker: `<repository>:<series>`,
    /// `<repository>:<series>--<model>`) held by another tree's build.
    pub held_tags: Vec<HeldTag>,
}

/// A tag naming a series that a build of another tree holds (two trees on
/// one repository): whoever pulls it gets the other tree's build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldTag {
    /// The tag in full (`<repository>:<series>`).
    pub tag: String,
    pub series: String,
    /// The other tree's build that holds it.
    pub build_id: String,
    /// The other tree's config id (its `csis_config`).
    pub config: String,
}

/// One drift entry (the original's shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// `image`, `pin`, `instance`, `release`.
    pub kind: String,
    pub name: String,
    /// `missing`, `foreign`, `changed`, `stale`, `revoked`.
    pub drift: String,
    pub detail: String,
    pub hard: bool,
}

/// `generated/state-report.json`:
/// `{run, reality, drift: [{kind, name, drift, detail, hard}], unavailable, notes, summary}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateReport {
    #[serde(default)]
    pub run: Option<String>,
    pub reality: Value,
    pub drift: Vec<Drift>,
    pub unavailable: Vec<String>,
    pub notes: Vec<String>,
    pub summary: BTreeMap<String, usize>,
}

impl StateReport {
    pub fn has_hard(&self) -> bool {
        self.drift.iter().any(|d| d.hard)
    }

    /// `--strict`: hard drift, any missing, foreign or changed (not stale),
    /// or anything unavailable (what was not checked is not known good).
    pub fn strict_fails(&self) -> bool {
        self.has_hard()
            || !self.unavailable.is_empty()
            || self
                .drift
                .iter()
                .any(|d| matches!(d.drift.as_str(), "missing" | "foreign" | "changed"))
    }

    /// Drift entries that concern one runtime (image names are `<id>@<rt>`,
    /// pins `img@rt`).
    pub fn drift_on(&self, runtime: &str) -> Vec<&Drift> {
        let suffix = format!("@{runtime}");
        self.drift
            .iter()
            .filter(|d| d.name.ends_with(&suffix))
            .collect()
    }

    /// One line per unavailable, note and drift entry, or one line saying
    /// records and reality agree.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for u in &self.unavailable {
            out.push(format!("unavailable: {u}"));
        }
        for n in &self.notes {
            out.push(format!("note: {n}"));
        }
        for d in &self.drift {
            out.push(format!(
                "{} {}: {}: {}{}",
                d.kind,
                d.name,
                d.drift,
                d.detail,
                if d.hard { " [HARD]" } else { "" }
            ));
        }
        if self.drift.is_empty() && self.notes.is_empty() && self.unavailable.is_empty() {
            out.push("no drift: records and reality agree".to_string());
        } else if self.drift.is_empty() {
            out.push("no drift: records and reality agree where reality answered".to_string());
        }
        out
    }
}

/// The records the query compares with.
#[derive(Debug, Clone, Copy)]
pub struct Records<'a> {
    pub lineage: &'a Lineage,
    pub pins: &'a Pins,
    pub revocations: &'a Revocations,
    pub releases: &'a Releases,
    /// The images under `parent_policy: follow`: their pin only records
    /// what their head was baked from (the next bake follows the head).
    pub follow: &'a BTreeSet<String>,
    /// `image -> parent series` for every declared image (for `stale`).
    pub image_parents: &'a BTreeMap<String, String>,
}

/// The tag disagreements between a record and an image's tags (field,
/// record value, tag value). A tag the image never carried, or a field the
/// record does not hold, is no disagreement.
pub fn tag_disagreements(
    rec: &BuildRecord,
    tags: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut eq = |field: &str, key: &str, recv: Option<&str>| {
        if let (Some(r), Some(t)) = (recv, tags.get(key)) {
            if r != t {
                out.push((field.to_string(), r.to_string(), t.clone()));
            }
        }
    };
    eq("series", tags::SERIES, Some(&rec.series));
    eq("parent", tags::PARENT, rec.parent.as_deref());
    eq("run", tags::RUN, rec.run.as_deref());
    if let (Some(fp), Some(t)) = (
        rec.input_fingerprint.as_deref(),
        tags.get(tags::FINGERPRINT),
    ) {
        if t.is_empty() || !fp.starts_with(t.as_str()) {
            out.push((
                "fingerprint".into(),
                fp.chars().take(FINGERPRINT_TAG_LEN).collect(),
                t.clone(),
            ));
        }
    }
    out
}

/// The tags a record says its image should carry (what `lineage relabel`
/// writes).
pub fn record_tags(rec: &BuildRecord) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    t.insert(tags::SERIES.to_string(), rec.series.clone());
    if let Some(p) = &rec.parent {
        t.insert(tags::PARENT.to_string(), p.clone());
    }
    if let Some(r) = &rec.run {
        t.insert(tags::RUN.to_string(), r.clone());
    }
    if let Some(f) = &rec.input_fingerprint {
        t.insert(
            tags::FINGERPRINT.to_string(),
            f.chars().take(FINGERPRINT_TAG_LEN).collect(),
        );
    }
    t
}

/// A record built from a foreign image's tags (`csis state import`): the
/// parent and fingerprint prefix from the tags, mods unknown, and NOT
/// marked as having passed in-bake tests (a foreign image is often a failed
/// bake), so it is never released without a fresh verification.
pub fn record_from_tags(img: &SeenImage, runtime: &str, run: &str) -> Option<BuildRecord> {
    let series = img.tags.get(tags::SERIES)?.clone();
    let mut r = BuildRecord::new(img.build_id.clone(), series, runtime);
    r.name = img.name.clone();
    r.parent = img.tags.get(tags::PARENT).cloned();
    r.input_fingerprint = img.tags.get(tags::FINGERPRINT).cloned();
    r.run = img.tags.get(tags::RUN).cloned();
    let list = |k: &str| -> Vec<String> {
        img.tags
            .get(k)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    r.capabilities.identity_types = list(tags::IDENTITY_TYPES);
    r.capabilities.storage_types = list(tags::STORAGE_TYPES);
    r.tests.in_bake = false;
    r.tests.assertions = 0;
    r.imported = Some(true);
    r.imported_by = Some(run.to_string());
    Some(r)
}

fn why_revoked(revs: &Revocations, build: &str) -> Option<String> {
    revs.get(build).map(|rv| {
        rv.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    })
}

/// What needs a build: its pins, then the models it is released on.
fn needed_by(records: &Records<'_>, build: &str) -> Vec<String> {
    let mut v = pinned_by(records.pins, build);
    for (model, m) in &records.releases.current {
        for (image, b) in m {
            if b == build {
                v.push(format!("the {model} release of {image}"));
            }
        }
    }
    v
}

fn pinned_by(pins: &Pins, build: &str) -> Vec<String> {
    let mut v: Vec<String> = pins
        .instances
        .iter()
        .filter(|(_, b)| b.as_str() == build)
        .map(|(i, _)| format!("instance {i}"))
        .collect();
    v.extend(
        pins.images
            .iter()
            .filter(|(_, b)| b.as_str() == build)
            .map(|(k, _)| format!("image {k}")),
    );
    v
}

/// A tag naming one of this tree's series on `rt` (one it recorded a
/// build of there, or declares) held by another tree's build: soft drift
/// `held`, naming the other tree's config id and what fixes it.
fn held_drift(records: &Records<'_>, rt: &str, held: &[HeldTag]) -> Vec<Drift> {
    let ours = |series: &str| {
        records.image_parents.contains_key(series)
            || records.image_parents.values().any(|p| p == series)
            || records
                .lineage
                .builds
                .iter()
                .any(|b| b.series == series && b.runtime.as_deref() == Some(rt))
    };
    held.iter()
        .filter(|h| ours(&h.series))
        .map(|h| Drift {
            kind: "tag".into(),
            name: format!("{}@{rt}", h.tag),
            drift: "held".into(),
            detail: format!(
                "{} names {}, a build of {} of another tree (csis_config {}), not this tree's: whoever pulls it gets that tree's build, and this tree's bakes do not move it; give each tree its own repository (`repository:` of runtime {rt} in cfg/), or have the other tree drop the tag (`docker rmi {}`) so this tree's next bake of {} takes it",
                h.tag, h.build_id, h.series, h.config, h.tag, h.series
            ),
            hard: false,
        })
        .collect()
}

/// Compare records with what the runtimes answered. `recorded_runtimes_known`
/// is the set of runtimes declared in the tree: a record on another runtime
/// gets an `unavailable` line (it was not asked), never a `missing`.
pub fn judge(
    records: Records<'_>,
    views: &[RuntimeView],
    declared: &BTreeSet<String>,
    run: Option<&str>,
) -> StateReport {
    let mut f = Found::default();
    let l = records.lineage;
    let recorded: BTreeSet<&str> = l.builds.iter().map(|b| b.build_id.as_str()).collect();
    for v in views {
        let rt = v.runtime.as_str();
        match &v.images {
            Err(why) => {
                f.unavailable.insert(format!("images/{rt}: {why}"));
            }
            Ok(images) => {
                f.reality_images.insert(
                    rt.to_string(),
                    serde_json::to_value(images).unwrap_or(Value::Null),
                );
                image_drift(&records, &recorded, rt, images, &mut f);
            }
        }
        f.drift.extend(held_drift(&records, rt, &v.held_tags));
        match &v.instances {
            None => {}
            Some(Err(why)) => {
                f.unavailable.insert(format!("instances/{rt}: {why}"));
            }
            Some(Ok(instances)) => {
                f.reality_instances.insert(
                    rt.to_string(),
                    serde_json::to_value(instances).unwrap_or(Value::Null),
                );
                instance_drift(&records, rt, instances, &mut f);
            }
        }
    }
    unasked_runtimes(&records, views, declared, &mut f);
    instance_pin_drift(&records, &recorded, &mut f);
    release_drift(&records, &recorded, &mut f);
    image_pin_drift(&records, &recorded, &mut f);
    f.report(views, run)
}

/// What [`judge`] found so far.
#[derive(Default)]
struct Found {
    drift: Vec<Drift>,
    unavailable: BTreeSet<String>,
    notes: BTreeSet<String>,
    reality_images: serde_json::Map<String, Value>,
    reality_instances: serde_json::Map<String, Value>,
}

/// Images: a recorded build gone from its runtime (`missing`, hard when
/// something needs it), one whose tags disagree with its record
/// (`changed`), an image of this tree lineage does not record (`foreign`).
fn image_drift(
    records: &Records<'_>,
    recorded: &BTreeSet<&str>,
    rt: &str,
    images: &[SeenImage],
    f: &mut Found,
) {
    let l = records.lineage;
    let present: BTreeMap<&str, &SeenImage> =
        images.iter().map(|i| (i.build_id.as_str(), i)).collect();
    for rec in l.builds.iter().filter(|b| b.runtime.as_deref() == Some(rt)) {
        match present.get(rec.build_id.as_str()) {
            None => {
                let mut by = needed_by(records, &rec.build_id);
                let head = l
                    .head(&rec.series, rt)
                    .is_some_and(|h| h.build_id == rec.build_id);
                if head {
                    by.insert(
                        0,
                        format!(
                            "the head of {} on {rt} (a child would bake from it)",
                            rec.series
                        ),
                    );
                }
                f.drift.push(Drift {
                    kind: "image".into(),
                    name: format!("{}@{rt}", rec.build_id),
                    drift: "missing".into(),
                    detail: if by.is_empty() {
                        format!("recorded build of {} is gone from {rt}", rec.series)
                    } else {
                        format!(
                            "recorded build of {} is gone from {rt}; it is {}",
                            rec.series,
                            by.join(", ")
                        )
                    },
                    hard: !by.is_empty(),
                });
            }
            Some(img) => {
                let d = tag_disagreements(rec, &img.tags);
                if !d.is_empty() {
                    f.drift.push(Drift {
                        kind: "image".into(),
                        name: format!("{}@{rt}", rec.build_id),
                        drift: "changed".into(),
                        detail: d
                            .iter()
                            .map(|(f, r, t)| format!("{f}: lineage={r} tag={t}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                            + " (csis lineage relabel)",
                        hard: false,
                    });
                }
            }
        }
    }
    for img in images {
        if !recorded.contains(img.build_id.as_str()) {
            f.drift.push(Drift {
                    kind: "image".into(),
                    name: format!("{}@{rt}", img.build_id),
                    drift: "foreign".into(),
                    detail: format!(
                        "an image of {} ({}) that lineage does not record: `csis state import` adopts it, or remove it by hand",
                        img.tags.get(tags::SERIES).map(String::as_str).unwrap_or("?"),
                        img.name.as_deref().unwrap_or("untagged")
                    ),
                    hard: false,
                });
        }
    }
}

/// Instances: one running a revoked build (`revoked`), one that booted
/// another build than its pin (`changed`, unless a pending replacement
/// explains it); a switched-off one is noted.
fn instance_drift(records: &Records<'_>, rt: &str, instances: &[SeenInstance], f: &mut Found) {
    for i in instances {
        let name = i.name.clone().unwrap_or_else(|| i.id.clone());
        let Some(img) = i.image.as_deref() else {
            continue;
        };
        if let Some(rv) = records.revocations.get(img) {
            f.drift.push(Drift {
                kind: "instance".into(),
                name: format!("{name}@{rt}"),
                drift: "revoked".into(),
                detail: format!(
                    "runs revoked build {img}{} ({})",
                    rv.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default(),
                    i.power
                ),
                hard: false,
            });
        }
        if i.power == "stopped" {
            f.notes
                .insert(format!("instance {name}@{rt}: switched off; not drift"));
        }
        // The booted image against the instance's pin.
        let pin = records
            .pins
            .instances
            .get(&name)
            .or_else(|| records.pins.instances.get(&i.id));
        if let Some(pin) = pin.filter(|p| p.as_str() != img) {
            let pending = records
                .pins
                .pending_replacements
                .get(&name)
                .is_some_and(|p| p == pin);
            if pending {
                f.notes.insert(format!(
                    "instance {name}@{rt}: booted {img}, pinned to {pin}: the pending replacement explains it"
                ));
            } else {
                f.drift.push(Drift {
                    kind: "instance".into(),
                    name: format!("{name}@{rt}"),
                    drift: "changed".into(),
                    detail: format!("booted {img}, pinned to {pin}"),
                    hard: false,
                });
            }
        }
    }
}

/// Records on runtimes nobody was asked about: say so.
fn unasked_runtimes(
    records: &Records<'_>,
    views: &[RuntimeView],
    declared: &BTreeSet<String>,
    f: &mut Found,
) {
    let l = records.lineage;
    let asked: BTreeSet<&str> = views.iter().map(|v| v.runtime.as_str()).collect();
    for rt in l
        .builds
        .iter()
        .filter_map(|b| b.runtime.as_deref())
        .collect::<BTreeSet<_>>()
    {
        if !asked.contains(rt) {
            if declared.contains(rt) {
                f.unavailable.insert(format!("images/{rt}: not asked"));
            } else {
                f.unavailable.insert(format!(
                    "images/{rt}: lineage records builds on {rt}, which this tree does not declare"
                ));
            }
        }
    }
}

/// Instance pins on a build lineage does not record (`missing`) or on a
/// revoked one (`revoked`); pending replacements are noted.
fn instance_pin_drift(records: &Records<'_>, recorded: &BTreeSet<&str>, f: &mut Found) {
    for (inst, b) in &records.pins.instances {
        if !recorded.contains(b.as_str()) {
            f.drift.push(Drift {
                kind: "pin".into(),
                name: format!("instance {inst}"),
                drift: "missing".into(),
                detail: format!("pinned to {b}, which lineage does not record"),
                hard: true,
            });
        }
    }
    for (inst, b) in &records.pins.instances {
        if let Some(why) = why_revoked(records.revocations, b) {
            f.drift.push(Drift {
                kind: "pin".into(),
                name: format!("instance {inst}"),
                drift: "revoked".into(),
                detail: format!(
                    "pinned to revoked build {b}{why}: `csis upgrade instance {inst}` moves it to a new build"
                ),
                hard: true,
            });
        }
    }
    for (inst, b) in &records.pins.pending_replacements {
        f.notes.insert(format!(
            "instance {inst}: pending replacement onto {b}; not drift"
        ));
    }
}

/// Releases on a build lineage does not record or on a revoked one.
fn release_drift(records: &Records<'_>, recorded: &BTreeSet<&str>, f: &mut Found) {
    for (model, m) in &records.releases.current {
        for (image, b) in m {
            let name = format!("{model} {image}");
            if !recorded.contains(b.as_str()) {
                f.drift.push(Drift {
                    kind: "release".into(),
                    name,
                    drift: "missing".into(),
                    detail: format!(
                        "the {model} release of {image} is {b}, which lineage does not record: release another build (`csis release {image} --model {model}`)"
                    ),
                    hard: true,
                });
            } else if let Some(why) = why_revoked(records.revocations, b) {
                f.drift.push(Drift {
                    kind: "release".into(),
                    name,
                    drift: "revoked".into(),
                    detail: format!(
                        "the {model} release of {image} is revoked build {b}{why}: release another build (`csis release {image} --model {model}`)"
                    ),
                    hard: true,
                });
            }
        }
    }
}

/// Image pins on a build lineage does not record (`missing`), on a revoked
/// one (`revoked`, but for a follow image), or behind the parent's
/// unrevoked head (`stale`).
fn image_pin_drift(records: &Records<'_>, recorded: &BTreeSet<&str>, f: &mut Found) {
    let l = records.lineage;
    for (key, b) in &records.pins.images {
        if !recorded.contains(b.as_str()) {
            f.drift.push(Drift {
                kind: "pin".into(),
                name: key.clone(),
                drift: "missing".into(),
                detail: format!("pinned to {b}, which lineage does not record"),
                hard: true,
            });
            continue;
        }
        let image = key.split_once('@').map_or(key.as_str(), |(i, _)| i);
        // (a follow image's next bake follows its parent's unrevoked head)
        let revoked =
            why_revoked(records.revocations, b).filter(|_| !records.follow.contains(image));
        if let Some(why) = revoked {
            f.drift.push(Drift {
                kind: "pin".into(),
                name: key.clone(),
                drift: "revoked".into(),
                detail: format!(
                    "pinned to revoked build {b}{why}: its next bake would start from it; `csis upgrade image {image}` moves the pin"
                ),
                hard: true,
            });
            continue;
        }
        let Some((image, rt)) = key.split_once('@') else {
            continue;
        };
        let Some(parent) = records.image_parents.get(image) else {
            continue;
        };
        if let Some(head) = head_unrevoked(l, records.revocations, parent, rt) {
            if head.build_id != *b {
                f.drift.push(Drift {
                    kind: "image".into(),
                    name: key.clone(),
                    drift: "stale".into(),
                    detail: format!(
                        "pinned to {b}, behind {parent}'s head {} on {rt} (csis upgrade image, or parent_policy: follow)",
                        head.build_id
                    ),
                    hard: false,
                });
            }
        }
    }
}

impl Found {
    /// The report: drift sorted, counted per kind of drift.
    fn report(self, views: &[RuntimeView], run: Option<&str>) -> StateReport {
        let Found {
            mut drift,
            unavailable,
            mut notes,
            reality_images,
            reality_instances,
        } = self;
        drift.sort_by(|a, b| (&a.kind, &a.name, &a.drift).cmp(&(&b.kind, &b.name, &b.drift)));
        let mut summary = BTreeMap::new();
        for k in ["missing", "foreign", "changed", "stale", "revoked", "held"] {
            summary.insert(k.to_string(), drift.iter().filter(|d| d.drift == k).count());
        }
        let checked = views.iter().filter(|v| v.images.is_ok()).count();
        if checked == 0 && !views.is_empty() {
            notes.insert(format!(
                "nothing was checked: no runtime answered ({} unavailable); the records were compared with nothing",
                views.len()
            ));
        }
        let mut reality = json!({ "images": reality_images });
        if !reality_instances.is_empty() {
            reality["instances"] = Value::Object(reality_instances);
        }
        StateReport {
            run: run.map(str::to_string),
            reality,
            drift,
            unavailable: unavailable.into_iter().collect(),
            notes: notes.into_iter().collect(),
            summary,
        }
    }
}

#[cfg(test)]
mod tests;
