//! The picture of a plan: the plan and the records (lineage heads,
//! releases, revocations, pins, post-bake tests) gathered into the
//! [`csis_graph`] model, by default one node per series x runtime with its
//! steps folded in.

use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use csis_cache::release_rules::ImageTests;
use csis_cache::{parse_run_id, BuildRecord, Lineage, Pins, Releases, Revocations};
use csis_engine::{Dep, Plan, PlannedNode, Reason};
use csis_graph as g;
use csis_rules::compile::NodeKind;
use csis_rules::tree::Parent;
use csis_rules::Tree;
use csis_schema::model::ParentPolicy;

use crate::session::Session;

/// The model of `plan` (made by `session`), with the records as the next
/// build reads them.
pub fn picture(s: &Session, plan: &Plan, folded: bool) -> Result<g::Graph> {
    let (_, lineage, pins, _) = crate::session::read_meta(&s.root)?;
    let records = RecordsView {
        lineage: &lineage,
        pins: &pins,
        revs: &s.revs,
        releases: s.meta.releases()?,
        tests: ImageTests::load(&s.meta)?,
    };
    Ok(gather(&s.tree, &s.compiled.graph, plan, &records, folded))
}

/// What the picture reads of `meta-state/` (the planning view: revoked
/// heads and pins to revoked builds left out).
pub struct RecordsView<'a> {
    pub lineage: &'a Lineage,
    pub pins: &'a Pins,
    pub revs: &'a Revocations,
    pub releases: Releases,
    pub tests: ImageTests,
}

fn secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn build_of(r: &BuildRecord) -> g::Build {
    g::Build {
        id: r.build_id.clone(),
        at: r.run.as_deref().and_then(parse_run_id).map(secs),
    }
}

/// `image`, `os`, `storage` or `instance` from a label's first path segment.
fn series_kind(n: &PlannedNode) -> &'static str {
    match n.label.segments().next() {
        Some("os") => "os",
        Some("storages") => "storage",
        Some("instances") => "instance",
        _ => "image",
    }
}

/// A changed field for people: `inputs.mods[0].files[0] (playbooks/web.yml)`
/// (the content hash under a file is the file).
fn changed_field(c: &csis_engine::FieldChange) -> String {
    let path = c.path.strip_suffix(".blake3").unwrap_or(&c.path);
    match &c.item {
        Some(i) => format!("{path} ({i})"),
        None => path.to_string(),
    }
}

/// The series of a label (`//images/web@sim:bake` -> `web`).
fn label_series(l: &csis_engine::Label) -> String {
    l.name().to_string()
}

/// The reason a node is due, in words, with the changed fields.
fn due_of(n: &PlannedNode, parent: Option<&str>) -> Option<g::Due> {
    if !n.due {
        return None;
    }
    let parent = parent.unwrap_or("parent");
    let (reason, changed) = match n.decision.reason() {
        Some(Reason::Forced) => ("forced (--force-bake)".to_string(), Vec::new()),
        Some(Reason::NoRecord { .. }) if n.reason.contains("revoked") => {
            // `no unrevoked build on RT (ID revoked: WHY)`
            let detail = n
                .reason
                .split_once(" (")
                .map(|(_, d)| d.trim_end_matches(')').to_string());
            (
                "its build was revoked".to_string(),
                detail
                    .map(|d| match d.split_once(" revoked") {
                        Some((id, why)) => format!("{}{why}", g::short_id(id)),
                        None => d,
                    })
                    .into_iter()
                    .collect(),
            )
        }
        Some(Reason::NoRecord { runtime }) => {
            let words = match runtime {
                Some(rt) => n.reason.replace(&format!(" on {rt}"), ""),
                None => n.reason.clone(),
            };
            (words, Vec::new())
        }
        Some(Reason::DepMoved { from, to, .. }) => (
            format!("parent {parent} has a newer build"),
            vec![format!("{} -> {}", g::short_id(from), g::short_id(to))],
        ),
        Some(Reason::DepDue { label, .. }) => (
            format!("parent {} re-bakes", label_series(label)),
            Vec::new(),
        ),
        Some(Reason::InputsChanged { .. }) if !n.changes.is_empty() => (
            "inputs changed".to_string(),
            n.changes.iter().map(changed_field).collect(),
        ),
        Some(Reason::InputsChanged { .. }) => (
            "inputs changed".to_string(),
            vec!["(the head records no inputs to compare)".to_string()],
        ),
        _ => (n.reason.clone(), Vec::new()),
    };
    Some(g::Due {
        code: n.code.clone(),
        reason,
        changed,
    })
}

/// The inputs of a bake, one line per field, naming mods and files but
/// never a configuration value.
fn inputs_summary(v: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let Some(m) = v.as_object() else {
        return Vec::new();
    };
    let named = |x: &Value| -> Option<String> {
        x.get("name")
            .or_else(|| x.get("path"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut out = Vec::new();
    for (k, x) in m {
        let line = match (k.as_str(), x) {
            (
                "series" | "parent" | "recipe" | "family" | "family_version" | "architecture"
                | "admin_user",
                Value::String(s),
            ) => format!("{k}: {s}"),
            ("mods", Value::Array(a)) => {
                let names: Vec<String> = a
                    .iter()
                    .map(|m| {
                        let files = m
                            .get("files")
                            .and_then(Value::as_array)
                            .map(|f| f.iter().filter_map(named).collect::<Vec<_>>().join(", "));
                        let name = named(m).unwrap_or_else(|| "?".into());
                        match files.filter(|f| !f.is_empty()) {
                            Some(f) => format!("{name} [{f}]"),
                            None => name,
                        }
                    })
                    .collect();
                format!("mods: {} ({})", a.len(), names.join("; "))
            }
            (_, Value::Array(a)) => format!("{k}: {} item(s)", a.len()),
            (_, Value::Object(o)) if o.is_empty() => format!("{k}: {{}}"),
            (_, Value::Object(o)) => {
                let keys: Vec<&str> = o.keys().map(String::as_str).collect();
                format!("{k}: {{{}}}", keys.join(", "))
            }
            (_, Value::Number(n)) => format!("{k}: {n}"),
            (_, Value::Bool(b)) => format!("{k}: {b}"),
            (_, Value::Null) => format!("{k}: null"),
            (_, Value::String(_)) => format!("{k}: (set)"),
        };
        out.push(line);
    }
    out
}

/// The parent series of an image and how it follows it.
fn parent_of(tree: &Tree, series: &str, kind: &str) -> Option<(String, g::EdgeKind)> {
    if kind != "image" {
        return None;
    }
    let img = tree.image(series)?;
    let p = match &img.parent {
        Parent::Os(p) | Parent::Image(p) => p.clone(),
    };
    let k = match img.model.parent_policy {
        ParentPolicy::Pinned => g::EdgeKind::Pinned,
        ParentPolicy::Follow => g::EdgeKind::Follow,
    };
    Some((p, k))
}

/// The plan and the records as a [`csis_graph::Graph`]: folded (one node
/// per series x runtime) or one node per step.
pub fn gather(
    tree: &Tree,
    graph: &csis_engine::Graph,
    plan: &Plan,
    rec: &RecordsView<'_>,
    folded: bool,
) -> g::Graph {
    let now = SystemTime::now();
    let revoked = revoked_by_series(rec);
    let runtime_of: HashMap<&str, Option<&str>> = rec
        .lineage
        .builds
        .iter()
        .map(|b| (b.build_id.as_str(), b.runtime.as_deref()))
        .collect();
    // model -> image -> build, by runtime
    let released = |series: &str, rt: &str, head: Option<&str>| -> Vec<String> {
        let mut out = Vec::new();
        for (model, images) in &rec.releases.current {
            let Some(b) = images.get(series) else {
                continue;
            };
            let on_rt = runtime_of
                .get(b.as_str())
                .is_some_and(|r| r.is_none_or(|r| r == rt));
            if !on_rt {
                continue;
            }
            if Some(b.as_str()) == head {
                out.push(model.clone());
            } else {
                out.push(format!("{model} (older build)"));
            }
        }
        out
    };

    let (groups, node_group) = group_nodes(plan, folded);

    let mut nodes: Vec<g::Node> = Vec::with_capacity(groups.len());
    for members in &groups {
        let first = members[0];
        let bake = members.iter().find(|n| n.kind == NodeKind::Bake).copied();
        let main = bake.unwrap_or(first);
        let series = main
            .series
            .clone()
            .unwrap_or_else(|| label_series(&main.label));
        let runtime = main.runtime.clone();
        let skind = series_kind(main);
        let parent = parent_of(tree, &series, skind);
        let kind = if folded {
            skind.to_string()
        } else {
            main.kind.clone()
        };
        let rt = runtime.as_deref().unwrap_or("");
        let head = rec.lineage.head(&series, rt);
        let with_build = folded || main.kind == NodeKind::Bake;
        let id = if folded {
            main.label.target().to_string()
        } else {
            main.label.to_string()
        };
        let mut node = g::Node {
            id,
            kind,
            series: series.clone(),
            runtime: runtime.clone(),
            parent: parent.as_ref().map(|p| p.0.clone()),
            due: due_of(main, parent.as_ref().map(|p| p.0.as_str())),
            entry: g::Entry {
                fingerprint: main.fingerprint.to_hex(),
                inputs: graph
                    .find(&main.label)
                    .map(|id| inputs_summary(&graph.node(id).inputs().to_value()))
                    .unwrap_or_default(),
                deps: main.deps.iter().map(ToString::to_string).collect(),
                command: format!("csis build {}", main.label.target()),
            },
            ..g::Node::default()
        };
        if with_build {
            node.build = head.map(build_of);
            node.released = released(&series, rt, head.map(|h| h.build_id.as_str()));
            node.revoked = revoked
                .get(&(series.as_str(), rt))
                .cloned()
                .unwrap_or_default();
            node.tested = head.and_then(|h| rec.tests.result(&h.build_id));
            // pinned behind the parent's head
            if let Some((p, g::EdgeKind::Pinned)) = &parent {
                if let (Some(pin), Some(ph)) =
                    (rec.pins.image_pin(&series, rt), rec.lineage.head(p, rt))
                {
                    if pin != ph.build_id {
                        node.behind = Some(g::Behind {
                            pinned: pin.to_string(),
                            head: ph.build_id.clone(),
                        });
                    }
                }
            }
        }
        if folded {
            node.steps = members
                .iter()
                .map(|n| g::Step {
                    label: n.label.to_string(),
                    kind: n.kind.clone(),
                    due: n.due,
                    reason: n.reason.clone(),
                    fingerprint: n.fingerprint.to_hex(),
                })
                .collect();
        }
        nodes.push(node);
    }

    mark_pinned_children(tree, rec, &mut nodes, folded);

    let edges = edges_between(tree, graph, plan, &node_group, &nodes);
    g::Graph {
        title: tree.config.id.clone(),
        now: Some(secs(now)),
        folded,
        nodes,
        edges,
    }
}

/// Per series and runtime: its revoked builds (with their reasons).
fn revoked_by_series<'r>(rec: &'r RecordsView<'_>) -> HashMap<(&'r str, &'r str), Vec<String>> {
    let mut revoked: HashMap<(&str, &str), Vec<String>> = HashMap::new();
    for r in &rec.revs.revocations {
        if let (Some(s), Some(rt)) = (r.series.as_deref(), r.runtime.as_deref()) {
            let what = match r.reason.as_deref().filter(|x| !x.is_empty()) {
                Some(why) => format!("{} ({why})", r.build_id),
                None => r.build_id.clone(),
            };
            revoked.entry((s, rt)).or_default().push(what);
        }
    }
    revoked
}

/// The plan's nodes in groups: by target (folded) or one each; and each
/// node's group by label.
fn group_nodes(plan: &Plan, folded: bool) -> (Vec<Vec<&PlannedNode>>, HashMap<String, usize>) {
    let mut groups: Vec<Vec<&PlannedNode>> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    let mut node_group: HashMap<String, usize> = HashMap::new();
    for n in &plan.nodes {
        let key = if folded {
            n.label.target().to_string()
        } else {
            n.label.to_string()
        };
        let gi = *group_of.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[gi].push(n);
        node_group.insert(n.label.to_string(), gi);
    }
    (groups, node_group)
}

/// Pinned children: the images pinned to a build of each series.
fn mark_pinned_children(tree: &Tree, rec: &RecordsView<'_>, nodes: &mut [g::Node], folded: bool) {
    let mut pinned_children: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes.iter() {
        if let (Some(p), Some(rt)) = (&n.parent, &n.runtime) {
            if matches!(
                parent_of(tree, &n.series, "image"),
                Some((_, g::EdgeKind::Pinned))
            ) && rec.pins.image_pin(&n.series, rt).is_some()
                && n.build.is_some()
            {
                pinned_children
                    .entry((p.clone(), rt.clone()))
                    .or_default()
                    .push(n.series.clone());
            }
        }
    }
    for n in nodes.iter_mut() {
        let is_parent_node = folded || n.kind == NodeKind::Bake;
        if let (true, Some(rt)) = (is_parent_node, &n.runtime) {
            if let Some(c) = pinned_children.get(&(n.series.clone(), rt.clone())) {
                n.pinned_children = c.clone();
                n.pinned_children.dedup();
            }
        }
    }
}

/// Edges between groups; the parent edge of a bake is follow or pinned.
fn edges_between(
    tree: &Tree,
    graph: &csis_engine::Graph,
    plan: &Plan,
    node_group: &HashMap<String, usize>,
    nodes: &[g::Node],
) -> Vec<g::Edge> {
    let mut edges: Vec<g::Edge> = Vec::new();
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for n in &plan.nodes {
        let to = node_group[&n.label.to_string()];
        let Some(id) = graph.find(&n.label) else {
            continue;
        };
        for (d, dep) in graph.deps(id) {
            let dl = graph.node(d).label().to_string();
            let Some(&from) = node_group.get(&dl) else {
                continue;
            };
            if from == to {
                continue;
            }
            let parent_edge = n.kind == NodeKind::Bake
                && graph.node(d).kind() == NodeKind::Bake
                && matches!(dep, Dep::Hashed(name) | Dep::Pinned { name, .. } if &**name == "parent");
            let kind = if parent_edge {
                parent_of(tree, &nodes[to].series, "image")
                    .map(|p| p.1)
                    .unwrap_or(g::EdgeKind::Follow)
            } else {
                g::EdgeKind::Other
            };
            let behind = parent_edge && nodes[to].behind.is_some();
            match seen.get(&(from, to)) {
                Some(&i) => {
                    // a group pair joined by several steps: the parent edge wins
                    if kind != g::EdgeKind::Other {
                        edges[i].kind = kind;
                        edges[i].behind = behind;
                    }
                }
                None => {
                    seen.insert((from, to), edges.len());
                    edges.push(g::Edge {
                        from: nodes[from].id.clone(),
                        to: nodes[to].id.clone(),
                        kind,
                        behind,
                    });
                }
            }
        }
    }
    edges
}
