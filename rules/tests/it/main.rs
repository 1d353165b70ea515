//! This crate's integration tests, one test binary (issue 24, item 5): the
//! loader and the compile: fixtures, the fleet, hostile input, the
//! reference trees, incremental loads. Each file a module.

mod fixture_valid;
mod fleet;
mod fleet_graph;
mod fuzz;
mod groups;
mod hostile_input;
mod incremental;
mod meta_state;
mod overlays_unused;
mod recipe_checks;
mod reference;
mod yaml_parity;
