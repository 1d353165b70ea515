//! This crate's integration tests, one test binary (issue 24, item 5): the
//! records: meta-state, the recorder, the stores, retention, the fleet
//! records. Each file a module.

mod dispose_props;
mod flaky_store;
mod fleet_records;
mod hostile_records;
mod meta_state;
mod recorder_lazy;
mod recorder_update;
mod remote_store;
