//! `runtime_builders:` entries: the fields every runtime shares
//! ([`common`]) and each type's own ([`aws`], [`docker`], [`dummy`]), with
//! each type's row of what the load knows of it ([`types`]).

mod aws;
mod common;
mod docker;
mod dummy;
mod types;

pub use aws::*;
pub use common::*;
pub use docker::*;
pub use dummy::*;
pub use types::*;
