//! Loading a tree: `cfg/` merged, decrypted, templated, typed, resolved and
//! validated; `images/` likewise; `groups/`, `storages/`, `instances/` read
//! into the fleet (what lives on gcloud counted, not used by csis yet). All
//! errors of a load are collected and returned together.
//!
//! This module holds the entry points and the `Loader`'s run; its parts, in the
//! order of a load:
//! - `files`: which YAML files are read, in which order;
//! - `config`: the `cfg/` merge and the configuration;
//! - `overlays`, `collections`: `--overlay`, `--undeclare`, the collection
//!   directories;
//! - `head`, `transforms`: an entry's name and type, then its decryption,
//!   templates and strict model;
//! - the entry loaders, one per class: `runtimes`, `builders`,
//!   `os_builders`, `images`, `groups`, `fleet` (instances, storages,
//!   users, instance and user builders, resolved after the groups);
//! - `index`, `resolve`, `resolve_series`, `cycles`: names indexed, every
//!   reference resolved, `source_image` cycles refused;
//! - `offline_checks` (the runtime types' own checks, registered by the
//!   caller), `recipe_checks`;
//! - `helpers`, `made_names`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::crypt::Identities;
use crate::template::Renderer;
use crate::tree::*;
use csis_schema::diag::{Diagnostic, Diags};
use csis_schema::model::IaConfig;
use csis_schema::yaml::{join_path, Entry, Node};
use indexmap::IndexMap;

mod builders;
mod collections;
mod config;
mod cycles;
mod files;
mod fleet;
mod groups;
mod head;
mod helpers;
mod images;
mod index;
mod made_names;
mod offline_checks;
mod os_builders;
mod overlays;
mod parse_cache;
mod recipe_checks;
mod resolve;
mod resolve_series;
mod runtimes;
mod transforms;

use builders::Which;
use files::yaml_files;
use helpers::{glob_match, is_absent, known};
pub use helpers::{looks_private, public_key_problem};
pub use made_names::tag_safe;
pub use offline_checks::RuntimeChecks;
pub use overlays::Undeclare;
use transforms::first_marker;

/// How to load: the per-invocation changes and the environment.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--overlay FILE` (repeatable), applied in order.
    pub overlays: Vec<PathBuf>,
    /// `--undeclare kind:name` (repeatable).
    pub undeclares: Vec<String>,
    /// The environment templates see as `ENV` (None = the process environment).
    pub env: Option<BTreeMap<String, String>>,
    /// The age identity setting (`CSIS_CONFIG_IDENTITY`): a key, a file or a
    /// directory. None = read `CSIS_CONFIG_IDENTITY` from `env`.
    pub identity: Option<String>,
    /// The load time for `execution.*` (None = now).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// The offline checks of each runtime type, from the runtime crates
    /// (`csis_ops::wiring::offline_checks`). A runtime type without an
    /// entry here is checked for its common fields only.
    pub runtime_checks: Vec<RuntimeChecks>,
    /// The directory of the persistent parse cache (the tree's
    /// `.csis/cache/`; [`PARSE_CACHE_FILE`] in it): each file's parse is
    /// taken from it when the file's text is the one it was made from.
    /// None = every file parsed.
    pub parse_cache: Option<PathBuf>,
    /// Whether this build can open the tree's `meta_state:` store: a
    /// message when it cannot (`csis_cache::objstore::not_built_in`, a
    /// build without the `store` feature), refused at the field. None =
    /// every store accepted.
    pub meta_state_check: Option<fn(&csis_schema::model::MetaStateSpec) -> Option<String>>,
}

pub use parse_cache::FILE as PARSE_CACHE_FILE;

/// An item of a merged list: its node and its index within its own file.
struct Item {
    node: Node,
    path: String,
}

/// A file the caller parsed: its parse, shared (taken without a copy when
/// the loader holds the last reference), and the parse's content hash when
/// the caller has one (then the file's images may come from an
/// [`ImageMemo`]).
struct Pre {
    hash: Option<blake3::Hash>,
    parse: SharedParse,
}

/// A file's parse (or why it does not parse), shared.
pub type SharedParse = Arc<Result<Node, Diagnostic>>;

/// The loaded images of each file of `images/`, kept between the loads of
/// one process by the incremental load ([`crate::incremental`]): a file
/// whose parse did not change gives the images (before resolution), the
/// diagnostics and the template reads of the load before, without its
/// templates, decryption and typed model done again. Valid for one key
/// (the options, and the `execution.*` values the templates see); emptied
/// when the key moves. Not used with overlays or `--undeclare` (which
/// change items across files); a file holding an `ENC[age:...]` marker is
/// never kept (what it opens to depends on the identity files, which the
/// key does not cover). Never written anywhere: it lives in memory.
///
/// A kept file's images also come resolved (their parent, builders,
/// runtimes and mods as the resolution fills them in, their offline checks
/// passed) when the resolution's context is the one they were resolved in
/// (the resolution's context: every file outside `images/` and every
/// image's names, the number of secrets registered, which the offline
/// checks' tag keys are redacted by): an edit of one image file resolves
/// and checks that file's images alone. Only a resolution that added no
/// diagnostic is kept.
#[derive(Default)]
pub struct ImageMemo {
    key: Option<blake3::Hash>,
    files: HashMap<PathBuf, MemoFile>,
    /// The last load's files of `images/`: (from the memo, loaded anew).
    pub last: (usize, usize),
    /// Of the last load's kept files, those whose images came resolved.
    pub last_resolved: usize,
}

struct MemoFile {
    hash: blake3::Hash,
    images: Vec<Arc<Image>>,
    diags: Vec<Diagnostic>,
    reads: crate::template::TemplateReads,
    /// The images resolved, and the context they were resolved in.
    resolved: Option<(blake3::Hash, Vec<Arc<Image>>)>,
}

/// Where a file's images sit in the load's list, and whether they came
/// resolved from the [`ImageMemo`] (`path`: the memo's entry, if any).
struct ImageSpan {
    path: Option<PathBuf>,
    range: std::ops::Range<usize>,
    resolved: bool,
}

struct Loader<'o> {
    root: PathBuf,
    opts: &'o LoadOptions,
    d: Diags,
    env: BTreeMap<String, String>,
    identities: Option<Result<Identities, String>>,
    renderer: Renderer,
    execution: Execution,
    unused: Vec<UnusedSection>,
    /// Names (normalized, incl. aliases) of declarations csis does not use,
    /// per class: references to them are not errors.
    unused_runtimes: HashSet<String>,
    unused_image_builders: HashSet<String>,
    unused_backends: HashSet<String>,
    /// Files parsed by the caller ([`load_from_nodes`]), by path: read
    /// instead of the disk. None = parse the files on disk.
    pre: Option<BTreeMap<PathBuf, Pre>>,
    /// The images of the loads before ([`load_from_parses`]).
    memo: Option<&'o mut ImageMemo>,
    /// The parse cache, once the first files are parsed from disk.
    parse_cache: Option<parse_cache::ParseCache>,
    /// With a memo: the files of `images/` in the load's list of images,
    /// and the context the resolution runs in (None: nothing is kept).
    spans: Vec<ImageSpan>,
    resolution_context: Option<blake3::Hash>,
    /// With a memo: the hash of every file outside `images/` (what the
    /// resolution reads besides the images), taken before the load takes
    /// the files; None when a file has no hash.
    globals: Option<blake3::Hash>,
}

/// Load and validate the tree at `root`. On success the tree carries the
/// load's warnings; on failure every diagnostic (errors and warnings) is
/// returned together.
///
/// Beyond the YAML, the load looks for every playbook and script a
/// modification names and refuses the tree when one is missing
/// ([`missing_files`]: an error at the line naming it; a bake of that image
/// could only fail, and the spec says mod files must exist); the
/// incremental load ([`crate::incremental`]) leaves that to the compile's
/// content hashes, and a bake checks its own image again
/// ([`missing_files_of`]).
pub fn load(root: &Path, opts: &LoadOptions) -> Result<Tree, Vec<Diagnostic>> {
    let tree = load_with(root, opts, None, None)?;
    let missing = missing_files(&tree);
    if !missing.is_empty() {
        let mut all = tree.warnings.clone();
        all.extend(missing);
        return Err(all);
    }
    Ok(tree)
}

/// An error for each playbook or script a modification names that is not
/// a file under the tree's root, at the line naming it. Each file is
/// looked for once.
pub fn missing_files(tree: &Tree) -> Vec<Diagnostic> {
    let mut seen: HashMap<String, bool> = HashMap::new();
    tree.images
        .iter()
        .flat_map(|img| missing_files_seen(tree, img, &mut seen))
        .collect()
}

/// [`missing_files`] of one image (what a bake of it reads).
pub fn missing_files_of(tree: &Tree, image: &crate::tree::Image) -> Vec<Diagnostic> {
    missing_files_seen(tree, image, &mut HashMap::new())
}

fn missing_files_seen(
    tree: &Tree,
    img: &crate::tree::Image,
    seen: &mut HashMap<String, bool>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for m in &img.mods {
        for (k, files) in [
            ("playbooks", &m.item.playbooks),
            ("scripts", &m.item.scripts),
        ] {
            for (i, f) in files.iter().enumerate() {
                let exists = *seen
                    .entry(f.clone())
                    .or_insert_with(|| tree.root.join(f).is_file());
                if !exists {
                    out.push(
                        Diagnostic::at(
                            m.origin.field(k),
                            &format!("{}[{i}]", join_path(&m.origin.path, k)),
                            format!(
                                "`{f}` does not exist in the tree: a bake of `{}` would fail",
                                img.display
                            ),
                        )
                        .with_hint(format!(
                            "paths are relative to the tree's root ({}); create the file or fix the path",
                            tree.root.display()
                        )),
                    );
                }
            }
        }
    }
    out
}

/// Every YAML file [`load`] parses under `root`: `cfg/*.y(a)ml`, then
/// `images/`, `groups/`, `storages/`, `instances/` (recursively), each
/// directory in the loader's order.
pub fn tree_files(root: &Path) -> Vec<PathBuf> {
    let mut out = yaml_files(&root.join("cfg"), false);
    for dir in ["images", "groups", "storages", "instances"] {
        let d = root.join(dir);
        if d.is_dir() {
            out.extend(yaml_files(&d, true));
        }
    }
    out
}

/// [`load`] from files the caller has already parsed (the incremental
/// compile, [`crate::incremental`]): `files` holds, per path of
/// [`tree_files`], the parse of that file (as [`yaml::parse_file`] returns
/// it). Files not in `files` are not read. Overlays are still read from disk.
pub fn load_from_nodes(
    root: &Path,
    opts: &LoadOptions,
    files: Vec<(PathBuf, Result<Node, Diagnostic>)>,
) -> Result<Tree, Vec<Diagnostic>> {
    let pre = files
        .into_iter()
        .map(|(p, parse)| {
            let parse = Arc::new(parse);
            (p, Pre { hash: None, parse })
        })
        .collect();
    load_with(root, opts, Some(pre), None)
}

/// [`load_from_nodes`] from shared parses with their content hashes, the
/// images of each file of `images/` whose parse is the one `memo` holds
/// taken from it (and the memo brought up to date): the incremental
/// load's, which loads again only the images of the files that moved.
/// Answers as [`load_from_nodes`] does.
pub fn load_from_parses(
    root: &Path,
    opts: &LoadOptions,
    files: Vec<(PathBuf, blake3::Hash, SharedParse)>,
    memo: &mut ImageMemo,
) -> Result<Tree, Vec<Diagnostic>> {
    let pre = files
        .into_iter()
        .map(|(p, hash, parse)| {
            let hash = Some(hash);
            (p, Pre { hash, parse })
        })
        .collect();
    load_with(root, opts, Some(pre), Some(memo))
}

fn load_with<'o>(
    root: &Path,
    opts: &'o LoadOptions,
    pre: Option<BTreeMap<PathBuf, Pre>>,
    memo: Option<&'o mut ImageMemo>,
) -> Result<Tree, Vec<Diagnostic>> {
    let env: BTreeMap<String, String> = opts
        .env
        .clone()
        .unwrap_or_else(|| std::env::vars().collect());
    let now = opts.now.unwrap_or_else(chrono::Utc::now);
    let mut l = Loader {
        root: root.to_path_buf(),
        opts,
        d: Diags::default(),
        identities: None,
        renderer: Renderer::new(
            &env,
            &Execution {
                timestamp: String::new(),
                date: String::new(),
                dateformat: String::new(),
            },
        ),
        env,
        execution: Execution {
            timestamp: String::new(),
            date: now.format("%Y-%m-%d").to_string(),
            dateformat: String::new(),
        },
        unused: Vec::new(),
        unused_runtimes: HashSet::new(),
        unused_image_builders: HashSet::new(),
        unused_backends: HashSet::new(),
        pre,
        memo,
        parse_cache: None,
        spans: Vec::new(),
        resolution_context: None,
        globals: None,
    };
    let tree = l.run(now);
    if let Some(c) = l.parse_cache.take() {
        c.save();
    }
    l.register_env_secrets();
    l.d.items.iter_mut().for_each(Diagnostic::redact);
    match tree {
        Some(t) if !l.d.has_errors() => {
            let mut t = t;
            t.warnings = l.d.items;
            Ok(t)
        }
        _ => Err(l.d.items),
    }
}

impl Loader<'_> {
    // -- generic helpers ---------------------------------------------------

    // -- the load ------------------------------------------------------------

    fn run(&mut self, now: chrono::DateTime<chrono::Utc>) -> Option<Tree> {
        let cfg_dir = self.root.join("cfg");
        if !cfg_dir.is_dir() {
            self.d.push(
                Diagnostic::plain(&self.root.display().to_string(), "not a configuration tree: there is no cfg/ directory")
                    .with_hint("run csis in the tree's root, or pass -C DIR (csis init DIR writes a starter tree)"),
            );
            return None;
        }

        self.globals = self.globals_hash();

        // 1. cfg/ merged
        let (scalars, mut lists, config_map) = self.merge_cfg(&cfg_dir);

        // 2. overlays (parsed once; applied to config and collections)
        let overlays = self.read_overlays();

        // 3. globals
        self.set_execution(&scalars, now);
        self.renderer = self.renderer.renew(&self.env, &self.execution);
        let (config, config_origin) = self.load_config(&scalars, &overlays, config_map);

        // 4. builders
        let mut builders = self.load_builders(&mut lists, &config);

        // 5. collections
        let (images, groups) = self.load_collections(&overlays, &mut builders.fleet);

        // 6. resolve and validate
        let fleet = std::mem::take(&mut builders.fleet);
        let mut tree = builders.into_tree(
            self.root.clone(),
            (config, config_origin),
            images,
            groups,
            self.execution.clone(),
        );
        self.resolve(&mut tree);
        self.resolve_groups(&mut tree);
        self.resolve_memberships(&mut tree);
        self.resolve_fleet(&mut tree, fleet);
        for u in &self.unused {
            self.d
                .push(Diagnostic::plain(&u.place, u.message()).warning());
        }
        tree.unused = std::mem::take(&mut self.unused);
        self.check_recipe(&tree);
        self.check_image_groups(&tree);
        tree.template_reads = self.renderer.reads();
        Some(tree)
    }

    /// With a memo and the caller's parses: a hash of every file outside
    /// `images/` (path and parse hash), before the load takes them; None
    /// when a file has no hash.
    fn globals_hash(&self) -> Option<blake3::Hash> {
        self.memo.as_ref()?;
        let images = self.root.join("images");
        let mut h = blake3::Hasher::new();
        h.update(b"csis-load-globals-v1\0");
        for (p, f) in self.pre.as_ref()?.iter() {
            if p.starts_with(&images) {
                continue;
            }
            let bytes = p.as_os_str().as_encoded_bytes();
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
            h.update(f.hash?.as_bytes());
        }
        Some(h.finalize())
    }

    /// The `execution.*` globals: the load's timestamp in the tree's
    /// `dateformat` (a format strftime refuses is an error at its line).
    fn set_execution(
        &mut self,
        scalars: &IndexMap<String, Entry>,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let dateformat = scalars
            .get("dateformat")
            .and_then(|e| e.value.as_str())
            .unwrap_or("%Y-%m-%d-%H%M%S")
            .to_string();
        self.execution.dateformat = dateformat.clone();
        self.execution.timestamp = {
            use std::fmt::Write;
            let mut s = String::new();
            if write!(s, "{}", now.format(&dateformat)).is_err() {
                if let Some(e) = scalars.get("dateformat") {
                    self.d.error(
                        &e.value.loc,
                        "dateformat",
                        format!("not a strftime format: `{dateformat}`"),
                    );
                }
                s = now.format("%Y-%m-%d-%H%M%S").to_string();
            }
            s
        };
    }

    /// The builders of `cfg/`, each list in the order a load reads them.
    fn load_builders(
        &mut self,
        lists: &mut IndexMap<String, Vec<Item>>,
        config: &IaConfig,
    ) -> Builders {
        let mut executables = Vec::new();
        for it in lists.shift_remove("executables").unwrap_or_default() {
            if let Some(x) = self.load_executable(it) {
                executables.push(x);
            }
        }
        let mut runtimes = Vec::new();
        for it in lists.shift_remove("runtime_builders").unwrap_or_default() {
            if let Some(r) = self.load_runtime(it) {
                runtimes.push(r);
            }
        }
        let mut backends = Vec::new();
        for it in lists.shift_remove("state_backends").unwrap_or_default() {
            if let Some(b) = self.load_backend(it) {
                backends.push(b);
            }
        }
        let mut fleet = fleet::Fleet::default();
        for it in lists.shift_remove("instance_builders").unwrap_or_default() {
            fleet.instance_builder(self, it);
        }
        for it in lists.shift_remove("user_builders").unwrap_or_default() {
            if let Some(b) = self.load_user_builder(it) {
                fleet.user_builders.push(b);
            }
        }
        let mut group_builders = Vec::new();
        for it in lists.shift_remove("group_builders").unwrap_or_default() {
            if let Some(b) = self.load_group_builder(it) {
                group_builders.push(b);
            }
        }
        let mut storage_builders = Vec::new();
        for it in lists.shift_remove("storage_builders").unwrap_or_default() {
            storage_builders.extend(fleet.storage_builder(self, it));
        }
        let mut image_builders = Vec::new();
        for it in lists.shift_remove("image_builders").unwrap_or_default() {
            if let Some(b) = self.load_image_builder(it) {
                image_builders.push(b);
            }
        }
        let mut mod_builders = Vec::new();
        for it in lists.shift_remove("mod_builders").unwrap_or_default() {
            if let Some(b) = self.load_mod_builder(it) {
                mod_builders.push(b);
            }
        }
        let mut os_builders = Vec::new();
        for it in lists.shift_remove("os_builders").unwrap_or_default() {
            if let Some(b) = self.load_os_builder(it, config) {
                os_builders.push(b);
            }
        }
        Builders {
            executables,
            runtimes,
            backends,
            fleet,
            group_builders,
            storage_builders,
            image_builders,
            mod_builders,
            os_builders,
        }
    }

    /// The collections: `images/`, then `groups/` (groups and users),
    /// `storages/` and `instances/` into the fleet.
    fn load_collections(
        &mut self,
        overlays: &[Node],
        fleet: &mut fleet::Fleet,
    ) -> (Vec<Arc<Image>>, Vec<crate::groups::Group>) {
        let images = if self.memo.is_some()
            && self.opts.overlays.is_empty()
            && self.opts.undeclares.is_empty()
        {
            self.load_images_memo()
        } else {
            let image_items = self.read_collection("images", &["images"], overlays);
            let mut images = Vec::new();
            for it in image_items.into_iter().flat_map(|(_, v)| v) {
                if let Some(i) = self.load_image(it) {
                    images.push(Arc::new(i));
                }
            }
            images
        };
        let mut groups = Vec::new();
        for (dir, keys) in [
            ("groups", &["groups", "users"][..]),
            ("storages", &["storages"][..]),
            ("instances", &["instances"][..]),
        ] {
            for (key, items) in self.read_collection(dir, keys, overlays) {
                for it in items {
                    match key.as_str() {
                        "groups" => groups.extend(self.load_group(it)),
                        "users" => fleet.users.extend(self.load_user(it)),
                        "storages" => fleet.storage(self, it),
                        _ => fleet.instances.extend(self.load_instance(it)),
                    }
                }
            }
        }
        (images, groups)
    }
}

/// The builders of `cfg/` as read, before resolution.
struct Builders {
    executables: Vec<ExecutableEntry>,
    runtimes: Vec<RuntimeEntry>,
    backends: Vec<StateBackend>,
    fleet: fleet::Fleet,
    group_builders: Vec<crate::groups::GroupBuilder>,
    storage_builders: Vec<crate::groups::StorageBuilder>,
    image_builders: Vec<ImageBuilder>,
    mod_builders: Vec<ModBuilder>,
    os_builders: Vec<OsBuilder>,
}

impl Builders {
    /// The tree of these builders and collections, nothing resolved nor
    /// indexed yet (the fleet is resolved into it).
    fn into_tree(
        self,
        root: PathBuf,
        (config, config_origin): (IaConfig, Option<Origin>),
        images: Vec<Arc<Image>>,
        groups: Vec<crate::groups::Group>,
        execution: Execution,
    ) -> Tree {
        Tree {
            root,
            config,
            config_origin,
            executables: self.executables,
            runtimes: self.runtimes,
            state_backends: self.backends,
            os_builders: self.os_builders,
            image_builders: self.image_builders,
            mod_builders: self.mod_builders,
            images,
            group_builders: self.group_builders,
            storage_builders: self.storage_builders,
            groups,
            instances: Vec::new(),
            storages: Vec::new(),
            users: Vec::new(),
            instance_builders: Vec::new(),
            user_builders: Vec::new(),
            unused: Vec::new(),
            warnings: Vec::new(),
            execution,
            template_reads: Default::default(),
            executables_by_name: Default::default(),
            runtimes_by_name: Default::default(),
            state_backends_by_name: Default::default(),
            os_builders_by_name: Default::default(),
            image_builders_by_name: Default::default(),
            mod_builders_by_name: Default::default(),
            images_by_name: Default::default(),
            group_builders_by_name: Default::default(),
            storage_builders_by_name: Default::default(),
            groups_by_name: Default::default(),
            instances_by_name: Default::default(),
            storages_by_name: Default::default(),
            instance_builders_by_name: Default::default(),
            user_builders_by_name: Default::default(),
            kids: Default::default(),
        }
    }
}
