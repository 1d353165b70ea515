//! The fleet's lifecycle (docs/fleet.md §4): what each storage and instance
//! node of the graph will do and why (`plan`: the planner's decision over
//! the records, applied to the engine's plan), what a build does for one
//! (`apply`: create, archive, destroy a storage; launch, verify, record,
//! replace, decommission an instance, prove an ephemeral one), what `csis
//! instances` reports (`report`), and what the load refuses against the
//! records (`checks`: launch parameters changed without a replacement).
//!
//! Everything the build records goes through its `Recorder` (journalled,
//! so a kill converges on replay); every machine and volume through the
//! runtime's hooks (`csis_runtime::Runtime::launch_instance`, ...).

pub mod apply;
pub mod checks;
pub mod drift;
pub mod import;
pub mod plan;
pub mod report;
pub mod tofu;

pub use checks::launch_param_changes;
pub use plan::{apply_fleet_plan, decide_instance, decide_storage, Action, Decided, FleetView};
pub use report::{instances, InstanceLine, InstancesReport};

#[cfg(test)]
mod tests;
