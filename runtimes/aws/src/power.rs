//! Power states: EC2's `State.Name` in csis's vocabulary, and the words a
//! session refusal uses for each.

use csis_runtime::PowerState;

/// EC2's `State.Name` in the system's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsPowerState {
    Starting,
    Running,
    Stopping,
    Stopped,
    Absent,
    Unknown,
}

impl AwsPowerState {
    /// `pending` -> starting, `running`, `stopping`/`shutting-down` ->
    /// stopping, `stopped`, `terminated` -> absent, anything else -> unknown.
    pub fn from_ec2(raw: &str) -> AwsPowerState {
        match raw {
            "pending" => AwsPowerState::Starting,
            "running" => AwsPowerState::Running,
            "stopping" | "shutting-down" => AwsPowerState::Stopping,
            "stopped" => AwsPowerState::Stopped,
            "terminated" => AwsPowerState::Absent,
            _ => AwsPowerState::Unknown,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            AwsPowerState::Starting => "starting",
            AwsPowerState::Running => "running",
            AwsPowerState::Stopping => "stopping",
            AwsPowerState::Stopped => "stopped",
            AwsPowerState::Absent => "absent",
            AwsPowerState::Unknown => "unknown",
        }
    }
    /// Onto the hook surface's vocabulary (one to one).
    pub fn to_api(self) -> PowerState {
        match self {
            AwsPowerState::Starting => PowerState::Starting,
            AwsPowerState::Running => PowerState::Running,
            AwsPowerState::Stopping => PowerState::Stopping,
            AwsPowerState::Stopped => PowerState::Stopped,
            AwsPowerState::Absent => PowerState::Absent,
            AwsPowerState::Unknown => PowerState::Unknown,
        }
    }
    /// How a session refusal names the state.
    pub fn describe(self) -> String {
        match self {
            AwsPowerState::Stopped => "STOPPED (switched off; not drift)".into(),
            AwsPowerState::Absent => "absent (no such machine)".into(),
            other => other.as_str().to_string(),
        }
    }
}

/// The text a session refusal uses when the cloud could not be asked.
pub const POWER_UNAVAILABLE: &str = "power state unavailable (no runtime could answer)";
