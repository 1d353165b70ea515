//! Adapters between the records and the planner: [`LineageRecords`]
//! (the engine's `Records`: each bake node's series head) and
//! [`MetaPins`] (what the compile asks of `meta-state/`: pins and recorded
//! fingerprints; `csis_ops` lends it to the compile as its `PinSource`, so
//! this crate needs no loader).

// The records' own names and build ids (the team's files, not a peer's
// input): FxHash, as the engine's label index.
use rustc_hash::FxHashMap as HashMap;
use std::time::{Duration, SystemTime};

use csis_engine::{Fingerprint, Node, Record, Records};

use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::runid::parse_run_id;

/// The engine's view of a head record.
pub fn engine_record(b: &BuildRecord, now: SystemTime) -> Record {
    with_canonical(b, age(b.run.as_deref(), now))
}

fn with_canonical(b: &BuildRecord, age: Option<Duration>) -> Record {
    Record {
        canonical: b.inputs.clone(),
        ..lean_record(b, age)
    }
}

/// How long ago run `run` began (by its id), as of `now`.
fn age(run: Option<&str>, now: SystemTime) -> Option<Duration> {
    since(run.and_then(parse_run_id), now)
}

/// How long before `now` `born` was.
fn since(born: Option<SystemTime>, now: SystemTime) -> Option<Duration> {
    born.map(|t| now.duration_since(t).unwrap_or_default())
}

/// When the runs of one lineage began, each run id parsed once (the
/// records of one build share their run).
#[derive(Default)]
struct Births<'a> {
    seen: HashMap<&'a str, Option<SystemTime>>,
}

impl<'a> Births<'a> {
    fn of(&mut self, b: &'a BuildRecord) -> Option<SystemTime> {
        let run = b.run.as_deref()?;
        *self.seen.entry(run).or_insert_with(|| parse_run_id(run))
    }
}

/// [`engine_record`] without the canonical document (an earlier record).
fn lean_record(b: &BuildRecord, age: Option<Duration>) -> Record {
    let mut deps = csis_engine::DepBuilds::default();
    if let Some(p) = &b.parent {
        if p != "vendor" {
            deps.insert("parent".to_string(), p.clone());
        }
    }
    Record {
        fingerprint: b
            .input_fingerprint
            .as_deref()
            .and_then(|h| Fingerprint::from_hex(h).ok()),
        canonical: None,
        build: Some(b.build_id.clone()),
        age,
        deps,
        earlier: Vec::new(),
    }
}

/// Heads of every (series, runtime), for the planner. Only `bake` nodes
/// have records.
pub struct LineageRecords {
    /// Per series, per runtime (a few): looked up without a key made.
    heads: HashMap<String, Vec<Head>>,
}

/// The record of one (series, runtime) and when its runs began (the head's
/// first, then its earlier records'), so that [`LineageRecords::at`] ages
/// them without reading the lineage again.
struct Head {
    runtime: String,
    record: Record,
    born: Vec<Option<SystemTime>>,
}

impl LineageRecords {
    pub fn new(lineage: &Lineage, now: SystemTime) -> Self {
        Self::excluding(lineage, now, |_| false)
    }

    /// [`LineageRecords::new`], where a build `excluded` names (a revoked
    /// one) is never offered as an earlier record to reinstate.
    pub fn excluding(lineage: &Lineage, now: SystemTime, excluded: impl Fn(&str) -> bool) -> Self {
        // The newest record by run id (then position) is the head; the
        // others with a fingerprint are its earlier records, newest first.
        let mut all: HashMap<(&str, &str), Vec<&BuildRecord>> = HashMap::default();
        for b in &lineage.builds {
            if let Some(rt) = &b.runtime {
                all.entry((b.series.as_str(), rt.as_str()))
                    .or_default()
                    .push(b);
            }
        }
        let mut births = Births::default();
        let mut me = LineageRecords {
            heads: HashMap::with_capacity_and_hasher(all.len(), Default::default()),
        };
        for ((s, r), mut bs) in all {
            // Newest first: by run, then the later in the file.
            bs.reverse();
            bs.sort_by(|a, b| crate::lineage::run_order(b, a));
            let head = bs[0];
            let head_born = births.of(head);
            let mut born = vec![head_born];
            let mut record = with_canonical(head, since(head_born, now));
            record.earlier = bs
                .iter()
                .filter(|b| !std::ptr::eq(**b, head) && b.input_fingerprint.is_some())
                .filter(|b| !excluded(&b.build_id))
                .map(|b| {
                    let at = births.of(b);
                    born.push(at);
                    lean_record(b, since(at, now))
                })
                .collect();
            me.insert(s, r, record, born);
        }
        // Records without a runtime count on any runtime, unless a later
        // record with a runtime exists: handled at lookup.
        let anyrt: Vec<&BuildRecord> = lineage
            .builds
            .iter()
            .filter(|b| b.runtime.is_none())
            .collect();
        if !anyrt.is_empty() {
            // Resolve exactly with Lineage::head for the (rare) runtime-less records.
            let mut pairs: Vec<(String, String)> = me
                .heads
                .iter()
                .flat_map(|(s, rts)| rts.iter().map(|h| (s.clone(), h.runtime.clone())))
                .collect();
            for b in &anyrt {
                pairs.push((b.series.clone(), String::new()));
            }
            for (s, r) in pairs {
                if let Some(h) = lineage.head(&s, &r) {
                    let born = births.of(h);
                    me.insert(&s, &r, with_canonical(h, since(born, now)), vec![born]);
                }
            }
        }
        me
    }

    /// The same records aged as of `now` (a watch keeps its records while
    /// their files do not move, and plans again later).
    pub fn at(&mut self, now: SystemTime) {
        for h in self.heads.values_mut().flatten() {
            let mut born = h.born.iter().copied();
            h.record.age = since(born.next().flatten(), now);
            for (e, b) in h.record.earlier.iter_mut().zip(born) {
                e.age = since(b, now);
            }
        }
    }

    /// Set the record of (series, runtime).
    fn insert(
        &mut self,
        series: &str,
        runtime: &str,
        record: Record,
        born: Vec<Option<SystemTime>>,
    ) {
        // most series bake on one runtime: room for one (a pushed Vec
        // takes room for four: 3 MB more at 5,000 images)
        let rts = self
            .heads
            .entry(series.to_string())
            .or_insert_with(|| Vec::with_capacity(1));
        match rts.iter_mut().find(|h| h.runtime == runtime) {
            Some(old) => {
                old.record = record;
                old.born = born;
            }
            None => rts.push(Head {
                runtime: runtime.to_string(),
                record,
                born,
            }),
        }
    }

    fn get(&self, series: &str, runtime: &str) -> Option<&Record> {
        let rts = self.heads.get(series)?;
        let on = |rt: &str| rts.iter().find(|h| h.runtime == rt).map(|h| &h.record);
        on(runtime).or_else(|| on(""))
    }
}

impl Records for LineageRecords {
    fn record(&self, node: &Node) -> Option<&Record> {
        if node.kind() != "bake" {
            return None;
        }
        self.get(node.attr("series")?, node.attr("runtime")?)
    }
}

/// Pins and recorded fingerprints for the compile.
pub struct MetaPins<'a> {
    pub pins: &'a Pins,
    pub lineage: &'a Lineage,
    by_id: HashMap<&'a str, &'a BuildRecord>,
}

impl<'a> MetaPins<'a> {
    pub fn new(pins: &'a Pins, lineage: &'a Lineage) -> Self {
        let by_id = lineage
            .builds
            .iter()
            .map(|b| (b.build_id.as_str(), b))
            .collect();
        MetaPins {
            pins,
            lineage,
            by_id,
        }
    }

    /// The parent build `image` is pinned to on `runtime`.
    pub fn image_pin(&self, image: &str, runtime: &str) -> Option<String> {
        self.pins.image_pin(image, runtime).map(str::to_string)
    }

    /// The input fingerprint recorded for `build_id` (64 hex).
    pub fn build_fingerprint(&self, build_id: &str) -> Option<String> {
        self.by_id
            .get(build_id)
            .and_then(|b| b.input_fingerprint.clone())
    }

    /// The capability stamp recorded for `build_id` (`{identity_types,
    /// storage_types}`), when the build is recorded.
    pub fn build_capabilities(&self, build_id: &str) -> Option<serde_json::Value> {
        self.by_id
            .get(build_id)
            .and_then(|b| serde_json::to_value(&b.capabilities).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csis_engine::{Label, Node};

    /// Records kept and aged again read as records made at that time: the
    /// head's age and each earlier record's, on every runtime.
    #[test]
    fn records_aged_again_are_the_records_of_then() {
        let mut lineage = Lineage::default();
        for (i, (series, rt, run)) in [
            ("web", "aws", "2026_12_01t00_00_00_000000"),
            ("web", "aws", "2026_12_03t00_00_00_000000"),
            ("web", "docker", "2026_11_20t10_00_00_000000"),
            ("db", "aws", "2026_10_01t00_00_00_000000"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut b = BuildRecord::new(format!("b{i}"), series, rt);
            b.input_fingerprint = Some(format!("{i:02}").repeat(32));
            b.run = Some(run.into());
            lineage.add_build(b);
        }
        let t0 = parse_run_id("2026_12_04t00_00_00_000000").unwrap();
        let later = t0 + Duration::from_secs(40 * 86400 + 7);
        let mut kept = LineageRecords::new(&lineage, t0);
        kept.at(later);
        let fresh = LineageRecords::new(&lineage, later);
        let mut seen = 0;
        for (series, rt) in [("web", "aws"), ("web", "docker"), ("db", "aws")] {
            let label = Label::parse(&format!("//images/{series}@{rt}:bake")).unwrap();
            let node = Node::new(label, "bake")
                .with_attr("series", series)
                .with_attr("runtime", rt);
            let (a, b) = (kept.record(&node).unwrap(), fresh.record(&node).unwrap());
            assert_eq!(a.age, b.age, "{series} on {rt}");
            assert!(a.age.unwrap() >= Duration::from_secs(40 * 86400));
            let ages = |r: &Record| r.earlier.iter().map(|e| e.age).collect::<Vec<_>>();
            assert_eq!(ages(a), ages(b), "{series} on {rt}");
            seen += a.earlier.len();
        }
        assert_eq!(seen, 1, "web on aws has one earlier record");
    }
}
