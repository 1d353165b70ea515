//! Events of a run, for the CLI to render (progress bars on a terminal, JSON
//! lines otherwise). Each serializes as one JSON object tagged by `event`:
//!
//! ```text
//! {"event":"skipped","label":"//images/a@rt:bake","kind":"bake","reason":"current (build b-1)"}
//! {"event":"started","label":"//images/b@rt:bake","kind":"bake","reason":"no build yet on rt"}
//! {"event":"log","label":"//images/b@rt:bake","line":"step 1/3"}
//! {"event":"finished","label":"//images/b@rt:bake","kind":"bake","elapsed_ms":1200}
//! {"event":"failed","label":"//images/c@rt:bake","kind":"bake","error":"exit 2","elapsed_ms":9,"cancelled":false}
//! {"event":"not_run","label":"//images/d@rt:bake","kind":"bake","reason":"//images/c@rt:bake failed"}
//! {"event":"would_run","label":"//images/e@rt:bake","kind":"bake","reason":"no build yet on rt"}
//! {"event":"summary","baked":1,"skipped":1,"failed":1,"not_run":1,"cancelled":0,...}
//! ```
//!
//! Order: all `skipped` (and, in a dry run, `would_run`) first, then `started`/`log`/`finished`/`failed` as
//! they happen, then `not_run` for every due node that did not run, then one
//! `summary`, last.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::label::Label;

/// One event. `label` is always the node's full label.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A selected node that is current (only `Decide` nodes: support nodes
    /// that are not needed produce no event).
    Skipped {
        label: Label,
        kind: String,
        reason: String,
    },
    /// A due node's action started.
    Started {
        label: Label,
        kind: String,
        reason: String,
    },
    /// A line of output from a running action ([`crate::NodeContext::log`]).
    Log { label: Label, line: String },
    /// A node's action succeeded; `output` is what it answered (a bake's
    /// build id, a release's decision), absent when it answered nothing.
    Finished {
        label: Label,
        kind: String,
        elapsed_ms: u64,
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        output: serde_json::Value,
    },
    /// A node's action failed; `cancelled` when it stopped because the run
    /// was cancelled (or `fail_fast` stopped it).
    Failed {
        label: Label,
        kind: String,
        error: String,
        elapsed_ms: u64,
        cancelled: bool,
    },
    /// A due node a dry run does not run ([`crate::RunOptions::rehearse`]):
    /// it would run, for `reason`.
    WouldRun {
        label: Label,
        kind: String,
        reason: String,
    },
    /// A due node that did not run: a dependency failed, or the run stopped.
    NotRun {
        label: Label,
        kind: String,
        reason: String,
    },
    /// The last event.
    Summary(Summary),
}

impl Event {
    /// The node label, for all but the summary.
    pub fn label(&self) -> Option<&Label> {
        match self {
            Event::Skipped { label, .. }
            | Event::Started { label, .. }
            | Event::Log { label, .. }
            | Event::Finished { label, .. }
            | Event::Failed { label, .. }
            | Event::WouldRun { label, .. }
            | Event::NotRun { label, .. } => Some(label),
            Event::Summary(_) => None,
        }
    }

    /// One JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("events serialize")
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Counts for one node kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    pub finished: usize,
    pub skipped: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub not_run: usize,
    /// Due nodes a dry run did not run (only in a dry run's JSON).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub would_run: usize,
}

/// The run's summary. `baked` counts finished nodes of the counted kind
/// ([`crate::RunOptions::count_kind`]; all finished nodes when unset) that
/// made something new, `reused` the others;
/// `skipped`, `failed`, `cancelled`, `not_run` count nodes of every kind.
/// Every due node is exactly one of finished, failed, cancelled, not run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub baked: usize,
    /// Finished nodes of the counted kind that reused a result made before
    /// ([`crate::NodeOutput::reused`]; not in `baked`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reused: usize,
    pub skipped: usize,
    pub failed: usize,
    pub not_run: usize,
    /// Nodes that were running when the run was cancelled and then failed.
    pub cancelled: usize,
    /// Finished nodes of every kind.
    pub finished: usize,
    /// Whether the run was cancelled (token or fail-fast).
    pub interrupted: bool,
    /// Due nodes a dry run did not run (of every kind; per kind in `kinds`;
    /// only in a dry run's JSON).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub would_run: usize,
    pub elapsed_ms: u64,
    /// The same counts per node kind.
    pub kinds: BTreeMap<String, KindCounts>,
}

impl Summary {
    /// Nothing failed, nothing was cancelled, everything due ran.
    pub fn success(&self) -> bool {
        self.failed == 0 && self.cancelled == 0 && self.not_run == 0
    }
}

type EventFn = dyn Fn(Event) + Send + Sync;

/// Where events go: a callback, called synchronously from the scheduler and
/// from actions' [`crate::NodeContext::log`]. Cheap to clone.
#[derive(Clone)]
pub struct Events(Arc<EventFn>);

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// Events go to `f` (keep it quick: it runs on the scheduler's task).
    pub fn new(f: impl Fn(Event) + Send + Sync + 'static) -> Events {
        Events(Arc::new(f))
    }
    /// Events are dropped.
    pub fn none() -> Events {
        Events::new(|_| {})
    }
    /// Events go into an unbounded channel (the CLI renders from the receiver).
    pub fn channel() -> (Events, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Events::new(move |e| {
                let _ = tx.send(e);
            }),
            rx,
        )
    }
    /// Events are collected in a vector (tests).
    pub fn collect() -> (Events, Arc<Mutex<Vec<Event>>>) {
        let v = Arc::new(Mutex::new(Vec::new()));
        let v2 = v.clone();
        (
            Events::new(move |e| v2.lock().expect("events lock").push(e)),
            v,
        )
    }
    /// Send one event.
    pub fn emit(&self, e: Event) {
        (self.0)(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_shape() {
        let l = Label::parse("//images/a@rt:bake").unwrap();
        let e = Event::Started {
            label: l.clone(),
            kind: "bake".into(),
            reason: "no build yet on rt".into(),
        };
        assert_eq!(
            e.to_json_line(),
            r#"{"event":"started","label":"//images/a@rt:bake","kind":"bake","reason":"no build yet on rt"}"#
        );
        let s = Event::Summary(Summary {
            baked: 2,
            ..Default::default()
        });
        let j: serde_json::Value = serde_json::from_str(&s.to_json_line()).unwrap();
        assert_eq!(j["event"], "summary");
        assert_eq!(j["baked"], 2);
        assert_eq!(j["not_run"], 0);
        let back: Event = serde_json::from_value(j).unwrap();
        assert_eq!(back, s);
        let n = Event::NotRun {
            label: l,
            kind: "bake".into(),
            reason: "x".into(),
        };
        assert!(n.to_json_line().starts_with(r#"{"event":"not_run""#));
    }
}
