//! OS builders (`os_builders:`): templates with the builder as `this` and
//! each runtime entry as its own `this`, the strict model, the update
//! policy and the admin keys checked.

use super::{glob_match, Item, Loader};
use crate::template;
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::yaml::{join_path, Node, Value};

impl Loader<'_> {
    pub(super) fn load_os_builder(&mut self, mut it: Item, config: &IaConfig) -> Option<OsBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if !OS_TYPES.contains(&ty.as_str()) {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown OS builder type `{ty}`"),
                format!("OS builder types: {}", OS_TYPES.join(", ")),
            );
            return None;
        }
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_os_builder(&mut it);
        if let Some(u) = it.node.get("update") {
            if u.as_str().is_some() {
                self.d.error_hint(
                    &u.loc,
                    &join_path(&it.path, "update"),
                    "a bare update policy name is refused",
                    format!(
                        "write a mapping: `update: {{policy: {}}}`",
                        u.as_str().unwrap_or("")
                    ),
                );
                return None;
            }
        }
        let model: OsBuilderModel = self.typed(&it.node, &it.path)?;
        self.check_os_fields(&it, &model);
        let admin_public_keys = match &model.admin_public_keys {
            Some(k) => {
                self.check_admin_keys(&it, &k.0);
                k.0.clone()
            }
            None => config.config.admin_public_keys.0.clone(),
        };
        let rnodes: &[Node] = it
            .node
            .get("runtimes")
            .and_then(|r| r.as_seq())
            .unwrap_or(&[]);
        let runtimes = model
            .runtimes
            .iter()
            .enumerate()
            .map(|(i, e)| OsRuntime {
                entry: e.clone(),
                label: e.name.clone().unwrap_or_else(|| e.image_builder.clone()),
                image_builder: None,
                runtime: None,
                origin: Origin::of(
                    rnodes.get(i).unwrap_or(&it.node),
                    format!("{}.runtimes[{i}]", it.path),
                ),
            })
            .collect();
        Some(OsBuilder {
            name: normalize_name(&name),
            display: name,
            model,
            runtimes,
            admin_public_keys,
            origin: Origin::of(&it.node, it.path),
        })
    }

    /// Templates: the builder sees itself as `this`; each runtime entry sees
    /// itself as `this`, the builder as `this.parent`, and its own `config`.
    fn render_os_builder(&mut self, it: &mut Item) {
        let runtimes_node = it.node.remove("runtimes");
        self.render_this(&mut it.node, &it.path, &[], false);
        if let Some(mut rn) = runtimes_node {
            if let Value::Seq(entries) = &mut rn.value {
                for (i, e) in entries.iter_mut().enumerate() {
                    if !e.any_str(&template::is_template) {
                        continue;
                    }
                    let p = format!("{}.runtimes[{i}]", it.path);
                    let mut with_parent = e.clone();
                    with_parent.set("parent", it.node.clone());
                    let thisv = template::to_value(&with_parent);
                    let cfgv = template::to_value(
                        &e.get("config")
                            .cloned()
                            .unwrap_or(Node::new(Value::Map(vec![]), e.loc.clone())),
                    );
                    self.render(e, &p, &[("this", &thisv), ("config", &cfgv)], &[]);
                }
            }
            it.node.set("runtimes", rn);
        }
    }

    /// An OS builder's own fields: a family (rhel's versions), an admin
    /// user, a runtime entry, a sound update policy.
    fn check_os_fields(&mut self, it: &Item, model: &OsBuilderModel) {
        let at = |k: &str| {
            it.node
                .get(k)
                .map(|n| n.loc.clone())
                .unwrap_or(it.node.loc.clone())
        };
        if model.family.trim().is_empty() {
            self.d.error(
                &at("family"),
                &join_path(&it.path, "family"),
                "family may not be empty",
            );
        }
        if model.family == "rhel" && !["8", "9", "10"].contains(&model.family_version.trim()) {
            self.d.error(
                &at("family_version"),
                &join_path(&it.path, "family_version"),
                format!(
                    "rhel accepts family_version 8, 9 or 10, not `{}`",
                    model.family_version
                ),
            );
        }
        if model.admin_user.trim().is_empty() {
            self.d.error(
                &at("admin_user"),
                &join_path(&it.path, "admin_user"),
                "admin_user may not be empty (a mandatory local admin user)",
            );
        }
        if model.runtimes.is_empty() {
            self.d.error_hint(
                &it.node.loc,
                &join_path(&it.path, "runtimes"),
                "an OS builder needs at least one runtime entry",
                "add `runtimes: [{image_builder: <name>}]`",
            );
        }
        self.check_update(it, model);
    }

    fn check_update(&mut self, it: &Item, model: &OsBuilderModel) {
        let at = |k: &str| {
            it.node
                .get(k)
                .map(|n| n.loc.clone())
                .unwrap_or(it.node.loc.clone())
        };
        if let Some(u) = &model.update {
            let up = join_path(&it.path, "update");
            let ul = at("update");
            if u.policy == UpdatePolicyKind::Packages && u.packages.is_empty() && u.pin.is_empty() {
                self.d
                    .error(&ul, &up, "policy `packages` needs `packages` and/or `pin`");
            }
            for p in &u.packages {
                if u.exclude.iter().any(|g| glob_match(g, p)) {
                    self.d.error(
                        &ul,
                        &up,
                        format!("package `{p}` is both in `packages` and excluded"),
                    );
                }
            }
            for (k, v) in &u.pin {
                if v.trim().is_empty() || v.contains(char::is_whitespace) {
                    self.d.error(
                        &ul,
                        &format!("{up}.pin.{k}"),
                        format!("pin of `{k}` needs a version without spaces"),
                    );
                }
            }
            if u.refresh_days == Some(0) {
                self.d.error(
                    &ul,
                    &format!("{up}.refresh_days"),
                    "refresh_days must be positive",
                );
            }
        }
    }

    /// Each admin public key of an OS builder: a public key, never
    /// private key material.
    fn check_admin_keys(&mut self, it: &Item, keys: &[String]) {
        let keys_node = it.node.get("admin_public_keys");
        for (i, key) in keys.iter().enumerate() {
            let l = keys_node
                .and_then(|n| n.as_seq().and_then(|s| s.get(i)).or(Some(n)))
                .map(|n| n.loc.clone())
                .unwrap_or(it.node.loc.clone());
            let at = format!("{}.admin_public_keys[{i}]", it.path);
            self.check_admin_key(
                &l,
                &at,
                key,
                "put the PUBLIC key here and keep the private key out of the tree",
            );
        }
    }
}
