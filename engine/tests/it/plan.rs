//! The planner: first match wins, propagation to follow descendants, pinned
//! children stay current, support and follow-up nodes, explain, JSON shape.

use std::time::Duration;

use csis_engine::*;
use serde_json::{json, Value};

fn l(s: &str) -> Label {
    Label::parse(s).unwrap()
}

struct Tree {
    g: Graph,
    base: NodeId,
    follow: NodeId,
    follow_child: NodeId,
    pinned: NodeId,
    pinned_child: NodeId,
    base_emit: NodeId,
    base_resolve: NodeId,
    base_retag: NodeId,
}

/// base -> follow -> follow_child (follow edges);
/// base -> pinned (pinned at `pin`) -> pinned_child (follow edge).
/// base has resolve -> emit -> bake -> retag.
fn tree(base_content: &str, pin: Option<Fingerprint>) -> Tree {
    let mut g = Graph::new();
    let rt = "rt";
    let t = |n: &str| l(&format!("//images/{n}@{rt}"));
    let base_resolve = g
        .add_node(Node::new(l("//os/deb12@rt"), "resolve").with_policy(RunPolicy::WhenDependentDue))
        .unwrap();
    let base_emit = g
        .add_node(Node::new(t("base"), "emit").with_policy(RunPolicy::WhenDependentDue))
        .unwrap();
    let base = g
        .add_node(
            Node::new(t("base"), "bake")
                .with_inputs(
                    json!({"series": "base", "mods": [{"name": "m", "content": base_content}]}),
                )
                .with_attr("series", "base"),
        )
        .unwrap();
    let base_retag = g
        .add_node(Node::new(t("base"), "retag").with_policy(RunPolicy::WhenDependencyDue))
        .unwrap();
    g.add_dep(base_emit, base_resolve, Dep::Order).unwrap();
    g.add_dep(base, base_emit, Dep::Order).unwrap();
    g.add_dep(base_retag, base, Dep::Order).unwrap();
    let mk = |g: &mut Graph, n: &str| {
        g.add_node(
            Node::new(t(n), "bake")
                .with_inputs(json!({"series": n}))
                .with_attr("series", n),
        )
        .unwrap()
    };
    let follow = mk(&mut g, "follow");
    let follow_child = mk(&mut g, "follow-child");
    let pinned = mk(&mut g, "pinned");
    let pinned_child = mk(&mut g, "pinned-child");
    g.add_dep(follow, base, Dep::hashed("parent")).unwrap();
    g.add_dep(follow_child, follow, Dep::hashed("parent"))
        .unwrap();
    let pin = pin.unwrap_or_else(|| g.fingerprints().unwrap().get(base));
    g.add_dep(pinned, base, Dep::pinned("parent", pin)).unwrap();
    g.add_dep(pinned_child, pinned, Dep::hashed("parent"))
        .unwrap();
    Tree {
        g,
        base,
        follow,
        follow_child,
        pinned,
        pinned_child,
        base_emit,
        base_resolve,
        base_retag,
    }
}

/// Records as if every Decide node had just been built from this graph.
fn converged(g: &Graph) -> MemoryRecords {
    let fps = g.fingerprints().unwrap();
    let mut r = MemoryRecords::default();
    for id in g.ids() {
        let n = g.node(id);
        if n.policy() != RunPolicy::Decide {
            continue;
        }
        let mut deps = csis_engine::DepBuilds::default();
        for (d, dep) in g.deps(id) {
            if let Dep::Hashed(name) = dep {
                deps.insert(name.to_string(), format!("b-{}", g.node(d).label().path()));
            }
        }
        r.insert(
            n.label().clone(),
            Record {
                fingerprint: Some(fps.get(id)),
                canonical: Some(g.canonical(id, &fps)),
                build: Some(format!("b-{}", n.label().path())),
                age: Some(Duration::from_secs(86400)),
                deps,
                earlier: Vec::new(),
            },
        );
    }
    r
}

fn plan_all(g: &Graph, planner: &Planner, records: &dyn Records) -> Plan {
    let fps = g.fingerprints().unwrap();
    planner.plan(g, &g.select_all(), &fps, records).unwrap()
}

#[test]
fn converged_tree_is_all_current() {
    let t = tree("v1", None);
    let r = converged(&t.g);
    let plan = plan_all(&t.g, &Planner::standard(), &r);
    assert_eq!(plan.nodes.len(), t.g.len());
    assert_eq!(
        plan.due().count(),
        0,
        "{:?}",
        plan.due().map(|n| &n.reason).collect::<Vec<_>>()
    );
    let b = plan.node(t.base).unwrap();
    assert_eq!(b.reason, "current (build b-images/base)");
    assert_eq!(b.code, "current");
}

#[test]
fn a_change_propagates_to_follow_descendants_while_pinned_children_stay_current() {
    let old = tree("v1", None);
    let records = converged(&old.g);
    let old_fps = old.g.fingerprints().unwrap();
    // Same tree, the base's mod changed; the pinned child still pins the old base build.
    let t = tree("v2", Some(old_fps.get(old.base)));
    let plan = plan_all(&t.g, &Planner::standard(), &records);
    let due = |id| plan.node(id).unwrap().due;

    let base = plan.node(t.base).unwrap();
    assert!(base.due);
    assert_eq!(base.code, "inputs-changed");
    let new_fp = t.g.fingerprints().unwrap().get(t.base);
    assert_eq!(
        base.reason,
        format!(
            "inputs changed ({} -> {})",
            old_fps.get(old.base).prefix(12),
            new_fp.prefix(12)
        )
    );
    // Field by field.
    let changes: Vec<String> = base.changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(changes, ["inputs.mods[0].content (m): v1 -> v2"]);

    // Follow descendants: due because their parent re-bakes (checked before inputs).
    let f = plan.node(t.follow).unwrap();
    assert!(f.due);
    assert_eq!(f.reason, "parent //images/base@rt:bake re-bakes this run");
    assert_eq!(
        plan.node(t.follow_child).unwrap().reason,
        "parent //images/follow@rt:bake re-bakes this run"
    );
    // Their fingerprints moved too, and explain says which hashed dep moved.
    assert_ne!(f.fingerprint, old_fps.get(old.follow));
    assert!(
        f.changes.iter().any(|c| c.path == "deps.parent"),
        "{:?}",
        f.changes
    );

    // Pinned child and its own descendants: current.
    assert!(!due(t.pinned), "{}", plan.node(t.pinned).unwrap().reason);
    assert!(!due(t.pinned_child));
    assert_eq!(
        plan.node(t.pinned).unwrap().fingerprint,
        old_fps.get(old.pinned)
    );

    // Support and follow-up nodes of the base run; the resolve/emit say why.
    assert_eq!(
        plan.node(t.base_emit).unwrap().reason,
        "needed by //images/base@rt:bake"
    );
    assert!(due(t.base_resolve));
    assert_eq!(
        plan.node(t.base_retag).unwrap().reason,
        "after //images/base@rt:bake"
    );
}

#[test]
fn support_nodes_do_not_run_for_current_bakes() {
    let t = tree("v1", None);
    let r = converged(&t.g);
    let plan = plan_all(&t.g, &Planner::standard(), &r);
    for id in [t.base_emit, t.base_resolve, t.base_retag] {
        assert!(!plan.node(id).unwrap().due);
    }
    // Only a follow child is forced: its parent's support nodes stay idle.
    let planner = Planner::standard().forced(|n| n.attr("series") == Some("follow"));
    let plan = plan_all(&t.g, &planner, &r);
    let due: Vec<String> = plan.due().map(|n| n.label.to_string()).collect();
    assert_eq!(
        due,
        ["//images/follow@rt:bake", "//images/follow-child@rt:bake"]
    );
    assert_eq!(plan.node(t.follow).unwrap().reason, "forced (--force-bake)");
}

#[test]
fn first_match_wins() {
    let t = tree("v1", None);
    let mut r = converged(&t.g);
    // The base has no record and is also forced: forced wins.
    r.map.remove(t.g.node(t.base).label());
    let planner = Planner::standard().forced(|n| n.attr("series") == Some("base"));
    let plan = plan_all(&t.g, &planner, &r);
    assert_eq!(plan.node(t.base).unwrap().code, "forced");
    // Not forced: no record.
    let plan = plan_all(&t.g, &Planner::standard(), &r);
    assert_eq!(plan.node(t.base).unwrap().reason, "no build yet on rt");
    // A follow child whose record's fingerprint also differs: the parent
    // re-baking is reported, not the inputs.
    assert_eq!(plan.node(t.follow).unwrap().code, "dep-due");

    // Parent moved beats inputs changed.
    let mut r = converged(&t.g);
    r.map.get_mut(t.g.node(t.base).label()).unwrap().build = Some("b-new".into());
    r.map
        .get_mut(t.g.node(t.follow).label())
        .unwrap()
        .fingerprint = None;
    let plan = plan_all(&t.g, &Planner::standard(), &r);
    let f = plan.node(t.follow).unwrap();
    assert_eq!(f.reason, "parent moved b-images/base -> b-new");
    assert_eq!(f.code, "dep-moved");
    // ... and the pinned child does not care where the base head moved.
    assert!(!plan.node(t.pinned).unwrap().due);

    // Unrecorded fingerprint alone: inputs changed (unrecorded -> ...).
    let mut r = converged(&t.g);
    r.map
        .get_mut(t.g.node(t.pinned).label())
        .unwrap()
        .fingerprint = None;
    let plan = plan_all(&t.g, &Planner::standard(), &r);
    assert!(plan
        .node(t.pinned)
        .unwrap()
        .reason
        .starts_with("inputs changed (unrecorded -> "));
}

#[test]
fn a_caller_rule_comes_after_the_standard_ones() {
    let t = tree("v1", None);
    let mut r = converged(&t.g);
    r.map.get_mut(t.g.node(t.base).label()).unwrap().age = Some(Duration::from_secs(40 * 86400));
    let refresh_days = 30u64;
    let planner = Planner::standard().rule(move |cx: &RuleCx<'_>| {
        let rec = cx.record?;
        let age = rec.age?.as_secs() / 86400;
        let head = rec.build.as_deref()?;
        (age >= refresh_days).then(|| {
            Reason::custom(
                "update-policy",
                format!("update policy: head {head} is {age} days old"),
            )
        })
    });
    let plan = plan_all(&t.g, &planner, &r);
    let b = plan.node(t.base).unwrap();
    assert_eq!(b.reason, "update policy: head b-images/base is 40 days old");
    assert_eq!(b.code, "update-policy");
    // Its follow child re-bakes with it; its pinned child does not.
    assert!(plan.node(t.follow).unwrap().due);
    assert!(!plan.node(t.pinned).unwrap().due);
    assert!(b.changes.is_empty(), "the inputs did not change");

    // When a standard rule matches first, the custom one is not consulted.
    let mut r2 = r.clone();
    r2.map
        .get_mut(t.g.node(t.base).label())
        .unwrap()
        .fingerprint = None;
    let plan = plan_all(&t.g, &planner, &r2);
    assert_eq!(plan.node(t.base).unwrap().code, "inputs-changed");
}

#[test]
fn selection_limits_the_plan() {
    let t = tree("v1", None);
    let r = MemoryRecords::default();
    let fps = t.g.fingerprints().unwrap();
    let sel =
        t.g.select(&[Pattern::parse("//images/follow@rt:bake").unwrap()])
            .unwrap();
    let plan = Planner::standard().plan(&t.g, &sel, &fps, &r).unwrap();
    let labels: Vec<String> = plan.nodes.iter().map(|n| n.label.to_string()).collect();
    // Ancestors in topological order; no descendants, no pinned sibling.
    assert_eq!(
        labels,
        [
            "//os/deb12@rt:resolve",
            "//images/base@rt:emit",
            "//images/base@rt:bake",
            "//images/follow@rt:bake"
        ]
    );
    assert!(plan.node(t.base_retag).is_none());
    assert!(plan.nodes.iter().all(|n| n.due));
}

#[test]
fn plan_json_shape() {
    let t = tree("v1", None);
    let plan = plan_all(&t.g, &Planner::standard(), &MemoryRecords::default());
    let j: Value = serde_json::to_value(&plan).unwrap();
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), t.g.len());
    let base = nodes
        .iter()
        .find(|n| n["label"] == "//images/base@rt:bake")
        .unwrap();
    let mut keys: Vec<&str> = base
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "code",
            "deps",
            "due",
            "fingerprint",
            "kind",
            "label",
            "reason",
            "runtime",
            "series"
        ]
    );
    assert_eq!(base["kind"], "bake");
    assert_eq!(base["series"], "base");
    assert_eq!(base["runtime"], "rt");
    assert_eq!(base["due"], true);
    assert_eq!(base["reason"], "no build yet on rt");
    assert_eq!(base["deps"], json!(["//images/base@rt:emit"]));
    assert_eq!(base["fingerprint"].as_str().unwrap().len(), 64);
}

/// Every planned node as JSON, with its full decision and id.
fn plan_view(p: &Plan) -> Vec<(NodeId, Value, Decision)> {
    for n in &p.nodes {
        assert_eq!(p.node(n.id).map(|x| x.id), Some(n.id), "found by its id");
    }
    p.nodes
        .iter()
        .map(|n| (n.id, serde_json::to_value(n).unwrap(), n.decision.clone()))
        .collect()
}

#[test]
fn a_plan_after_carries_the_unchanged_nodes_and_equals_a_fresh_plan() {
    let t = tree("v1", None);
    // records as the planning view has them: no canonical documents
    let mut r = converged(&t.g);
    for rec in r.map.values_mut() {
        rec.canonical = None;
    }
    let planner = Planner::standard();
    let sel = t.g.select_all();
    let first = planner
        .plan_after(&t.g, &sel, &t.g.fingerprints().unwrap(), &r, None)
        .unwrap();
    assert_eq!(first.carried(), 0);
    assert_eq!(first.made.len(), t.g.len());
    assert_eq!(first.plan.due().count(), 0);

    // base's inputs edited in place: the same shape
    let mut g = t.g.clone();
    let label = |n: &str| l(&format!("//images/{n}@rt"));
    g.replace_node(
        t.base,
        std::sync::Arc::new(
            Node::new(label("base"), "bake")
                .with_inputs(json!({"series": "base", "mods": [{"name": "m", "content": "v2"}]}))
                .with_attr("series", "base"),
        ),
    )
    .unwrap();
    assert_eq!(
        g.shape(),
        t.g.shape(),
        "a node replaced in place keeps the shape"
    );
    let fps = g.fingerprints().unwrap();
    let fresh = planner.plan(&g, &sel, &fps, &r).unwrap();
    let again = planner
        .plan_after(&g, &sel, &fps, &r, Some(first.plan))
        .unwrap();
    assert_eq!(plan_view(&again.plan), plan_view(&fresh));
    // base re-bakes, its follow descendants with it, its support nodes
    // and retag run; the pinned child and its child are carried
    let mut moved = vec![
        t.base,
        t.follow,
        t.follow_child,
        t.base_emit,
        t.base_resolve,
        t.base_retag,
    ];
    moved.sort();
    assert_eq!(again.carried(), 2);
    let mut made = again.made.clone();
    made.sort();
    assert_eq!(made, moved, "made anew: the nodes replaced");
    assert!(!again.plan.node(t.pinned).unwrap().due);
    assert!(!again.plan.node(t.pinned_child).unwrap().due);

    // a node a caller edited after planning is not carried
    let mut edited = again.plan;
    let i = edited.nodes.iter().position(|n| n.id == t.pinned).unwrap();
    edited.nodes[i].reason = "held: pinned to a revoked build".into();
    edited.nodes[i].code = "pin-revoked".into();
    let third = planner
        .plan_after(&g, &sel, &fps, &r, Some(edited))
        .unwrap();
    assert_eq!(plan_view(&third.plan), plan_view(&fresh));
    assert_eq!(third.carried(), t.g.len() - 1);
    assert_eq!(third.made, [t.pinned]);

    // another selection of the same graph (the nodes in other places):
    // each node carried is found by its place in the last plan, both ways
    let some = g
        .select(&[Pattern::parse("//images/follow@rt:bake").unwrap()])
        .unwrap();
    assert!(some.len() < g.len());
    let part = planner
        .plan_after(&g, &some, &fps, &r, Some(third.plan))
        .unwrap();
    assert_eq!(
        plan_view(&part.plan),
        plan_view(&planner.plan(&g, &some, &fps, &r).unwrap())
    );
    assert_eq!(part.carried(), some.len());
    let third = planner
        .plan_after(&g, &sel, &fps, &r, Some(part.plan))
        .unwrap();
    assert_eq!(plan_view(&third.plan), plan_view(&fresh));
    assert_eq!(third.carried(), some.len());

    // a graph of another shape: nothing is carried
    let mut bigger = g.clone();
    bigger
        .add_node(Node::new(label("other"), "bake").with_attr("series", "other"))
        .unwrap();
    assert_ne!(bigger.shape(), g.shape());
    // a copy and its original, each given a node: two shapes
    let mut other = g.clone();
    other
        .add_node(Node::new(label("another"), "bake").with_attr("series", "another"))
        .unwrap();
    assert_ne!(other.shape(), bigger.shape());
    assert_ne!(other.shape(), g.shape());
    let sel = bigger.select_all();
    let fps = bigger.fingerprints().unwrap();
    let fourth = planner
        .plan_after(&bigger, &sel, &fps, &r, Some(third.plan))
        .unwrap();
    assert_eq!(fourth.carried(), 0);
    assert_eq!(fourth.made.len(), bigger.len());
    assert_eq!(
        plan_view(&fourth.plan),
        plan_view(&planner.plan(&bigger, &sel, &fps, &r).unwrap())
    );
}

#[test]
fn a_heads_dependency_builds_are_a_sorted_map() {
    let mut d = csis_engine::DepBuilds::default();
    assert!(d.is_empty());
    assert_eq!(d.insert("parent".into(), "b1".into()), None);
    assert_eq!(d.insert("base".into(), "b0".into()), None);
    assert_eq!(d.insert("parent".into(), "b2".into()), Some("b1".into()));
    assert_eq!(d.get("parent").map(String::as_str), Some("b2"));
    assert_eq!(d.get("other"), None);
    assert_eq!(d.len(), 2);
    let names: Vec<&str> = d.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["base", "parent"]);
    // written and read as a map, as the BTreeMap it replaced
    let text = serde_json::to_string(&d).unwrap();
    assert_eq!(text, r#"{"base":"b0","parent":"b2"}"#);
    let back: csis_engine::DepBuilds =
        serde_json::from_str(r#"{"parent":"b2","base":"b0"}"#).unwrap();
    assert_eq!(back, d);
}
