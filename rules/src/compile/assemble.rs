//! The assembler: adds the series' [`Unit`]s to one graph (OS builders,
//! then images parents first, [`image_order`]) and links each image's bake
//! to its parent's on the same runtime.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use csis_engine::{Dep, Graph, Node, NodeId};

use super::units::{ParentLink, SeriesKind, Unit};
use super::vocabulary::{BakeSpec, CompileError, Compiled, NodeSpec, ParentSpec};
use crate::tree::{Parent, Tree};

/// Adds [`Unit`]s to a graph, OS builders first, then images parents
/// first, and links them: an entry enters the graph when its series has no
/// bake on that runtime yet (else: `a second runtimes[] entry`) and, for an
/// image, when its parent has a bake there (else: skipped).
///
/// The graph shares the units' nodes (`Arc`): a unit added by value (the
/// plain [`compile`](crate::compile::compile())) moves them in; a unit the caller keeps (the
/// incremental compile) is cloned cheaply. A bake spec is copied only to
/// set its parent, and with [`Assembler::with_specs`] a copy made by the
/// previous assembly is reused when its parent is the same.
#[derive(Default)]
pub struct Assembler {
    pub(super) g: Graph,
    specs: Vec<NodeSpec>,
    /// The bake node of each (series, runtime): looked up while the graph
    /// is assembled (FxHash), sorted once into [`Compiled`]'s at the end.
    pub(super) bakes: rustc_hash::FxHashMap<(String, String), NodeId>,
    /// Per (series, runtime): the last node of its build's follow-ups
    /// (release, else test, else retag), its post-bake tests and its
    /// release model: what an instance of it waits for and reads.
    /// Looked up, never walked: FxHash, as the name indexes.
    pub(super) after: rustc_hash::FxHashMap<(String, String), AfterBake>,
    pub(super) fleet: Vec<NodeId>,
    pub(super) warnings: Vec<String>,
    linked: Option<(LinkedSpecs, LinkedSpecs)>,
}

/// The bake specs an [`Assembler`] linked (its parent set), by the unit's
/// spec they were copied from: kept from one assembly to the next by the
/// incremental compile ([`Assembler::with_specs`]), so that the graph of an
/// unchanged unit shares its specs instead of copying them again. Each
/// entry holds the unit's spec (so its address names it while the entry
/// lives) and the linked copy.
#[derive(Default)]
pub struct LinkedSpecs {
    map: HashMap<usize, (Arc<BakeSpec>, Arc<BakeSpec>)>,
    /// The nodes and edges of the graph they were linked in (the next
    /// assembly reserves that room at once instead of growing to it).
    size: (usize, usize),
}

impl Assembler {
    /// An assembler that reuses the linked specs of a previous assembly
    /// ([`Assembler::finish_with_specs`] returns this one's).
    pub fn with_specs(previous: LinkedSpecs) -> Assembler {
        let (nodes, edges) = previous.size;
        Assembler {
            g: Graph::with_capacity(nodes, edges),
            specs: Vec::with_capacity(nodes),
            linked: Some((previous, LinkedSpecs::default())),
            ..Assembler::default()
        }
    }

    pub(super) fn node(&mut self, node: Arc<Node>, spec: NodeSpec) -> Result<NodeId, CompileError> {
        let id = self.g.add_node_arc(node)?;
        debug_assert_eq!(id.index(), self.specs.len());
        self.specs.push(spec);
        Ok(id)
    }

    /// The unit's bake spec with its parent set: itself when the parent
    /// is already that one, or when nothing else holds it (set in place);
    /// else the copy linked last time with the same parent, or a new copy.
    fn link(&mut self, mut spec: Arc<BakeSpec>, parent: ParentSpec) -> Arc<BakeSpec> {
        if spec.parent == parent {
            return spec;
        }
        let Some((old, new)) = &mut self.linked else {
            Arc::make_mut(&mut spec).parent = parent;
            return spec;
        };
        let key = Arc::as_ptr(&spec) as usize;
        let linked = match old.map.remove(&key) {
            Some((_, l)) if l.parent == parent => l,
            _ => {
                let mut copy = (*spec).clone();
                copy.parent = parent;
                Arc::new(copy)
            }
        };
        new.map.insert(key, (spec, linked.clone()));
        linked
    }

    /// Add a unit; per entry, the ids (indices) of its nodes when it
    /// entered the graph (consecutive, in [`Entry::fingerprints`](crate::compile::Entry::fingerprints) order),
    /// None when it did not.
    pub fn add(&mut self, unit: Unit) -> Result<Vec<Option<Range<usize>>>, CompileError> {
        let what = match unit.kind {
            SeriesKind::Os => "os builder",
            SeriesKind::Image => "image",
        };
        let mut added = Vec::with_capacity(unit.entries.len());
        for e in unit.entries {
            let rt = e.runtime;
            let key = (unit.series.clone(), rt.clone());
            if self.bakes.contains_key(&key) {
                self.warnings.push(format!(
                    "{what} {}: a second runtimes[] entry bakes on {rt}; only the first is used",
                    unit.series
                ));
                added.push(None);
                continue;
            }
            let first = self.g.len();
            let (parent, parent_dep) = match e.parent {
                ParentLink::Vendor => (None, None),
                ParentLink::Fixed(id) => (Some(ParentSpec::Fixed { id }), None),
                ParentLink::Series {
                    series,
                    policy,
                    pinned_build,
                    pinned_fp,
                } => {
                    let Some(&pbake) = self.bakes.get(&(series.clone(), rt.clone())) else {
                        self.warnings.push(format!(
                            "image {} on {rt}: its parent {series} does not bake on {rt}; skipped",
                            unit.series
                        ));
                        added.push(None);
                        continue;
                    };
                    let dep = match pinned_fp {
                        Some(fp) => Dep::pinned("parent", fp),
                        None => Dep::hashed("parent"),
                    };
                    (
                        Some(ParentSpec::Image {
                            series,
                            bake: pbake,
                            policy,
                            pinned_build,
                        }),
                        Some((pbake, dep)),
                    )
                }
            };
            let resolve = match e.resolve {
                Some((node, spec)) => Some(self.node(node, NodeSpec::Resolve(spec))?),
                None => None,
            };
            let parent = match (parent, resolve) {
                (Some(p), _) => p,
                (None, Some(resolve)) => ParentSpec::Vendor { resolve },
                (None, None) => unreachable!("a vendor parent comes with a resolve node"),
            };
            let spec = self.link(e.spec, parent);
            let bake = self.node(e.bake, NodeSpec::Bake(spec))?;
            let emit = self.node(e.emit, NodeSpec::Emit { bake })?;
            if let Some(resolve) = resolve {
                self.g.add_dep(emit, resolve, Dep::Order)?;
            }
            self.g.add_dep(bake, emit, Dep::Order)?;
            if let Some((pbake, dep)) = parent_dep {
                self.g.add_dep(bake, pbake, dep)?;
            }
            self.bakes.insert(key, bake);
            let retag = self.node(e.retag, NodeSpec::Retag { bake })?;
            self.g.add_dep(retag, bake, Dep::Order)?;
            // Retention runs after the release: a build to release is not
            // disposed first (on an ephemeral runtime the new build would go).
            let mut before_dispose = retag;
            let mut after = AfterBake::default();
            // The post-bake test runs on the retagged build; the release
            // waits for it (a failed test leaves the build unreleased).
            if let Some((node, tests)) = e.test {
                after.tests = tests.clone();
                let t = self.node(node, NodeSpec::Test { bake, tests })?;
                self.g.add_dep(t, retag, Dep::Order)?;
                before_dispose = t;
            }
            if let Some((node, model)) = e.release {
                after.release_model = Some(model.clone());
                let r = self.node(node, NodeSpec::Release { bake, model })?;
                self.g.add_dep(r, before_dispose, Dep::Order)?;
                before_dispose = r;
            }
            after.last = Some(before_dispose);
            self.after.insert((unit.series.clone(), rt.clone()), after);
            if let Some((node, keep, ephemeral)) = e.dispose {
                let d = self.node(
                    node,
                    NodeSpec::Dispose {
                        series: unit.series.clone(),
                        runtime: rt.clone(),
                        keep,
                        ephemeral,
                    },
                )?;
                self.g.add_dep(d, before_dispose, Dep::Order)?;
            }
            added.push(Some(first..self.g.len()));
        }
        Ok(added)
    }

    /// The compiled graph.
    pub fn finish(self) -> Compiled {
        self.finish_with_specs().0
    }

    /// The compiled graph, and the specs this assembly linked (for the
    /// next one, [`Assembler::with_specs`]).
    pub fn finish_with_specs(self) -> (Compiled, LinkedSpecs) {
        let mut linked = self.linked.map(|(_, new)| new).unwrap_or_default();
        linked.size = (self.g.len(), self.g.edge_count());
        (
            Compiled {
                graph: self.g,
                specs: self.specs,
                bakes: Arc::new(self.bakes.into_iter().collect()),
                fleet: self.fleet,
                warnings: self.warnings,
            },
            linked,
        )
    }
}

/// Put `new`, a unit of the same shape as `old` ([`Unit::same_shape`]), in
/// the place of `old` in `compiled`, which an [`Assembler`] made with `old`
/// and whose entries entered the graph at `ids` (what [`Assembler::add`]
/// returned): its nodes replace `old`'s, its specs theirs (a bake's with
/// the parent `old`'s had), and the graph's edges, order, bakes and
/// warnings stay, as an assembly with `new` would have made them. False,
/// and nothing changed, when the shapes differ or `ids` do not fit.
pub fn patch_unit(
    compiled: &mut Compiled,
    ids: &[Option<Range<usize>>],
    old: &Unit,
    new: &Unit,
) -> bool {
    if !old.same_shape(new) || ids.len() != new.entries.len() {
        return false;
    }
    let fits = new.entries.iter().zip(ids).all(|(e, r)| {
        r.as_ref()
            .is_none_or(|r| r.len() == e.graph_nodes().count() && r.end <= compiled.graph.len())
    });
    if !fits {
        return false;
    }
    for (e, r) in new.entries.iter().zip(ids) {
        let Some(r) = r else { continue };
        for (i, node) in r.clone().zip(e.graph_nodes()) {
            compiled
                .graph
                .replace_node(NodeId::from_index(i), node.clone())
                .expect("the same shape: the same labels");
            // each node's spec as the assembly makes it from `new`, in the
            // place the old one has (its ids of other nodes stay)
            let spec = match &compiled.specs[i] {
                NodeSpec::Resolve(_) => match &e.resolve {
                    Some((_, spec)) => NodeSpec::Resolve(spec.clone()),
                    None => unreachable!("the same shape: a resolve node"),
                },
                NodeSpec::Bake(was) if e.spec.parent == was.parent => {
                    NodeSpec::Bake(e.spec.clone())
                }
                NodeSpec::Bake(was) => {
                    let mut copy = (*e.spec).clone();
                    copy.parent = was.parent.clone();
                    NodeSpec::Bake(Arc::new(copy))
                }
                NodeSpec::Test { bake, .. } => match &e.test {
                    Some((_, tests)) => NodeSpec::Test {
                        bake: *bake,
                        tests: tests.clone(),
                    },
                    None => unreachable!("the same shape: a test node"),
                },
                NodeSpec::Release { bake, .. } => match &e.release {
                    Some((_, model)) => NodeSpec::Release {
                        bake: *bake,
                        model: model.clone(),
                    },
                    None => unreachable!("the same shape: a release node"),
                },
                NodeSpec::Dispose {
                    series, runtime, ..
                } => match &e.dispose {
                    Some((_, keep, ephemeral)) => NodeSpec::Dispose {
                        series: series.clone(),
                        runtime: runtime.clone(),
                        keep: *keep,
                        ephemeral: *ephemeral,
                    },
                    None => unreachable!("the same shape: a dispose node"),
                },
                // emit and retag name the bake alone, which stays
                other => other.clone(),
            };
            compiled.specs[i] = spec;
        }
    }
    true
}

/// What follows a bake that an instance of its series waits for and reads.
#[derive(Debug, Clone, Default)]
pub(super) struct AfterBake {
    /// The release, else the test, else the retag node.
    pub(super) last: Option<NodeId>,
    pub(super) tests: Vec<crate::tree::InBakeTest>,
    pub(super) release_model: Option<String>,
}

/// Images ordered parents first (a stable topological order over `source_image`).
/// A parent is found by the load's name index (a parent's name is the
/// canonical name of an image).
pub fn image_order(tree: &Tree) -> Vec<usize> {
    let mut state = vec![0u8; tree.images.len()]; // 0 new, 1 visiting, 2 done
    let mut out = Vec::with_capacity(tree.images.len());
    for start in 0..tree.images.len() {
        // iterative DFS
        let mut stack = vec![(start, false)];
        while let Some((i, expanded)) = stack.pop() {
            if expanded {
                state[i] = 2;
                out.push(i);
                continue;
            }
            if state[i] != 0 {
                continue;
            }
            state[i] = 1;
            stack.push((i, true));
            if let Parent::Image(p) = &tree.images[i].parent {
                if let Some(&pi) = tree.images_by_name.map.get(p.as_str()) {
                    if state[pi] == 0 {
                        stack.push((pi, false));
                    }
                }
            }
        }
    }
    out
}
