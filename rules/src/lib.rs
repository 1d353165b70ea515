//! csis-rules: the configuration tree.
//!
//! Files -> spanned YAML (`csis_schema::yaml`, the one module that knows
//! serde-saphyr) -> `ENC[age:...]` decryption ([`crypt`]) -> templates
//! ([`template`], minijinja) -> strict typed models (`csis_schema::model`)
//! -> resolution and validation ([`load`]) -> the resolved [`Tree`]
//! ([`tree`]), with every problem a `csis_schema::Diagnostic` naming file,
//! line, column and field path.
//!
//! ```no_run
//! let tree = csis_rules::load(std::path::Path::new("."), &csis_rules::LoadOptions::default());
//! ```

// A Diagnostic (file, line, column, path, message, hint, span) is the
// error of every parse; it is returned, not propagated through hot loops.
#![allow(clippy::result_large_err)]

/// Tree -> graph nodes: resolve, emit, bake, retag, test, release and dispose.
pub mod compile;
pub mod crypt;
/// The fleet, resolved: instances, storages, users, instance and user builders.
pub mod fleet;
pub mod groups;
pub mod incremental;
pub mod load;
pub mod secrets;
pub mod template;
pub mod tools;
pub mod tree;

pub use fleet::{
    Attach, ImagePolicy, Instance, InstanceBuilder, Mount, OnFailure, Storage, StorageState, User,
    UserBuilder,
};
pub use load::{load, LoadOptions, RuntimeChecks, Undeclare};
pub use tree::*;
