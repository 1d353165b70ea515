//! This crate's integration tests, one test binary (issue 24, item 5): the
//! docker runtime: offline checks, the recipe, the fleet, and the bakes on
//! the daemon. Each file a module.

mod common;
mod daemon;
mod fleet;
mod offline;
mod recipe;
