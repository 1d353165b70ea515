//! The resolved entries of a tree that crates below the loader read: where
//! an entry was declared ([`Origin`]), a runtime entry ([`RuntimeEntry`]),
//! and what a runtime's settings look up around it (an `executables:` entry,
//! an image builder bound to its runtime). The loader (`csis_rules`) makes
//! them; names are canonical (normalized) where the doc says so.

use crate::model::{
    AwsFields, DockerFields, DummyFields, Executable, ImageBuilderKind, ImageBuilderModel,
    RuntimeCommon, RuntimeKind,
};
use std::sync::Arc;

use crate::span::Loc;
use crate::yaml::Node;

/// Where an entity was declared: its location and its field path
/// (`runtime_builders[1]`, `images[0]`).
#[derive(Debug, Clone)]
pub struct Origin {
    pub loc: Loc,
    pub path: String,
    /// Where each top-level field's value is (for errors about one field).
    /// Shared: an origin is copied with every entry that holds it.
    pub fields: Arc<[(String, Loc)]>,
    /// Where each element of a top-level list field is (for errors about
    /// one element: `storage_types[1]`).
    pub items: Arc<[(String, Vec<Loc>)]>,
}

impl Origin {
    /// The origin of an entry node: its location, path and field locations.
    pub fn of(node: &Node, path: String) -> Origin {
        Origin {
            loc: node.loc.clone(),
            path,
            fields: node
                .as_map()
                .map(|m| {
                    m.iter()
                        .map(|e| (e.key.clone(), e.value.loc.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            items: node
                .as_map()
                .map(|m| {
                    m.iter()
                        .filter_map(|e| {
                            let seq = e.value.as_seq()?;
                            Some((e.key.clone(), seq.iter().map(|n| n.loc.clone()).collect()))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
    /// Where element `i` of the list `field` is (the field's location
    /// when it is not a list of that length).
    pub fn item(&self, field: &str, i: usize) -> &Loc {
        self.items
            .iter()
            .find(|(k, _)| k == field)
            .and_then(|(_, v)| v.get(i))
            .unwrap_or_else(|| self.field(field))
    }
    /// Where `field`'s value is (the entry's location when it is not declared).
    pub fn field(&self, field: &str) -> &Loc {
        self.fields
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, l)| l)
            .unwrap_or(&self.loc)
    }
    /// `file:line:col`
    pub fn display(&self) -> String {
        self.loc.display()
    }
    pub fn file(&self) -> &str {
        &self.loc.file.path
    }
}

/// An `executables:` entry.
#[derive(Debug, Clone)]
pub struct ExecutableEntry {
    pub name: String,
    pub model: Executable,
    pub origin: Origin,
}

/// A runtime entry of the tree, of a type csis implements (`aws`, `docker`,
/// `dummy`): what the runtime crates are constructed from. The client is
/// theirs; the `Runtime` trait is `csis_runtime`'s.
#[derive(Debug, Clone)]
pub struct RuntimeEntry {
    /// Canonical (normalized) name.
    pub name: String,
    /// As written.
    pub display: String,
    pub common: RuntimeCommon,
    pub kind: RuntimeKind,
    /// The resolved state backend (None when the tree declares none, or it is not one csis uses).
    pub state_backend: Option<String>,
    /// The resolved `executables:` entry (docker: `docker` by default), if declared.
    pub executable: Option<String>,
    pub origin: Origin,
}

impl RuntimeEntry {
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }
    pub fn aws(&self) -> Option<&AwsFields> {
        match &self.kind {
            RuntimeKind::Aws(a) => Some(a),
            _ => None,
        }
    }
    pub fn docker(&self) -> Option<&DockerFields> {
        match &self.kind {
            RuntimeKind::Docker(d) => Some(d),
            _ => None,
        }
    }
    pub fn dummy(&self) -> Option<&DummyFields> {
        match &self.kind {
            RuntimeKind::Dummy(d) => Some(d),
            _ => None,
        }
    }
    /// aws: the region; docker: the host or context; dummy: `local`. A
    /// secret in it (a password in an encrypted `host`) is redacted.
    pub fn address(&self) -> String {
        crate::secret::redact(&self.address_clear()).into_owned()
    }

    fn address_clear(&self) -> String {
        (self.kind.model().address)(&self.kind)
    }
    /// Bakes at once on this runtime (csis extension), if limited.
    pub fn max_parallel(&self) -> Option<u32> {
        self.common.max_parallel
    }
    /// A session mechanism usable for N9 (aws `ssm`; docker and dummy reach
    /// their machines through the daemon / simulation): the type's
    /// [`crate::model::TypeModel::session`].
    pub fn has_session(&self) -> bool {
        (self.kind.model().session)(&self.common)
    }
}

/// An image builder csis uses, bound to its runtime.
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    pub name: String,
    pub display: String,
    pub model: ImageBuilderModel,
    pub kind: ImageBuilderKind,
    /// Canonical name of the runtime it bakes on.
    pub runtime: String,
    /// Resolved `executables:` entry (packer), if any.
    pub executable: Option<String>,
    pub origin: Origin,
}
