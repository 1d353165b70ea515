//! Vendor tags read again at every plan: a base image baked from a vendor
//! reference that can move (a docker tag: `docker tag`, a pull of a newer
//! image) is due when the tag names another image than the one its head
//! was baked from (the record's `vendor_image`). One read per reference
//! through [`csis_runtime::Runtime::vendor_now`] (docker: an inspect, never a
//! pull); a digest reference never moves and is not read; a record without
//! `vendor_image` (an older csis's, the original's) is not compared.
//!
//! Only heads recorded `movable` are read, so a plan of a tree with none
//! constructs no runtime. A runtime that cannot answer makes nothing due:
//! the base's reason says its tag was not checked.

use std::collections::BTreeMap;

use csis_cache::{Lineage, VendorImage};
use csis_engine::{NodeId, Plan, Selection};
use csis_rules::compile::{Compiled, NodeSpec, ParentSpec, ResolveSpec, VendorMoves};
use csis_rules::Tree;
use csis_runtime::ResolveRequest;

/// The runtime's request for a resolve node's spec (the build's resolve
/// node, `csis test-mods`' base image and the vendor read ask the same).
pub(crate) fn resolve_request(r: &ResolveSpec) -> ResolveRequest {
    ResolveRequest {
        label: r.label.to_string(),
        series: r.series.clone(),
        family: r.family.clone(),
        family_version: r.family_version.clone(),
        architecture: r.architecture.clone(),
        owners: r.owners.clone(),
        query: r.query.clone(),
        image_id: r.image_id.clone(),
    }
}

/// What the plan read of the vendor tags of a selection.
#[derive(Debug, Default)]
pub struct VendorReads {
    /// The heads whose tag moved (the planner's [`VendorMoves`]).
    pub moved: VendorMoves,
    /// Bases whose tag could not be read: the bake node and why.
    pub unread: Vec<(NodeId, String)>,
    /// How many references were read.
    pub read: usize,
}

/// A selected base whose head was baked from a movable vendor reference.
struct MovableHead {
    bake: NodeId,
    runtime: String,
    build: String,
    recorded: VendorImage,
    request: ResolveRequest,
}

/// Whether a planned base's head records a movable vendor reference: the
/// no-op stamp does not answer for such a tree (only a read of the tag can
/// tell that nothing moved).
pub fn plan_reads_vendor_tags(compiled: &Compiled, lineage: &Lineage, plan: &Plan) -> bool {
    let planned: std::collections::HashSet<NodeId> = plan.nodes.iter().map(|n| n.id).collect();
    !movable_heads(compiled, lineage, |id| planned.contains(&id)).is_empty()
}

fn movable_heads(
    compiled: &Compiled,
    lineage: &Lineage,
    selected: impl Fn(NodeId) -> bool,
) -> Vec<MovableHead> {
    let c = compiled;
    let mut out = Vec::new();
    for id in c.bake_nodes() {
        if !selected(id) {
            continue;
        }
        let Some(spec) = c.bake_spec(id) else {
            continue;
        };
        let ParentSpec::Vendor { resolve } = &spec.parent else {
            continue;
        };
        let NodeSpec::Resolve(r) = c.spec(*resolve) else {
            continue;
        };
        let Some(head) = lineage.head(&spec.series, &spec.runtime) else {
            continue;
        };
        let Some(v) = head.vendor_image.as_ref().filter(|v| v.movable) else {
            continue;
        };
        out.push(MovableHead {
            bake: id,
            runtime: spec.runtime.clone(),
            build: head.build_id.clone(),
            recorded: v.clone(),
            request: resolve_request(r),
        });
    }
    out
}

/// Read what each movable vendor reference of the selection names now,
/// once per (runtime, reference), on the runtimes of `tree`.
pub fn read(
    tree: &Tree,
    compiled: &Compiled,
    lineage: &Lineage,
    sel: &Selection,
    made: &crate::wiring::Runtimes,
) -> VendorReads {
    let heads = movable_heads(compiled, lineage, |id| sel.contains(id));
    let mut reads = VendorReads::default();
    if heads.is_empty() {
        return reads;
    }
    let mut names: Vec<&str> = heads.iter().map(|h| h.runtime.as_str()).collect();
    names.sort();
    names.dedup();
    let mut runtimes = BTreeMap::new();
    for n in names {
        match made.get(tree, n) {
            Ok(rt) => {
                runtimes.insert(n.to_string(), rt);
            }
            Err(e) => {
                for h in heads.iter().filter(|h| h.runtime == n) {
                    reads.unread.push((h.bake, format!("{e:#}")));
                }
            }
        }
    }
    // One read per (runtime, reference), on the runtimes' tokio runtime
    // from a thread of its own (a caller may already run inside one).
    let now = std::thread::scope(|s| {
        s.spawn(|| {
            let mut now: BTreeMap<(String, String), Result<Option<String>, String>> =
                BTreeMap::new();
            for h in &heads {
                let key = (h.runtime.clone(), h.recorded.reference.clone());
                if now.contains_key(&key) {
                    continue;
                }
                let Some(r) = runtimes.get(&h.runtime) else {
                    continue;
                };
                let answer = made
                    .block_on(r.vendor_now(&h.request))
                    .map(|o| {
                        o.filter(|i| i.name.as_deref() == Some(h.recorded.reference.as_str()))
                            .map(|i| i.id)
                    })
                    .map_err(|e| e.to_string());
                now.insert(key, answer);
            }
            Ok::<_, String>(now)
        })
        .join()
        .unwrap_or_else(|_| Err("the vendor read panicked".to_string()))
    });
    let now = match now {
        Ok(n) => n,
        Err(e) => {
            for h in &heads {
                reads.unread.push((h.bake, e.clone()));
            }
            return reads;
        }
    };
    reads.read = now.len();
    for h in heads {
        match now.get(&(h.runtime.clone(), h.recorded.reference.clone())) {
            Some(Ok(Some(id))) if *id != h.recorded.id => {
                reads.moved.insert(
                    h.build,
                    (
                        h.recorded.reference.clone(),
                        h.recorded.id.clone(),
                        id.clone(),
                    ),
                );
            }
            Some(Err(e)) => reads.unread.push((h.bake, e.clone())),
            _ => {}
        }
    }
    reads
}

/// Say, on each current base whose tag could not be read, that it was not
/// checked (nothing is due for it: a daemon that does not answer is no claim).
pub fn note_unread(reads: &VendorReads, plan: &mut Plan) {
    for (id, why) in &reads.unread {
        if let Some(n) = plan.nodes.iter_mut().find(|n| n.id == *id && !n.due) {
            n.reason = format!("{} (vendor tag not checked: {why})", n.reason);
        }
    }
}
