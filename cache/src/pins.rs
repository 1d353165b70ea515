//! `meta-state/pins.yaml`: which build each image (per runtime) and each
//! instance is bound to, and the journal of pin moves (core.md §3.11, §4.4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pins {
    /// `instance -> build`.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub instances: BTreeMap<String, String>,
    /// `"image@runtime" -> parent build` (legacy bare `image` keys are read
    /// as a pin on every runtime).
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub images: BTreeMap<String, String>,
    /// The journal: `{kind, name, from?, to, run, op, runtime?}`.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub upgrades: Vec<PinMove>,
    /// `instance -> build` replacements waiting for the instance lifecycle.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub pending_replacements: BTreeMap<String, String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One journal entry of `upgrades`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinMove {
    /// `image` or `instance`.
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    #[serde(default)]
    pub run: Option<String>,
    /// `bind`, `follow`, `upgrade`, `dispose`, ...
    pub op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The key of an image pin: `image@runtime`.
pub fn image_key(image: &str, runtime: &str) -> String {
    // (one allocation, no formatter: a plan asks a pin of every image twice)
    [image, "@", runtime].concat()
}

impl Pins {
    /// The parent build an image is pinned to on a runtime (the
    /// `image@runtime` key, else a legacy bare `image` key).
    pub fn image_pin(&self, image: &str, runtime: &str) -> Option<&str> {
        self.images
            .get(&image_key(image, runtime))
            .or_else(|| self.images.get(image))
            .map(String::as_str)
    }

    /// Set an image's pin on a runtime and journal the move. Returns false
    /// (and journals nothing) when the pin already names `build`.
    pub fn move_image_pin(
        &mut self,
        image: &str,
        runtime: &str,
        build: &str,
        run: Option<&str>,
        op: &str,
    ) -> bool {
        let from = self.image_pin(image, runtime).map(str::to_string);
        if from.as_deref() == Some(build) {
            return false;
        }
        self.images
            .insert(image_key(image, runtime), build.to_string());
        self.upgrades.push(PinMove {
            kind: "image".into(),
            name: image.into(),
            from,
            to: build.into(),
            run: run.map(str::to_string),
            op: op.into(),
            runtime: Some(runtime.into()),
            extra: BTreeMap::new(),
        });
        true
    }

    /// Put back the image pins `lineage` can rebuild and `pins.yaml` lost
    /// (an empty, deleted or cut file): an image whose head record on a
    /// runtime was baked from a parent build that lineage holds was pinned
    /// to that parent when it was recorded. Records adopted from tags are
    /// left alone (an import binds nothing). Returns one line per restored
    /// pin, for the caller to report.
    pub fn restore_from_lineage(&mut self, lineage: &crate::Lineage) -> Vec<String> {
        use rustc_hash::{FxHashMap, FxHashSet};
        let ids: FxHashSet<&str> = lineage.builds.iter().map(|b| b.build_id.as_str()).collect();
        let mut heads: FxHashMap<(&str, &str), &crate::BuildRecord> = FxHashMap::default();
        for b in &lineage.builds {
            if let Some(rt) = b.runtime.as_deref() {
                let e = heads.entry((b.series.as_str(), rt)).or_insert(b);
                if crate::lineage::run_order(b, e).is_ge() {
                    *e = b;
                }
            }
        }
        // only the heads whose pin is missing, in order (their lines say so)
        let mut keys: Vec<_> = heads
            .into_iter()
            .filter_map(|(key, head)| {
                let parent = head.parent.as_deref()?;
                (head.imported != Some(true)
                    && ids.contains(parent)
                    && self.image_pin(key.0, key.1).is_none())
                .then_some((key, head, parent))
            })
            .collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::new();
        for ((series, rt), head, parent) in keys {
            self.images
                .insert(image_key(series, rt), parent.to_string());
            out.push(format!(
                "pins.yaml lacked the pin of {series} on {rt}: restored to {parent}, the parent of its head build {}",
                head.build_id
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BuildRecord, Lineage};

    fn rec(id: &str, series: &str, parent: &str, run: &str) -> BuildRecord {
        let mut r = BuildRecord::new(id, series, "rt");
        r.parent = Some(parent.into());
        r.run = Some(run.into());
        r
    }

    #[test]
    fn only_a_missing_pin_of_a_baked_head_is_restored_in_order() {
        const EARLY: &str = "2026_11_30t07_00_00_000000";
        const LATE: &str = "2026_11_30t08_00_00_000000";
        let mut imported = rec("i1", "imp", "b1", LATE);
        imported.imported = Some(true);
        let lineage = Lineage {
            builds: vec![
                rec("b1", "base", "vendor", EARLY),
                // web's head is w2 (the later run), whose parent is b1
                rec("w2", "web", "b1", LATE),
                rec("w1", "web", "gone", EARLY),
                rec("a1", "app", "b1", LATE),
                // a parent the lineage does not hold, an import, a pin kept
                rec("o1", "orphan", "gone", LATE),
                imported,
                rec("p1", "pinned", "b1", LATE),
            ],
            ..Default::default()
        };
        let mut pins = Pins::default();
        pins.images.insert(image_key("pinned", "rt"), "w2".into());
        let lines = pins.restore_from_lineage(&lineage);
        assert_eq!(
            lines,
            [
                "pins.yaml lacked the pin of app on rt: restored to b1, the parent of its head build a1",
                "pins.yaml lacked the pin of web on rt: restored to b1, the parent of its head build w2",
            ]
        );
        assert_eq!(pins.image_pin("web", "rt"), Some("b1"));
        assert_eq!(pins.image_pin("app", "rt"), Some("b1"));
        assert_eq!(pins.image_pin("pinned", "rt"), Some("w2"));
        assert_eq!(pins.image_pin("orphan", "rt"), None);
        assert_eq!(pins.image_pin("imp", "rt"), None);
        // restored once: nothing is missing the second time
        assert!(pins.restore_from_lineage(&lineage).is_empty());
    }
}
