//! The data model a picture is drawn from (also the `json` format).

use serde::{Deserialize, Serialize};

/// What is drawn.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Graph {
    /// The page's title (the tree's name).
    pub title: String,
    /// Now, in seconds since the epoch: build ages are relative to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<i64>,
    /// One node per series x runtime with its steps folded in (`true`), or
    /// one node per step.
    pub folded: bool,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// A series on a runtime (folded view), or one step of it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Node {
    /// Unique: `//images/app@sim` (folded) or a step's full label.
    pub id: String,
    /// `image`, `os`, `storage`, `instance` (folded), or a step kind (`bake`, `emit`, ...).
    pub kind: String,
    pub series: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The series this one is baked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Set when the node is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<Due>,
    /// The current (head) build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    /// Models the current build is released as.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub released: Vec<String>,
    /// Revoked builds of this series on this runtime, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked: Vec<String>,
    /// The post-bake tests of the current build: passed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested: Option<bool>,
    /// Series pinned to a build of this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_children: Vec<String>,
    /// Pinned to a parent build older than the parent's head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<Behind>,
    /// The plan entry (the detail panel).
    #[serde(default)]
    pub entry: Entry,
    /// The steps folded into this node (resolve, emit, bake, retag, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
}

/// Why a node is due, in words.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Due {
    /// The plan's reason code (`inputs-changed`, `no-record`, ...).
    pub code: String,
    /// The reason in words (`inputs changed`, `parent web re-bakes`).
    pub reason: String,
    /// The changed fields: `inputs.mods[0].files[0] (playbooks/web.yml)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// A build.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Build {
    pub id: String,
    /// When it was made, in seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
}

/// A pinned child behind its parent's head.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Behind {
    /// The parent build the child is pinned to.
    pub pinned: String,
    /// The parent's head.
    pub head: String,
}

/// A node's plan entry.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Entry {
    #[serde(default)]
    pub fingerprint: String,
    /// The inputs, summarized one line each (`mods: 2 (web-setup, ...)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// Labels of the direct dependencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<String>,
    /// The command that builds just this node.
    #[serde(default)]
    pub command: String,
}

/// One step folded into a node.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Step {
    pub label: String,
    pub kind: String,
    pub due: bool,
    pub reason: String,
    pub fingerprint: String,
}

/// How a child follows its parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    /// Re-baked when the parent moves.
    Follow,
    /// Bound to one parent build until upgraded.
    Pinned,
    /// Any other dependency (steps, ordering).
    #[default]
    Other,
}

/// An edge, parent (dependency) to child (dependent), by node id.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub kind: EdgeKind,
    /// The child is pinned behind the parent's head.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub behind: bool,
}

impl Node {
    /// `image` and `os` nodes: a series on a runtime.
    pub fn is_series(&self) -> bool {
        self.kind == "image" || self.kind == "os"
    }
    /// A storage or an instance of the fleet.
    pub fn is_fleet(&self) -> bool {
        self.kind == "storage" || self.kind == "instance"
    }
}

/// A build id short enough to read: `sha256:` digests and long ids keep
/// their first 12 characters after any prefix (`ami-0123456789ab`).
pub fn short_id(id: &str) -> String {
    let rest = id.strip_prefix("sha256:").unwrap_or(id);
    if rest.len() <= 14 {
        return rest.to_string();
    }
    match rest.find('-') {
        Some(i) if i <= 8 && rest.is_char_boundary(i) => {
            let tail: String = rest[i + 1..].chars().take(8).collect();
            format!("{}-{tail}", &rest[..i])
        }
        _ => rest.chars().take(12).collect(),
    }
}

/// An age in words: `45s`, `12m`, `3h`, `5d`, `8w`.
pub fn age(now: i64, at: i64) -> String {
    let s = (now - at).max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        86_400..1_209_600 => format!("{}d", s / 86_400),
        _ => format!("{}w", s / 604_800),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_and_ages() {
        assert_eq!(short_id("sha256:0123456789abcdef0123"), "0123456789ab");
        assert_eq!(short_id("ami-0123456789abcdef0"), "ami-01234567");
        assert_eq!(short_id("dummy-3f2a8c1d2b3c-1"), "dummy-3f2a8c1d");
        assert_eq!(short_id("dummy-1"), "dummy-1");
        assert_eq!(age(1000, 1000 - 90), "1m");
        assert_eq!(age(1000, 1000 - 3 * 86_400 - 100), "3d");
    }
}
