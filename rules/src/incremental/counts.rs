//! How many times each query body ran: the proof, in the tests and
//! under `CSIS_TIMING`, that an edit runs only what it invalidates.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Each counter named once: the live [`Counters`], their snapshot
/// [`Counts`] (with its documentation), the snapshot's reading and the
/// difference of two snapshots.
macro_rules! counters {
    ($( $(#[doc = $doc:expr])* $name:ident, )*) => {
        /// How many times each query body ran (and how many executions
        /// salsa reported through its `WillExecute` event, all queries
        /// together).
        #[derive(Debug, Default)]
        pub struct Counters {
            $( pub(super) $name: AtomicUsize, )*
        }

        /// A snapshot of [`Counters`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct Counts {
            $( $(#[doc = $doc])* pub $name: usize, )*
        }

        impl Counters {
            pub fn get(&self) -> Counts {
                Counts {
                    $( $name: self.$name.load(Ordering::Relaxed), )*
                }
            }
        }

        impl std::ops::Sub for Counts {
            type Output = Counts;
            fn sub(self, o: Counts) -> Counts {
                Counts {
                    $( $name: self.$name - o.$name, )*
                }
            }
        }
    };
}

counters! {
    /// Executions of [`parse_file`](super::parse_file).
    parses,
    /// Executions of [`load_tree`](super::load_tree).
    loads,
    /// Files of `images/` whose images a load took from the last one
    /// ([`ImageMemo`](crate::load::ImageMemo)).
    image_files_kept,
    /// Files of `images/` a load loaded anew.
    image_files_loaded,
    /// Of the files kept, those whose images came resolved (and checked)
    /// from the last load: the resolution's context did not move.
    image_files_resolved,
    /// Executions of [`draft`](super::draft) (one per series whose
    /// [`series_key`](super::series_key) moved).
    drafts,
    /// Executions of [`nodes`](super::nodes) (a series compiled: files
    /// hashed in, pins).
    compiles,
    /// Playbook and script files read and hashed.
    hashes,
    /// Executions of [`fingerprints`](super::fingerprints) (one series'
    /// node fingerprints).
    fingerprints,
    /// Executions of [`graph`](super::graph) (the graph assembled from
    /// the series).
    graphs,
    /// Of those, the graphs made by patching the last one in place (every
    /// series of the same shape,
    /// [`Unit::same_shape`](crate::compile::Unit::same_shape)).
    graphs_patched,
    /// Every query execution salsa reported (`EventKind::WillExecute`),
    /// counted only by an
    /// [`Incremental::counting_executions`](super::Incremental::counting_executions)
    /// (else 0).
    executions,
}

pub(super) fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}
