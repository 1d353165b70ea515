//! The ordering edges a build adds to the compiled graph once the plan is
//! known: dispose nodes after the bakes that stand on their series, the
//! instance nodes of a tofu root after what the root reads.

use std::collections::{HashMap, HashSet};

use csis_engine::NodeId;
use csis_rules::compile::{NodeSpec, ParentSpec};

use crate::session::Session;

/// Ordering edges the compiled graph does not carry, for the dispose nodes
/// that will run: a dispose node of (series, runtime) runs after
/// every due bake on that runtime whose parent is a build of the series
/// (`source_image` under either policy, or a fixed `image_identifier` that
/// is one of its recorded builds): those bakes stand on a build of the
/// series until they are recorded, and a follow child moves its pin off the
/// old parent build only when its bake is recorded. (After the series' own
/// release the compiled graph already orders it.)
///
/// Nothing depends on a dispose node, so no edge can close a cycle. The
/// edges are `Order` (never hashed) and added after fingerprints and plan;
/// the scheduler counts only due dependencies, so a bake that is current
/// or not selected holds nothing up.
pub(super) fn order_dispose_nodes(mut session: Session, plan: &csis_engine::Plan) -> Session {
    let c = &session.compiled;
    let mut disposes: HashMap<(&str, &str), NodeId> = HashMap::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        if let NodeSpec::Dispose {
            series, runtime, ..
        } = c.spec(n.id)
        {
            disposes.insert((series.as_str(), runtime.as_str()), n.id);
        }
    }
    if disposes.is_empty() {
        return session;
    }
    let mut edges = Vec::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        let key = match c.spec(n.id) {
            NodeSpec::Bake(b) => match &b.parent {
                ParentSpec::Image { series, .. } => Some((series.clone(), b.runtime.clone())),
                ParentSpec::Fixed { id } => session
                    .lineage
                    .find(id)
                    .map(|r| (r.series.clone(), b.runtime.clone())),
                ParentSpec::Vendor { .. } => None,
            },
            _ => None,
        };
        if let Some(d) = key.and_then(|(s, r)| disposes.get(&(s.as_str(), r.as_str())).copied()) {
            edges.push((d, n.id));
        }
    }
    for (d, dep) in edges {
        session
            .compiled
            .graph
            .add_dep(d, dep, csis_engine::Dep::Order)
            .expect("both nodes are in the graph");
    }
    session
}

/// Ordering edges for the nodes of a tofu root (fleet::tofu): the first of
/// them runs the root's sequence for all, so each instance node of a
/// tofu-typed builder runs after every due bake of an image any instance
/// of that builder boots, and after every due storage node of a
/// tofu-typed storage builder (the instance root reads their outputs).
/// `Order` edges, added after the plan: nothing depends on an instance
/// node, so no cycle.
pub(super) fn order_tofu_nodes(mut session: Session, plan: &csis_engine::Plan) -> Session {
    let c = &session.compiled;
    let tree = &session.tree;
    let tofu = |ty: Option<&str>| ty.is_some_and(crate::fleet::tofu::is_tofu);
    let due: HashSet<NodeId> = plan.nodes.iter().filter(|n| n.due).map(|n| n.id).collect();
    let mut instances: Vec<(NodeId, &str)> = Vec::new();
    let mut storages: Vec<NodeId> = Vec::new();
    let mut bakes: HashMap<&str, Vec<NodeId>> = HashMap::new();
    for id in c.graph.ids() {
        match c.spec(id) {
            NodeSpec::Instance(i)
                if tofu(tree.instance_builder(&i.builder).map(|b| b.type_.as_str())) =>
            {
                if due.contains(&id) {
                    instances.push((id, i.builder.as_str()));
                }
                if let Some(b) = i.bake.filter(|b| due.contains(b)) {
                    bakes.entry(i.builder.as_str()).or_default().push(b);
                }
            }
            NodeSpec::Storage(s)
                if due.contains(&id)
                    && tofu(
                        tree.storage_builder(&s.builder)
                            .map(|b| b.model.type_.as_str()),
                    ) =>
            {
                storages.push(id)
            }
            _ => {}
        }
    }
    let mut edges = Vec::new();
    for (node, builder) in instances {
        for &b in bakes.get(builder).into_iter().flatten() {
            edges.push((node, b));
        }
        edges.extend(storages.iter().map(|&s| (node, s)));
    }
    for (n, dep) in edges {
        let _ = session
            .compiled
            .graph
            .add_dep(n, dep, csis_engine::Dep::Order);
    }
    session
}
