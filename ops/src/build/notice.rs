//! What a build tells people besides its node events, as data: the
//! reporter gets a [`Notice`], never a sentence, so that a renderer can
//! word it, colour it or write it as JSON. `Display` is the plain line the
//! binary prints today (stderr, or above the progress bars).

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    /// A warning of the compile, an online check or the no-op stamp.
    Warning { message: String },
    /// An online check that would refuse a bake; a dry run goes on.
    DryRunRefusal { message: String },
    /// A fleet node its apply flag gates: what it would do.
    Gated {
        label: String,
        action: String,
        reason: String,
    },
    /// A lease of the shared store waited for or taken over.
    Lease { message: String },
    /// A lease another runner took over while this build held it.
    LeaseLost { key: String },
    /// A leftover of an interrupted bake, removed before anything bakes.
    LeftoverRemoved { runtime: String, leftover: String },
    /// The leftovers of a runtime could not be listed.
    LeftoversUnknown { runtime: String, error: String },
    /// How many requests the build sent to the shared store.
    StoreRequests { url: String, requests: u64 },
    /// The tofu roots the build wrote under `generated/`.
    TofuRoots { dirs: Vec<String> },
    /// The tofu roots could not be written (the nodes that need them fail).
    TofuRootsNotWritten { error: String },
    /// A line of a release or dispose node's outcome.
    NodeLine { label: String, line: String },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Warning { message } => write!(f, "warning: {message}"),
            Notice::DryRunRefusal { message } => {
                write!(f, "{message} (a bake would be refused; --dry-run goes on)")
            }
            Notice::Gated {
                label,
                action,
                reason,
            } => write!(f, "gated: {label} would {action}: {reason}"),
            Notice::Lease { message } => f.write_str(message),
            Notice::LeaseLost { key } => write!(
                f,
                "warning: the lease {key} was taken over by another runner while this build held it (it was not renewed in time)"
            ),
            Notice::LeftoverRemoved { runtime, leftover } => write!(
                f,
                "{runtime}: removed {leftover}, left by an interrupted bake"
            ),
            Notice::LeftoversUnknown { runtime, error } => {
                write!(f, "{runtime}: could not look for leftovers: {error}")
            }
            Notice::StoreRequests { url, requests } => {
                write!(f, "meta-state store {url}: {requests} requests")
            }
            Notice::TofuRoots { dirs } => write!(
                f,
                "tofu roots written under generated/: {} (planned and applied by their storage and instance nodes where apply_storage / apply_instances allow)",
                dirs.join(", ")
            ),
            Notice::TofuRootsNotWritten { error } => {
                write!(f, "warning: tofu roots not written: {error}")
            }
            Notice::NodeLine { label, line } => write!(f, "{label}: {line}"),
        }
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
            n.to_string(),
            "gated: //instances/a:instance would launch: apply_instances is false"
        );
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(v["notice"], "gated");
        assert_eq!(v["action"], "launch");
        let w = Notice::Warning {
            message: "x".into(),
        };
        assert_eq!(w.to_string(), "warning: x");
    }
}
