//! The series rules: one series' share of the graph (its [`Unit`]), per
//! runtime entry its nodes and their inputs ([`Entry`]). An OS builder's
//! unit ([`os_unit`]); an image's ([`image_draft`], which reads only the
//! tree, then [`finish_image`], which adds the content hash of each playbook
//! and script and the pins).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use csis_engine::{Fingerprint, Label, Node, RunPolicy};
use serde_json::{json, Value};

use super::bake_inputs::{
    base_bake_inputs, image_bake_inputs, mod_input_and_record, tests_input, vendor_input,
};
use super::vocabulary::{
    BakeCost, BakeSpec, BaseRecipeSpec, CompileError, GroupSpec, NodeKind, ParentSpec, PinSource,
    ResolveSpec, DEFAULT_BAKE_COST, PINNED_PARENT_ATTR,
};
use crate::tree::{InBakeTest, Parent, Tree};
use csis_schema::model::{JsonMap, ParentPolicy};

/// The group activation of an image, from its `group:` and the group's builder.
pub fn group_spec(tree: &Tree, image: &crate::tree::Image) -> Option<GroupSpec> {
    let g = tree.group(image.model.group.as_deref()?)?;
    let b = tree.group_builder(g.builder.as_deref()?)?;
    Some(GroupSpec {
        group: g.display.clone(),
        identity_type: b.identity_type.to_string(),
        posix: b.identity_type == "posix" || b.posix.is_some(),
    })
}

fn required_plugins(tree: &Tree, image_builder: &str) -> Vec<(String, String, String)> {
    tree.image_builder(image_builder)
        .map(|b| {
            b.model
                .required_plugins
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        p.version.clone(),
                        p.source
                            .clone()
                            .unwrap_or_else(|| format!("github.com/hashicorp/{}", p.name)),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn label(kind_path: &str, name: &str, runtime: &str) -> Result<Label, CompileError> {
    Label::new(&[kind_path, "/", name].concat(), Some(runtime), None)
        .map_err(|e| CompileError::Label(e.to_string()))
}

/// Which kind of series a [`Unit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKind {
    /// An OS builder (a base image).
    Os,
    /// An image.
    Image,
}

/// One series' share of the graph: its nodes on each active `runtimes[]`
/// entry (that names a runtime and an image builder), in entry order. What
/// depends on other series (the parent's bake node, whether an entry
/// enters the graph at all) is left to the [`Assembler`](crate::compile::Assembler). Compared by
/// value: the incremental compile backdates an unchanged unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub kind: SeriesKind,
    /// The series (canonical name).
    pub series: String,
    pub entries: Vec<Entry>,
}

/// One runtime entry of a [`Unit`]: its nodes in graph order (resolve for
/// an OS builder, bake, emit, retag, release with `release:`, dispose with
/// retention).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub runtime: String,
    pub(super) resolve: Option<(Arc<Node>, ResolveSpec)>,
    /// The bake node with its inputs (an image's draft has no `mods` there
    /// yet). Nodes are shared: the graph points at the unit's nodes.
    pub(super) bake: Arc<Node>,
    /// `spec.parent` is set by the assembler (from `parent`); an image's
    /// draft has no `mod_records` yet.
    pub(super) spec: Arc<BakeSpec>,
    pub(super) parent: ParentLink,
    pub(super) emit: Arc<Node>,
    pub(super) retag: Arc<Node>,
    pub(super) test: Option<TestNode>,
    pub(super) release: Option<ReleaseNode>,
    pub(super) dispose: Option<DisposeNode>,
    /// For an image under `follow`: the nearest ancestor under `pinned`
    /// (through `follow` links only), whose pinned build's recorded stamp
    /// is this chain's capabilities ([`finish_image`]).
    pub(super) caps_pinned_by: Option<String>,
}

/// Where an entry's bake starts from, before the graph exists.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ParentLink {
    /// The vendor image the entry's resolve node finds.
    Vendor,
    /// `image_identifier`.
    Fixed(String),
    /// The bake of the series `series` on the same runtime (an OS builder or
    /// an image: by name, as the graph holds it).
    Series {
        series: String,
        policy: ParentPolicy,
        /// The pin in force (pinned policy), and its recorded fingerprint.
        pinned_build: Option<String>,
        pinned_fp: Option<Fingerprint>,
    },
}

impl Unit {
    /// Whether an [`Assembler`](crate::compile::Assembler) lays out `other`
    /// as it lays out this unit: the same series and entries, each on the
    /// same runtime from the same parent link, with nodes of the same
    /// labels in the same places, the same post-bake tests and release
    /// model (what the fleet reads of an image). Their nodes' inputs and
    /// specs may differ: an incremental compile then patches the graph in
    /// place ([`patch_unit`](crate::compile::patch_unit)).
    pub fn same_shape(&self, other: &Unit) -> bool {
        fn label(n: &Arc<Node>) -> &csis_engine::Label {
            n.label()
        }
        self.kind == other.kind
            && self.series == other.series
            && self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| {
                a.runtime == b.runtime
                    && a.parent == b.parent
                    && a.resolve.as_ref().map(|r| label(&r.0))
                        == b.resolve.as_ref().map(|r| label(&r.0))
                    && label(&a.bake) == label(&b.bake)
                    && label(&a.emit) == label(&b.emit)
                    && label(&a.retag) == label(&b.retag)
                    && a.test.as_ref().map(|(n, t)| (label(n), t))
                        == b.test.as_ref().map(|(n, t)| (label(n), t))
                    && a.release.as_ref().map(|(n, m)| (label(n), m))
                        == b.release.as_ref().map(|(n, m)| (label(n), m))
                    && a.dispose.as_ref().map(|d| label(&d.0))
                        == b.dispose.as_ref().map(|d| label(&d.0))
            })
    }
}

impl Entry {
    /// The entry's nodes in the order they enter a graph (what
    /// [`Entry::fingerprints`] returns one fingerprint of each for): its
    /// resolve node, bake, emit, retag, test, release and dispose, those it
    /// has.
    pub fn graph_nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        let resolve = self.resolve.as_ref().map(|(n, _)| n);
        let test = self.test.as_ref().map(|(n, _)| n);
        let release = self.release.as_ref().map(|(n, _)| n);
        let dispose = self.dispose.as_ref().map(|(n, ..)| n);
        resolve
            .into_iter()
            .chain([&self.bake, &self.emit, &self.retag])
            .chain(test)
            .chain(release)
            .chain(dispose)
    }

    /// The series this entry's bake hashes as its `parent` (follow, and
    /// pinned while no recorded fingerprint is known), and the series whose
    /// bake must exist on the runtime for the entry to enter the graph.
    pub fn parent_series(&self) -> Option<(&str, bool)> {
        match &self.parent {
            ParentLink::Series {
                series, pinned_fp, ..
            } => Some((series.as_str(), pinned_fp.is_none())),
            _ => None,
        }
    }

    /// Where the bake is among [`Entry::fingerprints`] (after the resolve
    /// node of an OS builder).
    pub fn bake_index(&self) -> usize {
        usize::from(self.resolve.is_some())
    }

    /// The fingerprints of this entry's nodes, in graph order, as
    /// [`Graph::fingerprints`](csis_engine::Graph::fingerprints) computes them once the entry is in the
    /// graph. `parent` is the fingerprint of the parent's bake (needed
    /// when [`Entry::parent_series`] says it is hashed).
    pub fn fingerprints(&self, parent: Option<Fingerprint>) -> Vec<Fingerprint> {
        let own = |n: &Node| Fingerprint::of_inputs(n.kind(), n.inputs());
        let mut out = Vec::with_capacity(6);
        if let Some((n, _)) = &self.resolve {
            out.push(own(n));
        }
        let dep = match &self.parent {
            ParentLink::Series {
                pinned_fp: Some(fp),
                ..
            } => Some(*fp),
            ParentLink::Series { .. } => Some(parent.unwrap_or_default()),
            ParentLink::Vendor | ParentLink::Fixed(_) => None,
        };
        let mut deps: Vec<(&str, Fingerprint)> = dep.map(|fp| ("parent", fp)).into_iter().collect();
        out.push(Fingerprint::compute_encoded(
            &mut Vec::new(),
            self.bake.kind(),
            self.bake.inputs(),
            &mut deps,
        ));
        out.push(own(&self.emit));
        out.push(own(&self.retag));
        if let Some((n, _)) = &self.test {
            out.push(own(n));
        }
        if let Some((n, _)) = &self.release {
            out.push(own(n));
        }
        if let Some((n, ..)) = &self.dispose {
            out.push(own(n));
        }
        out
    }
}

/// The cost of baking a series (its `config:`) on `runtime`, as `costs`
/// answers for the runtime's type.
fn bake_cost(tree: &Tree, costs: &dyn BakeCost, runtime: &str, config: &JsonMap) -> u64 {
    tree.runtime(runtime)
        .map_or(DEFAULT_BAKE_COST, |r| costs.bake_cost(r, config))
}

/// A release node and its model.
pub(super) type ReleaseNode = (Arc<Node>, String);
/// A post-bake test node and the commands it runs.
pub(super) type TestNode = (Arc<Node>, Vec<InBakeTest>);

/// The post-bake test node of an image on a runtime, when it declares
/// `tests.post_bake`. Its inputs are the commands (what they check enters
/// its fingerprint, never the bake's); it runs when its bake ran.
fn test_node(
    tree: &Tree,
    image: &crate::tree::Image,
    target: &Label,
    runtime: &str,
) -> Option<TestNode> {
    let tests = tree.post_bake_commands(image)?;
    let node = Node::new(target.clone(), NodeKind::Test.as_str())
        .with_policy(RunPolicy::WhenDependencyDue)
        .with_attr("series", &image.name)
        .with_attr("runtime", runtime)
        .with_inputs(csis_schema::secret::redacted(
            json!({"post_bake": tests_input(&tests)}),
        ));
    Some((Arc::new(node), tests))
}
/// A dispose node, its `keep` and whether the runtime is ephemeral.
pub(super) type DisposeNode = (Arc<Node>, Option<u32>, bool);

/// The follow-ups of a bake shared by bases and images: retag, release, dispose.
fn follow_ups(
    tree: &Tree,
    target: &Label,
    series: &str,
    runtime: &str,
    release: Option<&str>,
    keep: Option<u32>,
) -> (Arc<Node>, Option<ReleaseNode>, Option<DisposeNode>) {
    let attrs = |n: Node| n.with_attr("series", series).with_attr("runtime", runtime);
    let retag = attrs(
        Node::new(target.clone(), NodeKind::Retag.as_str())
            .with_policy(RunPolicy::WhenDependencyDue),
    );
    let release = release.map(|model| {
        (
            Arc::new(attrs(
                Node::new(target.clone(), NodeKind::Release.as_str())
                    .with_policy(RunPolicy::WhenDependencyDue)
                    .with_inputs(json!({"model": model})),
            )),
            model.to_string(),
        )
    });
    let ephemeral = tree.runtime(runtime).is_some_and(|r| r.common.ephemeral);
    let dispose = (keep.is_some() || ephemeral).then(|| {
        (
            Arc::new(attrs(
                Node::new(target.clone(), NodeKind::Dispose.as_str())
                    .with_policy(RunPolicy::WhenDependencyDue)
                    .with_inputs(json!({"keep": keep, "ephemeral": ephemeral})),
            )),
            keep,
            ephemeral,
        )
    });
    (Arc::new(retag), release, dispose)
}

fn kind_label(target: &Label, kind: NodeKind) -> Result<Label, CompileError> {
    target
        .with_kind(kind.as_str())
        .map_err(|e| CompileError::Label(e.to_string()))
}

/// A placeholder until the assembler knows the parent's node.
fn unlinked() -> ParentSpec {
    ParentSpec::Fixed { id: String::new() }
}

/// An OS builder's unit: per active runtime entry a resolve, bake, emit,
/// retag (+ dispose).
pub fn os_unit(
    tree: &Tree,
    os: &crate::tree::OsBuilder,
    costs: &dyn BakeCost,
) -> Result<Unit, CompileError> {
    let ts = &tree.execution.timestamp;
    let mut entries = Vec::new();
    for entry in os.active_runtimes() {
        let (Some(rt), Some(ib)) = (entry.runtime.clone(), entry.image_builder.clone()) else {
            continue;
        };
        let target = label("os", &os.name, &rt)?;
        let arch = os_architecture(os);
        let owners = tree.os_owners(os, entry);
        let query = Value::Object(tree.os_query(os, entry).into_iter().collect());
        let vendor = vendor_input(os, entry, &arch);
        let resolve = Node::new(target.clone(), NodeKind::Resolve.as_str())
            .with_policy(RunPolicy::WhenDependentDue)
            .with_inputs(json!({"vendor": vendor, "owners": owners}))
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        let resolve_spec = ResolveSpec {
            label: kind_label(&target, NodeKind::Resolve)?,
            series: os.name.clone(),
            runtime: rt.clone(),
            family: os.model.family.clone(),
            family_version: os.model.family_version.clone(),
            architecture: arch.clone(),
            owners,
            query,
            image_id: entry.entry.image_id.clone(),
        };
        let tests = tree.os_tests(os, entry);
        let disk = tree.os_disk_size(os, entry);
        let update = serde_json::to_value(os.model.effective_update()).unwrap_or(Value::Null);
        let caps = serde_json::to_value(tree.os_capability_stamp(os)).unwrap_or(Value::Null);
        let bake_inputs = base_bake_inputs(os, &vendor, &caps, &tests, disk, &update);
        let refresh = os.model.effective_update().refresh_days;
        let mut bake = Node::new(target.clone(), NodeKind::Bake.as_str())
            .with_pool(&rt)
            .with_cost(bake_cost(tree, costs, &rt, &os.model.config))
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        if let Some(d) = refresh {
            bake = bake.with_attr("refresh_days", &d.to_string());
        }
        let tags: BTreeMap<String, String> = tree.os_tags(os, entry).into_iter().collect();
        let spec = BakeSpec {
            label: kind_label(&target, NodeKind::Bake)?,
            series: os.name.clone(),
            display: os.display.clone(),
            runtime: rt.clone(),
            image_builder: ib.clone(),
            base: true,
            final_name: format!("{}-{}-{}", os.display, rt, ts),
            parent: unlinked(),
            machine_type: tree.os_machine_type(entry),
            disk_size_gb: disk,
            bake_user: tree.os_bake_user(os, entry),
            package_manager: Some(os.model.package_manager().to_string()),
            family: Some(os.model.family.clone()),
            architecture: Some(arch.clone()),
            mods: Vec::new(),
            tests,
            tags,
            capabilities: caps,
            mod_records: Vec::new(),
            chain: Vec::new(),
            update: Some(update),
            base_recipe: Some(BaseRecipeSpec {
                os_type: os.model.type_.clone(),
                family: os.model.family.clone(),
                family_version: os.model.family_version.clone(),
                admin_user: os.model.admin_user.clone(),
                admin_public_keys: os.admin_public_keys.clone(),
                update: os.model.effective_update(),
                identity_types: os.model.identity_types.clone(),
                storage_types: os.model.storage_types.clone(),
                identity_builders: os
                    .model
                    .identity_types
                    .iter()
                    .map(|t| tree.group_builder_of_type(t).map(|b| b.display.clone()))
                    .collect(),
                storage_builders: os
                    .model
                    .storage_types
                    .iter()
                    .map(|t| {
                        tree.storage_builder_of_type(t, &rt)
                            .map(|b| b.display.clone())
                    })
                    .collect(),
            }),
            required_plugins: required_plugins(tree, &ib),
            group: None,
        };
        let emit = Node::new(target.clone(), NodeKind::Emit.as_str())
            .with_policy(RunPolicy::WhenDependentDue)
            .with_attr("series", &os.name)
            .with_attr("runtime", &rt);
        let keep = tree.runtime(&rt).and_then(|r| r.common.retention_keep);
        let (retag, release, dispose) = follow_ups(tree, &target, &os.name, &rt, None, keep);
        entries.push(Entry {
            runtime: rt,
            resolve: Some((Arc::new(resolve), resolve_spec)),
            bake: Arc::new(bake.with_inputs(csis_schema::secret::redacted(bake_inputs))),
            spec: Arc::new(spec),
            parent: ParentLink::Vendor,
            emit: Arc::new(emit),
            retag,
            test: None,
            release,
            dispose,
            caps_pinned_by: None,
        });
    }
    Ok(Unit {
        kind: SeriesKind::Os,
        series: os.name.clone(),
        entries,
    })
}

/// An image's unit before its files are hashed and its pins looked up: the
/// bake inputs lack `mods` and the specs their `mod_records` (see
/// [`finish_image`]). It reads the tree and nothing else.
pub fn image_draft(
    tree: &Tree,
    image: &crate::tree::Image,
    costs: &dyn BakeCost,
) -> Result<Unit, CompileError> {
    let ts = &tree.execution.timestamp;
    let chain: Vec<String> = tree
        .chain(image)
        .iter()
        .map(|l| l.name().to_string())
        .collect();
    let chain_images: Vec<String> = chain[..chain.len().saturating_sub(1)].to_vec();
    let mods = tree.mod_inputs(image);
    let tests = tree.image_tests(image);
    let disk = tree.image_disk_size(image);
    let caps = serde_json::to_value(tree.capability_stamp(image)).unwrap_or(Value::Null);
    let root = tree.chain_root(image);
    let pm = root.map(|o| o.model.package_manager().to_string());
    let family = root.map(|o| o.model.family.clone());
    let architecture = root.map(os_architecture);
    let policy = image.model.parent_policy;
    let policy_name = match policy {
        ParentPolicy::Pinned => "pinned",
        ParentPolicy::Follow => "follow",
    };
    let pname = match &image.parent {
        Parent::Os(o) | Parent::Image(o) => o,
    };
    let group = group_spec(tree, image);
    let release = image.model.release.as_ref().map(|r| r.model.as_str());
    let caps_pinned_by = match policy {
        ParentPolicy::Follow => pinned_ancestor(tree, image),
        ParentPolicy::Pinned => None,
    };
    let mut entries = Vec::new();
    for entry in image.active_runtimes() {
        let (Some(rt), Some(ib)) = (entry.runtime.clone(), entry.image_builder.clone()) else {
            continue;
        };
        let target = label("images", &image.name, &rt)?;
        let (parent_input, parent) = match &entry.entry.image_identifier {
            Some(fixed) => (
                json!({"image_identifier": fixed}),
                ParentLink::Fixed(fixed.clone()),
            ),
            None => (
                json!({"series": pname, "policy": policy_name}),
                ParentLink::Series {
                    series: pname.clone(),
                    policy,
                    pinned_build: None,
                    pinned_fp: None,
                },
            ),
        };
        let bake_inputs = image_bake_inputs(
            &image.name,
            parent_input,
            &caps,
            &tests,
            disk,
            group.as_ref(),
        );
        let tags: BTreeMap<String, String> = tree.image_tags(image, entry).into_iter().collect();
        let bake = Node::new(target.clone(), NodeKind::Bake.as_str())
            .with_pool(&rt)
            .with_cost(bake_cost(tree, costs, &rt, &image.model.config))
            .with_attr("series", &image.name)
            .with_attr("runtime", &rt);
        let spec = BakeSpec {
            label: kind_label(&target, NodeKind::Bake)?,
            series: image.name.clone(),
            display: image.display.clone(),
            runtime: rt.clone(),
            image_builder: ib.clone(),
            base: false,
            final_name: format!("{}-{}-{}", image.display, ib, ts),
            parent: unlinked(),
            machine_type: tree.image_machine_type(entry),
            disk_size_gb: disk,
            bake_user: tree.image_bake_user(image, entry),
            package_manager: pm.clone(),
            family: family.clone(),
            architecture: architecture.clone(),
            mods: mods.clone(),
            tests: tests.clone(),
            tags,
            capabilities: caps.clone(),
            mod_records: Vec::new(),
            chain: chain_images.clone(),
            update: None,
            base_recipe: None,
            group: group.clone(),
            required_plugins: required_plugins(tree, &ib),
        };
        let emit = Node::new(target.clone(), NodeKind::Emit.as_str())
            .with_policy(RunPolicy::WhenDependentDue)
            .with_attr("series", &image.name)
            .with_attr("runtime", &rt);
        let keep = tree.retention_keep(image, &rt);
        let (retag, release, dispose) = follow_ups(tree, &target, &image.name, &rt, release, keep);
        let test = test_node(tree, image, &target, &rt);
        entries.push(Entry {
            runtime: rt,
            resolve: None,
            bake: Arc::new(bake.with_inputs(csis_schema::secret::redacted(bake_inputs))),
            spec: Arc::new(spec),
            parent,
            emit: Arc::new(emit),
            retag,
            test,
            release,
            dispose,
            caps_pinned_by: caps_pinned_by.clone(),
        });
    }
    Ok(Unit {
        kind: SeriesKind::Image,
        series: image.name.clone(),
        entries,
    })
}

/// Finish an image's [`image_draft`]: the mods' inputs with the content
/// hash of every playbook and script (`hash`), their lineage records, and
/// the pins (`pins`, asked only under `parent_policy: pinned`, and for a
/// `follow` image below a pinned ancestor, that ancestor's pin).
pub fn finish_image(
    mut draft: Unit,
    hash: &mut dyn FnMut(&Path) -> String,
    pins: &dyn PinSource,
) -> Unit {
    let Some(first) = draft.entries.first() else {
        return draft;
    };
    let (mod_inputs, mod_records): (Vec<Value>, Vec<Value>) = first
        .spec
        .mods
        .iter()
        .map(|m| mod_input_and_record(m, hash))
        .map(|(i, r)| {
            (
                csis_schema::secret::redacted(i),
                csis_schema::secret::redacted(r),
            )
        })
        .unzip();
    let (mut mod_inputs, mut mod_records) = (Some(mod_inputs), Some(mod_records));
    let last = draft.entries.len() - 1;
    for (i, e) in draft.entries.iter_mut().enumerate() {
        // the last entry takes them, the others a copy
        let take = |v: &mut Option<Vec<Value>>| {
            if i == last {
                v.take().unwrap_or_default()
            } else {
                v.clone().unwrap_or_default()
            }
        };
        let (inputs, records) = (take(&mut mod_inputs), take(&mut mod_records));
        Arc::make_mut(&mut e.bake).set_input("mods", &Value::Array(inputs));
        Arc::make_mut(&mut e.spec).mod_records = records;
        if let ParentLink::Series {
            policy: ParentPolicy::Pinned,
            pinned_build,
            pinned_fp,
            ..
        } = &mut e.parent
        {
            *pinned_build = pins.image_pin(&draft.series, &e.runtime);
            // For the planner's "parent pin moved" (attributes never
            // enter a fingerprint).
            if let Some(b) = pinned_build.as_deref() {
                Arc::make_mut(&mut e.bake).set_attr(PINNED_PARENT_ATTR, b);
            }
            *pinned_fp = pinned_build
                .as_deref()
                .and_then(|b| pins.build_fingerprint(b))
                .and_then(|h| Fingerprint::from_hex(&h).ok());
            // The chain's capabilities are the pinned build's stamp (it
            // bakes from that build), not today's declaration of the root:
            // a capability the root gained since is not its parent's.
            if let Some(caps) = pinned_build
                .as_deref()
                .and_then(|b| pins.build_capabilities(b))
            {
                Arc::make_mut(&mut e.bake).set_input("capabilities", &caps);
                Arc::make_mut(&mut e.spec).capabilities = caps;
            }
        }
        // Under `follow`, below a pinned ancestor: the chain stands on that
        // ancestor's pinned build, so its stamp is this image's too (a
        // capability the root gained since is nobody's in this chain).
        if let (
            ParentLink::Series {
                policy: ParentPolicy::Follow,
                ..
            },
            Some(anc),
        ) = (&e.parent, e.caps_pinned_by.as_deref())
        {
            if let Some(caps) = pins
                .image_pin(anc, &e.runtime)
                .and_then(|b| pins.build_capabilities(&b))
            {
                Arc::make_mut(&mut e.bake).set_input("capabilities", &caps);
                Arc::make_mut(&mut e.spec).capabilities = caps;
            }
        }
    }
    draft
}

/// The nearest ancestor image of `image` under `parent_policy: pinned`,
/// reached through `follow` links only (its pinned build is where the
/// chain's capabilities come from); none when the chain reaches its OS
/// builder first.
fn pinned_ancestor(tree: &Tree, image: &crate::tree::Image) -> Option<String> {
    let mut cur = image;
    for _ in 0..=tree.images.len() {
        let Parent::Image(p) = &cur.parent else {
            return None;
        };
        let next = tree.image(p)?;
        if next.model.parent_policy == ParentPolicy::Pinned {
            return Some(next.name.clone());
        }
        cur = next;
    }
    None
}

/// An OS builder's architecture: `default` (or none) is `x86_64`.
fn os_architecture(os: &crate::tree::OsBuilder) -> String {
    if os.model.architecture.is_empty() || os.model.architecture == "default" {
        "x86_64".to_string()
    } else {
        os.model.architecture.clone()
    }
}
