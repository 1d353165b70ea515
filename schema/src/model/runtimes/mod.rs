//! `runtime_builders:` entries: the fields every runtime shares
//! ([`common`]) and each type's own ([`aws`], [`docker`], [`dummy`]).

mod aws;
mod common;
mod docker;
mod dummy;

pub use aws::*;
pub use common::*;
pub use docker::*;
pub use dummy::*;
