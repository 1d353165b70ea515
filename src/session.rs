//! The session of `csis_ops` opened from the command line (for the
//! commands that plan: `plan`, `graph`, `watch`).

use anyhow::Result;
pub use csis_ops::session::{plan, read_meta, select, Session};

use crate::GlobalArgs;

/// Load (a `csis_ops::NotLoaded` when the tree does not load) and compile.
pub fn open(global: &GlobalArgs) -> Result<Session> {
    csis_ops::session::open(&global.dir, &global.tree().load_options())
}
