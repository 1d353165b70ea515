//! One module per command. Each exposes `Args` (clap) and `run`.

pub mod build;
pub mod builds;
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
// the operator's secrets and the command line's own description
pub mod completions;
pub mod decrypt;
pub mod encrypt;
pub mod mask;
pub mod public_safe;
pub mod reencrypt;
