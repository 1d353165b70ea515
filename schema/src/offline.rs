//! Offline problems: what a runtime type's own checks find in its tree
//! entry, in a base image's entry on it, or in a series baked on it,
//! without connecting anywhere. A
//! problem names a field path relative to what was checked, a message and
//! a hint; the loader turns the path into the span of that field, so a
//! runtime crate knows nothing of YAML nodes or diagnostics.

use crate::model::JsonMap;

/// One problem an offline check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field path, relative to the entry checked (`context`,
    /// `networking.subnets`, `tags.a b`; empty: the entry itself).
    pub path: String,
    /// The field whose place the problem points at, when it is not `path`
    /// itself (`tags` for a problem of one tag's key).
    pub at: Option<String>,
    pub message: String,
    pub hint: Option<String>,
    /// A warning, not an error.
    pub warning: bool,
}

impl Problem {
    /// An error at `path`.
    pub fn error(path: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            path: path.into(),
            at: None,
            message: message.into(),
            hint: None,
            warning: false,
        }
    }

    /// A warning at `path`.
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            warning: true,
            ..Problem::error(path, message)
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }

    /// Point at the field `at` rather than at `path`.
    pub fn pointing_at(mut self, at: impl Into<String>) -> Problem {
        self.at = Some(at.into());
        self
    }
}

/// What an offline check sees of one series on a runtime: the name its
/// bake makes there and the keys of the tags the build carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeSeries {
    /// The class of the series as diagnostics name it (`image`, `OS builder`).
    pub class: &'static str,
    /// The final (artifact) name a bake makes, already made tag-safe.
    pub made_name: String,
    pub tag_keys: Vec<String>,
}

/// What an offline check sees of an OS builder's entry on a runtime: the
/// base image it pins, and the query that finds it (the OS builder's, with
/// the entry's merged in).
#[derive(Debug, Clone, PartialEq)]
pub struct BaseEntry {
    pub image_id: Option<String>,
    pub query: JsonMap,
}
