//! `meta-state/lineage.yaml`: one record per successful bake, append-only
//! (core.md §4.8), with csis's fields added (`inputs`, `fingerprint_recipe`,
//! `parent_fingerprint`). Unknown fields of records written by the original
//! (or by a newer csis) are kept and written back unchanged.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The whole file: `builds: [record...]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lineage {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub builds: Vec<BuildRecord>,
    /// Top-level keys this version does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The capability stamp `{identity_types[], storage_types[]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub identity_types: Vec<String>,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub storage_types: Vec<String>,
}

impl Capabilities {
    /// Neither axis declares anything.
    pub fn is_empty(&self) -> bool {
        self.identity_types.is_empty() && self.storage_types.is_empty()
    }
}

/// `tests {in_bake, assertions}`: a record exists only because the bake,
/// including its in-bake verification, succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordTests {
    #[serde(default = "yes")]
    pub in_bake: bool,
    #[serde(default)]
    pub assertions: u64,
}

fn yes() -> bool {
    true
}

impl Default for RecordTests {
    fn default() -> Self {
        RecordTests {
            in_bake: true,
            assertions: 0,
        }
    }
}

/// `fingerprint_restamped [ {run, previous, reason} ]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restamp {
    pub run: String,
    pub previous: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The vendor image a base image's bake started from (csis): the
/// reference its OS builder names (`busybox:1`, an AMI query's name), the
/// id the resolve found (a docker digest reference or image id, an AMI
/// id), and whether the reference can name another image later (a docker
/// tag: every plan reads the tag again, `csis_ops::vendor`; a digest never
/// moves).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorImage {
    pub reference: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub movable: bool,
    /// Fields this version does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One successful bake (core.md §4.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The runtime's artifact id (AMI id, docker image id, dummy id).
    pub build_id: String,
    /// The series (image name, or OS builder name for a base image).
    pub series: String,
    /// The runtime it lives on; a record without one matches any runtime
    /// when looking for a series head (the original's rule).
    #[serde(default)]
    pub runtime: Option<String>,
    /// Final artifact name.
    #[serde(default)]
    pub name: Option<String>,
    /// The parent build id it was baked from, or `vendor`.
    #[serde(default)]
    pub parent: Option<String>,
    /// Full 64-hex input fingerprint.
    #[serde(default)]
    pub input_fingerprint: Option<String>,
    /// Run id (`2026_11_30t07_44_28_123456`); lexicographic = chronological.
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub capabilities: Capabilities,
    /// Mod records (`name, type, operation, idempotent, content_hash, run`).
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub mods: Vec<Value>,
    #[serde(default)]
    pub local_mods: bool,
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub tests: RecordTests,
    /// The base image's effective update policy, or null.
    #[serde(default)]
    pub update: Option<Value>,
    /// Image names from this image to its root; `[]` for a base image.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub chain: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_by: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::null_as_default"
    )]
    pub fingerprint_restamped: Vec<Restamp>,

    // ---- csis fields ----
    /// The canonical inputs the fingerprint was computed over (for
    /// `csis plan --explain`: an exact field-by-field diff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// The fingerprint recipe version (`csis-bake-v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_recipe: Option<String>,
    /// The parent's fingerprint this bake hashed (`follow`), or the pinned
    /// parent build's recorded fingerprint (`pinned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_fingerprint: Option<String>,
    /// How long the runtime's bake took, in seconds (none for an adopted
    /// or imported build): the scheduler's cost of this series' next bake
    /// on this runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bake_seconds: Option<f64>,
    /// The last run that made this build the series head again without a
    /// bake: its inputs (fingerprint and parent build) were those of that
    /// run's bake, which took it instead of baking the same image twice.
    /// The head is the newest record by this run, else by `run`
    /// ([`BuildRecord::order_run`]); `run` stays the run that baked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinstated_by_run: Option<String>,
    /// A base image's vendor image, as its bake's resolve found it (none
    /// for an image, and for records older than the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_image: Option<VendorImage>,

    /// Fields this version does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl BuildRecord {
    /// A record with the identity fields set and everything else empty.
    pub fn new(
        build_id: impl Into<String>,
        series: impl Into<String>,
        runtime: impl Into<String>,
    ) -> Self {
        BuildRecord {
            build_id: build_id.into(),
            series: series.into(),
            runtime: Some(runtime.into()),
            name: None,
            parent: None,
            input_fingerprint: None,
            run: None,
            capabilities: Capabilities::default(),
            mods: Vec::new(),
            local_mods: false,
            tests: RecordTests::default(),
            update: None,
            bake_seconds: None,
            reinstated_by_run: None,
            chain: Vec::new(),
            imported: None,
            imported_by: None,
            fingerprint_restamped: Vec::new(),
            inputs: None,
            fingerprint_recipe: None,
            parent_fingerprint: None,
            vendor_image: None,
            extra: BTreeMap::new(),
        }
    }

    /// Does this record count for `runtime` (records without a runtime match any)?
    pub fn on_runtime(&self, runtime: &str) -> bool {
        self.runtime.as_deref().is_none_or(|r| r == runtime)
    }

    /// The run that orders this record among its series' builds: the run
    /// that last reinstated it as the head, else the run that baked it
    /// (`""` for neither: the oldest).
    pub fn order_run(&self) -> &str {
        let baked = self.run.as_deref().unwrap_or("");
        match self.reinstated_by_run.as_deref() {
            Some(r) if r > baked => r,
            _ => baked,
        }
    }
}

/// The order of builds: by run id ([`BuildRecord::order_run`]: the run
/// that reinstated a build, else the one that baked it; lexicographic =
/// chronological; a record without one is the oldest), then by position in
/// the file. A file whose records were reversed, merged or moved by hand
/// means the same.
pub fn run_order(a: &BuildRecord, b: &BuildRecord) -> std::cmp::Ordering {
    a.order_run().cmp(b.order_run())
}

/// The recorded bake times of a lineage ([`Lineage::bake_seconds`]).
#[derive(Default)]
pub struct BakeSeconds<'a> {
    /// `(series, runtime)` -> the newest timed record and its seconds.
    last: HashMap<(&'a str, &'a str), (&'a BuildRecord, f64)>,
    /// runtime -> how many timed records, their seconds' sum.
    mean: HashMap<&'a str, (u32, f64)>,
}

impl BakeSeconds<'_> {
    /// How long the next bake of `series` on `runtime` should take, in
    /// seconds, from the records: the last recorded bake of that series
    /// there, else the mean of every recorded bake on that runtime, else
    /// none (the runtime type's estimate stands).
    pub fn estimate(&self, series: &str, runtime: &str) -> Option<f64> {
        if let Some((_, d)) = self.last.get(&(series, runtime)) {
            return Some(*d);
        }
        let (n, sum) = self.mean.get(runtime)?;
        (*n > 0).then(|| sum / f64::from(*n))
    }
}

impl Lineage {
    /// The series head on a runtime: the newest record (by run id, then the
    /// later in the file; [`run_order`]) of that series whose runtime is
    /// `runtime` (or unset). A deliberate difference from the original's
    /// append order: records are ordered by the run that baked them, so a
    /// reordered file names the same head.
    pub fn head(&self, series: &str, runtime: &str) -> Option<&BuildRecord> {
        newest(self.builds.iter(), series, runtime)
    }

    /// The records grouped by series, for many [`Lineage::head`] questions
    /// (each a scan of one series' records, not of the whole file).
    pub fn head_index(&self) -> HeadIndex<'_> {
        let mut by_series: std::collections::HashMap<&str, Vec<&BuildRecord>> = Default::default();
        for b in &self.builds {
            by_series.entry(b.series.as_str()).or_default().push(b);
        }
        HeadIndex { by_series }
    }

    /// Drop the records of a build id already recorded earlier in the file
    /// (the first is kept, as [`Lineage::add_build`] keeps it). Returns one
    /// line per record dropped, for the caller to report.
    pub fn dedupe(&mut self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        self.builds.retain(|b| {
            if seen.insert(b.build_id.clone()) {
                true
            } else {
                out.push(format!(
                    "lineage.yaml records build {} ({}) more than once: the first record is kept",
                    b.build_id, b.series
                ));
                false
            }
        });
        out
    }

    /// Every recorded bake time, read once, for the estimates of many due
    /// bakes ([`BakeSeconds::estimate`]; a scan of the records per bake was
    /// the builds times the due bakes).
    pub fn bake_seconds(&self) -> BakeSeconds<'_> {
        let mut est = BakeSeconds::default();
        for b in &self.builds {
            let (Some(d), Some(rt)) = (b.bake_seconds, b.runtime.as_deref()) else {
                continue;
            };
            if !(d.is_finite() && d >= 0.0) {
                continue;
            }
            let last = est.last.entry((b.series.as_str(), rt)).or_insert((b, d));
            // the newest by run, the later in the file among equals
            if run_order(b, last.0).is_ge() {
                *last = (b, d);
            }
            let mean = est.mean.entry(rt).or_insert((0, 0.0));
            *mean = (mean.0 + 1, mean.1 + d);
        }
        est
    }

    /// The record of one build id.
    pub fn find(&self, build_id: &str) -> Option<&BuildRecord> {
        self.builds.iter().find(|b| b.build_id == build_id)
    }

    /// Append a record; a duplicate build id is ignored (returns false).
    pub fn add_build(&mut self, record: BuildRecord) -> bool {
        if self.find(&record.build_id).is_some() {
            return false;
        }
        self.builds.push(record);
        true
    }

    /// Make a recorded build the head of its series again, as of `run`
    /// (a run that would have baked the very same inputs from the same
    /// parent build). Returns whether the record changed: an older or
    /// equal run changes nothing, so replaying it is idempotent.
    pub fn reinstate(&mut self, build_id: &str, run: &str) -> bool {
        match self.builds.iter_mut().find(|b| b.build_id == build_id) {
            Some(b) if run > b.order_run() => {
                b.reinstated_by_run = Some(run.to_string());
                true
            }
            _ => false,
        }
    }

    /// Every record of a series on a runtime, in append order.
    pub fn series_builds<'a>(
        &'a self,
        series: &'a str,
        runtime: &'a str,
    ) -> impl Iterator<Item = &'a BuildRecord> + 'a {
        self.builds
            .iter()
            .filter(move |b| b.series == series && b.on_runtime(runtime))
    }
}

/// The head among `builds` (in file order): [`Lineage::head`]'s rule.
fn newest<'a>(
    builds: impl Iterator<Item = &'a BuildRecord>,
    series: &str,
    runtime: &str,
) -> Option<&'a BuildRecord> {
    let mut head: Option<&BuildRecord> = None;
    for b in builds.filter(|b| b.series == series && b.on_runtime(runtime)) {
        if head.is_none_or(|h| run_order(b, h).is_ge()) {
            head = Some(b);
        }
    }
    head
}

/// A lineage's records by series, in file order ([`Lineage::head_index`]).
pub struct HeadIndex<'a> {
    by_series: std::collections::HashMap<&'a str, Vec<&'a BuildRecord>>,
}

impl<'a> HeadIndex<'a> {
    /// [`Lineage::head`], answered from the series' own records.
    pub fn head(&self, series: &str, runtime: &str) -> Option<&'a BuildRecord> {
        newest(self.by_series.get(series)?.iter().copied(), series, runtime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_index_names_the_heads_the_lineage_names() {
        let mut l = Lineage::default();
        let mut add = |id: &str, series: &str, rt: Option<&str>, run: Option<&str>| {
            let mut r = BuildRecord::new(id, series, rt.unwrap_or("x"));
            r.runtime = rt.map(str::to_string);
            r.run = run.map(str::to_string);
            l.builds.push(r);
        };
        add("a1", "web", Some("rt"), Some("r2"));
        add("a2", "web", Some("rt"), Some("r1"));
        add("a3", "web", Some("rt"), Some("r2"));
        add("a4", "web", None, Some("r3"));
        add("a5", "web", Some("other"), Some("r9"));
        add("b1", "db", Some("rt"), None);
        add("b2", "db", Some("rt"), None);
        let ix = l.head_index();
        for s in ["web", "db", "none"] {
            for rt in ["rt", "other", "none"] {
                assert_eq!(
                    ix.head(s, rt).map(|b| &b.build_id),
                    l.head(s, rt).map(|b| &b.build_id),
                    "{s} on {rt}"
                );
            }
        }
        assert_eq!(ix.head("web", "rt").unwrap().build_id, "a4");
        assert_eq!(ix.head("db", "rt").unwrap().build_id, "b2");
    }

    fn timed(id: &str, series: &str, rt: &str, run: &str, secs: Option<f64>) -> BuildRecord {
        let mut r = BuildRecord::new(id, series, rt);
        r.run = Some(run.into());
        r.bake_seconds = secs;
        r
    }

    fn rec(id: &str, run: &str) -> BuildRecord {
        let mut r = BuildRecord::new(id, "web", "rt");
        r.run = Some(run.into());
        r
    }

    #[test]
    fn a_bases_vendor_image_round_trips_with_what_this_version_does_not_know() {
        let text = "builds:\n- build_id: sha256:b1\n  series: bb\n  runtime: rt\n  parent: vendor\n  later_field: 7\n  vendor_image:\n    reference: busybox:1\n    id: sha256:aa\n    movable: true\n    seen_by: other\n";
        let l: Lineage = crate::yamlio::from_text("t", text).unwrap();
        let v = l.builds[0].vendor_image.as_ref().unwrap();
        assert_eq!(
            (v.reference.as_str(), v.id.as_str(), v.movable),
            ("busybox:1", "sha256:aa", true)
        );
        let back = crate::yamlio::to_text(&l).unwrap();
        let again: Lineage = crate::yamlio::from_text("t", &back).unwrap();
        assert_eq!(again, l);
        assert!(
            back.contains("seen_by: other") && back.contains("later_field: 7"),
            "{back}"
        );
        // a record without one (an image, the original's) writes no key
        let plain = crate::yamlio::to_text(&rec("x", "r")).unwrap();
        assert!(!plain.contains("vendor_image"), "{plain}");
    }

    #[test]
    fn the_next_bake_is_estimated_from_the_last_recorded_one_then_the_runtime_mean() {
        let mut l = Lineage::default();
        l.add_build(timed(
            "b2",
            "web",
            "rt",
            "2026_11_02t00_00_00_000000",
            Some(30.0),
        ));
        // Appended after, but an earlier run: not the last bake.
        l.add_build(timed(
            "b1",
            "web",
            "rt",
            "2026_11_01t00_00_00_000000",
            Some(90.0),
        ));
        l.add_build(timed("b3", "web", "rt", "2026_11_03t00_00_00_000000", None));
        l.add_build(timed(
            "o1",
            "other",
            "rt",
            "2026_11_01t00_00_00_000000",
            Some(60.0),
        ));
        l.add_build(timed(
            "x1",
            "web",
            "elsewhere",
            "2026_11_04t00_00_00_000000",
            Some(5.0),
        ));
        let seconds = l.bake_seconds();
        assert_eq!(seconds.estimate("web", "rt"), Some(30.0));
        assert_eq!(seconds.estimate("web", "elsewhere"), Some(5.0));
        // No bake of `new` on rt: the mean of rt's recorded bakes.
        assert_eq!(seconds.estimate("new", "rt"), Some(60.0));
        assert_eq!(seconds.estimate("new", "nowhere"), None);
    }

    #[test]
    fn the_head_is_the_newest_run_wherever_it_sits_in_the_file() {
        let mut l = Lineage::default();
        l.builds.push(rec("new", "2026_11_03t00_00_00_000000"));
        l.builds.push(rec("old", "2026_11_01t00_00_00_000000"));
        assert_eq!(l.head("web", "rt").unwrap().build_id, "new");
        // equal runs: the later in the file
        l.builds.push(rec("same", "2026_11_03t00_00_00_000000"));
        assert_eq!(l.head("web", "rt").unwrap().build_id, "same");
    }

    #[test]
    fn a_reinstated_build_is_the_head_as_of_the_run_that_reinstated_it() {
        let mut l = Lineage::default();
        l.builds.push(rec("a", "2026_11_01t00_00_00_000000"));
        l.builds.push(rec("b", "2026_11_02t00_00_00_000000"));
        assert!(l.reinstate("a", "2026_11_03t00_00_00_000000"));
        assert_eq!(l.head("web", "rt").unwrap().build_id, "a");
        // the run that baked it stays; replaying the same or an older run changes nothing
        assert_eq!(
            l.find("a").unwrap().run.as_deref(),
            Some("2026_11_01t00_00_00_000000")
        );
        assert!(!l.reinstate("a", "2026_11_03t00_00_00_000000"));
        assert!(!l.reinstate("b", "2026_11_01t12_00_00_000000"));
        assert!(!l.reinstate("missing", "2026_11_09t00_00_00_000000"));
        // a later bake is newer again; the record survives a YAML round trip
        l.builds.push(rec("c", "2026_11_04t00_00_00_000000"));
        assert_eq!(l.head("web", "rt").unwrap().build_id, "c");
        let back: Lineage =
            crate::yamlio::from_text("t", &crate::yamlio::to_text(&l).unwrap()).unwrap();
        assert_eq!(back, l);
    }

    #[test]
    fn a_build_recorded_twice_is_read_once_and_reported() {
        let mut l = Lineage::default();
        l.builds.push(rec("a", "r1"));
        l.builds.push(rec("b", "r2"));
        let mut again = rec("a", "r3");
        again.name = Some("copy".into());
        l.builds.push(again);
        let said = l.dedupe();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("build a (web) more than once"), "{said:?}");
        assert_eq!(l.builds.len(), 2);
        assert_eq!(l.find("a").unwrap().name, None, "the first record is kept");
        assert!(l.dedupe().is_empty());
    }
}
