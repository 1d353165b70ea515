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
        canonical: b.inputs.clone(),
        build: Some(b.build_id.clone()),
        age: b
            .run
            .as_deref()
            .and_then(parse_run_id)
            .map(|t| now.duration_since(t).unwrap_or_default()),
        deps,
    }
}

/// Heads of every (series, runtime), for the planner. Only `bake` nodes
/// have records.
pub struct LineageRecords {
    heads: HashMap<(String, String), Record>,
}

impl LineageRecords {
    pub fn new(lineage: &Lineage, now: SystemTime) -> Self {
        // The newest record by run id (then position) is the head.
        let mut newest: HashMap<(&str, &str), &BuildRecord> = HashMap::new();
        for b in &lineage.builds {
            if let Some(rt) = &b.runtime {
                let e = newest.entry((b.series.as_str(), rt.as_str())).or_insert(b);
                if crate::lineage::run_order(b, e).is_ge() {
                    *e = b;
                }
            }
        }
        let heads = newest
            .into_iter()
            .map(|((s, r), b)| ((s.to_string(), r.to_string()), engine_record(b, now)))
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
