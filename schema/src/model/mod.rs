//! Strict typed models of everything csis loads from a tree.
//!
//! Each struct refuses unknown keys (`deny_unknown_fields`), so a typo is an
//! error naming its field path. These are the models *as declared* (after
//! templating and decryption); the resolved views that name their foreign
//! keys canonically are the loader's (`csis_rules::tree`).
//!
//! A runtime entry is split in two when it loads: the fields every runtime
//! shares ([`RuntimeCommon`]) and the fields of its `type`
//! ([`AwsFields`], [`DockerFields`], [`DummyFields`]), each strict.
//!
//! One file per section of a tree; every name is re-exported here
//! (`model::ImageModel`).

mod cfg;
mod executables;
mod fleet;
mod groups;
mod image_builders;
mod images;
mod mod_builders;
mod os_builders;
mod runtimes;
mod state_backends;
mod tests;
mod values;

pub use cfg::*;
pub use executables::*;
pub use fleet::*;
pub use groups::*;
pub use image_builders::*;
pub use images::*;
pub use mod_builders::*;
pub use os_builders::*;
pub use runtimes::*;
pub use state_backends::*;
pub use tests::*;
pub use values::*;
