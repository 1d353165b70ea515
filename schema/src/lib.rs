//! csis-schema: the configuration schema, what a runtime, the cache and
//! the loader all read.
//!
//! A light crate (serde, serde-saphyr, no template engine, no age, no
//! salsa), so that every runtime crate compiles beside the loader rather
//! than after it:
//!
//! - [`span`]: a source file and a place in it ([`SourceFile`], [`Loc`]);
//! - [`yaml`]: the spanned YAML node, its parser and its deserializer (the
//!   one module that knows serde-saphyr);
//! - [`entry`]: the resolved entries the runtime crates are built from
//!   ([`RuntimeEntry`], [`Origin`]);
//! - [`diag`]: diagnostics naming file, line, column and field path;
//! - [`model`]: the strict typed models of every entry of a tree, as
//!   declared;
//! - [`offline`]: the problems a runtime type's own offline checks find
//!   (a field path, a message, a hint), which the loader places;
//! - [`secret`]: the registry of secret values and their redaction;
//! - [`tags`]: the names of the tags and labels csis stamps on what it
//!   makes.

// A Diagnostic (file, line, column, path, message, hint, span) is the
// error of every parse; it is returned, not propagated through hot loops.
#![allow(clippy::result_large_err)]

pub mod diag;
pub mod entry;
pub mod model;
pub mod offline;
mod par;
pub mod secret;
pub mod span;
pub mod tags;
pub mod yaml;

pub use diag::{Diagnostic, Severity};
pub use entry::{Origin, RuntimeEntry};
pub use offline::{BaseEntry, MadeSeries, Problem};
pub use par::par_map;
pub use span::{Loc, SourceFile};
