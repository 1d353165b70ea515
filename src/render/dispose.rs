//! What `csis dispose` and a build's dispose nodes did, kept, refused or
//! could not check, for people.

use csis_ops::dispose::{DisposeEvent, Failure, Refusal};

/// For people: one line per item, `refused:` / `error:` / `warning:`
/// where the event is one.
pub fn lines(e: &DisposeEvent) -> Vec<String> {
    match e {
        DisposeEvent::Kept {
            build_id,
            series,
            runtime,
            reason,
        } => vec![format!(
            "kept (retention debt): {build_id} ({series} on {runtime}): {reason}"
        )],
        DisposeEvent::NothingToDispose => vec!["nothing to dispose".into()],
        DisposeEvent::WouldDispose {
            build_id,
            series,
            runtime,
            run,
            image_pins,
        } => {
            let mut v = vec![format!(
                "would dispose {build_id} ({series} on {runtime}{})",
                run.as_deref()
                    .map(|r| format!(", run {r}"))
                    .unwrap_or_default()
            )];
            v.extend(image_pins.iter().map(|k| format!("  would remove image pin {k}")));
            v
        }
        DisposeEvent::CannotCheckUsers {
            build_id,
            runtime,
            reason,
        } => vec![format!(
            "warning: {runtime}: cannot check live references of {build_id} ({reason})"
        )],
        DisposeEvent::Refused { refusals } => {
            let mut v: Vec<String> = refusals.iter().map(|r| format!("refused: {}", refusal(r))).collect();
            v.push("nothing was deleted".into());
            v
        }
        DisposeEvent::Disposed {
            build_id,
            series,
            runtime,
            already_gone,
            notes,
            image_pins_removed,
        } => {
            let mut v = vec![format!(
                "disposed {build_id} ({series} on {runtime}){}",
                if *already_gone { " (already gone)" } else { "" }
            )];
            v.extend(notes.iter().map(|n| format!("  {n}")));
            v.extend(
                image_pins_removed
                    .iter()
                    .map(|k| format!("  removed image pin {k}")),
            );
            v
        }
        DisposeEvent::Failed {
            build_id,
            series,
            runtime,
            failure,
        } => vec![match failure {
            Failure::Dispose { error } => format!(
                "error: could not dispose {build_id} ({series} on {runtime}): {error}; its record is kept; stopping"
            ),
            Failure::StillThere => format!(
                "error: {build_id} is still on {runtime} after disposal; its record is kept; stopping"
            ),
            Failure::CannotReadBack { error } => format!(
                "error: cannot read back the disposal of {build_id} from {runtime}: {error}; its record is kept; stopping"
            ),
        }],
    }
}
/// Why a disposal was refused, in one line.
pub fn refusal(r: &Refusal) -> String {
    match r {
        Refusal::Plan { reason } => reason.clone(),
        Refusal::Runtime { runtime, reason } => format!("runtime {runtime}: {reason}"),
        Refusal::InUse {
            build_id,
            series,
            runtime,
            users,
        } => format!(
            "build {build_id} ({series}) is in use on {runtime}: {}; decommission first",
            users.join(", ")
        ),
        Refusal::CannotCheckUsers {
            build_id,
            runtime,
            reason,
        } => format!("cannot check live references of {build_id} on {runtime}: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_line_each_then_nothing_was_deleted() {
        let e = DisposeEvent::Refused {
            refusals: vec![
                Refusal::Plan {
                    reason: "build x is released".into(),
                },
                Refusal::InUse {
                    build_id: "b-1".into(),
                    series: "web".into(),
                    runtime: "sim".into(),
                    users: vec!["vm1".into(), "vm2".into()],
                },
            ],
        };
        assert_eq!(
            lines(&e),
            [
                "refused: build x is released",
                "refused: build b-1 (web) is in use on sim: vm1, vm2; decommission first",
                "nothing was deleted",
            ]
        );
    }
}
