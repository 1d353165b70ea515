//! The incremental load behind `csis watch`: the tree's files as salsa
//! inputs, and the steps of the load as memoized salsa queries, so that an
//! edit recomputes only what depends on it.
//!
//! ```text
//!  TreeFile (input: path, text, revision)  --parse_file-->  ParsedFile  (one per file)
//!  TreeInput (input: root, files, options) --load_tree--->  LoadedTree  (merge, resolve, validate)
//! ```
//!
//! - [`parse_file`] depends on one [`TreeFile`] only: editing one image file
//!   re-parses that file and no other.
//! - [`load_tree`] depends on the file list, the options and every file's
//!   [`ParsedFile`]. Its result is compared by content: a `ParsedFile` is
//!   equal to the previous one when the parse's determinants (display path,
//!   absolute path, text) hash the same, so a file saved without a change
//!   (or changed and changed back) re-parses but does not reload the tree
//!   (salsa backdates the parse).
//!
//! [`Incremental`] wraps the database for a tree on disk: [`Incremental::sync`]
//! re-reads the YAML files and sets only the inputs whose text changed;
//! [`Incremental::tree`] answers the loaded tree, recomputing what the
//! changes invalidated. [`Incremental::counters`] counts query executions
//! (the tests prove the incrementality with it).
//!
//! Not tracked (read as the plain loader reads them, at the load's
//! execution): overlay files, age identities, the environment. The load
//! time (`LoadOptions::now`) is fixed when the database is created, so a
//! tree that renders `execution.timestamp` keeps one timestamp per watch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use salsa::Setter;

use crate::diag::Diagnostic;
use crate::load::{self, LoadOptions};
use crate::tree::Tree;
use crate::yaml::{self, Node, SourceFile};

/// How many times each query body ran (and how many executions salsa
/// reported through its `WillExecute` event, all queries together).
#[derive(Debug, Default)]
pub struct Counters {
    parses: AtomicUsize,
    loads: AtomicUsize,
    executions: AtomicUsize,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Executions of [`parse_file`].
    pub parses: usize,
    /// Executions of [`load_tree`].
    pub loads: usize,
    /// Every query execution salsa reported (`EventKind::WillExecute`).
    pub executions: usize,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            parses: self.parses - o.parses,
            loads: self.loads - o.loads,
            executions: self.executions - o.executions,
        }
    }
}

impl Counters {
    pub fn get(&self) -> Counts {
        Counts {
            parses: self.parses.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            executions: self.executions.load(Ordering::Relaxed),
        }
    }
}

/// The database's view for queries.
#[salsa::db]
pub trait Db: salsa::Database {
    /// Execution counters (written by the queries, never read by them).
    fn counters(&self) -> &Counters;
}

/// The salsa database of the incremental load.
#[salsa::db]
#[derive(Clone)]
pub struct CompileDb {
    storage: salsa::Storage<Self>,
    counters: Arc<Counters>,
}

impl Default for CompileDb {
    fn default() -> Self {
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let storage = salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { .. } = event.kind {
                c.executions.fetch_add(1, Ordering::Relaxed);
            }
        })));
        CompileDb { storage, counters }
    }
}

#[salsa::db]
impl salsa::Database for CompileDb {}

#[salsa::db]
impl Db for CompileDb {
    fn counters(&self) -> &Counters {
        &self.counters
    }
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

/// The tree as a whole: its root, its files (in the loader's order) and
/// the load options.
#[salsa::input]
pub struct TreeInput {
    #[returns(ref)]
    pub root: PathBuf,
    #[returns(ref)]
    pub files: Vec<TreeFile>,
    #[returns(ref)]
    pub options: Options,
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
    pub result: Arc<Result<Tree, Vec<Diagnostic>>>,
}

impl PartialEq for LoadedTree {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
    }
}
impl Eq for LoadedTree {}

fn put(h: &mut blake3::Hasher, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// Parse one file into the spanned node tree (`yaml::parse_source_w`).
#[salsa::tracked(returns(ref))]
pub fn parse_file(db: &dyn Db, file: TreeFile) -> ParsedFile {
    db.counters().parses.fetch_add(1, Ordering::Relaxed);
    let path = file.path(db);
    let display = file.display(db);
    let mut h = blake3::Hasher::new();
    h.update(b"csis-incremental-parse-v1");
    put(&mut h, display.as_bytes());
    put(&mut h, path.to_string_lossy().as_bytes());
    let result = match file.text(db) {
        Ok(text) => {
            h.update(b"T");
            put(&mut h, text.as_bytes());
            let src = Arc::new(SourceFile {
                path: display.clone(),
                abs: path.clone(),
                text: text.clone(),
            });
            yaml::parse_source_w(src, &mut Vec::new())
        }
        Err(e) => {
            h.update(b"E");
            put(&mut h, e.as_bytes());
            Err(Diagnostic::plain(display, format!("cannot read: {e}")))
        }
    };
    ParsedFile {
        hash: h.finalize(),
        result: Arc::new(result),
    }
}

/// Merge, template, type, resolve and validate the parsed files
/// ([`load::load_from_nodes`]).
#[salsa::tracked(returns(ref))]
pub fn load_tree(db: &dyn Db, input: TreeInput) -> LoadedTree {
    db.counters().loads.fetch_add(1, Ordering::Relaxed);
    let opts = input.options(db);
    let mut h = blake3::Hasher::new();
    h.update(b"csis-incremental-load-v1");
    put(&mut h, input.root(db).to_string_lossy().as_bytes());
    // The options by content (their Debug rendering is deterministic:
    // vectors, a BTreeMap, strings and a time).
    put(&mut h, format!("{:?}", opts.0).as_bytes());
    let mut nodes = Vec::with_capacity(input.files(db).len());
    for f in input.files(db) {
        let p = parse_file(db, *f);
        h.update(p.hash.as_bytes());
        nodes.push((f.path(db).clone(), (*p.result).clone()));
    }
    let result = load::load_from_nodes(input.root(db), &opts.0, nodes);
    LoadedTree {
        hash: h.finalize(),
        result: Arc::new(result),
    }
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
}

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        *self == SyncReport::default()
    }
}

/// The incremental load of one tree on disk.
pub struct Incremental {
    db: CompileDb,
    root: PathBuf,
    input: TreeInput,
    files: BTreeMap<PathBuf, TreeFile>,
}

impl Incremental {
    /// Read the tree's YAML files at `root` (nothing is parsed yet). The
    /// load time is fixed now when `opts.now` is None.
    pub fn new(root: &Path, opts: &LoadOptions) -> Incremental {
        let mut opts = opts.clone();
        opts.now.get_or_insert_with(chrono::Utc::now);
        let db = CompileDb::default();
        let input = TreeInput::new(&db, root.to_path_buf(), Vec::new(), Options(Arc::new(opts)));
        let mut inc = Incremental {
            db,
            root: root.to_path_buf(),
            input,
            files: BTreeMap::new(),
        };
        inc.sync();
        inc
    }

    /// Re-read the tree's YAML files: set the text of the files that
    /// changed (only those), add and remove files. Nothing is recomputed
    /// until [`Incremental::tree`].
    pub fn sync(&mut self) -> SyncReport {
        let mut report = SyncReport::default();
        let listed = load::tree_files(&self.root);
        let mut order = Vec::with_capacity(listed.len());
        let mut seen = BTreeMap::new();
        for p in listed {
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
        report
    }

    /// Replace the load options (invalidates the load, not the parses).
    pub fn set_options(&mut self, opts: &LoadOptions) {
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

    /// The tree loaded as a whole, shared (cheap to keep).
    pub fn loaded(&self) -> Arc<Result<Tree, Vec<Diagnostic>>> {
        load_tree(&self.db, self.input).result.clone()
    }

    /// The files the database holds, in the loader's order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(|p| p.as_path())
    }

    /// How often each query ran so far.
    pub fn counts(&self) -> Counts {
        self.db.counters.get()
    }

    /// The database (for queries of one's own).
    pub fn db(&self) -> &CompileDb {
        &self.db
    }
}
