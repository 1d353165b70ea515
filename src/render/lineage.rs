//! `csis lineage relabel` and `restamp`: their events for people.

use csis_ops::lineage::{RelabelEvent, RestampEvent};

/// A relabel event for people (`error:` for a problem).
pub fn relabel_line(e: &RelabelEvent, dry_run: bool) -> String {
    match e {
        RelabelEvent::Refused { reason } => format!("error: {reason}"),
        RelabelEvent::CannotList { runtime, error } => {
            format!("error: {runtime} cannot list its images: {error}")
        }
        RelabelEvent::NotOnRuntime { build_id, runtime } => {
            format!("{build_id} is not on {runtime} (the state query reports it missing)")
        }
        RelabelEvent::Relabelled {
            build_id,
            series,
            changes,
        } => {
            let what = changes
                .iter()
                .map(|c| format!("{}: {} -> {}", c.field, c.tag, c.record))
                .collect::<Vec<_>>()
                .join("; ");
            let verb = if dry_run {
                "would relabel"
            } else {
                "relabelled"
            };
            format!("{verb} {build_id} ({series}): {what}")
        }
        RelabelEvent::RetagFailed { build_id, error } => {
            format!("error: could not retag {build_id}: {error}")
        }
        RelabelEvent::NothingToRelabel { runtime } => {
            format!("nothing to relabel: every recorded build's tags agree on {runtime}")
        }
    }
}
/// A restamp event for people (`error:` for a problem).
pub fn restamp_line(e: &RestampEvent, dry_run: bool) -> String {
    match e {
        RestampEvent::Restamped {
            build_id,
            series,
            previous,
            current,
        } => format!(
            "{} {build_id} ({series}): {} -> {}",
            if dry_run {
                "would restamp"
            } else {
                "restamped"
            },
            previous.chars().take(12).collect::<String>(),
            current.chars().take(12).collect::<String>()
        ),
        RestampEvent::RetagFailed { build_id, error } => format!(
            "error: could not retag {build_id}: {error} (csis lineage relabel repairs it)"
        ),
        RestampEvent::FirstPassOnly => "(a dry run shows the first pass only: children pinned to a restamped parent may follow)".into(),
        RestampEvent::NothingToRestamp { runtime } => format!(
            "nothing to restamp: every head on {runtime} matches the tree's fingerprint"
        ),
    }
}
