//! How many times each query body ran: the proof, in the tests and
//! under `CSIS_TIMING`, that an edit runs only what it invalidates.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many times each query body ran (and how many executions salsa
/// reported through its `WillExecute` event, all queries together).
#[derive(Debug, Default)]
pub struct Counters {
    pub(super) parses: AtomicUsize,
    pub(super) loads: AtomicUsize,
    pub(super) image_files_kept: AtomicUsize,
    pub(super) image_files_loaded: AtomicUsize,
    pub(super) image_files_resolved: AtomicUsize,
    pub(super) drafts: AtomicUsize,
    pub(super) compiles: AtomicUsize,
    pub(super) hashes: AtomicUsize,
    pub(super) fingerprints: AtomicUsize,
    pub(super) graphs: AtomicUsize,
    pub(super) graphs_patched: AtomicUsize,
    pub(super) executions: AtomicUsize,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Executions of [`parse_file`](super::parse_file).
    pub parses: usize,
    /// Executions of [`load_tree`](super::load_tree).
    pub loads: usize,
    /// Files of `images/` whose images a load took from the last one
    /// ([`ImageMemo`](crate::load::ImageMemo)), and those it loaded anew.
    pub image_files_kept: usize,
    pub image_files_loaded: usize,
    /// Of the files kept, those whose images came resolved (and checked)
    /// from the last load: the resolution's context did not move.
    pub image_files_resolved: usize,
    /// Executions of [`draft`](super::draft) (one per series whose [`series_key`](super::series_key) moved).
    pub drafts: usize,
    /// Executions of [`nodes`](super::nodes) (a series compiled: files hashed in, pins).
    pub compiles: usize,
    /// Playbook and script files read and hashed.
    pub hashes: usize,
    /// Executions of [`fingerprints`](super::fingerprints) (one series' node fingerprints).
    pub fingerprints: usize,
    /// Executions of [`graph`](super::graph) (the graph assembled from the series).
    pub graphs: usize,
    /// Of those, the graphs made by patching the last one in place (every
    /// series of the same shape, [`Unit::same_shape`](crate::compile::Unit::same_shape)).
    pub graphs_patched: usize,
    /// Every query execution salsa reported (`EventKind::WillExecute`),
    /// counted only by an [`Incremental::counting_executions`](super::Incremental::counting_executions) (else 0).
    pub executions: usize,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            parses: self.parses - o.parses,
            loads: self.loads - o.loads,
            image_files_kept: self.image_files_kept - o.image_files_kept,
            image_files_loaded: self.image_files_loaded - o.image_files_loaded,
            image_files_resolved: self.image_files_resolved - o.image_files_resolved,
            drafts: self.drafts - o.drafts,
            compiles: self.compiles - o.compiles,
            hashes: self.hashes - o.hashes,
            fingerprints: self.fingerprints - o.fingerprints,
            graphs: self.graphs - o.graphs,
            graphs_patched: self.graphs_patched - o.graphs_patched,
            executions: self.executions - o.executions,
        }
    }
}

impl Counters {
    pub fn get(&self) -> Counts {
        let g = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        Counts {
            parses: g(&self.parses),
            loads: g(&self.loads),
            image_files_kept: g(&self.image_files_kept),
            image_files_loaded: g(&self.image_files_loaded),
            image_files_resolved: g(&self.image_files_resolved),
            drafts: g(&self.drafts),
            compiles: g(&self.compiles),
            hashes: g(&self.hashes),
            fingerprints: g(&self.fingerprints),
            graphs: g(&self.graphs),
            graphs_patched: g(&self.graphs_patched),
            executions: g(&self.executions),
        }
    }
}

pub(super) fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}
