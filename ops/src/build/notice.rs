//! What a build tells people besides its node events, as data: the
//! reporter gets a [`Notice`], never a sentence, so that a renderer can
//! word it, colour it or write it as JSON (the binary words it,
//! `src/render/notice.rs`).

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
    /// A lease of the shared store (`key`, `series@runtime`) another
    /// runner (`holder`) holds: waited for or taken over.
    Lease {
        key: String,
        holder: String,
        #[serde(flatten)]
        what: LeaseTaken,
    },
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
    /// A dry run's check of a tofu root (`init -backend=false`, `validate`)
    /// did not pass, or could not run (`why`); the dry run goes on.
    TofuRootNotValid { dir: String, why: String },
    /// After the run, the teardown of a tofu root's ephemerals whose
    /// proofs the run left unfinished: one line of what it did (`root`: the
    /// root's directory).
    EphemeralsTeardown { root: String, line: String },
    /// What a release node did (refused or failed: its error).
    Release {
        label: String,
        outcome: crate::release::ReleaseEvent,
    },
    /// One thing a dispose node did, kept, refused or could not check.
    Dispose {
        label: String,
        outcome: crate::dispose::DisposeEvent,
    },
}

/// What became of a lease of the shared store another runner held.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "lease", rename_all = "snake_case")]
pub enum LeaseTaken {
    /// Its holder is a live runner: waiting.
    Waiting,
    /// Its term had passed `ago` seconds before (its owner stopped
    /// renewing it): taken over.
    TakenOver { ago: f64 },
    /// Its holder was a process of this host that is gone: taken over at
    /// once.
    TakenFromDead,
}

impl Notice {
    /// The notice of what taking the leases met (`now`: when it happened,
    /// seconds since the epoch).
    pub(crate) fn lease(e: &csis_cache::lease::LeaseEvent, now: f64) -> Notice {
        use csis_cache::lease::LeaseEvent as E;
        let (key, holder, what) = match e {
            E::Waiting { key, holder } => (key, holder, LeaseTaken::Waiting),
            E::TakenOver {
                key,
                holder,
                expired,
            } => (
                key,
                holder,
                LeaseTaken::TakenOver {
                    ago: (now - expired).max(0.0),
                },
            ),
            E::TakenFromDead { key, holder } => (key, holder, LeaseTaken::TakenFromDead),
        };
        Notice::Lease {
            key: key.clone(),
            holder: holder.clone(),
            what,
        }
    }

    /// The node a notice is about (a release or dispose node's).
    pub fn label(&self) -> Option<&str> {
        match self {
            Notice::Release { label, .. } | Notice::Dispose { label, .. } => Some(label),
            _ => None,
        }
    }
}
