//! What `csis release` and a build's release nodes did, for people.

use csis_ops::release::ReleaseEvent;

/// What happened, in words (no `refused:`/`error:` prefix).
pub fn message(e: &ReleaseEvent) -> String {
    match e {
        ReleaseEvent::AlreadyCurrent {
            build_id,
            model,
            series,
        } => format!("{build_id} is already the current {model} release of {series}"),
        ReleaseEvent::WouldRelease {
            build_id,
            model,
            series,
            runtime,
            ..
        } => format!("would release {build_id} as {model} of {series} on {runtime}"),
        ReleaseEvent::Released {
            build_id,
            model,
            series,
            runtime,
            marked,
        } => format!(
            "released {build_id} as {model} of {series} on {runtime}{}",
            if *marked {
                " (marked on the runtime)"
            } else {
                ""
            }
        ),
        ReleaseEvent::NotQualified {
            series,
            runtime,
            reason,
        } => format!("{series} on {runtime}: not released: {reason}"),
        ReleaseEvent::NoBuildYet { series, runtime } => {
            format!("{series} on {runtime}: no build to release yet")
        }
        ReleaseEvent::HeadAlreadyCurrent {
            series,
            runtime,
            model,
        } => format!("{series} on {runtime}: the head is already the current {model} release"),
        ReleaseEvent::NothingQualifies => "nothing qualifies for release".into(),
        ReleaseEvent::Refused { reason } => reason.clone(),
        ReleaseEvent::MarkFailed {
            build_id,
            runtime,
            error,
        } => {
            format!("the release mark of {build_id} on {runtime} failed: {error}; nothing recorded")
        }
    }
}

/// For people: the message, prefixed `refused:`/`error:` for a
/// problem, and a dry run's commands.
pub fn lines(e: &ReleaseEvent) -> Vec<String> {
    match e {
        ReleaseEvent::Refused { .. } => vec![format!("refused: {}", message(e))],
        ReleaseEvent::MarkFailed { .. } => vec![format!("error: {}", message(e))],
        ReleaseEvent::WouldRelease { commands, .. } => {
            let mut v = vec![message(e)];
            v.extend(commands.iter().map(|c| format!("  would run: {c}")));
            v
        }
        _ => vec![message(e)],
    }
}
/// A release node's line: its outcome (`refused:` before a refusal), what
/// the node logs, answers and fails with.
pub fn node_line(e: &ReleaseEvent) -> String {
    match e {
        ReleaseEvent::Refused { .. } => format!("refused: {}", message(e)),
        _ => message(e),
    }
}
