//! One module per command. Each exposes `Args` (clap) and `run`.

pub mod build;
pub mod graph;
pub mod init;
pub mod plan;
pub mod runtime;
pub mod validate;
pub mod watch;
// lineage operations (issue 6)
pub mod dispose;
pub mod empty;
pub mod lineage;
pub mod preflight;
pub mod release;
pub mod revoke;
pub mod state;

/// Take the tree lock, saying so while another csis holds it.
pub(crate) fn take_lock(root: &std::path::Path) -> anyhow::Result<csis_cache::TreeLock> {
    csis_ops::state::take_lock(root, |holder| {
        eprintln!("waiting for another csis to release the tree lock ({holder})");
    })
}
