//! Selection by patterns, the closest-label error, cycle detection.

use csis_engine::*;
use serde_json::json;

fn l(s: &str) -> Label {
    Label::parse(s).unwrap()
}
fn p(s: &str) -> Pattern {
    Pattern::parse(s).unwrap()
}

/// os/deb12 on two runtimes -> images/base -> images/dask, images/torch (aws only).
fn tree() -> Graph {
    let mut g = Graph::new();
    for rt in ["aws-east2", "docker-local"] {
        let os = l(&format!("//os/deb12@{rt}"));
        let resolve = g
            .add_node(Node::new(os.clone(), "resolve").with_policy(RunPolicy::WhenDependentDue))
            .unwrap();
        let os_bake = g.add_node(Node::new(os, "bake")).unwrap();
        g.add_dep(os_bake, resolve, Dep::Order).unwrap();
        let mut parent = os_bake;
        let images: &[&str] = if rt == "aws-east2" {
            &["base", "dask", "torch"]
        } else {
            &["base", "dask"]
        };
        for (i, name) in images.iter().enumerate() {
            let t = l(&format!("//images/{name}@{rt}"));
            let emit = g
                .add_node(Node::new(t.clone(), "emit").with_policy(RunPolicy::WhenDependentDue))
                .unwrap();
            let bake = g
                .add_node(Node::new(t.clone(), "bake").with_inputs(json!({"name": name})))
                .unwrap();
            let retag = g
                .add_node(Node::new(t, "retag").with_policy(RunPolicy::WhenDependencyDue))
                .unwrap();
            g.add_dep(bake, emit, Dep::Order).unwrap();
            g.add_dep(bake, parent, Dep::hashed("parent")).unwrap();
            g.add_dep(retag, bake, Dep::Order).unwrap();
            if i == 0 {
                parent = bake; // dask and torch both chain from base
            }
        }
    }
    g
}

fn selected(g: &Graph, s: &Selection) -> Vec<String> {
    let mut v: Vec<String> = s.iter().map(|id| g.node(id).label().to_string()).collect();
    v.sort();
    v
}

#[test]
fn patterns_select_nodes_and_their_ancestors() {
    let g = tree();
    assert_eq!(g.select(&[p("//...")]).unwrap().len(), g.len());

    let s = g.select(&[p("//images/dask@aws-east2")]).unwrap();
    assert_eq!(
        selected(&g, &s),
        [
            "//images/base@aws-east2:bake",
            "//images/base@aws-east2:emit",
            "//images/dask@aws-east2:bake",
            "//images/dask@aws-east2:emit",
            "//images/dask@aws-east2:retag",
            "//os/deb12@aws-east2:bake",
            "//os/deb12@aws-east2:resolve",
        ]
    );

    let s = g.select(&[p("//images/dask@aws-east2:bake")]).unwrap();
    assert!(!selected(&g, &s).contains(&"//images/dask@aws-east2:retag".to_string()));

    // @runtime alone: everything on that runtime, nothing elsewhere.
    let s = g.select(&[p("@docker-local")]).unwrap();
    assert_eq!(s.len(), 2 + 2 * 3);
    assert!(selected(&g, &s).iter().all(|x| x.contains("@docker-local")));

    // //images/dask: both runtimes.
    let s = g.select(&[p("//images/dask")]).unwrap();
    let names = selected(&g, &s);
    assert!(names.contains(&"//images/dask@docker-local:bake".to_string()));
    assert!(names.contains(&"//images/dask@aws-east2:bake".to_string()));
    assert!(!names.iter().any(|x| x.contains("torch")));

    // Several patterns: the union.
    let s = g
        .select(&[p("//images/torch@aws-east2"), p("//os/...")])
        .unwrap();
    let names = selected(&g, &s);
    assert!(names.contains(&"//os/deb12@docker-local:resolve".to_string()));
    assert!(names.contains(&"//images/torch@aws-east2:retag".to_string()));
    assert!(!names.iter().any(|x| x.contains("dask")));

    // Selection is ancestor-closed.
    for id in s.iter() {
        for (d, _) in g.deps(id) {
            assert!(s.contains(d));
        }
    }
}

#[test]
fn a_pattern_matching_nothing_names_the_closest_labels() {
    let g = tree();
    let e = g.select(&[p("//images/dusk@aws-east2")]).unwrap_err();
    assert_eq!(e.pattern, "//images/dusk@aws-east2");
    assert_eq!(e.closest[0], "//images/dask@aws-east2");
    assert!(
        e.to_string()
            .contains("matches nothing; closest: //images/dask@aws-east2"),
        "{e}"
    );

    let e = g.select(&[p("@aws-east3")]).unwrap_err();
    assert_eq!(e.closest[0], "@aws-east2");

    let e = g.select(&[p("//image/...")]).unwrap_err();
    assert_eq!(e.closest[0], "//images/...");

    // One good and one bad pattern is still an error.
    assert!(g.select(&[p("//..."), p("//images/tourch")]).is_err());
}

#[test]
fn a_cycle_is_an_error_that_prints_it() {
    let mut g = Graph::new();
    let free = g.add_node(Node::new(l("//free@rt"), "bake")).unwrap();
    let a = g.add_node(Node::new(l("//a@rt"), "bake")).unwrap();
    let b = g.add_node(Node::new(l("//b@rt"), "bake")).unwrap();
    let c = g.add_node(Node::new(l("//c@rt"), "bake")).unwrap();
    let after = g.add_node(Node::new(l("//after@rt"), "bake")).unwrap();
    g.add_dep(a, free, Dep::Order).unwrap();
    g.add_dep(b, a, Dep::hashed("parent")).unwrap();
    g.add_dep(c, b, Dep::Order).unwrap();
    g.add_dep(a, c, Dep::Order).unwrap(); // closes a -> b -> c -> a
    g.add_dep(after, c, Dep::Order).unwrap();

    let e = g.fingerprints().unwrap_err();
    assert_eq!(e.cycle.len(), 4, "{e}");
    assert_eq!(e.cycle.first(), e.cycle.last());
    // Each step of the printed cycle is a real dependency: x -> y means y depends on x.
    for w in e.cycle.windows(2) {
        let (x, y) = (g.find(&w[0]).unwrap(), g.find(&w[1]).unwrap());
        assert!(g.deps(y).any(|(d, _)| d == x), "{} -> {}", w[0], w[1]);
    }
    let mut members: Vec<String> = e.cycle[..3].iter().map(|l| l.to_string()).collect();
    members.sort();
    assert_eq!(members, ["//a@rt:bake", "//b@rt:bake", "//c@rt:bake"]);
    assert!(e.to_string().starts_with("dependency cycle: //"), "{e}");
    assert!(g.check_acyclic().is_err());

    // Without the closing edge, it is fine and ordered parents first.
    let mut g = Graph::new();
    let a = g.add_node(Node::new(l("//a@rt"), "bake")).unwrap();
    let b = g.add_node(Node::new(l("//b@rt"), "bake")).unwrap();
    g.add_dep(a, b, Dep::Order).unwrap();
    assert_eq!(g.topo_order().unwrap(), vec![b, a]);
}

#[test]
fn a_two_node_cycle() {
    let mut g = Graph::new();
    let a = g.add_node(Node::new(l("//a@rt"), "bake")).unwrap();
    let b = g.add_node(Node::new(l("//b@rt"), "bake")).unwrap();
    g.add_dep(a, b, Dep::Order).unwrap();
    g.add_dep(b, a, Dep::Order).unwrap();
    let e = g.check_acyclic().unwrap_err();
    assert_eq!(e.cycle.len(), 3);
}

/// A node replaced by one of its label keeps its place, its edges and the
/// topological order; its new inputs are what the graph fingerprints. A
/// node of another label is refused, and the graph is left as it was.
#[test]
fn a_node_is_replaced_in_place_by_one_of_its_label() {
    let mut g = tree();
    let id = g.find(&l("//images/base@aws-east2:bake")).unwrap();
    let (order, before) = (g.topo_order().unwrap(), g.fingerprints().unwrap());
    let deps = |g: &Graph| g.deps(id).map(|(d, _)| d).collect::<Vec<_>>();
    let (old_deps, old_dependents) = (deps(&g), g.dependents(id).collect::<Vec<_>>());
    let node = Node::new(l("//images/base@aws-east2"), "bake").with_inputs(json!({"name": "b2"}));
    g.replace_node(id, std::sync::Arc::new(node)).unwrap();
    assert_eq!(g.node(id).inputs().to_value(), json!({"name": "b2"}));
    assert_eq!(g.topo_order().unwrap(), order);
    assert_eq!(
        (deps(&g), g.dependents(id).collect::<Vec<_>>()),
        (old_deps, old_dependents)
    );
    let after = g.fingerprints().unwrap();
    assert_ne!(after.get(id), before.get(id), "the new inputs are hashed");
    // the same order, new values
    let kept = before.with_values(g.ids().map(|i| after.get(i)).collect());
    assert_eq!(kept.topo_order(), after.topo_order());

    let other = Node::new(l("//images/dask@aws-east2"), "bake");
    let err = g.replace_node(id, std::sync::Arc::new(other)).unwrap_err();
    assert!(matches!(err, GraphError::Replaced { .. }), "{err}");
    assert_eq!(g.node(id).inputs().to_value(), json!({"name": "b2"}));
    assert!(g
        .replace_node(NodeId::from_index(g.len()), g.node_arc(id).clone())
        .is_err());
}
