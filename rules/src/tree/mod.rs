//! The loaded, resolved tree: every entity csis uses, with its foreign keys
//! resolved to canonical names and its source location, plus the effective
//! values the graph compile needs (chain; in `bake.rs`: bake user, disk
//! size, capability stamp, mod inputs, in-bake tests).
//!
//! Names are normalized ([`normalize_name`]); every lookup accepts a name or
//! an alias in any spelling. Lookups are hash-map based (no quadratic scans).

mod bake;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use crate::template::Execution;
pub use bake::tests_to_commands;
use csis_schema::diag::Diagnostic;
use csis_schema::model::*;

pub use csis_schema::entry::{ExecutableEntry, ImageBuilder, Origin, RuntimeEntry};

/// Normalize a name as the original does: trimmed, lower-cased, spaces and
/// `:` become `_`.
pub fn normalize_name(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            ' ' | ':' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Whether `s` is already its own [`normalize_name`] (the names the loader
/// resolved foreign keys to are): then a lookup needs no new String.
pub fn is_normalized(s: &str) -> bool {
    // Untrimmed only if an end is whitespace: an end that is a printable
    // ASCII byte is not, so only another end asks Unicode's trim (every
    // lookup by name asks this).
    let plain_end = |b: Option<&u8>| b.is_none_or(|&b| b > b' ' && b < 0x80);
    let bytes = s.as_bytes();
    let trimmed =
        (plain_end(bytes.first()) && plain_end(bytes.last())) || s.len() == s.trim().len();
    trimmed
        && !bytes
            .iter()
            .any(|&b| b.is_ascii_uppercase() || b == b' ' || b == b':')
}

/// `s` normalized, borrowed when it already is.
pub fn normalized(s: &str) -> std::borrow::Cow<'_, str> {
    if is_normalized(s) {
        std::borrow::Cow::Borrowed(s)
    } else {
        std::borrow::Cow::Owned(normalize_name(s))
    }
}

/// The hash map of the name indexes: rustc-hash's (FxHash), several times
/// cheaper than SipHash on short names. The keys are the tree's own names,
/// so the weaker resistance to crafted collisions costs nothing.
pub(crate) type NameMap<V> = HashMap<String, V, rustc_hash::FxBuildHasher>;

/// A state backend csis uses (`s3`, `local`).
#[derive(Debug, Clone)]
pub struct StateBackend {
    pub name: String,
    pub display: String,
    pub common: BuilderCommon,
    pub kind: StateBackendKind,
    pub origin: Origin,
}

#[derive(Debug, Clone)]
pub struct ModBuilder {
    pub name: String,
    pub display: String,
    pub model: ModBuilderModel,
    pub kind: ModKind,
    pub executable: Option<String>,
    pub origin: Origin,
}

/// One `runtimes[]` entry of an OS builder, resolved.
#[derive(Debug, Clone)]
pub struct OsRuntime {
    pub entry: OsRuntimeEntry,
    /// The entry's label (its `name`, else the image builder's name).
    pub label: String,
    /// Canonical image builder; None when the entry bakes through a builder
    /// csis does not implement yet (e.g. `packer-gce`).
    pub image_builder: Option<String>,
    /// Canonical runtime of that image builder.
    pub runtime: Option<String>,
    pub origin: Origin,
}

/// An OS builder: a base image.
#[derive(Debug, Clone)]
pub struct OsBuilder {
    pub name: String,
    pub display: String,
    pub model: OsBuilderModel,
    pub runtimes: Vec<OsRuntime>,
    /// The admin public keys in force (the builder's, else `config.admin_public_keys`).
    pub admin_public_keys: Vec<String>,
    pub origin: Origin,
}

impl OsBuilder {
    /// The active runtime entries (bound to a runtime csis implements).
    pub fn active_runtimes(&self) -> impl Iterator<Item = &OsRuntime> {
        self.runtimes.iter().filter(|r| r.runtime.is_some())
    }
    /// The entry baking on `runtime` (canonical name), if any.
    pub fn runtime_entry(&self, runtime: &str) -> Option<&OsRuntime> {
        self.runtimes
            .iter()
            .find(|r| r.runtime.as_deref() == Some(runtime))
    }
}

/// Where an image's chain goes next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "lowercase")]
pub enum Parent {
    /// A base image (OS builder), canonical name.
    Os(String),
    /// Another image, canonical name.
    Image(String),
}

/// One `runtimes[]` entry of an image, resolved.
#[derive(Debug, Clone)]
pub struct ImageRuntime {
    pub entry: ImageRuntimeEntry,
    /// The label (`name`, else the image builder's name).
    pub label: String,
    /// None when the entry bakes through a builder csis does not implement yet.
    pub image_builder: Option<String>,
    pub runtime: Option<String>,
    pub origin: Origin,
}

/// A modification item with its builder resolved.
#[derive(Debug, Clone)]
pub struct ResolvedMod {
    /// Shared: the incremental load copies the images of unmoved files.
    pub item: Arc<ModItem>,
    /// Canonical mod builder.
    pub builder: String,
    pub kind: ModKind,
    pub origin: Origin,
}

/// An image (instance image), resolved.
#[derive(Debug, Clone)]
pub struct Image {
    pub name: String,
    pub display: String,
    /// Shared: the incremental load copies the images of unmoved files.
    pub model: Arc<ImageModel>,
    pub parent: Parent,
    /// The primary image builder (`type`), canonical, if csis implements it.
    pub primary_builder: Option<String>,
    pub runtimes: Vec<ImageRuntime>,
    pub mods: Vec<ResolvedMod>,
    pub origin: Origin,
    /// The OS builder its chain ends at (its place in `os_builders`), set
    /// by the load once every parent is resolved ([`Tree::set_chain_roots`]).
    pub(crate) root: Option<usize>,
}

impl Image {
    pub fn active_runtimes(&self) -> impl Iterator<Item = &ImageRuntime> {
        self.runtimes.iter().filter(|r| r.runtime.is_some())
    }
    pub fn runtime_entry(&self, runtime: &str) -> Option<&ImageRuntime> {
        self.runtimes
            .iter()
            .find(|r| r.runtime.as_deref() == Some(runtime))
    }
}

/// A section csis reads but does not implement yet (reported once by `validate`).
#[derive(Debug, Clone, Serialize)]
pub struct UnusedSection {
    /// `storages`, `gcloud runtimes`, `instance builders`, ...
    pub what: String,
    pub count: usize,
    /// Where they are (`storages/`, `cfg/`).
    pub place: String,
}

impl UnusedSection {
    /// `not used by csis yet: 5 storages (storages/)`
    pub fn message(&self) -> String {
        format!(
            "not used by csis yet: {} {} ({})",
            self.count, self.what, self.place
        )
    }
}

/// One link of an image's chain, from the image to its base.
#[derive(Debug, Clone, Copy)]
pub enum ChainLink<'a> {
    Image(&'a Image),
    Os(&'a OsBuilder),
}

impl<'a> ChainLink<'a> {
    pub fn name(&self) -> &'a str {
        match self {
            ChainLink::Image(i) => &i.name,
            ChainLink::Os(o) => &o.name,
        }
    }
}

/// The capabilities a chain inherits verbatim from its root base (N24).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityStamp {
    pub identity_types: Vec<String>,
    pub storage_types: Vec<String>,
}

/// One modification's content inputs (what its fingerprint hashes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModInput {
    pub name: String,
    /// Canonical mod builder name.
    pub builder: String,
    pub kind: ModKind,
    /// The item's `config` (part of the content hash).
    pub config: JsonMap,
    /// Playbooks (ansible) or scripts (bash), absolute, resolved against the tree root.
    pub files: Vec<PathBuf>,
    /// The same paths as written (root-relative).
    pub declared_files: Vec<String>,
    /// Inline lines (bash), literal.
    pub inline: Vec<String>,
    pub ensure: Option<EnsureModel>,
    /// The mod builder's `extra_arguments` (ansible) / `environment_vars` (bash).
    pub extra_arguments: Vec<String>,
    pub environment_vars: Vec<String>,
    pub execute_command: Option<String>,
    /// The resolved executable's binary (ansible-playbook, bash), if declared.
    pub binary: Option<String>,
}

/// One in-bake assertion as a shell command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InBakeTest {
    pub description: String,
    pub run: String,
    pub expect_rc: i32,
    pub contains: Option<String>,
}

/// Name -> index maps of one class (names and aliases, normalized).
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub map: NameMap<usize>,
    pub default: Option<usize>,
}

impl Index {
    /// The entry of a name or alias in any spelling (`default` or an empty
    /// name: the default entry). Normalizes only a name that is not
    /// already normalized (no allocation for the canonical names the
    /// compile looks up).
    pub fn get(&self, name: &str) -> Option<usize> {
        let n = normalized(name);
        if n.is_empty() || n == "default" {
            return self.default;
        }
        self.map.get(&*n).copied()
    }
}

/// The loaded tree.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The tree root (the directory holding `cfg/`).
    pub root: PathBuf,
    pub config: IaConfig,
    pub config_origin: Option<Origin>,
    pub executables: Vec<ExecutableEntry>,
    pub runtimes: Vec<RuntimeEntry>,
    pub state_backends: Vec<StateBackend>,
    pub os_builders: Vec<OsBuilder>,
    pub image_builders: Vec<ImageBuilder>,
    pub mod_builders: Vec<ModBuilder>,
    /// Shared: the incremental load copies the images of unmoved files
    /// (a count each); the resolution fills a new one in through
    /// `Arc::make_mut`.
    pub images: Vec<Arc<Image>>,
    /// `group_builders:` (their effect on bakes: identity prerequisites,
    /// group activation).
    pub group_builders: Vec<crate::groups::GroupBuilder>,
    /// `storage_builders:` (their effect on bakes: storage prerequisites).
    pub storage_builders: Vec<crate::groups::StorageBuilder>,
    /// `groups/` groups (an image's own group is activated on it).
    pub groups: Vec<crate::groups::Group>,
    /// `instances/`, resolved (`crate::fleet`).
    pub instances: Vec<crate::fleet::Instance>,
    /// `storages/`, resolved.
    pub storages: Vec<crate::fleet::Storage>,
    /// `groups/` `users:`, resolved.
    pub users: Vec<crate::fleet::User>,
    /// `instance_builders:` csis runs (docker, tofu on aws).
    pub instance_builders: Vec<crate::fleet::InstanceBuilder>,
    /// `user_builders:`.
    pub user_builders: Vec<crate::fleet::UserBuilder>,
    /// Sections read but not used by csis yet.
    pub unused: Vec<UnusedSection>,
    /// Warnings of the load (including one per unused section).
    pub warnings: Vec<Diagnostic>,
    /// The `execution.*` values templates saw (timestamp, date, dateformat).
    pub execution: Execution,
    /// What the templates read from outside the tree (`ENV` keys,
    /// `execution.*` fields).
    pub template_reads: crate::template::TemplateReads,
    pub(crate) executables_by_name: Index,
    pub(crate) runtimes_by_name: Index,
    pub(crate) state_backends_by_name: Index,
    pub(crate) os_builders_by_name: Index,
    pub(crate) image_builders_by_name: Index,
    pub(crate) mod_builders_by_name: Index,
    pub(crate) images_by_name: Index,
    pub(crate) group_builders_by_name: Index,
    pub(crate) storage_builders_by_name: Index,
    pub(crate) groups_by_name: Index,
    pub(crate) instances_by_name: Index,
    pub(crate) storages_by_name: Index,
    pub(crate) instance_builders_by_name: Index,
    pub(crate) user_builders_by_name: Index,
    /// parent (canonical name) -> images built from it
    pub(crate) kids: NameMap<Vec<usize>>,
}

impl Tree {
    /// The tree root.
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn executable(&self, name: &str) -> Option<&ExecutableEntry> {
        self.executables_by_name
            .get(name)
            .map(|i| &self.executables[i])
    }
    /// A runtime by name or alias (`default` = the default runtime).
    pub fn runtime(&self, name: &str) -> Option<&RuntimeEntry> {
        self.runtimes_by_name.get(name).map(|i| &self.runtimes[i])
    }
    pub fn state_backend(&self, name: &str) -> Option<&StateBackend> {
        self.state_backends_by_name
            .get(name)
            .map(|i| &self.state_backends[i])
    }
    /// An OS builder (base image) by name or alias.
    pub fn os_builder(&self, name: &str) -> Option<&OsBuilder> {
        self.os_builders_by_name
            .get(name)
            .map(|i| &self.os_builders[i])
    }
    /// A group builder by name or alias; `default` is the one marked
    /// `is_default`, else the only one declared.
    pub fn group_builder(&self, name: &str) -> Option<&crate::groups::GroupBuilder> {
        match self.group_builders_by_name.get(name) {
            Some(i) => Some(&self.group_builders[i]),
            None if normalize_name(name) == "default" && self.group_builders.len() == 1 => {
                self.group_builders.first()
            }
            None => None,
        }
    }
    /// A storage builder by name or alias; `default` is the one marked
    /// `is_default`, else the only one declared.
    pub fn storage_builder(&self, name: &str) -> Option<&crate::groups::StorageBuilder> {
        match self.storage_builders_by_name.get(name) {
            Some(i) => Some(&self.storage_builders[i]),
            None if normalize_name(name) == "default" && self.storage_builders.len() == 1 => {
                self.storage_builders.first()
            }
            None => None,
        }
    }
    /// A group of `groups/` by name.
    pub fn group(&self, name: &str) -> Option<&crate::groups::Group> {
        self.groups_by_name
            .map
            .get(&*normalized(name))
            .map(|i| &self.groups[*i])
    }
    /// The group builder that supplies the base-image prerequisites of an
    /// identity type: the default group builder when it is of that type,
    /// else the first declared one of that type.
    pub fn group_builder_of_type(
        &self,
        identity_type: &str,
    ) -> Option<&crate::groups::GroupBuilder> {
        let mut of = self
            .group_builders
            .iter()
            .filter(|b| b.identity_type == identity_type);
        of.clone()
            .find(|b| b.model.is_default)
            .or_else(|| of.next())
    }
    /// The storage builder of a storage type (`ebs`) on a runtime
    /// (canonical): the default one when it is of that type, else the
    /// first declared.
    pub fn storage_builder_of_type(
        &self,
        storage_type: &str,
        runtime: &str,
    ) -> Option<&crate::groups::StorageBuilder> {
        let mut of = self
            .storage_builders
            .iter()
            .filter(|b| b.storage_type == storage_type && b.runtime.as_deref() == Some(runtime));
        of.clone()
            .find(|b| b.model.is_default)
            .or_else(|| of.next())
    }
    pub fn image_builder(&self, name: &str) -> Option<&ImageBuilder> {
        self.image_builders_by_name
            .get(name)
            .map(|i| &self.image_builders[i])
    }
    pub fn mod_builder(&self, name: &str) -> Option<&ModBuilder> {
        self.mod_builders_by_name
            .get(name)
            .map(|i| &self.mod_builders[i])
    }
    /// An instance by name or alias.
    pub fn instance(&self, name: &str) -> Option<&crate::fleet::Instance> {
        self.instances_by_name
            .map
            .get(&*normalized(name))
            .map(|i| &self.instances[*i])
    }
    /// A storage by name or alias.
    pub fn storage(&self, name: &str) -> Option<&crate::fleet::Storage> {
        self.storages_by_name
            .map
            .get(&*normalized(name))
            .map(|i| &self.storages[*i])
    }
    /// An instance builder by name or alias; `default` is the one marked
    /// `is_default`, else the only one declared.
    pub fn instance_builder(&self, name: &str) -> Option<&crate::fleet::InstanceBuilder> {
        match self.instance_builders_by_name.get(name) {
            Some(i) => Some(&self.instance_builders[i]),
            None if normalize_name(name) == "default" && self.instance_builders.len() == 1 => {
                self.instance_builders.first()
            }
            None => None,
        }
    }
    /// A user builder by name or alias (`default` as for instance builders).
    pub fn user_builder(&self, name: &str) -> Option<&crate::fleet::UserBuilder> {
        match self.user_builders_by_name.get(name) {
            Some(i) => Some(&self.user_builders[i]),
            None if normalize_name(name) == "default" && self.user_builders.len() == 1 => {
                self.user_builders.first()
            }
            None => None,
        }
    }
    /// The instances that mount `storage` (canonical or declared name).
    pub fn instances_mounting(&self, storage: &str) -> Vec<&crate::fleet::Instance> {
        let n = normalize_name(storage);
        self.instances
            .iter()
            .filter(|i| i.mounts.iter().any(|m| m.storage == n))
            .collect()
    }
    /// An image by name or alias.
    pub fn image(&self, name: &str) -> Option<&Image> {
        self.images_by_name.get(name).map(|i| &*self.images[i])
    }
    pub fn default_runtime(&self) -> Option<&RuntimeEntry> {
        self.runtimes_by_name.default.map(|i| &self.runtimes[i])
    }

    /// The images directly built from `name` (an image or OS builder), in
    /// declaration order. Indexed at load: O(children).
    pub fn children(&self, name: &str) -> Vec<&Image> {
        self.kids
            .get(&*normalized(name))
            .map(|v| v.iter().map(|&i| &*self.images[i]).collect())
            .unwrap_or_default()
    }

    /// The chain from `image` to its base: `[image, parent image, ..., OS builder]`.
    /// The loader refuses cycles, so this terminates.
    pub fn chain<'a>(&'a self, image: &'a Image) -> Vec<ChainLink<'a>> {
        let mut out = vec![ChainLink::Image(image)];
        let mut cur = image;
        for _ in 0..self.images.len() + 1 {
            match &cur.parent {
                Parent::Os(o) => {
                    if let Some(os) = self.os_builder(o) {
                        out.push(ChainLink::Os(os));
                    }
                    break;
                }
                Parent::Image(p) => match self.image(p) {
                    Some(next) => {
                        out.push(ChainLink::Image(next));
                        cur = next;
                    }
                    None => break,
                },
            }
        }
        out
    }

    /// The OS builder at the root of `image`'s chain (where the walk of
    /// [`Tree::chain`] ends), as the load found it once per image: the
    /// compile asks it several times per image.
    pub fn chain_root<'a>(&'a self, image: &'a Image) -> Option<&'a OsBuilder> {
        image.root.map(|i| &self.os_builders[i])
    }

    /// Each image's chain root ([`Tree::chain_root`]): its chain walked by
    /// name once, the roots of the images on the way kept, so that an
    /// image's root is then read, not walked (a chain root is asked a few
    /// times per image by the compile). An image whose chain names a
    /// missing image or loops has none.
    pub(crate) fn set_chain_roots(&mut self) {
        let n = self.images.len();
        // None: not known yet
        let mut roots: Vec<Option<Option<usize>>> = vec![None; n];
        let mut path = Vec::new();
        for start in 0..n {
            let mut cur = start;
            path.clear();
            let root = loop {
                if let Some(r) = roots[cur] {
                    break r;
                }
                if path.len() > n {
                    break None; // a loop
                }
                path.push(cur);
                match &self.images[cur].parent {
                    Parent::Os(o) => break self.os_builders_by_name.get(o),
                    Parent::Image(p) => match self.images_by_name.get(p) {
                        Some(j) => cur = j,
                        None => break None,
                    },
                }
            };
            for &k in &path {
                roots[k] = Some(root);
            }
        }
        for (img, r) in self.images.iter_mut().zip(roots) {
            // a shared image (a kept file's) is copied only if it moved
            let r = r.flatten();
            if img.root != r {
                Arc::make_mut(img).root = r;
            }
        }
    }
}
