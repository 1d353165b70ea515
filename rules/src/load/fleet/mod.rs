//! The fleet (`crate::fleet`): instance and user builders (`cfg/`),
//! storages (`storages/`), users (`groups/` `users:`) and instances
//! (`instances/`) read into their strict models, then resolved against
//! the tree with every refusal of config.md C.7, C.8, D.2-D.4 at its file,
//! line and field. What lives on a runtime csis does not run (gcloud) is
//! counted once as "not used by csis yet" and otherwise left alone.
//!
//! Users and user builders are kept as declared: a user's name, its
//! profile strings and a builder's Okta values may be `ENC[age:...]`
//! markers, which only their own lifecycles (the OPA roots) open.

use std::collections::{HashMap, HashSet};

mod instances;
mod lifecycle;
mod storages;

use super::index::Declared;
use super::{is_absent, known, Item, Loader};
use crate::fleet::*;
use crate::tree::{normalize_name, Index, Origin, RuntimeEntry, Tree, UnusedSection};
use csis_schema::model::{article, UNUSED_RUNTIME_TYPES};
use csis_schema::yaml::{join_path, Node};

/// The fleet as read, before resolution.
#[derive(Default)]
pub(super) struct Fleet {
    pub instance_builders: Vec<InstanceBuilder>,
    pub user_builders: Vec<UserBuilder>,
    pub storages: Vec<Storage>,
    pub users: Vec<User>,
    pub instances: Vec<Declaration>,
    /// Names (normalised, with aliases; `default` for a default one) of
    /// instance builders and storages refused already: what names them
    /// is not refused a second time.
    pub refused: Refused,
}

#[derive(Default)]
pub(super) struct Refused {
    instance_builders: HashSet<String>,
    storage_builders: HashSet<String>,
    storages: HashSet<String>,
}

/// The names an item answers to: its name, its aliases, `default` when it is one.
fn names_of(node: &Node) -> Vec<String> {
    let mut out = vec![normalize_name(&node.get_str("name").unwrap_or_default())];
    if let Some(a) = node.get("aliases").and_then(|a| a.as_seq()) {
        out.extend(
            a.iter()
                .filter_map(|x| x.scalar_text())
                .map(|x| normalize_name(&x)),
        );
    }
    if node.get("is_default").and_then(|d| d.as_bool()) == Some(true) {
        out.push("default".into());
    }
    out
}

impl Fleet {
    /// Add an instance builder item, or remember that it was refused.
    pub(super) fn instance_builder(&mut self, l: &mut Loader, it: Item) {
        let names = names_of(&it.node);
        match l.load_instance_builder(it) {
            Some(b) => self.instance_builders.push(b),
            None => self.refused.instance_builders.extend(names),
        }
    }
    /// Load a storage builder item, or remember that it was refused.
    pub(super) fn storage_builder(
        &mut self,
        l: &mut Loader,
        it: Item,
    ) -> Option<crate::groups::StorageBuilder> {
        let names = names_of(&it.node);
        let b = l.load_storage_builder(it);
        if b.is_none() {
            self.refused.storage_builders.extend(names);
        }
        b
    }
    /// Add a storage item, or remember that it was refused.
    pub(super) fn storage(&mut self, l: &mut Loader, it: Item) {
        let names = names_of(&it.node);
        match l.load_storage(it) {
            Some(s) => self.storages.push(s),
            None => self.refused.storages.extend(names),
        }
    }
}

/// A declared instance and where each of its `storages:` items is.
pub(super) struct Declaration {
    pub instance: Instance,
    pub attach: Vec<Origin>,
}

impl Declared for InstanceBuilder {
    const CLASS: &'static str = "instance builder";
    fn declared_name(&self) -> &str {
        &self.display
    }
    fn aliases(&self) -> &[String] {
        &self.model.aliases
    }
    fn is_default(&self) -> bool {
        self.is_default
    }
    fn origin(&self) -> &Origin {
        &self.origin
    }
}

impl Declared for UserBuilder {
    const CLASS: &'static str = "user builder";
    fn declared_name(&self) -> &str {
        &self.display
    }
    fn aliases(&self) -> &[String] {
        &self.model.aliases
    }
    fn is_default(&self) -> bool {
        self.is_default
    }
    fn origin(&self) -> &Origin {
        &self.origin
    }
}

impl Declared for Storage {
    const CLASS: &'static str = "storage";
    fn declared_name(&self) -> &str {
        &self.display
    }
    fn aliases(&self) -> &[String] {
        &self.model.aliases
    }
    fn is_default(&self) -> bool {
        false
    }
    fn origin(&self) -> &Origin {
        &self.origin
    }
}

impl Declared for Instance {
    const CLASS: &'static str = "instance";
    fn declared_name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        &self.model.aliases
    }
    fn is_default(&self) -> bool {
        false
    }
    fn origin(&self) -> &Origin {
        &self.origin
    }
}

/// Why a name is not a hostname label an instance can carry: letters,
/// digits and hyphens, not at either end, and short enough that the
/// canonical hostname `<name>-NNN` is a label too (at most 63).
pub fn hostname_problem(name: &str) -> Option<String> {
    const MAX: usize = 63 - 4;
    if name.len() > MAX {
        return Some(format!(
            "instance name `{name}` has {} characters: at most {MAX}, so that its hostname `<name>-NNN` is a hostname label (63)",
            name.len()
        ));
    }
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    (!ok).then(|| {
        format!(
            "instance name `{name}` is not a hostname label (letters, digits and hyphens, not first or last)"
        )
    })
}

/// A `<n>m|h|d` duration.
pub(super) fn is_duration(t: &str) -> bool {
    t.len() > 1
        && t[..t.len() - 1].chars().all(|c| c.is_ascii_digit())
        && t.ends_with(['m', 'h', 'd'])
}

/// A name that is set (not empty, not `default`).
fn named(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|m| !is_absent(m))
        .map(str::to_string)
}

/// The machine types a runtime declares, when it keeps a catalog (docker;
/// dummy when it declares any).
fn machine_types(rt: &RuntimeEntry) -> Option<Vec<String>> {
    (rt.kind.model().machine_types)(&rt.kind)
}

// -- reading ---------------------------------------------------------------

impl Loader<'_> {
    pub(super) fn load_instance_builder(&mut self, mut it: Item) -> Option<InstanceBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if instance_type(&ty).is_none() {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown instance builder type `{ty}`"),
                format!(
                    "instance builder types: {}",
                    INSTANCE_BUILDER_TYPES
                        .iter()
                        .map(|t| t.builder_type)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            return None;
        }
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let model: InstanceBuilderModel = self.typed(&it.node, &it.path)?;
        Some(InstanceBuilder {
            name: normalize_name(&name),
            display: name,
            type_: ty,
            runtime: String::new(),
            is_default: model.is_default,
            executable: named(model.executable.as_deref()),
            state_configuration: model.state_configuration.clone(),
            required_plugins: model.required_plugins.clone(),
            config: model.config.clone(),
            tags: model.tags.clone(),
            model,
            origin: Origin::of(&it.node, it.path),
        })
    }

    /// A user builder, kept as declared (its Okta values are not opened).
    pub(super) fn load_user_builder(&mut self, it: Item) -> Option<UserBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if !USER_BUILDER_TYPES.contains(&ty.as_str()) {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown user builder type `{ty}`"),
                format!("user builder types: {}", USER_BUILDER_TYPES.join(", ")),
            );
            return None;
        }
        let model: UserBuilderModel = self.typed(&it.node, &it.path)?;
        let missing: Vec<&str> = ["org", "team"]
            .into_iter()
            .filter(|k| ty != "posix" && it.node.get(k).is_none())
            .collect();
        if let Some(first) = missing.first() {
            self.d.error(
                &it.node.loc,
                &join_path(&it.path, first),
                format!(
                    "missing field `{}` (required by user builders of type {ty})",
                    missing.join("`, `")
                ),
            );
        }
        Some(UserBuilder {
            name: normalize_name(&name),
            display: name,
            type_: ty,
            is_default: model.is_default,
            model,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn load_storage(&mut self, mut it: Item) -> Option<Storage> {
        let (name, _) = self.head(&it.node, &it.path, false)?;
        it.node.remove("undeclare");
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let model: StorageModel = self.typed(&it.node, &it.path)?;
        Some(Storage {
            name: normalize_name(&name),
            display: name,
            builder: String::new(),
            builder_type: String::new(),
            storage_type: String::new(),
            runtime: String::new(),
            groups: Vec::new(),
            public_read: model.public_read,
            share_mode: String::new(),
            requested: model.state,
            attach: Attach::Many,
            posix: false,
            supports_archive: false,
            size_gb: model.size,
            bucket_name: model.bucket_name.clone(),
            availability_zone: model.availability_zone.clone(),
            lifecycle: model.lifecycle.clone(),
            config: model.config.clone(),
            tags: model.tags.clone(),
            model,
            origin: Origin::of(&it.node, it.path),
        })
    }

    /// A user, kept as declared: its name may be an `ENC[age:...]` marker.
    pub(super) fn load_user(&mut self, it: Item) -> Option<User> {
        if let Some(a) = it.node.get("aliases") {
            self.d.error(
                &a.loc,
                &join_path(&it.path, "aliases"),
                "`aliases` is refused on a user (a user is named once)",
            );
            return None;
        }
        let model: UserModel = self.typed(&it.node, &it.path)?;
        let origin = Origin::of(&it.node, it.path);
        let mut ok = true;
        for (k, v) in [
            ("name", &model.name),
            ("first_name", &model.first_name),
            ("last_name", &model.last_name),
        ] {
            if v.trim().is_empty() {
                self.d.error(
                    origin.field(k),
                    &join_path(&origin.path, k),
                    format!("`{k}` may not be blank"),
                );
                ok = false;
            }
        }
        let uid = model
            .uid
            .or_else(|| model.attributes.as_ref().and_then(|a| a.unix_uid));
        ok.then(|| User {
            name: model.name.trim().to_string(),
            first_name: model.first_name.clone(),
            last_name: model.last_name.clone(),
            email: model.email.clone(),
            uid,
            public_keys: model.public_keys.clone(),
            builder: None,
            model,
            origin,
        })
    }

    pub(super) fn load_instance(&mut self, mut it: Item) -> Option<Declaration> {
        let (name, _) = self.head(&it.node, &it.path, false)?;
        if let Some(g) = it.node.get("groups") {
            self.d.error_hint(
                &g.loc,
                &join_path(&it.path, "groups"),
                "`groups` is refused on an instance: an instance belongs to its image's group",
                "set `group:` on the image the instance boots",
            );
            return None;
        }
        if let Some(p) = hostname_problem(&name) {
            let n = it.node.get("name").expect("name");
            self.d.error(&n.loc, &join_path(&it.path, "name"), p);
            return None;
        }
        it.node.remove("undeclare");
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &["userdata"], false);
        let model: InstanceModel = self.typed(&it.node, &it.path)?;
        let anodes: &[Node] = it
            .node
            .get("storages")
            .and_then(|s| s.as_seq())
            .unwrap_or(&[]);
        let attach = (0..model.storages.len())
            .map(|i| {
                Origin::of(
                    anodes.get(i).unwrap_or(&it.node),
                    format!("{}.storages[{i}]", it.path),
                )
            })
            .collect();
        let instance = Instance {
            name,
            image: String::new(),
            group: String::new(),
            builder: String::new(),
            builder_type: String::new(),
            runtime: String::new(),
            machine_type: None,
            mounts: Vec::new(),
            ephemeral: model.ephemeral,
            on_failure: OnFailure::Teardown,
            teardown_after: None,
            image_policy: model.image_policy,
            availability_zone: model.availability_zone.clone(),
            userdata: model.userdata.clone(),
            tags: model.tags.clone(),
            model,
            origin: Origin::of(&it.node, it.path),
        };
        Some(Declaration { instance, attach })
    }
}

// -- resolution ------------------------------------------------------------

/// The names (normalised, with aliases) of what csis does not run.
#[derive(Default)]
struct Unused {
    instance_builders: HashSet<String>,
    storages: HashSet<String>,
    /// Refused already (reported once).
    refused: Refused,
}

impl Loader<'_> {
    /// Resolve the fleet into `t`: builders, storages, users, instances,
    /// in that order (each reads the ones before).
    pub(super) fn resolve_fleet(&mut self, t: &mut Tree, fleet: Fleet) {
        let mut unused = Unused {
            refused: fleet.refused,
            ..Default::default()
        };
        self.resolve_instance_builders(t, fleet.instance_builders, &mut unused);
        t.user_builders_by_name = self.index_of(&fleet.user_builders);
        t.user_builders = fleet.user_builders;
        self.resolve_storages(t, fleet.storages, &mut unused);
        self.resolve_users(t, fleet.users);
        self.check_group_members(t);
        self.resolve_instances(t, fleet.instances, &unused);
    }

    /// An index of `items` whose names were already checked (no second
    /// report of a duplicate).
    fn quiet_index_of<T: Declared>(&mut self, items: &[T]) -> Index {
        let saved = std::mem::take(&mut self.d);
        let ix = self.index_of(items);
        self.d = saved;
        ix
    }

    fn count_unused(&mut self, what: &str, place: &str) {
        match self.unused.iter_mut().find(|u| u.what == what) {
            Some(u) => u.count += 1,
            None => self.unused.push(UnusedSection {
                what: what.into(),
                count: 1,
                place: place.into(),
            }),
        }
    }

    fn resolve_instance_builders(
        &mut self,
        t: &mut Tree,
        mut builders: Vec<InstanceBuilder>,
        unused: &mut Unused,
    ) {
        let _ = self.index_of(&builders);
        let mut keep = Vec::new();
        for mut b in builders.drain(..) {
            match self.instance_builder_runtime(t, &b) {
                Ok(Some(rt)) => {
                    b.runtime = rt;
                    keep.push(b);
                }
                Ok(None) => {
                    self.count_unused("gcloud instance builders", "cfg/");
                    let names = std::iter::once(&b.display).chain(b.model.aliases.iter());
                    unused
                        .instance_builders
                        .extend(names.map(|n| normalize_name(n)));
                    if b.is_default {
                        unused.instance_builders.insert("default".into());
                    }
                }
                Err(()) => {
                    let names = std::iter::once(&b.display).chain(b.model.aliases.iter());
                    let refused = &mut unused.refused.instance_builders;
                    refused.extend(names.map(|n| normalize_name(n)));
                    if b.is_default {
                        refused.insert("default".into());
                    }
                }
            }
        }
        t.instance_builders_by_name = self.quiet_index_of(&keep);
        t.instance_builders = keep;
    }

    /// The canonical runtime of an instance builder; None when it is a
    /// runtime csis does not run (gcloud); Err when refused (reported).
    fn instance_builder_runtime(
        &mut self,
        t: &Tree,
        b: &InstanceBuilder,
    ) -> Result<Option<String>, ()> {
        let o = &b.origin;
        let path = join_path(&o.path, "runtime");
        let rname = b.model.runtime.clone().unwrap_or_else(|| "default".into());
        let want = instance_type(&b.type_)
            .map(|k| k.runtime_type)
            .unwrap_or("");
        if let Some(e) = &b.executable {
            if t.executable(e).is_none() {
                self.d.error_hint(
                    o.field("executable"),
                    &join_path(&o.path, "executable"),
                    format!("executable `{e}` names no declared executable"),
                    known(
                        "executables",
                        t.executables.iter().map(|x| x.model.name.as_str()),
                    ),
                );
            }
        }
        let Some(rt) = t.runtime(&rname) else {
            if self.unused_runtimes.contains(&normalize_name(&rname))
                || UNUSED_RUNTIME_TYPES.contains(&want)
            {
                return Ok(None);
            }
            self.d.error_hint(
                o.field("runtime"),
                &path,
                format!("runtime `{rname}` names no declared runtime"),
                known("runtimes", t.runtimes.iter().map(|r| r.display.as_str())),
            );
            return Err(());
        };
        if rt.type_name() == want || rt.kind.model().simulates_any {
            return Ok(Some(rt.name.clone()));
        }
        self.d.error_hint(
            o.field("runtime"),
            &path,
            format!(
                "instance builder `{}` of type {} cannot run on {} runtime {}: it needs {} {want} runtime",
                b.display,
                b.type_,
                rt.type_name(),
                rt.display,
                article(want),
            ),
            "instance builder types: docker on docker, tofu on aws, tofu-gce on gcloud",
        );
        Err(())
    }

    /// The `tags` of a docker instance or volume become its labels: a key
    /// of csis's own (`csis_...`), which csis's label would overwrite, is
    /// refused at the `tags` line. (A sealed value is written as its
    /// token, as on every label and cloud tag.)
    pub(super) fn refuse_label_tags(
        &mut self,
        o: &Origin,
        tags: &indexmap::IndexMap<String, String>,
        what: &str,
        kind: &str,
    ) {
        let prefix = csis_schema::tags::PREFIX;
        for k in tags.keys().filter(|k| k.starts_with(prefix)) {
            self.d.error_hint(
                o.field("tags"),
                &join_path(&join_path(&o.path, "tags"), k),
                format!("{what}: tag `{k}` is a name csis labels the {kind} with itself"),
                format!("rename the tag: names starting with `{prefix}` are csis's"),
            );
        }
    }

    fn resolve_users(&mut self, t: &mut Tree, mut users: Vec<User>) {
        let mut names: HashMap<String, Origin> = HashMap::new();
        let mut uids: HashMap<u32, Origin> = HashMap::new();
        for u in &mut users {
            let o = u.origin.clone();
            if !crate::crypt::contains_marker(&u.name) {
                if let Some(prev) = names.insert(u.name.clone(), o.clone()) {
                    self.d.error_hint(
                        o.field("name"),
                        &join_path(&o.path, "name"),
                        format!("duplicate user name `{}`", u.name),
                        format!("already declared at {}", prev.display()),
                    );
                }
            }
            if let Some(uid) = u.uid {
                let field = if u.model.uid.is_some() {
                    "uid"
                } else {
                    "attributes"
                };
                let (at, path) = (o.field(field), join_path(&o.path, field));
                if uid < 1024 {
                    self.d.error(
                        at,
                        &path,
                        format!("uid {uid} is below 1024 (the system range)"),
                    );
                } else if let Some(prev) = uids.insert(uid, o.clone()) {
                    self.d.error_hint(
                        at,
                        &path,
                        format!("uid {uid} is already the uid of another user"),
                        format!("that user is at {}", prev.display()),
                    );
                }
            }
            u.builder = self.user_builder_of(t, u);
        }
        t.users = users;
    }

    /// The canonical user builder of a user (None: the tree declares none).
    fn user_builder_of(&mut self, t: &Tree, u: &User) -> Option<String> {
        let ty = u.model.type_.clone().unwrap_or_else(|| "default".into());
        if let Some(b) = t.user_builder(&ty) {
            return Some(b.name.clone());
        }
        let default = normalize_name(&ty) == "default";
        if default && t.user_builders.is_empty() {
            return None;
        }
        self.d.error_hint(
            u.origin.field("type"),
            &join_path(&u.origin.path, "type"),
            if default {
                "this user has no type and the tree declares no default user builder".to_string()
            } else {
                format!("type `{ty}` names no declared user builder")
            },
            known(
                "user builders",
                t.user_builders.iter().map(|b| b.display.as_str()),
            ),
        );
        None
    }

    /// Members and admins are declared users; gids are unique. A name
    /// kept as an `ENC[...]` marker is compared by no one: when any user
    /// name is encrypted, members are not checked against them.
    fn check_group_members(&mut self, t: &Tree) {
        let plain: HashSet<&str> = t.users.iter().map(|u| u.name.as_str()).collect();
        let any_sealed = t
            .users
            .iter()
            .any(|u| crate::crypt::contains_marker(&u.name));
        let mut gids: HashMap<u32, &str> = HashMap::new();
        for g in &t.groups {
            let o = &g.origin;
            for (k, list) in [("members", &g.model.members), ("admins", &g.model.admins)] {
                for (i, m) in list.iter().enumerate() {
                    let m = m.trim();
                    if any_sealed || crate::crypt::contains_marker(m) || plain.contains(m) {
                        continue;
                    }
                    self.d.error_hint(
                        o.item(k, i),
                        &format!("{}[{i}]", join_path(&o.path, k)),
                        format!(
                            "`{m}` in {k} of group `{}` is not a declared user",
                            g.display
                        ),
                        "declare it under `users:` in groups/",
                    );
                }
            }
            let gid = g
                .model
                .gid
                .or_else(|| g.model.attributes.as_ref().and_then(|a| a.unix_gid));
            if let Some(gid) = gid {
                if let Some(prev) = gids.insert(gid, &g.display) {
                    let field = if g.model.gid.is_some() {
                        "gid"
                    } else {
                        "attributes"
                    };
                    self.d.error(
                        o.field(field),
                        &join_path(&o.path, field),
                        format!("gid {gid} is already the gid of group `{prev}`"),
                    );
                }
            }
        }
    }
}
