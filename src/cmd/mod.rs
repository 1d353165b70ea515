//! One module per command. Each exposes `Args` (clap) and `run`.

pub mod build;
pub mod graph;
pub mod init;
pub mod plan;
pub mod runtime;
pub mod validate;
pub mod watch;
