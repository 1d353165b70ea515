//! The queries of the compile, per series: the names, a series' draft, its
//! pins and nodes, its bakes and their fingerprints, the order of the series
//! and the assembled graph.

use super::*;
use crate::tree::Parent;

/// What `meta-state/` answers the compile of a tree: for every image under
/// `parent_policy: pinned` and each of its runtimes, the pinned parent
/// build, that build's recorded fingerprint and capability stamp. A value, so that a change
/// of the records that no pin of the tree sees changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinTable {
    /// `(image, runtime) -> (build, recorded fingerprint, recorded capabilities)`.
    pins: BTreeMap<(String, String), PinAnswer>,
}

/// What the records answer for one pin: the build, its recorded
/// fingerprint and its recorded capability stamp.
type PinAnswer = (String, Option<String>, Option<serde_json::Value>);

impl PinTable {
    /// Ask `source` every pin the compile of `tree` can ask.
    pub fn of(tree: &Tree, source: &dyn PinSource) -> PinTable {
        let mut pins = BTreeMap::new();
        for (image, rt) in Self::pins_of(tree) {
            if let Some(build) = source.image_pin(image, rt) {
                let fp = source.build_fingerprint(&build);
                let caps = source.build_capabilities(&build);
                pins.insert((image.to_string(), rt.to_string()), (build, fp, caps));
            }
        }
        PinTable { pins }
    }

    /// Which pins the compile of `tree` can ask, as a hash: equal for two
    /// trees that ask a source the same questions.
    pub fn asked(tree: &Tree) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"csis-pins-asked-v1");
        for (image, rt) in Self::pins_of(tree) {
            put(&mut h, image.as_bytes());
            put(&mut h, rt.as_bytes());
        }
        *h.finalize().as_bytes()
    }

    /// `(image, runtime)` of each pin the compile of `tree` can ask: every
    /// image under `parent_policy: pinned`, on each of its runtimes.
    fn pins_of(tree: &Tree) -> impl Iterator<Item = (&str, &str)> {
        tree.images
            .iter()
            .filter(|i| i.model.parent_policy == ParentPolicy::Pinned)
            .flat_map(|i| {
                i.active_runtimes()
                    .filter_map(move |e| Some((i.name.as_str(), e.runtime.as_deref()?)))
            })
    }
}

/// An OS builder or an image, by canonical name.
#[salsa::interned]
pub struct Series<'db> {
    #[returns(copy)]
    pub kind: SeriesKind,
    #[returns(ref)]
    pub name: String,
}

/// A series' [`Unit`] (None: no such series in the loaded tree, or the
/// tree does not load; Err: a compile error, as text).
pub type UnitResult = Option<Result<Arc<Unit>, String>>;

/// The names of the tree's OS builders and images (so that a lookup by
/// name asks only for series that exist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub os: BTreeSet<String>,
    pub images: BTreeSet<String>,
}

#[salsa::tracked(returns(ref))]
pub fn names(db: &dyn Db, input: TreeInput) -> Names {
    let Ok(tree) = &*load_tree(db, input).result else {
        return Names::default();
    };
    Names {
        os: tree.os_builders.iter().map(|o| o.name.clone()).collect(),
        images: tree.images.iter().map(|i| i.name.clone()).collect(),
    }
}

/// A series' unit as far as the tree alone decides it: an OS builder's
/// whole unit ([`compile::os_unit`]), an image's draft
/// ([`compile::image_draft`]: no file hashes, no pins). It depends on
/// its [`series_key`] alone and reads the loaded tree without a
/// dependency on the load ([`Db::loaded`]), so it runs again only when
/// that key moves; it is compared by value, so an unchanged unit is
/// backdated and nothing after it runs again.
#[salsa::tracked(returns(ref))]
pub fn draft<'db>(db: &'db dyn Db, input: TreeInput, s: Series<'db>) -> UnitResult {
    bump(&db.counters().drafts);
    // The key brings the load up to date (and with it `Db::loaded`); the
    // tree is then read without a dependency on the whole load.
    (*series_key(db, input, s))?;
    let loaded = db
        .loaded()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()?;
    let Ok(tree) = &*loaded else {
        return None;
    };
    let name = s.name(db);
    let unit = match s.kind(db) {
        SeriesKind::Os => {
            let os = tree.os_builder(name).filter(|o| o.name == *name)?;
            compile::os_unit(tree, os, db.bake_costs())
        }
        SeriesKind::Image => {
            let image = tree.image(name).filter(|i| i.name == *name)?;
            compile::image_draft(tree, image, db.bake_costs())
        }
    };
    Some(unit.map(Arc::new).map_err(|e| e.to_string()))
}

/// What a series' [`draft`] reads of the loaded tree, as a hash (None: the
/// tree does not load, or has no such series): [`LoadedTree::globals`]
/// (the options, every file outside `images/`), and for an image the
/// name and the parse hash of the file declaring it, of itself and of
/// every image of its chain (its parent, ...) up to its OS builder. A
/// draft reads the configuration, its image and its chain's images and
/// nothing of the other images, so an edit of one image file re-drafts
/// the images of that file and the images whose chain passes through it
/// alone. It reads the whole load, so it runs for every series when the
/// tree reloads (cheap: a walk of the chain); compared by value, it is
/// the firewall between the load and the per-series work. An image
/// declared outside the tracked files keys on the whole tree's hash. A
/// compile rule that starts reading another image than the chain's (its
/// children, a sibling) must add that image's file here: the tests compare
/// with a plain compile after every kind of edit, but only on their trees.
#[salsa::tracked]
pub fn series_key<'db>(db: &'db dyn Db, input: TreeInput, s: Series<'db>) -> Option<[u8; 32]> {
    let loaded = load_tree(db, input);
    let Ok(tree) = &*loaded.result else {
        return None;
    };
    let name = s.name(db);
    // the bytes gathered, then hashed at once: a series' key has some
    // twenty pieces, and 5,000 keys are made at every load
    let mut h: Vec<u8> = Vec::with_capacity(256);
    h.extend_from_slice(b"csis-series-key-v1");
    h.extend_from_slice(loaded.globals.as_bytes());
    put_bytes(&mut h, name.as_bytes());
    match s.kind(db) {
        SeriesKind::Os => {
            tree.os_builder(name).filter(|o| o.name == *name)?;
        }
        SeriesKind::Image => {
            let mut cur = tree.image(name).filter(|i| i.name == *name)?;
            for _ in 0..=tree.images.len() {
                put_bytes(&mut h, cur.name.as_bytes());
                match loaded
                    .image_files
                    .get(cur.origin.loc.file.abs.as_os_str().as_encoded_bytes())
                {
                    Some(f) => h.extend_from_slice(f.as_bytes()),
                    None => h.extend_from_slice(loaded.hash.as_bytes()),
                };
                match &cur.parent {
                    Parent::Os(o) => {
                        put_bytes(&mut h, o.as_bytes());
                        break;
                    }
                    Parent::Image(p) => match tree.image(p) {
                        Some(next) => cur = next,
                        None => {
                            put_bytes(&mut h, p.as_bytes());
                            break;
                        }
                    },
                }
            }
        }
    }
    Some(*blake3::hash(&h).as_bytes())
}

/// [`put`] into a buffer hashed later: the same bytes.
fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    b.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    b.extend_from_slice(bytes);
}

/// The pins of one image, `(runtime, build, recorded fingerprint, recorded
/// capabilities)`: the
/// firewall between the whole [`PinTable`] and one image.
#[salsa::tracked(returns(ref))]
pub fn image_pins<'db>(
    db: &'db dyn Db,
    input: TreeInput,
    s: Series<'db>,
) -> Vec<(String, String, Option<String>, Option<serde_json::Value>)> {
    let name = s.name(db);
    input
        .pins(db)
        .pins
        .iter()
        .filter(|((image, _), _)| image == name)
        .map(|((_, rt), (b, fp, caps))| (rt.clone(), b.clone(), fp.clone(), caps.clone()))
        .collect()
}

/// [`PinSource`] over [`image_pins`], asked only when the compile asks (an
/// image under `follow` never depends on the pins).
struct SeriesPins<'db> {
    db: &'db dyn Db,
    input: TreeInput,
    s: Series<'db>,
    answers: OnceCell<&'db [SeriesPin]>,
    /// The pins of a pinned ancestor a `follow` image asked for (its
    /// chain's capabilities are that ancestor's pinned build's).
    others: std::cell::RefCell<Vec<&'db [SeriesPin]>>,
}

type SeriesPin = (String, String, Option<String>, Option<serde_json::Value>);

impl<'db> SeriesPins<'db> {
    fn answers(&self) -> &'db [SeriesPin] {
        self.answers
            .get_or_init(|| image_pins(self.db, self.input, self.s).as_slice())
    }
    /// The answers of `image`'s pins: this series' own, or another image's.
    fn of(&self, image: &str) -> &'db [SeriesPin] {
        if image == self.s.name(self.db).as_str() {
            return self.answers();
        }
        let other = Series::new(self.db, SeriesKind::Image, image.to_string());
        let a = image_pins(self.db, self.input, other).as_slice();
        self.others.borrow_mut().push(a);
        a
    }
    fn every(&self) -> Vec<&'db [SeriesPin]> {
        let mut all = vec![self.answers()];
        all.extend(self.others.borrow().iter().copied());
        all
    }
}

impl PinSource for SeriesPins<'_> {
    fn image_pin(&self, image: &str, runtime: &str) -> Option<String> {
        self.of(image)
            .iter()
            .find(|(rt, ..)| rt == runtime)
            .map(|(_, b, ..)| b.clone())
    }
    fn build_fingerprint(&self, build_id: &str) -> Option<String> {
        self.every()
            .into_iter()
            .flatten()
            .find(|(_, b, ..)| b == build_id)
            .and_then(|(_, _, fp, _)| fp.clone())
    }
    fn build_capabilities(&self, build_id: &str) -> Option<serde_json::Value> {
        self.every()
            .into_iter()
            .flatten()
            .find(|(_, b, ..)| b == build_id)
            .and_then(|(.., caps)| caps.clone())
    }
}

/// A series' unit, ready for the graph: an image's draft finished with the
/// content hash of its playbooks and scripts ([`ContentFile`] inputs) and
/// its pins ([`compile::finish_image`]). Runs when the draft, one of those
/// files or one of those pins changed; compared by value.
#[salsa::tracked(returns(ref))]
pub fn nodes<'db>(db: &'db dyn Db, input: TreeInput, s: Series<'db>) -> UnitResult {
    bump(&db.counters().compiles);
    let draft = draft(db, input, s).clone()?;
    let unit = match draft {
        Ok(u) if s.kind(db) == SeriesKind::Image => u,
        other => return Some(other),
    };
    let pins = SeriesPins {
        db,
        input,
        s,
        answers: OnceCell::new(),
        others: Default::default(),
    };
    let mut hash = |p: &Path| db.content_file(p).hash(db).clone();
    Some(Ok(Arc::new(compile::finish_image(
        (*unit).clone(),
        &mut hash,
        &pins,
    ))))
}

/// Which entries of a series' unit hold the graph's bake of that series on
/// their runtime (the compile's `bakes` map, per series): `(runtime, entry
/// index)`. An OS builder's first entry on each runtime; an image's first
/// entry on a runtime where no OS builder of the same name bakes and its
/// parent has a bake (or its parent is an `image_identifier`). Depends on
/// the drafts only: a new file hash or pin does not move it.
#[salsa::tracked(returns(ref))]
pub fn bakes_of<'db>(db: &'db dyn Db, input: TreeInput, s: Series<'db>) -> Vec<(String, usize)> {
    let Some(Ok(unit)) = draft(db, input, s) else {
        return Vec::new();
    };
    let os_twin = match s.kind(db) {
        SeriesKind::Image if names(db, input).os.contains(s.name(db)) => Some(bakes_of(
            db,
            input,
            Series::new(db, SeriesKind::Os, s.name(db).clone()),
        )),
        _ => None,
    };
    let mut out: Vec<(String, usize)> = Vec::new();
    for (i, e) in unit.entries.iter().enumerate() {
        let taken = out.iter().any(|(rt, _)| *rt == e.runtime)
            || os_twin.is_some_and(|b| b.iter().any(|(rt, _)| *rt == e.runtime));
        if taken {
            continue;
        }
        if let Some((parent, _)) = e.parent_series() {
            if bake_site(db, input, parent, &e.runtime).is_none() {
                continue;
            }
        }
        out.push((e.runtime.clone(), i));
    }
    out
}

/// The series and entry holding the graph's bake named `name` on `rt`.
fn bake_site<'db>(
    db: &'db dyn Db,
    input: TreeInput,
    name: &str,
    rt: &str,
) -> Option<(Series<'db>, usize)> {
    let n = names(db, input);
    for (kind, exists) in [
        (SeriesKind::Os, n.os.contains(name)),
        (SeriesKind::Image, n.images.contains(name)),
    ] {
        if !exists {
            continue;
        }
        let s = Series::new(db, kind, name.to_string());
        if let Some((_, i)) = bakes_of(db, input, s).iter().find(|(r, _)| r == rt) {
            return Some((s, *i));
        }
    }
    None
}

/// The fingerprints of one entry's nodes (graph order) and of its bake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFps {
    pub bake: Fingerprint,
    pub nodes: Vec<Fingerprint>,
}

/// The fingerprints of a series' nodes, per entry of its unit (None: the
/// entry is not in the graph). Depends on the series' [`nodes`], on
/// [`bakes_of`], and, for an image whose bake hashes its parent's (follow,
/// or pinned with no recorded fingerprint), on the parent's
/// fingerprints: so an edit re-fingerprints the series and its `follow`
/// descendants, and compared by value, stops where a fingerprint does not
/// move.
#[salsa::tracked(returns(ref))]
pub fn fingerprints<'db>(
    db: &'db dyn Db,
    input: TreeInput,
    s: Series<'db>,
) -> Vec<Option<EntryFps>> {
    bump(&db.counters().fingerprints);
    let Some(Ok(unit)) = nodes(db, input, s) else {
        return Vec::new();
    };
    let live = bakes_of(db, input, s);
    unit.entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if !live.iter().any(|(_, j)| *j == i) {
                return None;
            }
            let parent = match e.parent_series() {
                Some((p, true)) => bake_fingerprint(db, input, p, &e.runtime),
                _ => None,
            };
            let nodes = e.fingerprints(parent);
            Some(EntryFps {
                bake: nodes[e.bake_index()],
                nodes,
            })
        })
        .collect()
}

/// The fingerprint of the graph's bake named `name` on `rt`.
fn bake_fingerprint(db: &dyn Db, input: TreeInput, name: &str, rt: &str) -> Option<Fingerprint> {
    let (s, i) = bake_site(db, input, name, rt)?;
    fingerprints(db, input, s).get(i)?.as_ref().map(|f| f.bake)
}

/// The compiled graph and every node's fingerprint.
pub struct CompiledTree {
    pub compiled: Compiled,
    pub fps: Fingerprints,
}

/// The series in the compile's order: OS builders, then images parents
/// first. Compared by value: an edit that moves no series does not
/// reassemble the graph.
#[salsa::tracked(returns(ref))]
pub fn series_order(db: &dyn Db, input: TreeInput) -> Option<Vec<(SeriesKind, String)>> {
    let Ok(tree) = &*load_tree(db, input).result else {
        return None;
    };
    Some(
        tree.os_builders
            .iter()
            .map(|o| (SeriesKind::Os, o.name.clone()))
            .chain(
                compile::image_order(tree)
                    .into_iter()
                    .map(|i| (SeriesKind::Image, tree.images[i].name.clone())),
            )
            .collect(),
    )
}

/// The graph assembled from the series' units in the compile's order (OS
/// builders, then images parents first) by the same [`Assembler`] as
/// [`compile::compile`], with the fingerprints of the series' entries
/// (None: the tree does not load). Runs when the order, a unit or a
/// fingerprint changed; not compared (nothing depends on it). When every
/// series has the shape it had in the last graph ([`Unit::same_shape`]:
/// an edit moved inputs, not nodes) and the tree declares no fleet, the
/// last graph is patched instead ([`patched`]): the units that moved put
/// their nodes and specs in the places of the old ones, and the
/// fingerprints are laid out in the same order.
#[salsa::tracked(returns(ref), no_eq)]
pub fn graph(db: &dyn Db, input: TreeInput) -> Option<Result<Arc<CompiledTree>, String>> {
    bump(&db.counters().graphs);
    let order = series_order(db, input).as_ref()?;
    let fleet = fleet_part(db, input);
    let last = db
        .last_graph()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(last) = last.filter(|l| fleet.is_none() && l.order == *order) {
        if let Some(next) = patched(db, input, last) {
            bump(&db.counters().graphs_patched);
            let c = next.compiled.clone();
            *db.last_graph().lock().unwrap_or_else(|e| e.into_inner()) = Some(next);
            return Some(Ok(c));
        }
    }
    let previous =
        std::mem::take(&mut *db.linked_specs().lock().unwrap_or_else(|e| e.into_inner()));
    let mut a = Assembler::with_specs(previous);
    let mut fps: Vec<Fingerprint> = Vec::new();
    let mut memo_ok = true;
    let mut units = Vec::with_capacity(order.len());
    let mut ids = Vec::with_capacity(order.len());
    for (kind, name) in order {
        let s = Series::new(db, *kind, name.clone());
        let unit = match nodes(db, input, s) {
            Some(Ok(u)) => u,
            Some(Err(e)) => return Some(Err(e.clone())),
            None => {
                units.push(None);
                ids.push(Vec::new());
                continue;
            }
        };
        let added = match a.add((**unit).clone()) {
            Ok(added) => added,
            Err(e) => return Some(Err(e.to_string())),
        };
        let f = fingerprints(db, input, s);
        for (i, added) in added.iter().enumerate() {
            match (added, f.get(i).and_then(|x| x.as_ref())) {
                (Some(_), Some(e)) => fps.extend_from_slice(&e.nodes),
                (None, None) => {}
                _ => memo_ok = false,
            }
        }
        units.push(Some(unit.clone()));
        ids.push(added);
    }
    // The fleet's nodes come last; their fingerprints are their own
    // inputs (every fleet edge is an ordering edge). The incremental
    // compile reads no fleet records: declared storages and instances only.
    if let Some(part) = fleet {
        if let Ok(tree) = &*part.tree {
            if let Err(e) = a.add_fleet(tree, &compile::RecordedFleet::default()) {
                return Some(Err(e.to_string()));
            }
        }
    }
    let (compiled, linked) = a.finish_with_specs();
    *db.linked_specs().lock().unwrap_or_else(|e| e.into_inner()) = linked;
    for id in compiled.fleet_nodes() {
        let n = compiled.graph.node(id);
        fps.push(Fingerprint::of_inputs(n.kind(), n.inputs()));
    }
    // The memoized fingerprints cover exactly the nodes the assembler
    // added (else a bug: fingerprint the graph as a whole instead).
    let memo_ok = memo_ok && fps.len() == compiled.graph.len();
    debug_assert!(memo_ok, "the memoized fingerprints disagree with the graph");
    let fps = if memo_ok {
        Fingerprints::from_computed(&compiled.graph, fps)
    } else {
        compiled.graph.fingerprints()
    };
    Some(match fps {
        Ok(fps) => {
            let c = Arc::new(CompiledTree { compiled, fps });
            if memo_ok && fleet.is_none() {
                *db.last_graph().lock().unwrap_or_else(|e| e.into_inner()) = Some(LastGraph {
                    order: order.clone(),
                    units,
                    ids,
                    compiled: c.clone(),
                });
            }
            Ok(c)
        }
        Err(e) => Err(e.to_string()),
    })
}

/// The graph [`graph`] made last, and what it was made of: the series'
/// order, each series' unit (None: it had none) and where each entry of
/// it entered the graph ([`Assembler::add`]).
pub struct LastGraph {
    order: Vec<(SeriesKind, String)>,
    units: Vec<Option<Arc<Unit>>>,
    ids: Vec<Vec<Option<std::ops::Range<usize>>>>,
    compiled: Arc<CompiledTree>,
}

/// `last`'s graph with the units of now put in place of those that moved
/// ([`compile::patch_unit`]) and the fingerprints of now, when every
/// series has the shape it had (None: assemble it again). The topological
/// order is `last`'s (the same nodes and edges).
fn patched(db: &dyn Db, input: TreeInput, last: LastGraph) -> Option<LastGraph> {
    let old = &last.compiled;
    let mut compiled: Option<Compiled> = None;
    let mut fps = vec![Fingerprint::default(); old.compiled.graph.len()];
    let mut units = Vec::with_capacity(last.units.len());
    for (((kind, name), was), ids) in last.order.iter().zip(&last.units).zip(&last.ids) {
        let s = Series::new(db, *kind, name.clone());
        let unit = match (nodes(db, input, s), was) {
            (None, None) => {
                units.push(None);
                continue;
            }
            (Some(Ok(u)), Some(was)) => {
                if !Arc::ptr_eq(u, was) {
                    let c = compiled.get_or_insert_with(|| old.compiled.clone());
                    if !compile::patch_unit(c, ids, was, u) {
                        return None;
                    }
                }
                u
            }
            // a series appeared, went or does not compile: assemble again
            // (which says the error as a plain compile does)
            _ => return None,
        };
        let f = fingerprints(db, input, s);
        if f.len() != ids.len() {
            return None;
        }
        for (r, e) in ids.iter().zip(f) {
            match (r, e) {
                (Some(r), Some(e)) if r.len() == e.nodes.len() => {
                    fps[r.clone()].copy_from_slice(&e.nodes)
                }
                (None, None) => {}
                _ => return None,
            }
        }
        units.push(Some(unit.clone()));
    }
    let compiled = compiled.unwrap_or_else(|| old.compiled.clone());
    let fps = old.fps.with_values(fps);
    Some(LastGraph {
        order: last.order,
        units,
        ids: last.ids,
        compiled: Arc::new(CompiledTree { compiled, fps }),
    })
}

/// What the fleet's nodes read of a loaded tree, compared by its content
/// (the declared instances, storages, instance and storage builders and
/// the `apply_*` keys), so an edit elsewhere does not reassemble the graph.
/// It holds the loaded tree it was read from; equal parts read alike.
#[derive(Debug, Clone)]
pub struct FleetPart {
    key: serde_json::Value,
    pub tree: Arc<Result<Tree, Vec<csis_schema::Diagnostic>>>,
}

impl PartialEq for FleetPart {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for FleetPart {}

/// [`FleetPart`] of the loaded tree (None: it does not load, or declares
/// no fleet).
#[salsa::tracked(returns(ref))]
pub fn fleet_part(db: &dyn Db, input: TreeInput) -> Option<FleetPart> {
    let loaded = load_tree(db, input);
    let Ok(tree) = &*loaded.result else {
        return None;
    };
    if tree.instances.is_empty() && tree.storages.is_empty() {
        return None;
    }
    let keys = &tree.config.config;
    let builders: Vec<(&str, Option<&str>)> = tree
        .storage_builders
        .iter()
        .map(|b| (b.name.as_str(), b.runtime.as_deref()))
        .collect();
    let key = serde_json::json!({
        "instances": tree.instances,
        "storages": tree.storages,
        "instance_builders": tree.instance_builders,
        "storage_builders": builders,
        "apply_instances": keys.apply_instances,
        "apply_storage": keys.apply_storage,
        "require_released_builds": keys.require_released_builds,
    });
    Some(FleetPart {
        key,
        tree: loaded.result.clone(),
    })
}
