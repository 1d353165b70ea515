//! This crate's integration tests, one test binary (issue 24, item 5):
//! labels, fingerprints, the graph, the planner and the scheduler. Each
//! file a module.

mod fingerprints;
mod graph;
mod plan;
mod schedule;
mod schedule_random;
