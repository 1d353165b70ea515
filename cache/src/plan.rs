//! Adapters between the records and the planner: [`LineageRecords`]
//! (the engine's `Records`: each bake node's series head) and
//! [`MetaPins`] (what the compile asks of `meta-state/`: pins and recorded
//! fingerprints; `csis_ops` lends it to the compile as its `PinSource`, so
//! this crate needs no loader).

use std::collections::HashMap;
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
    run.and_then(parse_run_id)
        .map(|t| now.duration_since(t).unwrap_or_default())
}

/// The ages of the runs of one lineage, each run id parsed once (the
/// records of one build share their run).
struct Ages<'a> {
    now: SystemTime,
    seen: HashMap<&'a str, Option<Duration>>,
}

impl<'a> Ages<'a> {
    fn of(&mut self, b: &'a BuildRecord) -> Option<Duration> {
        let run = b.run.as_deref()?;
        let now = self.now;
        *self.seen.entry(run).or_insert_with(|| age(Some(run), now))
    }
}

/// [`engine_record`] without the canonical document (an earlier record).
fn lean_record(b: &BuildRecord, age: Option<Duration>) -> Record {
    let mut deps = std::collections::BTreeMap::new();
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
    heads: HashMap<String, Vec<(String, Record)>>,
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
        let mut all: HashMap<(&str, &str), Vec<&BuildRecord>> = HashMap::new();
        for b in &lineage.builds {
            if let Some(rt) = &b.runtime {
                all.entry((b.series.as_str(), rt.as_str()))
                    .or_default()
                    .push(b);
            }
        }
        let mut ages = Ages {
            now,
            seen: HashMap::new(),
        };
        let mut me = LineageRecords {
            heads: HashMap::with_capacity(all.len()),
        };
        for ((s, r), mut bs) in all {
            // Newest first: by run, then the later in the file.
            bs.reverse();
            bs.sort_by(|a, b| crate::lineage::run_order(b, a));
            let head = bs[0];
            let mut rec = with_canonical(head, ages.of(head));
            rec.earlier = bs
                .iter()
                .filter(|b| !std::ptr::eq(**b, head) && b.input_fingerprint.is_some())
                .filter(|b| !excluded(&b.build_id))
                .map(|b| lean_record(b, ages.of(b)))
                .collect();
            me.insert(s, r, rec);
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
                .flat_map(|(s, rts)| rts.iter().map(|(r, _)| (s.clone(), r.clone())))
                .collect();
            for b in &anyrt {
                pairs.push((b.series.clone(), String::new()));
            }
            for (s, r) in pairs {
                if let Some(h) = lineage.head(&s, &r) {
                    me.insert(&s, &r, engine_record(h, now));
                }
            }
        }
        me
    }

    /// Set the record of (series, runtime).
    fn insert(&mut self, series: &str, runtime: &str, rec: Record) {
        let rts = self.heads.entry(series.to_string()).or_default();
        match rts.iter_mut().find(|(r, _)| r == runtime) {
            Some((_, old)) => *old = rec,
            None => rts.push((runtime.to_string(), rec)),
        }
    }

    fn get(&self, series: &str, runtime: &str) -> Option<&Record> {
        let rts = self.heads.get(series)?;
        let on = |rt: &str| rts.iter().find(|(r, _)| r == rt).map(|(_, rec)| rec);
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
