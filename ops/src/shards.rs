//! `csis plan --shards N`: the due bakes split into N groups for a CI
//! matrix, respecting the DAG. A group holds whole chains where it can; a
//! chain too long for one group is cut below a bake, and the group holding
//! the rest names the group it waits on (`waits_on`). Waits only ever point
//! to a group of a lower index, so a matrix that runs group `i` after the
//! groups it names never deadlocks.
//!
//! The unit of work is a due bake with every due bake below it (through
//! its `parent`) while that subtree fits the target size (the due bakes
//! divided by N, rounded up); a larger subtree keeps its root bake as a
//! unit of its own and its children's subtrees become units that wait on
//! it. Units are placed heaviest first (longest processing time first) on
//! the least loaded group that does not come before a group it waits on.

use std::collections::{BTreeMap, BTreeSet};

use csis_engine::{Graph, NodeId, Plan};
use csis_rules::compile::NodeKind;
use serde::Serialize;

/// One group of the split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// 0-based; the matrix index.
    pub index: usize,
    /// The labels of its due bakes, in plan (topological) order.
    pub bakes: Vec<String>,
    /// The patterns a job passes to `csis build` (`//images/web@rt`).
    pub patterns: Vec<String>,
    /// The groups whose bakes this one's stand on (all of a lower index).
    pub waits_on: Vec<usize>,
}

/// The answer of `csis plan --shards N --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardPlan {
    /// N as asked.
    pub shards: usize,
    /// Due bakes in all.
    pub due: usize,
    /// Exactly N groups (empty ones included, so a matrix of N always has
    /// its index).
    pub groups: Vec<Shard>,
}

/// The nearest due bakes a node stands on (through non-bake nodes).
fn due_bake_parents(graph: &Graph, plan: &Plan, id: NodeId) -> BTreeSet<NodeId> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<NodeId> = graph.deps(id).map(|(d, _)| d).collect();
    let mut seen = BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        if graph.node(d).kind() == NodeKind::Bake {
            if plan.is_due(d) {
                out.insert(d);
            }
            continue;
        }
        stack.extend(graph.deps(d).map(|(x, _)| x));
    }
    out
}

/// Split the plan's due bakes into `n` groups (n >= 1).
pub fn split(graph: &Graph, plan: &Plan, n: usize) -> ShardPlan {
    let n = n.max(1);
    let due: Vec<NodeId> = plan
        .nodes
        .iter()
        .filter(|p| p.due && p.kind == NodeKind::Bake)
        .map(|p| p.id)
        .collect();
    let order: BTreeMap<NodeId, usize> = due.iter().enumerate().map(|(i, d)| (*d, i)).collect();
    // the forest of due bakes: each bake under its nearest due parent bake
    let mut parent: BTreeMap<NodeId, Option<NodeId>> = BTreeMap::new();
    let mut children: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
    for &d in &due {
        // one parent per image; with several (never today), the first in plan order
        let p = due_bake_parents(graph, plan, d)
            .into_iter()
            .min_by_key(|p| order.get(p).copied().unwrap_or(usize::MAX));
        parent.insert(d, p);
        if let Some(p) = p {
            children.entry(p).or_default().push(d);
        }
    }
    // subtree sizes, children before parents (reverse plan order)
    let mut size: BTreeMap<NodeId, usize> = BTreeMap::new();
    for &d in due.iter().rev() {
        let s = 1 + children
            .get(&d)
            .map(|c| c.iter().map(|x| size[x]).sum::<usize>())
            .unwrap_or(0);
        size.insert(d, s);
    }
    let target = due.len().div_ceil(n).max(1);
    // units: (root, members, the unit it waits on)
    struct Unit {
        members: Vec<NodeId>,
        waits: Option<usize>,
    }
    let mut units: Vec<Unit> = Vec::new();
    fn whole(children: &BTreeMap<NodeId, Vec<NodeId>>, root: NodeId, out: &mut Vec<NodeId>) {
        out.push(root);
        for c in children.get(&root).into_iter().flatten() {
            whole(children, *c, out);
        }
    }
    // (root, the unit it waits on), processed parents first
    let mut todo: std::collections::VecDeque<(NodeId, Option<usize>)> = due
        .iter()
        .filter(|d| parent[d].is_none())
        .map(|d| (*d, None))
        .collect();
    while let Some((root, waits)) = todo.pop_front() {
        if size[&root] <= target {
            let mut members = Vec::new();
            whole(&children, root, &mut members);
            units.push(Unit { members, waits });
        } else {
            units.push(Unit {
                members: vec![root],
                waits,
            });
            let me = units.len() - 1;
            for c in children.get(&root).into_iter().flatten() {
                todo.push_back((*c, Some(me)));
            }
        }
    }
    // place units: units are in waits-first order already; heaviest first
    // among those whose awaited unit is placed
    let mut load = vec![0usize; n];
    let mut group_of: Vec<Option<usize>> = vec![None; units.len()];
    let mut placed = 0;
    while placed < units.len() {
        let next = (0..units.len())
            .filter(|&u| group_of[u].is_none())
            .filter(|&u| units[u].waits.is_none_or(|w| group_of[w].is_some()))
            .max_by_key(|&u| (units[u].members.len(), std::cmp::Reverse(u)))
            .expect("a unit whose awaited unit is placed");
        let floor = units[next].waits.and_then(|w| group_of[w]).unwrap_or(0);
        let g = (floor..n).min_by_key(|&g| (load[g], g)).unwrap_or(floor);
        load[g] += units[next].members.len();
        group_of[next] = Some(g);
        placed += 1;
    }
    let mut groups: Vec<Shard> = (0..n)
        .map(|index| Shard {
            index,
            bakes: Vec::new(),
            patterns: Vec::new(),
            waits_on: Vec::new(),
        })
        .collect();
    let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for (u, unit) in units.iter().enumerate() {
        let g = group_of[u].unwrap_or(0);
        members[g].extend(unit.members.iter().copied());
        if let Some(w) = unit.waits.and_then(|w| group_of[w]) {
            if w != g && !groups[g].waits_on.contains(&w) {
                groups[g].waits_on.push(w);
            }
        }
    }
    for (g, mut m) in members.into_iter().enumerate() {
        m.sort_by_key(|d| order[d]);
        for d in m {
            let label = graph.node(d).label();
            groups[g].bakes.push(label.to_string());
            groups[g].patterns.push(label.target().to_string());
        }
        groups[g].waits_on.sort();
    }
    ShardPlan {
        shards: n,
        due: due.len(),
        groups,
    }
}
