//! The fleet in the compiled graph (docs/fleet.md §4), no daemon: a storage
//! node per storage and an instance node per instance, their labels and
//! patterns, their order (storage before the instances that mount it, an
//! instance after its image's retag/test), their fingerprints over the
//! launch parameters, the `apply_*` gates, and the nodes that retire what
//! the records hold and the tree declares no more.

use std::collections::BTreeMap;

use csis_engine::{Label, Pattern};
use csis_rules::compile::{
    compile, Compiled, NodeKind, PinSource, RecordedFleet, RecordedInstance, RecordedStorage,
    DECOMMISSION_ATTR, GATED_ATTR,
};
use csis_rules::{load, LoadOptions, Tree};

const RT: &str = "docker-fleet";

fn tree_with(apply: &str, edit: &[(&str, &str)]) -> (tempfile::TempDir, Tree) {
    let dir = tempfile::tempdir().unwrap();
    let mut subst = vec![
        ("@REPO@", "csis-fleet-test/r"),
        ("@BASE@", "csis-fleet-test/base:t"),
        ("@ID@", "fleet-graph"),
        ("@APPLY@", apply),
        ("@WEB@", "web1"),
        ("@APP@", "app1"),
    ];
    subst.extend_from_slice(edit);
    csis_testkit::copy_dir_with(
        &csis_testkit::fixture("fleet-docker-graph"),
        dir.path(),
        &subst,
    );
    let t = load(dir.path(), &LoadOptions::default()).unwrap_or_else(|d| {
        panic!(
            "{:#?}",
            d.iter()
                .filter(|d| d.is_error())
                .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.path, d.message))
                .collect::<Vec<_>>()
        )
    });
    (dir, t)
}

struct Fleet(RecordedFleet);
impl PinSource for Fleet {
    fn image_pin(&self, _: &str, _: &str) -> Option<String> {
        None
    }
    fn build_fingerprint(&self, _: &str) -> Option<String> {
        None
    }
    fn fleet(&self) -> RecordedFleet {
        self.0.clone()
    }
}

fn id(c: &Compiled, label: &str) -> csis_engine::NodeId {
    c.graph
        .find(&Label::parse(label).unwrap())
        .unwrap_or_else(|| panic!("no node {label}"))
}

fn deps(c: &Compiled, label: &str) -> Vec<String> {
    let mut v: Vec<String> = c
        .graph
        .deps(id(c, label))
        .map(|(d, _)| c.graph.node(d).label().to_string())
        .collect();
    v.sort();
    v
}

fn inst(name: &str) -> String {
    format!("//instances/{name}@{RT}:instance")
}

#[test]
fn storages_and_instances_are_nodes_in_order() {
    let (_d, t) = tree_with("true", &[]);
    let c = compile(&t, &csis_rules::compile::NoPins).unwrap();
    let data = format!("//storages/data@{RT}:storage");
    assert_eq!(
        c.graph.node(id(&c, &data)).kind(),
        NodeKind::Storage.as_str()
    );
    for n in ["keeper", "follower", "prober"] {
        assert_eq!(
            c.graph.node(id(&c, &inst(n))).kind(),
            NodeKind::Instance.as_str()
        );
    }
    // the storage precedes the instance that mounts it; an instance follows
    // its image's build on its runtime (web has a post-bake test: after it)
    assert_eq!(
        deps(&c, &inst("keeper")),
        vec![format!("//images/app@{RT}:retag"), data.clone()]
    );
    assert_eq!(
        deps(&c, &inst("follower")),
        vec![format!("//images/web@{RT}:test")]
    );
    assert!(deps(&c, &data).is_empty());
    assert_eq!(c.fleet_nodes().count(), 4);
    let spec = c.instance_spec(id(&c, &inst("prober"))).unwrap();
    assert_eq!(
        spec.post_bake.len(),
        1,
        "the ephemeral one runs web's tests"
    );
    assert!(spec.gated.is_none());
}

#[test]
fn patterns_select_fleet_nodes_and_their_ancestors() {
    let (_d, t) = tree_with("true", &[]);
    let c = compile(&t, &csis_rules::compile::NoPins).unwrap();
    let sel = c
        .graph
        .select(&[Pattern::parse("//instances/...").unwrap()])
        .unwrap();
    let labels: Vec<String> = sel
        .iter()
        .map(|i| c.graph.node(i).label().to_string())
        .collect();
    for n in ["keeper", "follower", "prober"] {
        assert!(labels.contains(&inst(n)), "{labels:?}");
    }
    // their ancestors: the images' bakes and the storage they mount
    assert!(labels.contains(&format!("//images/web@{RT}:bake")));
    assert!(labels.contains(&format!("//storages/data@{RT}:storage")));
    let sel = c
        .graph
        .select(&[Pattern::parse("//storages/data").unwrap()])
        .unwrap();
    let labels: Vec<String> = sel
        .iter()
        .map(|i| c.graph.node(i).label().to_string())
        .collect();
    assert_eq!(labels, vec![format!("//storages/data@{RT}:storage")]);
}

#[test]
fn fingerprints_cover_the_launch_parameters_only() {
    let fp = |edit: &[(&str, &str)], rec: &RecordedFleet| {
        let (_d, t) = tree_with("true", edit);
        let c = compile(&t, &Fleet(rec.clone())).unwrap();
        let fps = c.graph.fingerprints().unwrap();
        (
            fps.get(id(&c, &inst("keeper"))),
            fps.get(id(&c, &inst("follower"))),
        )
    };
    let none = RecordedFleet::default();
    let base = fp(&[], &none);
    // userdata of keeper changes keeper's only
    let ud = fp(
        &[(
            "  - name: keeper\n    image: app\n",
            "  - name: keeper\n    image: app\n    userdata: echo hi\n",
        )],
        &none,
    );
    assert_ne!(ud.0, base.0);
    assert_eq!(ud.1, base.1);
    // a mount point is a launch parameter
    let mp = fp(&[("/mnt/data", "/mnt/other")], &none);
    assert_ne!(mp.0, base.0);
    // the build it will boot: a head for web moves follower's only
    let mut heads = RecordedFleet::default();
    heads
        .heads
        .insert(("web".into(), RT.into()), "sha256:aaaa".into());
    let h = fp(&[], &heads);
    assert_ne!(h.1, base.1);
    assert_eq!(h.0, base.0);
    // a pending replacement is the build keeper will boot
    let mut pending = RecordedFleet::default();
    pending
        .pending
        .insert("keeper".into(), "sha256:bbbb".into());
    assert_ne!(fp(&[], &pending).0, base.0);
}

#[test]
fn apply_flags_gate_fleet_nodes() {
    let (_d, t) = tree_with("false", &[]);
    let c = compile(&t, &csis_rules::compile::NoPins).unwrap();
    let n = c.graph.node(id(&c, &inst("keeper")));
    assert_eq!(n.attr(GATED_ATTR), Some("apply_instances is false"));
    // apply_storage: true in the fixture
    let s = c
        .graph
        .node(id(&c, &format!("//storages/data@{RT}:storage")));
    assert_eq!(s.attr(GATED_ATTR), None);
    // a list names builders or runtimes
    let (_d, t) = tree_with("[containers]", &[]);
    let c = compile(&t, &csis_rules::compile::NoPins).unwrap();
    assert_eq!(c.graph.node(id(&c, &inst("keeper"))).attr(GATED_ATTR), None);
    let (_d, t) = tree_with("[elsewhere]", &[]);
    let c = compile(&t, &csis_rules::compile::NoPins).unwrap();
    let why = c.graph.node(id(&c, &inst("keeper"))).attr(GATED_ATTR);
    assert!(
        why.is_some_and(|w| w.contains("elsewhere") && w.contains("containers")),
        "{why:?}"
    );
}

#[test]
fn recorded_and_undeclared_get_nodes_that_retire_them() {
    let (_d, t) = tree_with("true", &[]);
    let mut rec = RecordedFleet::default();
    rec.instances.insert(
        "gone".into(),
        RecordedInstance {
            runtime: RT.into(),
            image: "web".into(),
            build: "sha256:cccc".into(),
            mounts: vec!["old-data".into()],
        },
    );
    rec.instances.insert(
        "keeper".into(),
        RecordedInstance {
            runtime: RT.into(),
            image: "app".into(),
            build: "sha256:dddd".into(),
            mounts: vec!["data".into()],
        },
    );
    rec.storages.insert(
        "old-data".into(),
        RecordedStorage {
            state: "active".into(),
            builder: "volumes".into(),
        },
    );
    rec.storages.insert(
        "long-gone".into(),
        RecordedStorage {
            state: "destroyed".into(),
            builder: "volumes".into(),
        },
    );
    let c = compile(&t, &Fleet(rec)).unwrap();
    let gone = c.graph.node(id(&c, &inst("gone")));
    assert_eq!(gone.attr(DECOMMISSION_ATTR), Some("true"));
    assert!(c
        .instance_spec(id(&c, &inst("gone")))
        .unwrap()
        .declared
        .is_none());
    // the storage it mounted is destroyed after it is decommissioned
    let old = format!("//storages/old-data@{RT}:storage");
    assert_eq!(deps(&c, &old), vec![inst("gone")]);
    assert!(c.storage_spec(id(&c, &old)).unwrap().declared.is_none());
    // a destroyed one needs nothing; a declared one is not retired
    assert!(c
        .graph
        .find(&Label::parse(&format!("//storages/long-gone@{RT}:storage")).unwrap())
        .is_none());
    assert_eq!(
        c.graph
            .node(id(&c, &inst("keeper")))
            .attr(DECOMMISSION_ATTR),
        None
    );
    let names: BTreeMap<String, usize> = c
        .fleet_nodes()
        .map(|i| (c.graph.node(i).label().to_string(), 1))
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
}
