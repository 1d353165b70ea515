//! Property: no dispose plan ever holds a pinned, released or launched build
//! (retention), and no explicit plan holds an instance-pinned or launched
//! one; children always come before their parents.

use std::collections::{BTreeMap, BTreeSet};

use csis_cache::retention::{
    plan_dispose, DisposeRequest, LaunchParams, PlanInputs, Protections, Selection,
};
use csis_cache::{BuildRecord, Lineage, Pins, Releases};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct World {
    lineage: Lineage,
    pins: Pins,
    releases: Releases,
    launches: LaunchParams,
    keep: BTreeMap<String, u32>,
    min_age: Option<u64>,
    pick: Vec<usize>,
}

fn world() -> impl Strategy<Value = World> {
    (1usize..24)
        .prop_flat_map(|n| {
            (
                // per build: series index, runtime index, parent choice, day
                prop::collection::vec(
                    (0usize..3, 0usize..2, any::<prop::sample::Index>(), 0u32..60),
                    n,
                ),
                prop::collection::vec(any::<prop::sample::Index>(), 0..4), // instance pins
                prop::collection::vec(any::<prop::sample::Index>(), 0..4), // image pins
                prop::collection::vec(any::<prop::sample::Index>(), 0..3), // releases
                prop::collection::vec(any::<prop::sample::Index>(), 0..3), // launches
                prop::collection::vec(0u32..4, 3),
                prop::option::of(0u64..40),
                prop::collection::vec(0usize..n, 0..6),
            )
        })
        .prop_map(|(bs, ip, mp, rl, la, keep, min_age, pick)| {
            let mut lineage = Lineage::default();
            let mut ids: Vec<String> = Vec::new();
            for (i, (s, r, p, day)) in bs.iter().enumerate() {
                let mut rec = BuildRecord::new(format!("b{i}"), format!("s{s}"), format!("rt{r}"));
                rec.parent = Some(if ids.is_empty() || *s == 0 {
                    "vendor".to_string()
                } else {
                    ids[p.index(ids.len())].clone()
                });
                rec.run = Some(format!(
                    "2026_10_{:02}t00_00_{:02}_000000",
                    1 + day % 30,
                    i % 60
                ));
                ids.push(rec.build_id.clone());
                lineage.add_build(rec);
            }
            let mut pins = Pins::default();
            for (k, x) in ip.iter().enumerate() {
                pins.instances
                    .insert(format!("vm{k}"), ids[x.index(ids.len())].clone());
            }
            for (k, x) in mp.iter().enumerate() {
                pins.images
                    .insert(format!("img{k}@rt0"), ids[x.index(ids.len())].clone());
            }
            let mut releases = Releases::default();
            for (k, x) in rl.iter().enumerate() {
                releases
                    .current
                    .entry(format!("m{}", k % 2))
                    .or_default()
                    .insert(format!("i{k}"), ids[x.index(ids.len())].clone());
            }
            let mut launches = LaunchParams::default();
            for (k, x) in la.iter().enumerate() {
                launches.instances.insert(
                    format!("l{k}"),
                    csis_cache::LaunchRecord {
                        build: ids[x.index(ids.len())].clone(),
                        ..Default::default()
                    },
                );
            }
            let keep = (0..3).map(|s| (format!("s{s}"), keep[s])).collect();
            let pick = pick.to_vec();
            World {
                lineage,
                pins,
                releases,
                launches,
                keep,
                min_age,
                pick,
            }
        })
}

proptest! {
    #[test]
    fn plans_never_hold_protected_builds(w in world()) {
        let p = Protections::from_records(&w.pins, &w.releases, &w.launches);
        let rts: BTreeSet<String> = ["rt0".to_string(), "rt1".to_string()].into();
        let now = csis_cache::parse_run_id("2026_11_05t00_00_00_000000").unwrap();
        let revoked = BTreeSet::new();
        let inp = PlanInputs { lineage: &w.lineage, protections: &p, configured_runtimes: &rts, revoked: &revoked, now };
        let keep = |s: &str, _: &str| w.keep.get(s).copied();
        let check_order = |items: &[csis_cache::retention::DisposeItem]| {
            for (i, it) in items.iter().enumerate() {
                // no later item is a (transitive) child of an earlier one
                for later in &items[i + 1..] {
                    let mut cur = later.parent.clone();
                    let mut hops = 0;
                    while let Some(pid) = cur {
                        prop_assert!(pid != it.build_id, "{} disposed before its child {}", it.build_id, later.build_id);
                        cur = w.lineage.find(&pid).and_then(|r| r.parent.clone());
                        hops += 1;
                        if hops > 64 { break; }
                    }
                }
            }
            Ok(())
        };
        for rt in [None, Some("rt0".to_string())] {
            let req = DisposeRequest { selection: Selection::Retention, runtime: rt.clone(), min_age_days: w.min_age };
            let plan = plan_dispose(inp, &req, &keep).expect("retention is never refused");
            for it in &plan.items {
                prop_assert!(!w.releases.is_current(&it.build_id));
                prop_assert!(!w.pins.instances.values().any(|b| b == &it.build_id));
                prop_assert!(!w.pins.images.values().any(|b| b == &it.build_id));
                prop_assert!(!p.launched.contains_key(&it.build_id));
                if let Some(min) = w.min_age {
                    let age = csis_cache::age_days(it.run.as_deref().unwrap(), now).unwrap();
                    prop_assert!(age >= min);
                }
                // beyond its series' keep count
                prop_assert!(w.keep.contains_key(&it.series));
            }
            // kept per group: at least `keep` builds remain
            for ((series, rt), n) in w.lineage.builds.iter().fold(BTreeMap::new(), |mut m, b| {
                *m.entry((b.series.clone(), b.runtime.clone().unwrap())).or_insert(0usize) += 1; m
            }) {
                let gone = plan.items.iter().filter(|i| i.series == series && i.runtime == rt).count();
                prop_assert!(n - gone >= (w.keep[&series] as usize).min(n));
            }
            check_order(&plan.items)?;
        }
        for sel in [Selection::All, Selection::Ids(w.pick.iter().map(|i| format!("b{i}")).collect())] {
            let req = DisposeRequest { selection: sel.clone(), runtime: Some("rt0".into()), min_age_days: w.min_age };
            if let Ok(plan) = plan_dispose(inp, &req, &keep) {
                for it in &plan.items {
                    prop_assert!(!w.pins.instances.values().any(|b| b == &it.build_id));
                    prop_assert!(!p.launched.contains_key(&it.build_id));
                    prop_assert!(!w.releases.is_current(&it.build_id));
                    prop_assert!(!w.pins.images.values().any(|b| b == &it.build_id));
                    prop_assert_eq!(it.runtime.as_str(), "rt0");
                }
                check_order(&plan.items)?;
            }
        }
    }
}
