//! Adapters between the records and the planner: [`LineageRecords`]
//! (the engine's `Records`: each bake node's series head) and
//! [`MetaPins`] (what the compile asks of `meta-state/`: pins and recorded
//! fingerprints; `csis_ops` lends it to the compile as its `PinSource`, so
//! this crate needs no loader).

use std::collections::HashMap;
use std::time::SystemTime;

use csis_engine::{Fingerprint, Node, Record, Records};

use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::runid::parse_run_id;

/// The engine's view of a head record.
pub fn engine_record(b: &BuildRecord, now: SystemTime) -> Record {
    Record {
        canonical: b.inputs.clone(),
        ..lean_record(b, now)
    }
}

/// [`engine_record`] without the canonical document (an earlier record).
fn lean_record(b: &BuildRecord, now: SystemTime) -> Record {
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
        age: b
            .run
            .as_deref()
            .and_then(parse_run_id)
            .map(|t| now.duration_since(t).unwrap_or_default()),
        deps,
        earlier: Vec::new(),
    }
}

/// Heads of every (series, runtime), for the planner. Only `bake` nodes
/// have records.
pub struct LineageRecords {
    heads: HashMap<(String, String), Record>,
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
        let heads = all
            .into_iter()
            .map(|((s, r), mut bs)| {
                // Newest first: by run, then the later in the file.
                bs.reverse();
                bs.sort_by(|a, b| crate::lineage::run_order(b, a));
                let head = bs[0];
                let mut rec = engine_record(head, now);
                rec.earlier = bs
                    .iter()
                    .filter(|b| !std::ptr::eq(**b, head) && b.input_fingerprint.is_some())
                    .filter(|b| !excluded(&b.build_id))
                    .map(|b| lean_record(b, now))
                    .collect();
                ((s.to_string(), r.to_string()), rec)
            })
            .collect();
        // Records without a runtime count on any runtime, unless a later
        // record with a runtime exists: handled at lookup.
        let anyrt: Vec<&BuildRecord> = lineage
            .builds
            .iter()
            .filter(|b| b.runtime.is_none())
            .collect();
        let mut me = LineageRecords { heads };
        if !anyrt.is_empty() {
            // Resolve exactly with Lineage::head for the (rare) runtime-less records.
            let mut pairs: Vec<(String, String)> = me.heads.keys().cloned().collect();
            for b in &anyrt {
                pairs.push((b.series.clone(), String::new()));
            }
            for (s, r) in pairs {
                if let Some(h) = lineage.head(&s, &r) {
                    me.heads.insert((s, r), engine_record(h, now));
                }
            }
        }
        me
    }

    fn get(&self, series: &str, runtime: &str) -> Option<&Record> {
        self.heads
            .get(&(series.to_string(), runtime.to_string()))
            .or_else(|| self.heads.get(&(series.to_string(), String::new())))
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
