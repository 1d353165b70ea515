//! Runtime entries (`runtime_builders:`): read into their common and
//! per-type models, and checked offline: the common fields here, the
//! type's own fields by its runtime's registered checks
//! (`offline_checks`).

use super::{Item, Loader, Which};
use crate::crypt;
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::yaml::{join_path, Node};

impl Loader<'_> {
    pub(super) fn load_runtime(&mut self, mut it: Item) -> Option<RuntimeEntry> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if UNUSED_RUNTIME_TYPES.contains(&ty.as_str()) {
            self.note_unused(&format!("{ty} runtimes"), &it.node, Which::Runtime);
            return None;
        }
        let Some(model) = type_model(&ty) else {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown runtime type `{ty}`"),
                format!(
                    "csis implements the runtime types {} ({} {} read but not used yet)",
                    and_list(RUNTIME_TYPE_MODELS.iter().map(|m| m.name)),
                    and_list(UNUSED_RUNTIME_TYPES.iter().copied()),
                    if UNUSED_RUNTIME_TYPES.len() == 1 {
                        "is"
                    } else {
                        "are"
                    },
                ),
            );
            return None;
        };
        // A runtime's profile and credentials.profile_name are read raw.
        if let Some(c) = it.node.get("credentials") {
            if let Some(p) = c.get("profile_name") {
                if p.as_str().is_some_and(crypt::contains_marker) {
                    self.d.error(
                        &p.loc,
                        &format!("{}.credentials.profile_name", it.path),
                        "`profile_name` may not be encrypted (it is read before decryption)",
                    );
                    return None;
                }
            }
        }
        self.decrypt(&mut it.node, &it.path, &["name", "type", "profile"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let common_node = it.node.filter_map(|k| RUNTIME_COMMON_KEYS.contains(&k));
        let own_node = it.node.filter_map(|k| !RUNTIME_COMMON_KEYS.contains(&k));
        let common: Option<RuntimeCommon> = self.typed(&common_node, &it.path);
        let kind = match (model.parse)(&own_node, &it.path) {
            Ok(kind) => Some(kind),
            Err(d) => {
                self.d.items.extend(d);
                None
            }
        };
        let (common, kind) = (common?, kind?);
        let origin = Origin::of(&it.node, it.path.clone());
        self.check_runtime(&it.node, &it.path, &common, &kind);
        Some(RuntimeEntry {
            name: normalize_name(&name),
            display: name,
            common,
            kind,
            state_backend: None,
            executable: None,
            origin,
        })
    }

    pub(super) fn check_runtime(
        &mut self,
        node: &Node,
        path: &str,
        common: &RuntimeCommon,
        kind: &RuntimeKind,
    ) {
        let at = |key: &str| {
            node.get(key)
                .map(|n| n.loc.clone())
                .unwrap_or(node.loc.clone())
        };
        if common.default_machine_type.trim().is_empty() {
            self.d.error(
                &at("default_machine_type"),
                &join_path(path, "default_machine_type"),
                "default_machine_type may not be empty",
            );
        }
        let model = kind.model();
        if let (Some(_), false) = (&common.teardown_after, model.delayed_teardown) {
            // only the default of its instances', which its machines do not realise
            let ty = model.name;
            self.d.error(
                &at("teardown_after"),
                &join_path(path, "teardown_after"),
                format!("`teardown_after` has no effect on {} {ty} runtime (nothing tears {} {ty} instance down after a delay): remove it", article(ty), article(ty)),
            );
        } else if let Some(t) = &common.teardown_after {
            if !super::fleet::is_duration(t) {
                self.d.error_hint(
                    &at("teardown_after"),
                    &join_path(path, "teardown_after"),
                    format!("`{t}` is not a duration"),
                    "write <number> then m, h or d (e.g. 2h)",
                );
            }
        }
        if common.max_parallel == Some(0) {
            self.d.error(
                &at("max_parallel"),
                &join_path(path, "max_parallel"),
                "max_parallel must be at least 1",
            );
        }
        self.check_runtime_entry(node, path, common, kind);
    }
}

/// `a, b and c`.
fn and_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
