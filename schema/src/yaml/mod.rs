//! The one module that knows serde-saphyr.
//!
//! A YAML file is parsed ([`parse`]) into a spanned [`Node`] tree ([`node`]:
//! every scalar, list and mapping carries its [`Loc`]: file, line, column,
//! byte offset). Typed values are then deserialized from nodes with
//! [`from_node`] ([`de`]), whose errors carry the file, line, column and
//! field path ([`path`]) of the offending node
//! (`runtime_builders[0].credentials.profile_nme`).
//!
//! [`to_string`] / [`from_str`] ([`io`]) are the helpers the cache crate uses
//! for its meta-state files.

pub mod de;
pub mod io;
pub mod node;
pub mod parse;
pub mod path;

pub use crate::span::{Loc, SourceFile};
pub use de::*;
pub use io::*;
pub use node::*;
pub use parse::*;
pub use path::*;
