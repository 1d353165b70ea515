//! Loading a tree: `cfg/` merged, decrypted, templated, typed, resolved and
//! validated; `images/` likewise; `groups/`, `storages/`, `instances/` read
//! and counted (not used by csis yet). All errors of a load are collected and
//! returned together.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::crypt::Identities;
use crate::diag::{Diagnostic, Diags};
use crate::model::*;
use crate::template::Renderer;
use crate::tree::*;
use crate::yaml::{join_path, Loc, Node};

mod builders;
mod collections;
mod config;
mod cycles;
mod files;
mod groups;
mod head;
mod helpers;
mod images;
mod index;
mod made_names;
mod os_builders;
mod overlays;
mod recipe_checks;
mod runtimes;
mod transforms;

use builders::Which;
use files::yaml_files;
pub use helpers::looks_private;
use helpers::{glob_match, is_absent, known};
pub use made_names::tag_safe;
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
}

/// Builder lists csis reads but does not implement yet, with their label.
const UNUSED_BUILDER_LISTS: &[(&str, &str)] = &[
    ("user_builders", "user builders"),
    ("instance_builders", "instance builders"),
];

/// An item of a merged list: its node and its index within its own file.
struct Item {
    node: Node,
    path: String,
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
    /// Duplicate mapping keys (the later value wins, as in the original's
    /// YAML reader). Kept, not reported: the original's own starters carry one.
    dup_keys: Vec<Diagnostic>,
    /// Files parsed by the caller ([`load_from_nodes`]), by path: read
    /// instead of the disk. None = parse the files on disk.
    pre: Option<BTreeMap<PathBuf, Result<Node, Diagnostic>>>,
}

/// Load and validate the tree at `root`. On success the tree carries the
/// load's warnings; on failure every diagnostic (errors and warnings) is
/// returned together.
///
/// Beyond the YAML, the load looks for every playbook and script a
/// modification names and warns of those that are missing
/// ([`missing_files`]: a warning, not an error, since the original loads
/// such trees and its own examples carry some); the incremental load
/// ([`crate::incremental`]) leaves that to the compile's content hashes.
pub fn load(root: &Path, opts: &LoadOptions) -> Result<Tree, Vec<Diagnostic>> {
    let mut tree = load_with(root, opts, None)?;
    let missing = missing_files(&tree);
    tree.warnings.extend(missing);
    Ok(tree)
}

/// A warning for each playbook or script a modification names that is not
/// a file under the tree's root (a bake of that image would fail; the
/// content hash in its fingerprint says `missing`). Each file is looked
/// for once.
pub fn missing_files(tree: &Tree) -> Vec<Diagnostic> {
    let mut seen: HashMap<&str, bool> = HashMap::new();
    let mut out = Vec::new();
    for img in &tree.images {
        for m in &img.mods {
            for (k, files) in [
                ("playbooks", &m.item.playbooks),
                ("scripts", &m.item.scripts),
            ] {
                for (i, f) in files.iter().enumerate() {
                    let exists = *seen
                        .entry(f.as_str())
                        .or_insert_with(|| tree.root.join(f).is_file());
                    if !exists {
                        out.push(
                            Diagnostic::at(
                                m.origin.field(k),
                                &format!("{}[{i}]", join_path(&m.origin.path, k)),
                                format!("`{f}` does not exist in the tree: a bake of `{}` would fail", img.display),
                            )
                            .warning()
                            .with_hint(format!(
                                "paths are relative to the tree's root ({}); create the file or fix the path",
                                tree.root.display()
                            )),
                        );
                    }
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
    load_with(root, opts, Some(files.into_iter().collect()))
}

fn load_with(
    root: &Path,
    opts: &LoadOptions,
    pre: Option<BTreeMap<PathBuf, Result<Node, Diagnostic>>>,
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
        dup_keys: Vec::new(),
        pre,
    };
    let tree = l.run(now);
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

        // 1. cfg/ merged
        let (scalars, mut lists, config_map) = self.merge_cfg(&cfg_dir);

        // 2. overlays (parsed once; applied to config and collections)
        let overlays = self.read_overlays();

        // 3. globals
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
        self.renderer = self.renderer.renew(&self.env, &self.execution);
        let (config, config_origin) = self.load_config(&scalars, &overlays, config_map);

        // 4. builders
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
        for (key, label) in UNUSED_BUILDER_LISTS {
            let items = lists.shift_remove(*key).unwrap_or_default();
            for it in &items {
                self.head(&it.node, &it.path, true);
            }
            if !items.is_empty() {
                self.unused.push(UnusedSection {
                    what: label.to_string(),
                    count: items.len(),
                    place: "cfg/".into(),
                });
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
            if let Some(b) = self.load_storage_builder(it) {
                storage_builders.push(b);
            }
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
            if let Some(b) = self.load_os_builder(it, &config) {
                os_builders.push(b);
            }
        }

        // 5. collections
        let image_items = self.read_collection("images", &["images"], &overlays);
        let mut images = Vec::new();
        for it in image_items.into_iter().flat_map(|(_, v)| v) {
            if let Some(i) = self.load_image(it) {
                images.push(i);
            }
        }
        let mut groups = Vec::new();
        for (dir, keys) in [
            ("groups", &["groups", "users"][..]),
            ("storages", &["storages"][..]),
            ("instances", &["instances"][..]),
        ] {
            for (key, items) in self.read_collection(dir, keys, &overlays) {
                if key == "groups" {
                    for it in items {
                        if let Some(g) = self.load_group(it) {
                            groups.push(g);
                        }
                    }
                    continue;
                }
                if !items.is_empty() {
                    self.unused.push(UnusedSection {
                        what: key,
                        count: items.len(),
                        place: format!("{dir}/"),
                    });
                }
            }
        }
        for u in &self.unused {
            self.d
                .push(Diagnostic::plain(&u.place, u.message()).warning());
        }

        // 6. resolve and validate
        let mut tree = Tree {
            root: self.root.clone(),
            config,
            config_origin,
            executables,
            runtimes,
            state_backends: backends,
            os_builders,
            image_builders,
            mod_builders,
            images,
            group_builders,
            storage_builders,
            groups,
            unused: std::mem::take(&mut self.unused),
            warnings: Vec::new(),
            execution: self.execution.clone(),
            template_reads: Default::default(),
            ix_exe: Default::default(),
            ix_rt: Default::default(),
            ix_sb: Default::default(),
            ix_os: Default::default(),
            ix_ib: Default::default(),
            ix_mb: Default::default(),
            ix_img: Default::default(),
            ix_gb: Default::default(),
            ix_stb: Default::default(),
            ix_grp: Default::default(),
            kids: Default::default(),
        };
        self.resolve(&mut tree);
        self.resolve_groups(&mut tree);
        self.check_recipe(&tree);
        self.check_image_groups(&tree);
        tree.template_reads = self.renderer.reads();
        Some(tree)
    }

    // -- resolution ----------------------------------------------------------

    fn resolve(&mut self, t: &mut Tree) {
        t.ix_exe = self.index_of(&t.executables);
        t.ix_rt = self.index_of(&t.runtimes);
        t.ix_sb = self.index_of(&t.state_backends);
        t.ix_os = self.index_of(&t.os_builders);
        t.ix_ib = self.index_of(&t.image_builders);
        t.ix_mb = self.index_of(&t.mod_builders);
        t.ix_img = self.index_of(&t.images);
        // An image and an OS builder share the `source_image` namespace.
        for img in &t.images {
            if let Some(o) = t.ix_os.map.get(&img.name) {
                let os = &t.os_builders[*o];
                self.d.error_hint(
                    img.origin.field("name"),
                    &join_path(&img.origin.path, "name"),
                    format!("image `{}` has the name of an OS builder", img.display),
                    format!(
                        "`source_image: {}` would be ambiguous; the OS builder is at {}",
                        img.display,
                        os.origin.display()
                    ),
                );
            }
        }

        let exe_ok = |t: &Tree, name: &str| t.ix_exe.map.contains_key(&normalize_name(name));

        // runtimes
        for i in 0..t.runtimes.len() {
            let rt = &t.runtimes[i];
            let path = rt.origin.path.clone();
            let o = rt.origin.clone();
            let sc = rt.common.state_configuration.clone();
            let mut backend = None;
            if !is_absent(&sc) {
                match t.ix_sb.get(&sc) {
                    Some(b) => backend = Some(t.state_backends[b].name.clone()),
                    None if self.unused_backends.contains(&normalize_name(&sc)) => {}
                    None => self.d.error_hint(
                        o.field("state_configuration"),
                        &join_path(&path, "state_configuration"),
                        format!("state_configuration `{sc}` names no declared state backend"),
                        known(
                            "state backends",
                            t.state_backends.iter().map(|b| b.display.as_str()),
                        ),
                    ),
                }
            } else if let Some(b) = t.ix_sb.default {
                backend = Some(t.state_backends[b].name.clone());
            }
            let dib = rt.common.default_image_builder.clone();
            if !is_absent(&dib)
                && t.ix_ib.get(&dib).is_none()
                && !self.unused_image_builders.contains(&normalize_name(&dib))
            {
                self.d.error_hint(
                    o.field("default_image_builder"),
                    &join_path(&path, "default_image_builder"),
                    format!("default_image_builder `{dib}` names no declared image builder"),
                    known(
                        "image builders",
                        t.image_builders.iter().map(|b| b.display.as_str()),
                    ),
                );
            }
            let mut exe = None;
            match (&rt.common.executable, &rt.kind) {
                (Some(e), _) => {
                    if exe_ok(t, e) {
                        exe = Some(normalize_name(e));
                    } else {
                        self.d.error_hint(
                            o.field("executable"),
                            &join_path(&path, "executable"),
                            format!("executable '{e}' is not declared in cfg/executables.yml"),
                            format!("declare `- name: {e}` with its `binary` under executables:"),
                        );
                    }
                }
                (None, RuntimeKind::Docker(_)) if exe_ok(t, "docker") => {
                    exe = Some("docker".into());
                }
                _ => {}
            }
            let rt = &mut t.runtimes[i];
            rt.state_backend = backend;
            rt.executable = exe;
        }

        // image builders -> runtimes
        for i in 0..t.image_builders.len() {
            let ib = &t.image_builders[i];
            let path = ib.origin.path.clone();
            let o = ib.origin.clone();
            let rname = ib.model.runtime.clone();
            let mut runtime = String::new();
            match t.ix_rt.get(&rname) {
                Some(r) => {
                    let rt = &t.runtimes[r];
                    if !ib.kind.runtime_types().contains(&rt.type_name()) {
                        self.d.error_hint(
                            o.field("runtime"),
                            &join_path(&path, "runtime"),
                            format!(
                                "image builder type {} cannot bake on runtime `{}` of type {}",
                                ib.kind.as_str(),
                                rt.display,
                                rt.type_name()
                            ),
                            format!(
                                "{} bakes on {} runtimes",
                                ib.kind.as_str(),
                                ib.kind.runtime_types().join("/")
                            ),
                        );
                    }
                    runtime = rt.name.clone();
                }
                None if self.unused_runtimes.contains(&normalize_name(&rname)) => {
                    self.d.error(o.field("runtime"), &join_path(&path, "runtime"), format!("image builder type {} cannot bake on runtime `{rname}` (a runtime type csis does not implement yet)", ib.kind.as_str()));
                }
                None if is_absent(&rname) => self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&path, "runtime"),
                    "`runtime: default` but no runtime has is_default: true",
                    "name the runtime, or mark one runtime is_default: true",
                ),
                None => self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&path, "runtime"),
                    format!("runtime `{rname}` is not declared"),
                    known("runtimes", t.runtimes.iter().map(|r| r.display.as_str())),
                ),
            }
            let mut exe = None;
            if let Some(e) = &ib.model.executable {
                if exe_ok(t, e) {
                    exe = Some(normalize_name(e));
                } else {
                    self.d.error_hint(
                        o.field("executable"),
                        &join_path(&path, "executable"),
                        format!("executable '{e}' is not declared in cfg/executables.yml"),
                        format!("declare `- name: {e}` under executables:"),
                    );
                }
            }
            let ib = &mut t.image_builders[i];
            ib.runtime = runtime;
            ib.executable = exe;
        }

        // mod builders
        for i in 0..t.mod_builders.len() {
            let mb = &t.mod_builders[i];
            let mut exe = None;
            if let Some(e) = &mb.model.executable {
                if exe_ok(t, e) {
                    exe = Some(normalize_name(e));
                } else {
                    self.d.error_hint(
                        mb.origin.field("executable"),
                        &join_path(&mb.origin.path, "executable"),
                        format!("executable '{e}' is not declared in cfg/executables.yml"),
                        format!("declare `- name: {e}` under executables:"),
                    );
                }
            }
            t.mod_builders[i].executable = exe;
        }

        // OS builders
        for i in 0..t.os_builders.len() {
            let mut seen_ib: HashMap<String, usize> = HashMap::new();
            let mut seen_label: HashSet<String> = HashSet::new();
            let os_path = t.os_builders[i].origin.path.clone();
            for j in 0..t.os_builders[i].runtimes.len() {
                let e = &t.os_builders[i].runtimes[j];
                let path = e.origin.path.clone();
                let o = e.origin.clone();
                let ibn = e.entry.image_builder.clone();
                let (ib, rt) = self.resolve_builder_ref(
                    t,
                    &ibn,
                    o.field("image_builder"),
                    &join_path(&path, "image_builder"),
                );
                if let Some(b) = &ib {
                    if let Some(prev) = seen_ib.insert(b.clone(), j) {
                        self.d.error(o.field("image_builder"), &join_path(&path, "image_builder"), format!("image builder `{ibn}` appears twice in runtimes (also runtimes[{prev}])"));
                    }
                }
                if let Some(n) = &e.entry.name {
                    if !seen_label.insert(normalize_name(n)) {
                        self.d.error(
                            o.field("name"),
                            &join_path(&path, "name"),
                            format!("duplicate runtime entry name `{n}`"),
                        );
                    }
                }
                if let Some(r) = rt.as_deref().and_then(|r| t.runtime(r)) {
                    if r.docker().is_some() {
                        if let Some(id) = &e.entry.image_id {
                            if !id.contains("@sha256:") {
                                self.d.error_hint(o.field("image_id"), &join_path(&path, "image_id"), format!("image_id '{id}' is not a digest reference"), "pin `<repository>@sha256:<digest>` (docker image inspect --format '{{index .RepoDigests 0}}')");
                            }
                        }
                        let allowed = [
                            "name",
                            "version",
                            "publisher",
                            "architecture",
                            "native.image",
                            "native",
                        ];
                        let q = t.os_query(&t.os_builders[i], e);
                        let filters = q
                            .get("filters")
                            .and_then(|f| f.as_object())
                            .cloned()
                            .unwrap_or_default();
                        for k in filters.keys().chain(q.keys().filter(|k| *k != "filters")) {
                            if !allowed.contains(&k.as_str()) {
                                self.d.error_hint(o.field("query"), &join_path(&path, "query"), format!("query key `{k}` cannot be answered by a docker daemon"), "docker queries use name, version, publisher, architecture and native.image");
                            }
                        }
                    }
                }
                let e = &mut t.os_builders[i].runtimes[j];
                e.image_builder = ib;
                e.runtime = rt;
            }
            // N9: no admin public key and no session mechanism on any runtime
            let os = &t.os_builders[i];
            if os.admin_public_keys.iter().all(|k| k.trim().is_empty()) {
                for e in os.active_runtimes() {
                    let rt = t
                        .runtime(e.runtime.as_deref().unwrap_or(""))
                        .expect("resolved");
                    if !rt.has_session() {
                        self.d.error_hint(
                            &e.origin.loc,
                            &e.origin.path,
                            format!("base image `{}` has no admin public key and runtime `{}` has no session mechanism: nobody could reach its machines (N9)", os.display, rt.display),
                            "set config.admin_public_keys (or the OS builder's admin_public_keys), or `session_mechanism: ssm` on the runtime",
                        );
                    }
                }
            }
            let _ = os_path;
        }

        // images: parents, builders, mods
        for i in 0..t.images.len() {
            let img = &t.images[i];
            let path = img.origin.path.clone();
            let o = img.origin.clone();
            let src = img.model.source_image.clone();
            let parent = if is_absent(&src) {
                match t.ix_os.default {
                    Some(o) => Some(Parent::Os(t.os_builders[o].name.clone())),
                    None => {
                        self.d.error_hint(
                            o.field("source_image"),
                            &join_path(&path, "source_image"),
                            "`source_image: default` but no OS builder has is_default: true",
                            "name the OS builder or image this image is built from",
                        );
                        None
                    }
                }
            } else if let Some(j) = t.ix_img.get(&src) {
                if j == i {
                    self.d.error(
                        o.field("source_image"),
                        &join_path(&path, "source_image"),
                        format!("image `{}` is its own source_image", img.display),
                    );
                    None
                } else {
                    Some(Parent::Image(t.images[j].name.clone()))
                }
            } else if let Some(o) = t.ix_os.get(&src) {
                Some(Parent::Os(t.os_builders[o].name.clone()))
            } else {
                let mut names: Vec<&str> =
                    t.os_builders.iter().map(|o| o.display.as_str()).collect();
                names.extend(t.images.iter().take(20).map(|i| i.display.as_str()));
                self.d.error_hint(
                    o.field("source_image"),
                    &join_path(&path, "source_image"),
                    format!("source_image `{src}` names no OS builder or image"),
                    known("OS builders and images", names.into_iter()),
                );
                None
            };
            let ty = img.model.type_.clone();
            let primary = match t.ix_ib.get(&ty) {
                Some(b) => Some(t.image_builders[b].name.clone()),
                None if self.unused_image_builders.contains(&normalize_name(&ty)) => None,
                None if is_absent(&ty) => None,
                None => {
                    self.d.error_hint(
                        o.field("type"),
                        &join_path(&path, "type"),
                        format!("image builder `{ty}` is not declared"),
                        known(
                            "image builders",
                            t.image_builders.iter().map(|b| b.display.as_str()),
                        ),
                    );
                    None
                }
            };
            let mut resolved_rt = Vec::new();
            let mut seen: HashMap<String, usize> = HashMap::new();
            for (j, e) in img.runtimes.iter().enumerate() {
                let (ib, rt) = self.resolve_builder_ref(
                    t,
                    &e.entry.image_builder,
                    e.origin.field("image_builder"),
                    &join_path(&e.origin.path, "image_builder"),
                );
                if let Some(b) = &ib {
                    if let Some(prev) = seen.insert(b.clone(), j) {
                        self.d.error(e.origin.field("image_builder"), &join_path(&e.origin.path, "image_builder"), format!("image builder `{}` appears twice in runtimes (also runtimes[{prev}])", e.entry.image_builder));
                    }
                }
                resolved_rt.push((ib, rt));
            }
            let mut resolved_mods = Vec::new();
            let mut mod_names: HashMap<String, usize> = HashMap::new();
            for (j, m) in img.mods.iter().enumerate() {
                let mp = m.origin.path.clone();
                if let Some(prev) = mod_names.insert(normalize_name(&m.item.name), j) {
                    self.d.error(
                        m.origin.field("name"),
                        &join_path(&mp, "name"),
                        format!(
                            "duplicate modification name `{}` (also modifications[{prev}])",
                            m.item.name
                        ),
                    );
                }
                let r = match t.ix_mb.get(&m.item.type_) {
                    Some(b) => Some((t.mod_builders[b].name.clone(), t.mod_builders[b].kind)),
                    None => {
                        if is_absent(&m.item.type_) {
                            self.d.error_hint(m.origin.field("type"), &join_path(&mp, "type"), "this modification names no type and no mod builder has is_default: true", "name the mod builder (`type: <name>`), or mark one is_default: true");
                        } else {
                            self.d.error_hint(
                                m.origin.field("type"),
                                &join_path(&mp, "type"),
                                format!("mod builder `{}` is not declared", m.item.type_),
                                known(
                                    "mod builders",
                                    t.mod_builders.iter().map(|b| b.display.as_str()),
                                ),
                            );
                        }
                        None
                    }
                };
                if let Some((_, kind)) = &r {
                    let origin = m.origin.clone();
                    self.check_mod(&m.item, *kind, &origin, &mp);
                }
                resolved_mods.push(r);
            }
            let img = &mut t.images[i];
            img.parent = parent.unwrap_or(Parent::Os(String::new()));
            img.primary_builder = primary;
            for (e, (ib, rt)) in img.runtimes.iter_mut().zip(resolved_rt) {
                e.image_builder = ib;
                e.runtime = rt;
            }
            for (m, r) in img.mods.iter_mut().zip(resolved_mods) {
                if let Some((b, k)) = r {
                    m.builder = b;
                    m.kind = k;
                }
            }
        }
        for (i, img) in t.images.iter().enumerate() {
            let (Parent::Os(p) | Parent::Image(p)) = &img.parent;
            t.kids.entry(p.clone()).or_default().push(i);
        }
        self.check_cycles(t);
        if !self.d.has_errors() {
            self.check_docker_names(t);
        }
    }

    /// Resolve an `image_builder:` reference to (canonical builder, canonical runtime).
    fn resolve_builder_ref(
        &mut self,
        t: &Tree,
        name: &str,
        loc: &Loc,
        path: &str,
    ) -> (Option<String>, Option<String>) {
        match t.ix_ib.get(name) {
            Some(b) => {
                let ib = &t.image_builders[b];
                let rt = (!ib.runtime.is_empty()).then(|| ib.runtime.clone());
                (Some(ib.name.clone()), rt)
            }
            None if self.unused_image_builders.contains(&normalize_name(name)) => (None, None),
            None if is_absent(name) => {
                self.d.error_hint(
                    loc,
                    path,
                    "`image_builder: default` but no image builder has is_default: true",
                    "name the image builder, or mark one is_default: true",
                );
                (None, None)
            }
            None => {
                self.d.error_hint(
                    loc,
                    path,
                    format!("image builder `{name}` is not declared"),
                    known(
                        "image builders",
                        t.image_builders.iter().map(|b| b.display.as_str()),
                    ),
                );
                (None, None)
            }
        }
    }

    fn check_mod(&mut self, m: &ModItem, kind: ModKind, origin: &Origin, path: &str) {
        let loc = &origin.loc;
        match kind {
            ModKind::Ansible => {
                if m.playbooks.is_empty() {
                    self.d.error_hint(origin.field("playbooks"), &join_path(path, "playbooks"), format!("ansible modification `{}` has no playbooks", m.name), "list the playbooks (root-relative paths); an item with only `config:` does nothing");
                }
                for k in ["script", "scripts"] {
                    let present = if k == "script" {
                        !m.script.is_empty()
                    } else {
                        !m.scripts.is_empty()
                    };
                    if present {
                        self.d.error(
                            origin.field(k),
                            &join_path(path, k),
                            format!(
                                "`{k}` belongs to a bash-remote modification, not an ansible one"
                            ),
                        );
                    }
                }
                if m.ensure.is_some() {
                    self.d.error(
                        origin.field("ensure"),
                        &join_path(path, "ensure"),
                        "`ensure` belongs to a bash-remote modification, not an ansible one",
                    );
                }
            }
            ModKind::BashRemote => {
                if !m.playbooks.is_empty() {
                    self.d.error(
                        origin.field("playbooks"),
                        &join_path(path, "playbooks"),
                        "`playbooks` belong to an ansible modification, not a bash-remote one",
                    );
                }
                if m.script.is_empty() && m.scripts.is_empty() && m.ensure.is_none() {
                    self.d.error_hint(
                        loc,
                        path,
                        format!(
                            "bash modification `{}` has no script, scripts or ensure",
                            m.name
                        ),
                        "give inline `script:` lines, `scripts:` files and/or an `ensure:` block",
                    );
                }
                if let Some(e) = &m.ensure {
                    if e.packages.is_empty()
                        && e.files.is_empty()
                        && e.services.is_empty()
                        && e.commands.is_empty()
                    {
                        self.d.error(
                            origin.field("ensure"),
                            &join_path(path, "ensure"),
                            "an `ensure` with every list empty is refused",
                        );
                    }
                    for (i, f) in e.files.iter().enumerate() {
                        if let Some(mode) = &f.mode {
                            let ok = match mode {
                                serde_json::Value::String(s) => {
                                    s.len() >= 3
                                        && s.len() <= 4
                                        && s.chars().all(|c| ('0'..='7').contains(&c))
                                }
                                _ => false,
                            };
                            if !ok {
                                self.d.error_hint(
                                    origin.field("ensure"),
                                    &format!("{path}.ensure.files[{i}].mode"),
                                    format!("mode {mode} is not an octal mode"),
                                    "write the mode quoted with its leading zero: \"0644\"",
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
