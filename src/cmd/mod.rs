//! One module per command. Each exposes `Args` (clap) and `run`: open the
//! context, call one operation of `csis_ops`, render its report. No command
//! imports another.

pub mod build;
pub mod builds;
pub mod completions;
pub mod decrypt;
pub mod dispose;
pub mod empty;
pub mod encrypt;
pub mod graph;
pub mod init;
pub mod lineage;
pub mod mask;
pub mod plan;
pub mod preflight;
pub mod public_safe;
pub mod reencrypt;
pub mod release;
pub mod revoke;
pub mod runtime;
pub mod state;
pub mod validate;
pub mod watch;

/// What a command says while another csis holds the tree lock.
pub(crate) fn say_waiting(holder: &str) {
    eprintln!("waiting for another csis to release the tree lock ({holder})");
}

/// Open the tree of the global options for an operation.
pub(crate) fn open(
    global: &crate::GlobalArgs,
    access: csis_ops::Access,
) -> anyhow::Result<csis_ops::Context> {
    csis_ops::Context::open(&global.tree(), access, say_waiting)
}
