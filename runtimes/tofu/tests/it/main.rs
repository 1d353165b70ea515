//! This crate's integration tests, one test binary (issue 24, item 5): the
//! tofu roots: emission, secrets, the gated sequence. Each file a module.

mod common;
mod emission;
mod secrets;
mod sequence;
