//! A build's [`Notice`]s as the lines people read (stderr, or above the
//! progress bars; the `message` of a notice under `--json`).

use csis_ops::build::{LeaseTaken, Notice};

/// The lines a terminal shows of a notice (a node's each after its label).
pub fn lines(n: &Notice) -> Vec<String> {
    match n.label() {
        Some(label) => (words(n).into_iter())
            .map(|w| format!("{label}: {w}"))
            .collect(),
        None => words(n),
    }
}

/// The words of a notice: a release or dispose node's outcome (what the
/// node logs, answers and fails with), or the line of any other notice.
pub fn words(n: &Notice) -> Vec<String> {
    match n {
        Notice::Release { outcome, .. } => vec![super::release::node_line(outcome)],
        Notice::Dispose { outcome, .. } => super::dispose::lines(outcome),
        _ => vec![line(n)],
    }
}

/// The line of a notice about no node.
fn line(n: &Notice) -> String {
    match n {
        Notice::Warning { message } => format!("warning: {message}"),
        Notice::DryRunRefusal { message } => {
            format!("{message} (a bake would be refused; --dry-run goes on)")
        }
        Notice::Gated {
            label,
            action,
            reason,
        } => format!("gated: {label} would {action}: {reason}"),
        Notice::Lease { key, holder, what } => match what {
            LeaseTaken::Waiting => format!("waiting for the lease of {key}, held by {holder}"),
            LeaseTaken::TakenOver { ago } => format!(
                "took over the lease of {key} from {holder}: it expired {ago:.0} s ago (its owner stopped renewing it)"
            ),
            LeaseTaken::TakenFromDead => format!(
                "took over the lease of {key} from {holder}: that process is gone from this host"
            ),
        },
        Notice::LeaseLost { key } => format!(
            "warning: the lease {key} was taken over by another runner while this build held it (it was not renewed in time)"
        ),
        Notice::LeftoverRemoved { runtime, leftover } => {
            format!("{runtime}: removed {leftover}, left by an interrupted bake")
        }
        Notice::LeftoversUnknown { runtime, error } => {
            format!("{runtime}: could not look for leftovers: {error}")
        }
        Notice::StoreRequests { url, requests } => {
            format!("meta-state store {url}: {requests} requests")
        }
        Notice::TofuRoots { dirs } => format!(
            "tofu roots written under generated/: {} (planned and applied by their storage and instance nodes where apply_storage / apply_instances allow)",
            dirs.join(", ")
        ),
        Notice::TofuRootsNotWritten { error } => {
            format!("warning: tofu roots not written: {error}")
        }
        Notice::TofuRootNotValid { dir, why } => {
            format!("warning: tofu root {dir} not validated: {why} (--dry-run goes on)")
        }
        Notice::EphemeralsTeardown { root, line } => format!("tofu root {root}: {line}"),
        Notice::Release { outcome, .. } => super::release::node_line(outcome),
        Notice::Dispose { outcome, .. } => super::dispose::lines(outcome).join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_data_in_json_and_one_line_in_text() {
        let n = Notice::Gated {
            label: "//instances/a:instance".into(),
            action: "launch".into(),
            reason: "apply_instances is false".into(),
        };
        assert_eq!(
            lines(&n),
            ["gated: //instances/a:instance would launch: apply_instances is false"]
        );
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(v["notice"], "gated");
        assert_eq!(v["action"], "launch");
        let w = Notice::Warning {
            message: "x".into(),
        };
        assert_eq!(lines(&w), ["warning: x"]);
    }

    #[test]
    fn a_lease_notice_says_what_became_of_the_lease() {
        let n = |what| Notice::Lease {
            key: "img@sim".into(),
            holder: "run-1 (host, pid 7)".into(),
            what,
        };
        assert_eq!(
            lines(&n(LeaseTaken::Waiting)),
            ["waiting for the lease of img@sim, held by run-1 (host, pid 7)"]
        );
        assert_eq!(
            lines(&n(LeaseTaken::TakenOver { ago: 41.6 })),
            ["took over the lease of img@sim from run-1 (host, pid 7): it expired 42 s ago (its owner stopped renewing it)"]
        );
        assert_eq!(
            lines(&n(LeaseTaken::TakenFromDead)),
            ["took over the lease of img@sim from run-1 (host, pid 7): that process is gone from this host"]
        );
        let v = serde_json::to_value(n(LeaseTaken::TakenOver { ago: 3.0 })).unwrap();
        assert_eq!(v["notice"], "lease");
        assert_eq!(v["lease"], "taken_over");
        assert_eq!(v["key"], "img@sim");
        assert_eq!(v["ago"], 3.0);
    }
}
