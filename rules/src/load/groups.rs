//! Group builders, storage builders and groups (`crate::groups`): read
//! into strict models, resolved, and checked for what a bake needs of
//! them. Nothing here is rendered, and the values only their own
//! lifecycles read stay as declared; a group's members are decrypted only
//! to be compared ([`Membership`]), never kept in clear.

use super::{known, Item, Loader};
use crate::groups::*;
use crate::tree::{normalize_name, Origin, Tree};
use csis_schema::model::article;
use csis_schema::yaml::join_path;
use std::collections::BTreeMap;

impl Loader<'_> {
    pub(super) fn load_group_builder(&mut self, mut it: Item) -> Option<GroupBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        let Some(identity_type) = identity_type_of(&ty) else {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown group builder type `{ty}`"),
                format!(
                    "group builder types: {}",
                    GROUP_BUILDER_TYPES
                        .iter()
                        .map(|(t, _)| *t)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            return None;
        };
        // `{{ this.* }}` as on every builder (`api_host:
        // "https://{{ this.org }}.pam.okta.com"`); a user's templates are
        // rendered per user, later
        self.render_this(
            &mut it.node,
            &it.path,
            &[
                "default_user_email_template",
                "default_user_description_template",
            ],
            false,
        );
        let model: GroupBuilderModel = self.typed(&it.node, &it.path)?;
        if identity_type == "posix" {
            for k in ["org", "team", "key", "secret", "posix"] {
                if let Some(n) = it.node.get(k) {
                    self.d.error(
                        &n.loc,
                        &join_path(&it.path, k),
                        format!("`{k}` does not apply to group builders of type {ty}"),
                    );
                }
            }
        } else {
            for k in ["org", "team"] {
                if it.node.get(k).is_none() {
                    self.d.error(
                        &it.node.loc,
                        &join_path(&it.path, k),
                        format!("missing field `{k}` (required by group builders of type {ty})"),
                    );
                }
            }
        }
        Some(GroupBuilder {
            name: normalize_name(&name),
            display: name,
            model,
            identity_type,
            posix: None,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn load_storage_builder(&mut self, it: Item) -> Option<StorageBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        let Some(st) = storage_type(&ty) else {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown storage builder type `{ty}`"),
                format!(
                    "storage builder types: {}",
                    STORAGE_BUILDER_TYPES
                        .iter()
                        .map(|t| t.builder_type)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            return None;
        };
        if let Some(p) = it.node.get("parameters") {
            self.d.error_hint(
                &p.loc,
                &join_path(&it.path, "parameters"),
                "`parameters` is refused on a storage builder",
                "module inputs go under `variables:`",
            );
            return None;
        }
        let model: StorageBuilderModel = self.typed(&it.node, &it.path)?;
        for own in STORAGE_OWN_FIELDS {
            if st.own.contains(own) {
                continue;
            }
            if let Some(n) = it.node.get(own) {
                self.d.error(
                    &n.loc,
                    &join_path(&it.path, own),
                    format!("`{own}` does not apply to storage builders of type {ty}"),
                );
            }
        }
        if ty == "tf-aws-s3" && model.bucket_name.is_none() {
            self.d.error(
                &it.node.loc,
                &join_path(&it.path, "bucket_name"),
                "missing field `bucket_name` (required by storage builders of type tf-aws-s3)",
            );
        }
        if let Some(vars) = it.node.get("variables").and_then(|v| v.as_map()) {
            for e in vars {
                if !st.variables.contains(&e.key.as_str()) {
                    self.d.error_hint(
                        &e.key_loc,
                        &join_path(&join_path(&it.path, "variables"), &e.key),
                        format!(
                            "unknown variable `{}` for storage builders of type {ty}",
                            e.key
                        ),
                        format!("variables of {ty}: {}", st.variables.join(", ")),
                    );
                }
            }
        }
        if st.token == "volume" {
            // its tags become the labels of every volume it makes
            let o = Origin::of(&it.node, it.path.clone());
            let what = format!("storage builder `{name}`");
            self.refuse_label_tags(&o, &model.tags, &what, "volume");
            if let Some(v) = it.node.get("variables") {
                let o = Origin::of(v, join_path(&it.path, "variables"));
                let tags = model
                    .variables
                    .get("tags")
                    .and_then(|t| t.as_object())
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| {
                                let text = v.as_str().map(str::to_string);
                                (k.clone(), text.unwrap_or_else(|| v.to_string()))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.refuse_label_tags(&o, &tags, &what, "volume");
            }
        }
        Some(StorageBuilder {
            name: normalize_name(&name),
            display: name,
            model,
            storage_type: st.token,
            runtime: None,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn load_group(&mut self, it: Item) -> Option<Group> {
        let (name, _) = self.head(&it.node, &it.path, false)?;
        let model: GroupModel = self.typed(&it.node, &it.path)?;
        if let Some(g) = model.gid {
            if g < 1024 {
                let l = it
                    .node
                    .get("gid")
                    .map(|n| n.loc.clone())
                    .unwrap_or(it.node.loc.clone());
                self.d.error(
                    &l,
                    &join_path(&it.path, "gid"),
                    format!("gid {g} is below 1024 (the system range)"),
                );
            }
        }
        Some(Group {
            name: normalize_name(&name),
            display: name,
            model,
            builder: None,
            membership: Membership::default(),
            origin: Origin::of(&it.node, it.path),
        })
    }

    /// Each group's [`Membership`]. A marker is compared by the name behind
    /// it when the tree's identity opens it, else by its text (two markers
    /// of one name then both stay).
    pub(super) fn resolve_memberships(&mut self, t: &mut Tree) {
        let sealed = t.groups.iter().any(|g| {
            (g.model.members.iter().chain(&g.model.admins)).any(|v| crate::crypt::is_marker(v))
        });
        let ids = if sealed { self.identities() } else { None };
        let name = |v: &String| match ids {
            Some(ids) if crate::crypt::is_marker(v) => ids.decrypt(v).unwrap_or_else(|_| v.clone()),
            _ => v.clone(),
        };
        let set = |v: &[String]| -> BTreeMap<String, String> {
            let mut out = BTreeMap::new();
            for x in v {
                out.entry(name(x)).or_insert_with(|| x.clone());
            }
            out
        };
        let root_admins = t
            .groups
            .iter()
            .find(|g| g.model.is_root)
            .map(|g| set(&g.model.admins))
            .unwrap_or_default();
        let all: Vec<Membership> = t
            .groups
            .iter()
            .map(|g| {
                let (mut members, mut admins) = (set(&g.model.members), set(&g.model.admins));
                match g.model.in_both {
                    Some(false) => members.retain(|n, _| !admins.contains_key(n)),
                    Some(true) => {
                        for (n, x) in &admins {
                            members.entry(n.clone()).or_insert_with(|| x.clone());
                        }
                    }
                    None => {}
                }
                if !g.model.is_root && g.model.include_root_group_in_admins {
                    for (n, x) in &root_admins {
                        admins.entry(n.clone()).or_insert_with(|| x.clone());
                    }
                }
                Membership {
                    members: members.into_values().collect(),
                    admins: admins.into_values().collect(),
                }
            })
            .collect();
        for (g, m) in t.groups.iter_mut().zip(all) {
            g.membership = m;
        }
    }

    /// Index the group builders, storage builders and groups, and resolve
    /// what they name: a group's builder, an okta builder's `posix:`, a
    /// storage builder's runtime.
    pub(super) fn resolve_groups(&mut self, t: &mut Tree) {
        t.group_builders_by_name = self.index_of(&t.group_builders);
        t.storage_builders_by_name = self.index_of(&t.storage_builders);
        t.groups_by_name = self.index_of(&t.groups);
        for i in 0..t.group_builders.len() {
            let Some(p) = t.group_builders[i].model.posix.clone() else {
                continue;
            };
            let b = &t.group_builders[i];
            match t.group_builder(&p) {
                Some(pb) if pb.identity_type == "posix" => {
                    let n = pb.name.clone();
                    t.group_builders[i].posix = Some(n);
                }
                Some(pb) => self.d.error(
                    b.origin.field("posix"),
                    &join_path(&b.origin.path, "posix"),
                    format!(
                        "`posix: {p}` names group builder `{}` of type {}, not a posix group builder",
                        pb.display, pb.model.type_
                    ),
                ),
                None => self.d.error_hint(
                    b.origin.field("posix"),
                    &join_path(&b.origin.path, "posix"),
                    format!("`posix: {p}` names no declared group builder"),
                    known(
                        "group builders",
                        t.group_builders.iter().map(|g| g.display.as_str()),
                    ),
                ),
            }
        }
        for i in 0..t.groups.len() {
            let g = &t.groups[i];
            let ty = g.model.type_.clone().unwrap_or_else(|| "default".into());
            match t.group_builder(&ty) {
                Some(b) => {
                    let n = b.name.clone();
                    t.groups[i].builder = Some(n);
                }
                None => self.d.error_hint(
                    g.origin.field("type"),
                    &join_path(&g.origin.path, "type"),
                    if normalize_name(&ty) == "default" {
                        format!(
                            "group `{}` has no type and the tree declares no default group builder",
                            g.display
                        )
                    } else {
                        format!(
                            "group `{}`: type `{ty}` names no declared group builder",
                            g.display
                        )
                    },
                    known(
                        "group builders",
                        t.group_builders.iter().map(|g| g.display.as_str()),
                    ),
                ),
            }
        }
        let roots = t.groups.iter().filter(|g| g.model.is_root).count();
        if roots > 1 {
            for g in t.groups.iter().filter(|g| g.model.is_root).skip(1) {
                self.d.error(
                    g.origin.field("is_root"),
                    &join_path(&g.origin.path, "is_root"),
                    format!(
                        "a second root group: `{}` (exactly one group is the root)",
                        g.display
                    ),
                );
            }
        }
        for i in 0..t.storage_builders.len() {
            let sb = &t.storage_builders[i];
            let rname = sb.model.runtime.clone().unwrap_or_else(|| "default".into());
            let want = storage_type(&sb.model.type_).map(|s| s.runtime_type);
            match t.runtime(&rname) {
                // a simulating runtime keeps any storage (engine tests)
                Some(rt) if Some(rt.type_name()) == want || rt.kind.model().simulates_any => {
                    let n = rt.name.clone();
                    t.storage_builders[i].runtime = Some(n);
                }
                Some(rt) => self.d.error(
                    sb.origin.field("runtime"),
                    &join_path(&sb.origin.path, "runtime"),
                    format!(
                        "storage builder `{}` of type {} cannot keep its storage on {} runtime {}: it needs {} {} runtime",
                        sb.display,
                        sb.model.type_,
                        rt.type_name(),
                        rt.display,
                        article(want.unwrap_or_default()),
                        want.unwrap_or_default()
                    ),
                ),
                // a runtime type csis does not run (gcloud): reported once as unused
                None if self.unused_runtimes.contains(&normalize_name(&rname)) => {}
                None => self.d.error_hint(
                    sb.origin.field("runtime"),
                    &join_path(&sb.origin.path, "runtime"),
                    format!("runtime `{rname}` names no declared runtime"),
                    known("runtimes", t.runtimes.iter().map(|r| r.display.as_str())),
                ),
            }
        }
    }

    /// What a bake cannot honour of an image's group: a group that is not
    /// declared, an OPA (okta) group on a docker runtime, a group whose
    /// identity type the image's base does not declare.
    pub(super) fn check_image_groups(&mut self, t: &Tree) {
        for img in &t.images {
            let Some(gname) = img.model.group.as_deref() else {
                continue;
            };
            let o = &img.origin;
            let path = join_path(&o.path, "group");
            let Some(g) = t.group(gname) else {
                self.d.error_hint(
                    o.field("group"),
                    &path,
                    format!("group `{gname}` is not declared in groups/"),
                    known("groups", t.groups.iter().map(|g| g.display.as_str())),
                );
                continue;
            };
            let Some(b) = g.builder.as_deref().and_then(|b| t.group_builder(b)) else {
                continue;
            };
            if b.identity_type == "okta" {
                for e in img.active_runtimes() {
                    let Some(rt) = e.runtime.as_deref().and_then(|r| t.runtime(r)) else {
                        continue;
                    };
                    if !rt.kind.model().opa_agent {
                        self.d.error(
                            o.field("group"),
                            &path,
                            format!(
                                "group `{}` is an OPA group (group builder `{}`, type {}), refused on {} runtime {}: a container has no OPA agent; use a posix group builder",
                                g.display, b.display, b.model.type_, rt.type_name(), rt.display
                            ),
                        );
                    }
                }
            }
            if let Some(root) = t.chain_root(img) {
                if !root
                    .model
                    .identity_types
                    .iter()
                    .any(|it| it == b.identity_type)
                {
                    self.d.error_hint(
                        o.field("group"),
                        &path,
                        format!(
                            "group `{}` is a{} {} group, but base image {} declares identity types [{}]: its activation has nothing to activate",
                            g.display,
                            if b.identity_type == "okta" { "n" } else { "" },
                            b.identity_type,
                            root.display,
                            root.model.identity_types.join(", ")
                        ),
                        format!(
                            "add `{}` to identity_types of {} ({})",
                            b.identity_type,
                            root.display,
                            root.origin.display()
                        ),
                    );
                }
            }
        }
    }
}
