//! csis-rules: the configuration tree.
//!
//! Files -> spanned YAML ([`yaml`], the one module that knows serde-saphyr)
//! -> `ENC[age:...]` decryption ([`crypt`]) -> templates ([`template`],
//! minijinja) -> strict typed models ([`model`]) -> resolution and
//! validation ([`load`]) -> the resolved [`Tree`] ([`tree`]), with every
//! problem a [`Diagnostic`] naming file, line, column and field path. The
//! schema ([`yaml`], [`model`], [`diag`], [`secret`]) is `csis-schema`'s,
//! named here.
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
pub mod groups;
pub mod incremental;
pub mod load;
pub mod secrets;
pub mod template;
pub mod tools;
pub mod tree;

// The configuration schema lives in csis-schema; its modules are named at
// the root so that `csis_schema::model`, `csis_schema::yaml`, `csis_schema::diag`, ... (and
// `csis_schema::yaml` in the tests and benches) keep naming them.
pub use csis_schema::{diag, model, offline, secret, yaml};

pub use diag::{Diagnostic, Severity};
pub use load::{load, LoadOptions, RuntimeChecks, Undeclare};
pub use offline::{BaseEntry, MadeSeries, Problem};
pub use tree::*;
