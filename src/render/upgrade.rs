//! `csis upgrade`'s outcome and the plan's notes of pinned images behind
//! their parent, for people.

use csis_ops::upgrade::{Behind, UpgradeReport};

/// An upgrade's outcome in one line.
pub fn message(r: &UpgradeReport) -> String {
    match r {
        UpgradeReport::Moved {
            kind,
            name,
            runtime,
            from,
            to,
            dry_run,
            next,
        } => format!(
            "{} {kind} {name} on {runtime}: pin {} -> {to}; next: {next}",
            if *dry_run {
                "would upgrade"
            } else {
                "upgraded"
            },
            from.as_deref().unwrap_or("(none)"),
            kind = kind.as_str(),
        ),
        UpgradeReport::AlreadyPinned {
            kind,
            name,
            runtime,
            build_id,
        } => format!(
            "{} {name} on {runtime} is already pinned to {build_id}; nothing changed",
            kind.as_str()
        ),
        UpgradeReport::Refused { reason } => format!("refused: {reason}; nothing changed"),
    }
}
/// A pinned image behind its parent's head, in one line.
pub fn behind(b: &Behind) -> String {
    format!(
        "//images/{}@{} is current but behind: pinned to {} {}, whose head is {} (run `{}`)",
        b.image, b.runtime, b.parent, b.pinned, b.head, b.command
    )
}
