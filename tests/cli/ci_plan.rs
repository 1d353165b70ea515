//! What CI needs of `csis plan` and the config id, through the real binary
//! on the dummy runtime (`tests/fixtures/ops/ci`): `--shards N` (the due
//! bakes split into groups that respect the DAG), and two trees sharing one
//! simulated runtime (`store:`) that never adopt or judge each other's
//! builds (`csis_config`). `--detailed-exitcode` and the markdown and github
//! formats are output cases (`tests/cli_cases/plan-*.case`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use csis_cache::MetaState;
use csis_testkit::Tree;
use serde_json::Value;

/// `(series, parent)` of the fixture's images: chains on two OS builders.
const IMAGES: &[(&str, &str)] = &[
    ("a1", "deb12"),
    ("a2", "a1"),
    ("a3", "a2"),
    ("b1", "deb12"),
    ("b2", "b1"),
    ("c1", "deb12"),
    ("d1", "deb13"),
];

/// A copy of `tests/fixtures/ops/ci` with config id `id`, whose dummy
/// runtime keeps its images in `store` (default: its own, beside it).
fn tree(id: &str, store: Option<&Path>) -> Tree {
    let t = Tree::of("ops/ci");
    let store = store.map_or_else(|| t.tmp.path().join("store"), Path::to_path_buf);
    let root = &t.root;
    std::fs::write(root.join("cfg/_config.yml"), format!("id: {id}\n")).unwrap();
    let rt = root.join("cfg/runtime-builders.yml");
    let text = std::fs::read_to_string(&rt).unwrap();
    std::fs::write(
        &rt,
        format!("{text}    store: {:?}\n", store.display().to_string()),
    )
    .unwrap();
    t
}

/// The recorded builds of the tree: series -> build id.
fn build_ids(t: &Tree) -> BTreeMap<String, String> {
    MetaState::of_tree(&t.root)
        .lineage()
        .unwrap()
        .builds
        .into_iter()
        .map(|b| (b.series, b.build_id))
        .collect()
}

/// The series of a bake label (`//images/a2@sim:bake` -> `a2`).
fn series_of(label: &str) -> String {
    let path = label.split('@').next().unwrap();
    path.rsplit('/').next().unwrap().to_string()
}

fn parent_of(series: &str) -> Option<&'static str> {
    IMAGES.iter().find(|(s, _)| *s == series).map(|(_, p)| *p)
}

#[test]
fn shards_hold_whole_chains_or_wait_on_a_lower_group() {
    let t = tree("ci-shards", None);
    for n in [1usize, 2, 3, 4, 12] {
        let out = t.ok(&["plan", "--shards", &n.to_string(), "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(v["shards"], n);
        assert_eq!(v["due"], 9);
        let groups = v["groups"].as_array().unwrap();
        assert_eq!(groups.len(), n, "{out}");
        let mut group_of: BTreeMap<String, usize> = BTreeMap::new();
        for (i, g) in groups.iter().enumerate() {
            assert_eq!(g["index"], i);
            let bakes: Vec<&str> = g["bakes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap())
                .collect();
            let patterns: Vec<&str> = g["patterns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap())
                .collect();
            assert_eq!(bakes.len(), patterns.len());
            for (b, p) in bakes.iter().zip(&patterns) {
                assert_eq!(*b, format!("{p}:bake"), "{out}");
                assert!(
                    group_of.insert(series_of(b), i).is_none(),
                    "{b} twice: {out}"
                );
            }
            for w in g["waits_on"].as_array().unwrap() {
                assert!(
                    w.as_u64().unwrap() < i as u64,
                    "waits on a lower group: {out}"
                );
            }
        }
        assert_eq!(group_of.len(), 9, "every due bake once: {out}");
        // a bake's parent is in its group or in a group it waits on
        for (series, g) in &group_of {
            let Some(parent) = parent_of(series) else {
                continue;
            };
            let pg = group_of[parent];
            let waits: BTreeSet<u64> = groups[*g]["waits_on"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().unwrap())
                .collect();
            assert!(
                pg == *g || waits.contains(&(pg as u64)),
                "{series} in {g}, its parent {parent} in {pg}, not awaited: {out}"
            );
        }
        if n >= 2 {
            let used = groups
                .iter()
                .filter(|g| !g["bakes"].as_array().unwrap().is_empty())
                .count();
            assert!(used >= 2, "the work is spread: {out}");
        }
        if n == 1 {
            assert!(groups[0]["waits_on"].as_array().unwrap().is_empty());
        }
    }
    // nothing due: N empty groups
    t.ok(&["build", "--json"]);
    let v: Value = serde_json::from_str(&t.ok(&["plan", "--shards", "3"])).unwrap();
    assert_eq!(v["due"], 0);
    assert!(v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["bakes"].as_array().unwrap().is_empty()));
    // out of range
    assert_eq!(t.run(&["plan", "--shards", "0"]).0, 2);
}

#[test]
fn two_trees_on_one_runtime_keep_their_own_builds() {
    let shared = tempfile::tempdir().unwrap();
    let store = shared.path().join("shared-store");
    let a = tree("team-a", Some(&store));
    let b = tree("team-b", Some(&store));
    // the same inputs: the same fingerprints (the config id is no input)
    let fps = |t: &Tree| -> Vec<(String, String)> {
        let v: Value = serde_json::from_str(&t.ok(&["plan", "--json"])).unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "bake")
            .map(|n| {
                (
                    n["label"].as_str().unwrap().to_string(),
                    n["fingerprint"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(fps(&a), fps(&b));
    a.ok(&["build", "--json"]);
    let out = b.ok(&["build", "--json"]);
    assert!(!out.contains("recovered"), "{out}");
    let (ia, ib) = (build_ids(&a), build_ids(&b));
    assert_eq!(ia.len(), 9);
    assert_eq!(ib.len(), 9);
    for (series, id) in &ia {
        assert_ne!(
            ib.get(series),
            Some(id),
            "{series}: tree b adopted tree a's build"
        );
    }
    // neither sees the other's builds as foreign
    for t in [&a, &b] {
        let (code, out, err) = t.run(&["state", "query", "--strict"]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!out.contains("foreign"), "{out}");
    }
    // an image of this tree that lost its record is still adopted
    let l = MetaState::of_tree(&b.root).lineage().unwrap();
    let mut cut = l.clone();
    cut.builds.retain(|r| r.series != "d1");
    MetaState::of_tree(&b.root).save_lineage(&cut).unwrap();
    let (code, out, _) = b.run(&["state", "query"]);
    assert_eq!(code, 0);
    assert_eq!(out.matches(": foreign").count(), 1, "{out}");
    assert!(out.contains(&ib["d1"]), "{out}");
    let out = b.ok(&["state", "import"]);
    assert!(
        out.contains(&format!("adopted {} (d1 on sim", ib["d1"])),
        "{out}"
    );
}
