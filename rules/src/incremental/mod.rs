//! The incremental load and compile behind `csis watch`: the tree's files,
//! the playbooks and scripts the compile hashes, and the pins of
//! `meta-state/` as salsa inputs; the load and the compile as memoized
//! salsa queries, so that an edit recomputes only what depends on it.
//!
//! ```text
//!  inputs                          queries (per ...)
//!  TreeFile  (path, text)   --->  parse_file        (file)
//!  TreeInput (files, options) -->  load_tree         (tree)    merge, resolve, validate
//!                                  names, series_order (tree)  firewalls: which series, in which order
//!                                  series_key        (series)  firewall: the files the series' draft reads
//!                                  draft             (series)  the series' unit as the tree decides it
//!  TreeInput.pins (PinTable) --->  image_pins        (image)   firewall: one image's pins
//!  ContentFile (path, hash) --->  nodes             (series)  draft + file hashes + pins = the unit
//!                                  bakes_of          (series)  which entries hold the series' bakes
//!                                  fingerprints      (series)  the unit's node fingerprints (+ the parent's)
//!                                  graph             (tree)    the units assembled, fingerprints laid out
//! ```
//!
//! A **series** is an OS builder or an image ([`Series`]); its **unit**
//! ([`compile::Unit`]) is its nodes on each runtime, built by the same
//! functions as the plain [`compile::compile`] ([`compile::os_unit`],
//! [`compile::image_draft`], [`compile::finish_image`]) and assembled by the
//! same [`compile::Assembler`], so both answer the same graph (the tests
//! compare them node by node).
//!
//! What backdates (results compared by value, so an equal result stops the
//! recomputation there):
//!
//! - [`parse_file`] depends on one [`TreeFile`]: editing one image file
//!   re-parses that file alone. A parse equal by content hash (display
//!   path, absolute path, text) is backdated: a file saved unchanged (or
//!   changed and changed back) does not reload the tree.
//! - [`series_key`] reads the loaded tree, so it runs for every series
//!   when the tree reloads (the price of a load that is one query): a hash
//!   of what the series' draft reads, the options and the files outside
//!   `images/` ([`LoadedTree::globals`]) and, for an image, the parse hash
//!   of the file of each image of its chain. An equal key is backdated,
//!   and the series' [`draft`] (which reads the tree through
//!   [`Db::loaded`], without a dependency on the load) is not asked again:
//!   editing one image file re-drafts the images of that file and those
//!   whose chain passes through it; a draft asked again and equal is
//!   backdated too, and nothing after it runs: editing one image
//!   recompiles that image alone.
//! - [`nodes`] finishes an image's draft with the content hashes of its
//!   playbooks and scripts ([`ContentFile`] inputs, read through
//!   [`Db::content_file`] on first demand) and its pins ([`image_pins`],
//!   read only under `parent_policy: pinned`): editing a playbook re-hashes
//!   that file and recompiles only the images using it; a new pin
//!   recompiles only the image pinned.
//! - [`fingerprints`] hashes a series' nodes ([`compile::Entry::fingerprints`]);
//!   an image whose bake hashes its parent's fingerprint (follow, or pinned
//!   without a recorded fingerprint) depends on the parent's fingerprints,
//!   so an edit re-fingerprints the series and its `follow` descendants,
//!   down to the first fingerprint that does not move. A pinned child with
//!   a recorded parent fingerprint does not depend on the parent's.
//! - [`graph`] re-assembles the graph when the order, a unit or a
//!   fingerprint changed, and lays out the memoized fingerprints by node
//!   ([`csis_engine::Fingerprints::from_computed`]). The graph shares the
//!   units' nodes (`Arc`, [`csis_engine::Graph::add_node_arc`]) and, when
//!   a bake's parent is the same as in the previous assembly, the bake
//!   spec linked then ([`compile::LinkedSpecs`], kept in the database): an
//!   edit copies only the specs of the series it recompiled, and dropping
//!   the previous graph frees little.
//!
//! [`Incremental`] wraps the database for a tree on disk:
//! [`Incremental::sync`] re-reads the YAML files whose metadata moved since
//! their last read (or whose read was racy) and sets only the inputs whose
//! text changed, and re-hashes the content files whose mtime or size
//! moved (setting only the hashes that changed); [`Incremental::set_pins`]
//! sets the pins `meta-state/` answers now ([`PinTable`]);
//! [`Incremental::tree`] and [`Incremental::compiled`] answer the loaded
//! tree and the compiled graph with its fingerprints, recomputing what the
//! changes invalidated: after a change, `compiled` first brings every
//! series' unit and fingerprints up to date on two threads (two handles on
//! the same storage, each half of the series; from 32 series), then
//! assembles. [`Incremental::counts`] counts query executions
//! and file hashes (the tests prove the incrementality with it). The
//! tree and graph an edit replaces are freed on a thread of their own,
//! not on the caller's (salsa frees its copies at the next revision).
//!
//! Not tracked (read as the plain loader reads them, at the load's
//! execution): overlay files, age identities, the environment. The load
//! time (`LoadOptions::now`) is fixed when the database is created, so a
//! tree that renders `execution.timestamp` keeps one timestamp per watch.
//! A content file rewritten with the same size within the filesystem's
//! mtime granularity of its last read is not seen (as `csis watch`'s own
//! polling does not see it).

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use csis_engine::{Fingerprint, Fingerprints};
use rustc_hash::FxHashMap;
use salsa::Setter;

use crate::compile::{
    self, Assembler, BakeCost, Compiled, DefaultCost, LinkedSpecs, PinSource, SeriesKind, Unit,
};
use crate::load::{self, LoadOptions};
use crate::tree::Tree;
use csis_schema::diag::Diagnostic;
use csis_schema::model::ParentPolicy;
use csis_schema::yaml::{self, Node, SourceFile};

mod counts;
mod series_queries;
mod tree_queries;

use counts::bump;
pub use counts::{Counters, Counts};

pub use series_queries::*;
pub use tree_queries::*;

/// The database's view for queries.
#[salsa::db]
pub trait Db: salsa::Database {
    /// Execution counters (written by the queries, never read by them).
    fn counters(&self) -> &Counters;
    /// The input holding a playbook's or script's content hash: created
    /// (the file read and hashed) the first time a query asks for it, and
    /// kept up to date by [`Incremental::sync`] (salsa's lazy-input pattern).
    fn content_file(&self, path: &Path) -> ContentFile;
    /// The bake specs the last [`graph`] linked (reused by the next one,
    /// [`Assembler::with_specs`]: a cache of copies, never read as a
    /// value by a query).
    fn linked_specs(&self) -> &Mutex<LinkedSpecs>;
    /// The graph the last [`graph`] made and what it was made of, for the
    /// next one to patch in place ([`LastGraph`]: never read as a value by
    /// a query).
    fn last_graph(&self) -> &Mutex<Option<LastGraph>>;
    /// The scheduler's cost of each bake (fixed for the database's life).
    fn bake_costs(&self) -> &dyn BakeCost;
    /// The tree [`load_tree`] loaded last (written by it, read by
    /// [`draft`] without a dependency: a draft depends on its
    /// [`series_key`] instead, which covers what it reads of the tree).
    fn loaded(&self) -> &Mutex<Option<LoadResult>>;
    /// The loaded images of each file of `images/`, kept by [`load_tree`]
    /// from one load to the next ([`load::ImageMemo`]: a cache of
    /// copies, never read as a value by a query).
    fn image_memo(&self) -> &Mutex<load::ImageMemo>;
}

/// What a load answers: the tree, or every diagnostic.
pub type LoadResult = Arc<Result<Tree, Vec<Diagnostic>>>;

/// When a content file was last read: its mtime and size (None: unreadable).
type Stamp = Option<(Option<SystemTime>, u64)>;

fn stamp_of(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.len()))
}

/// The salsa database of the incremental load and compile.
#[salsa::db]
#[derive(Clone)]
pub struct CompileDb {
    storage: salsa::Storage<Self>,
    counters: Arc<Counters>,
    /// Every content file asked for so far, with the stamp it was read at.
    contents: Arc<Mutex<BTreeMap<PathBuf, (ContentFile, Stamp)>>>,
    linked: Arc<Mutex<LinkedSpecs>>,
    last_graph: Arc<Mutex<Option<LastGraph>>>,
    costs: Arc<dyn BakeCost>,
    loaded: Arc<Mutex<Option<LoadResult>>>,
    memo: Arc<Mutex<load::ImageMemo>>,
}

impl Default for CompileDb {
    fn default() -> Self {
        CompileDb::new(false)
    }
}

impl CompileDb {
    /// A database; `count_executions`: salsa reports each of its events
    /// to a callback that counts the query executions
    /// ([`Counts::executions`], for the tests). Without it salsa makes no
    /// event at all (a watch edit verifies some 20,000 memos, each an
    /// event).
    fn new(count_executions: bool) -> Self {
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let callback: Option<Box<dyn Fn(salsa::Event) + Send + Sync>> =
            count_executions.then(|| -> Box<dyn Fn(salsa::Event) + Send + Sync> {
                Box::new(move |event: salsa::Event| {
                    if let salsa::EventKind::WillExecute { .. } = event.kind {
                        c.executions.fetch_add(1, Ordering::Relaxed);
                    }
                })
            });
        let storage = salsa::Storage::new(callback);
        CompileDb {
            storage,
            counters,
            contents: Arc::default(),
            linked: Arc::default(),
            last_graph: Arc::default(),
            costs: Arc::new(DefaultCost),
            loaded: Arc::default(),
            memo: Arc::default(),
        }
    }
}

#[salsa::db]
impl salsa::Database for CompileDb {}

#[salsa::db]
impl Db for CompileDb {
    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn content_file(&self, path: &Path) -> ContentFile {
        let mut contents = self.contents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, _)) = contents.get(path) {
            return *f;
        }
        let stamp = stamp_of(path);
        bump(&self.counters.hashes);
        let f = ContentFile::new(self, path.to_path_buf(), compile::file_hash(path));
        contents.insert(path.to_path_buf(), (f, stamp));
        f
    }

    fn linked_specs(&self) -> &Mutex<LinkedSpecs> {
        &self.linked
    }

    fn last_graph(&self) -> &Mutex<Option<LastGraph>> {
        &self.last_graph
    }

    fn bake_costs(&self) -> &dyn BakeCost {
        &*self.costs
    }

    fn loaded(&self) -> &Mutex<Option<LoadResult>> {
        &self.loaded
    }

    fn image_memo(&self) -> &Mutex<load::ImageMemo> {
        &self.memo
    }
}

/// A playbook or script file the compile hashes (its path as the tree
/// names it, resolved against the root).
#[salsa::input]
pub struct ContentFile {
    #[returns(ref)]
    pub path: PathBuf,
    /// blake3 hex of the bytes, or `missing` ([`compile::file_hash`]).
    #[returns(ref)]
    pub hash: String,
}

/// One YAML file of the tree.
#[salsa::input]
pub struct TreeFile {
    /// The path on disk (as [`load::tree_files`] lists it).
    #[returns(ref)]
    pub path: PathBuf,
    /// The display path (relative to the tree's root).
    #[returns(ref)]
    pub display: String,
    /// The file's text; None when it could not be read (the reason).
    #[returns(ref)]
    pub text: Result<Arc<str>, String>,
    /// How many times this file's text was set (0 = as first read).
    pub revision: u64,
}

/// The load's options (setting them invalidates the load, not the parses).
#[derive(Debug, Clone)]
pub struct Options(pub Arc<LoadOptions>);

/// The tree as a whole: its root, its files (in the loader's order), the
/// load options, and the pins of `meta-state/` the compile asks for.
#[salsa::input]
pub struct TreeInput {
    #[returns(ref)]
    pub root: PathBuf,
    #[returns(ref)]
    pub files: Vec<TreeFile>,
    #[returns(ref)]
    pub options: Options,
    /// Read only by [`image_pins`] (setting them invalidates no load).
    #[returns(ref)]
    pub pins: PinTable,
}

/// The parse of one file. Equal when the content hash of what the parse is
/// a function of (display path, absolute path, text) is equal: the parse is
/// deterministic, so equal hashes mean equal node trees (with equal
/// locations). Not compared by pointer.
#[derive(Debug, Clone)]
pub struct ParsedFile {
    pub hash: blake3::Hash,
    pub result: Arc<Result<Node, Diagnostic>>,
}

impl PartialEq for ParsedFile {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
    }
}
impl Eq for ParsedFile {}

/// The loaded tree (or every diagnostic). Equal when the content hash of
/// its inputs (the options' content and every file's [`ParsedFile`] hash,
/// in order) is equal: the load is deterministic in them.
#[derive(Debug, Clone)]
pub struct LoadedTree {
    pub hash: blake3::Hash,
    /// The hash of what every series' draft reads besides the image files
    /// of its chain: the options and the files outside `images/` (the
    /// whole tree's hash when overlays are set: their files are not
    /// tracked).
    pub globals: blake3::Hash,
    /// The parse hash of each file under `images/`, by its path's bytes
    /// ([`path_key`]: a `Path` hashes and compares component by component,
    /// and every series looks up each image of its chain here).
    pub image_files: Arc<FxHashMap<Box<[u8]>, blake3::Hash>>,
    pub result: Arc<Result<Tree, Vec<Diagnostic>>>,
}

impl PartialEq for LoadedTree {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
    }
}
impl Eq for LoadedTree {}

/// A path as the key of [`LoadedTree::image_files`]: its bytes (the paths
/// of one load's files and of their parses are the same `PathBuf`s).
pub fn path_key(p: &Path) -> Box<[u8]> {
    p.as_os_str().as_encoded_bytes().into()
}

fn put(h: &mut blake3::Hasher, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn read_text(path: &Path) -> Result<Arc<str>, String> {
    std::fs::read_to_string(path)
        .map(Arc::from)
        .map_err(|e| e.to_string())
}

fn display_of(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// What [`Incremental::sync`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncReport {
    /// Files whose text changed.
    pub changed: usize,
    /// Files that appeared.
    pub added: usize,
    /// Files that disappeared.
    pub removed: usize,
    /// Playbook and script files (those the compile hashed) whose content
    /// hash changed.
    pub contents: usize,
}

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        *self == SyncReport::default()
    }
}

/// The incremental load and compile of one tree on disk.
pub struct Incremental {
    db: CompileDb,
    root: PathBuf,
    input: TreeInput,
    files: BTreeMap<PathBuf, TreeFile>,
    /// An input changed since the last [`Incremental::compiled`].
    dirty: std::sync::atomic::AtomicBool,
    /// The loaded trees and graphs of the last compiles (at most two):
    /// salsa frees its copies of a replaced tree at the next revision, on
    /// the caller's thread (~100 ms for a tree of 5,000 images), so these
    /// hold them until then and [`Incremental::sync`] drops them on a
    /// thread of their own ([`retire`]).
    retired: Mutex<std::collections::VecDeque<Retired>>,
    /// The generation of the source [`Incremental::set_pins_kept`] asked
    /// last, and the pins the tree asked of it then ([`PinTable::asked`]).
    pins_asked: Option<(u64, [u8; 32])>,
    /// Each YAML file's metadata when [`Incremental::sync`] last read it,
    /// and when it read it: a file whose metadata did not move since a
    /// read that was not racy is not read again.
    stamps: BTreeMap<PathBuf, (Stamp, SystemTime)>,
    /// YAML files [`Incremental::sync`] read, in all.
    files_read: usize,
}

/// Whether a read at `read_at` of a file of this `stamp` may miss a later
/// write of the same size within the file system's mtime granularity: its
/// mtime is less than a second before the read (or unknown). The no-op
/// stamp's rule.
fn racy(stamp: Stamp, read_at: SystemTime) -> bool {
    match stamp {
        Some((Some(mtime), _)) => mtime + std::time::Duration::from_secs(1) >= read_at,
        _ => true,
    }
}

/// A loaded tree and its graph, kept to be dropped off the caller's thread.
type Retired = (LoadResult, Arc<CompiledTree>);

/// Drop `old` on a thread of its own (the caller does not wait for it);
/// in place when no thread can be started.
fn retire(old: Vec<Retired>) {
    if old.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("csis-retire".into())
        .spawn(move || drop(old));
    drop(spawned);
}

/// From how many series [`Incremental::compiled`] brings the units up to
/// date on two threads.
const PREFETCH_SERIES: usize = 32;

impl Incremental {
    /// Read the tree's YAML files at `root` (nothing is parsed yet). The
    /// load time is fixed now when `opts.now` is None.
    pub fn new(root: &Path, opts: &LoadOptions) -> Incremental {
        Incremental::with_costs(root, opts, Arc::new(DefaultCost))
    }

    /// [`Incremental::new`] with the scheduler's cost of each bake answered
    /// by `costs` (as [`compile::compile_with_costs`]).
    pub fn with_costs(root: &Path, opts: &LoadOptions, costs: Arc<dyn BakeCost>) -> Incremental {
        Incremental::made(root, opts, costs, false)
    }

    /// [`Incremental::new`] that also counts every query execution salsa
    /// reports ([`Counts::executions`]; the others count without it): for
    /// the tests that prove an edit runs nothing else.
    pub fn counting_executions(root: &Path, opts: &LoadOptions) -> Incremental {
        Incremental::made(root, opts, Arc::new(DefaultCost), true)
    }

    fn made(
        root: &Path,
        opts: &LoadOptions,
        costs: Arc<dyn BakeCost>,
        count_executions: bool,
    ) -> Incremental {
        let mut opts = opts.clone();
        opts.now.get_or_insert_with(chrono::Utc::now);
        let db = CompileDb {
            costs,
            ..CompileDb::new(count_executions)
        };
        let input = TreeInput::new(
            &db,
            root.to_path_buf(),
            Vec::new(),
            Options(Arc::new(opts)),
            PinTable::default(),
        );
        let mut inc = Incremental {
            db,
            root: root.to_path_buf(),
            input,
            files: BTreeMap::new(),
            dirty: std::sync::atomic::AtomicBool::new(true),
            retired: Mutex::default(),
            pins_asked: None,
            stamps: BTreeMap::new(),
            files_read: 0,
        };
        inc.sync();
        inc
    }

    /// Re-read the tree's YAML files whose metadata (mtime, size) moved
    /// since they were read, or whose read was racy (their mtime within a
    /// second of it): set the text of the files that
    /// changed (only those), add and remove files; re-hash the playbooks
    /// and scripts the compile hashed whose mtime or size changed, and set
    /// the hash of those whose content changed. Nothing is recomputed
    /// until [`Incremental::tree`] or [`Incremental::compiled`].
    pub fn sync(&mut self) -> SyncReport {
        let mut report = SyncReport::default();
        let listed = load::tree_files(&self.root);
        let mut order = Vec::with_capacity(listed.len());
        let mut seen = BTreeMap::new();
        let mut stamps = BTreeMap::new();
        for p in listed {
            let stamp = stamp_of(&p);
            if let (Some(&f), Some(&(was, read_at))) = (self.files.get(&p), self.stamps.get(&p)) {
                if stamp.is_some() && was == stamp && !racy(stamp, read_at) {
                    stamps.insert(p.clone(), (was, read_at));
                    seen.insert(p, f);
                    order.push(f);
                    continue;
                }
            }
            stamps.insert(p.clone(), (stamp, SystemTime::now()));
            self.files_read += 1;
            let text = read_text(&p);
            let file = match self.files.get(&p) {
                Some(&f) => {
                    if *f.text(&self.db) != text {
                        let rev = f.revision(&self.db) + 1;
                        let _old = f.set_text(&mut self.db).to(text);
                        f.set_revision(&mut self.db).to(rev);
                        report.changed += 1;
                    }
                    f
                }
                None => {
                    report.added += 1;
                    TreeFile::new(&self.db, p.clone(), display_of(&p, &self.root), text, 0)
                }
            };
            seen.insert(p, file);
            order.push(file);
        }
        report.removed = self.files.keys().filter(|p| !seen.contains_key(*p)).count();
        if *self.input.files(&self.db) != order {
            self.input.set_files(&mut self.db).to(order);
        }
        self.files = seen;
        self.stamps = stamps;
        report.contents = self.sync_contents();
        if !report.is_empty() {
            self.dirty.store(true, Ordering::Relaxed);
            // The new revision has just freed salsa's copies of the tree
            // and graph replaced in the previous one: the older of the two
            // kept is now only ours.
            let mut kept = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            let n = kept.len().saturating_sub(1);
            retire(kept.drain(..n).collect());
        }
        report
    }

    /// How many YAML files [`Incremental::sync`] has read (each sync reads
    /// the files whose metadata moved, and those read racily).
    pub fn files_read(&self) -> usize {
        self.files_read
    }

    /// Re-hash the content files whose stamp moved; set the changed hashes.
    fn sync_contents(&mut self) -> usize {
        let rehashed: Vec<(ContentFile, String)> = {
            let mut contents = self.db.contents.lock().unwrap_or_else(|e| e.into_inner());
            let mut v = Vec::new();
            for (path, (f, stamp)) in contents.iter_mut() {
                let now = stamp_of(path);
                if now != *stamp {
                    *stamp = now;
                    bump(&self.db.counters.hashes);
                    v.push((*f, compile::file_hash(path)));
                }
            }
            v
        };
        let mut changed = 0;
        for (f, hash) in rehashed {
            if *f.hash(&self.db) != hash {
                f.set_hash(&mut self.db).to(hash);
                changed += 1;
            }
        }
        changed
    }

    /// Set the pins the compile sees: what `source` (`meta-state/`) answers
    /// for the pinned images of the tree as it loads now. Call it after
    /// [`Incremental::sync`] and before [`Incremental::compiled`]; only a
    /// changed answer is set (and recompiles only the images it concerns).
    /// Returns whether it changed.
    pub fn set_pins(&mut self, source: &dyn PinSource) -> bool {
        // a source of no generation: the next kept source is asked again
        self.pins_asked = None;
        let table = match &*load_tree(&self.db, self.input).result {
            Ok(tree) => PinTable::of(tree, source),
            Err(_) => return false,
        };
        if *self.input.pins(&self.db) == table {
            return false;
        }
        self.input.set_pins(&mut self.db).to(table);
        self.dirty.store(true, Ordering::Relaxed);
        true
    }

    /// [`Incremental::set_pins`] for a source that answers what it answered
    /// at the last call of the same `generation` (`csis watch`'s records,
    /// read once and kept until their files move: a new read is a new
    /// generation). When the tree asks for the same pins of the same
    /// generation, nothing is asked (5,000 images ask ~10 M instructions of
    /// the records per edit otherwise).
    pub fn set_pins_kept(&mut self, generation: u64, source: &dyn PinSource) -> bool {
        let asked = match &*load_tree(&self.db, self.input).result {
            Ok(tree) => PinTable::asked(tree),
            Err(_) => return false,
        };
        if self.pins_asked == Some((generation, asked)) {
            return false;
        }
        let changed = self.set_pins(source);
        self.pins_asked = Some((generation, asked));
        changed
    }

    /// The compiled graph with every node's fingerprint, recomputing only
    /// what the last changes invalidated; `Err(None)` when the tree does
    /// not load ([`Incremental::tree`] has the diagnostics), `Err(Some)` a
    /// compile error.
    pub fn compiled(&self) -> Result<Arc<CompiledTree>, Option<String>> {
        if self.dirty.swap(false, Ordering::Relaxed) {
            self.prefetch();
        }
        // On a handle of its own: salsa reuses a handle's query frames, and
        // clears each one to its largest size at every query that reuses
        // it; the graph reads every series twice (10,000 reads at 5,000
        // series), which would make every later query on this handle clear
        // a frame of that size (~40 M instructions per edit).
        let db = self.db.clone();
        match graph(&db, self.input) {
            None => Err(None),
            Some(Ok(c)) => {
                self.keep(c);
                Ok(c.clone())
            }
            Some(Err(e)) => Err(Some(e.clone())),
        }
    }

    /// Keep the tree and graph `c` was compiled from until salsa lets go
    /// of them ([`Incremental::retired`]).
    fn keep(&self, c: &Arc<CompiledTree>) {
        let tree = load_tree(&self.db, self.input).result.clone();
        let mut kept = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        let same = kept
            .back()
            .is_some_and(|(t, g)| Arc::ptr_eq(t, &tree) && Arc::ptr_eq(g, c));
        if !same {
            kept.push_back((tree, c.clone()));
        }
        let n = kept.len().saturating_sub(2);
        retire(kept.drain(..n).collect());
    }

    /// Bring every series' unit and fingerprints up to date on two
    /// threads (the series in the compile's order, split in halves; salsa
    /// runs each query once, a thread needing a query the other is running
    /// waits for it), so that [`graph`] then finds them memoized. Only for
    /// trees of [`PREFETCH_SERIES`] series or more, on a machine with two
    /// cores or more.
    fn prefetch(&self) {
        let Some(order) = series_order(&self.db, self.input) else {
            return;
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if order.len() < PREFETCH_SERIES || cores < 2 {
            return;
        }
        let input = self.input;
        let fetch = |db: &CompileDb, part: &[(SeriesKind, String)]| {
            for (kind, name) in part {
                fingerprints(db, input, Series::new(db, *kind, name.clone()));
            }
        };
        let (first, second) = order.split_at(order.len() / 2);
        let other = self.db.clone();
        std::thread::scope(|sc| {
            sc.spawn(move || fetch(&other, second));
            fetch(&self.db, first);
        });
    }

    /// Replace the load options (invalidates the load, not the parses).
    pub fn set_options(&mut self, opts: &LoadOptions) {
        self.dirty.store(true, Ordering::Relaxed);
        let mut opts = opts.clone();
        opts.now.get_or_insert_with(chrono::Utc::now);
        self.input
            .set_options(&mut self.db)
            .to(Options(Arc::new(opts)));
    }

    /// The loaded tree, recomputing only what the last changes invalidated.
    pub fn tree(&self) -> &Result<Tree, Vec<Diagnostic>> {
        &load_tree(&self.db, self.input).result
    }

    /// The files the database holds, in the loader's order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(|p| p.as_path())
    }

    /// How often each query ran so far.
    pub fn counts(&self) -> Counts {
        self.db.counters.get()
    }
}
