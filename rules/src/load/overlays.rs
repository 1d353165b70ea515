//! Overlays (`--overlay FILE`: a mapping of `config` and collections) and
//! undeclares (`--undeclare kind:name`): read and checked once, applied to
//! the configuration and to each collection as it is read.

use super::{Item, Loader};
use crate::tree::normalize_name;
use csis_schema::diag::Diagnostic;
use csis_schema::yaml::{self, Node};

impl Loader<'_> {
    pub(super) fn read_overlays(&mut self) -> Vec<Node> {
        let mut out = Vec::new();
        for p in &self.opts.overlays {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                std::env::current_dir()
                    .map(|d| d.join(p))
                    .unwrap_or(p.clone())
            };
            if !abs.is_file() {
                self.d.push(
                    Diagnostic::plain(&p.display().to_string(), "overlay file not found")
                        .with_hint("--overlay takes a path to a YAML file"),
                );
                continue;
            }
            let node = match yaml::parse_file(&abs, &self.root) {
                Ok(n) => n,
                Err(d) => {
                    self.d.push(d);
                    continue;
                }
            };
            let Some(entries) = node.as_map() else {
                if !node.is_null() {
                    self.d.error(
                        &node.loc,
                        "",
                        "an overlay must be a mapping of `config` and/or collections",
                    );
                }
                continue;
            };
            let mut ok = true;
            for e in entries {
                if e.key == "config" {
                    if e.value.as_map().is_none() && !e.value.is_null() {
                        self.d.error(
                            &e.value.loc,
                            "config",
                            "an overlay's `config` must be a mapping",
                        );
                        ok = false;
                    }
                } else if COLLECTION_KEYS.contains(&e.key.as_str()) {
                    match e.value.as_seq() {
                        Some(items) => {
                            for (i, it) in items.iter().enumerate() {
                                if it.get("name").is_none() {
                                    self.d.error(
                                        &it.loc,
                                        &format!("{}[{i}]", e.key),
                                        "an overlay entry needs a `name`",
                                    );
                                    ok = false;
                                }
                            }
                        }
                        None if e.value.is_null() => {}
                        None => {
                            self.d.error(&e.value.loc, &e.key, "expected a list");
                            ok = false;
                        }
                    }
                } else {
                    self.d.error_hint(
                        &e.key_loc,
                        &e.key,
                        "unknown overlay key",
                        "an overlay holds only `config` and the collections users, groups, storages, images, instances, base_images",
                    );
                    ok = false;
                }
            }
            if ok {
                out.push(node);
            }
        }
        out
    }
}

/// A parsed `--undeclare kind:name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeclare {
    /// The collection key (`images`, `instances`, `storages`, `groups`, `users`, `base_images`).
    pub kind: String,
    pub name: String,
}

impl Undeclare {
    pub fn parse(s: &str) -> Result<Undeclare, String> {
        let (k, n) = s
            .split_once(':')
            .ok_or_else(|| format!("--undeclare {s}: expected kind:name (e.g. image:my-image)"))?;
        let kind = match k.trim() {
            "image" | "images" => "images",
            "instance" | "instances" => "instances",
            "storage" | "storages" => "storages",
            "group" | "groups" => "groups",
            "user" | "users" => "users",
            "base_image" | "base_images" => "base_images",
            other => {
                return Err(format!(
                    "--undeclare {s}: unknown kind `{other}` (images, instances, storages, groups, users, base_images)"
                ))
            }
        };
        if n.trim().is_empty() {
            return Err(format!("--undeclare {s}: the name is empty"));
        }
        Ok(Undeclare {
            kind: kind.into(),
            name: n.trim().to_string(),
        })
    }
}

pub(super) const COLLECTION_KEYS: &[&str] = &[
    "users",
    "groups",
    "storages",
    "images",
    "instances",
    "base_images",
];

impl Loader<'_> {
    /// Apply the overlays to a collection's items, per key: an entry of
    /// the same name merged key by key, a new name added, `undeclare: true`
    /// removing it.
    pub(super) fn apply_overlays(&mut self, out: &mut [(String, Vec<Item>)], overlays: &[Node]) {
        for o in overlays {
            for (key, items) in out.iter_mut() {
                let Some(list) = o.get(key).and_then(|l| l.as_seq()) else {
                    continue;
                };
                for (i, on) in list.iter().enumerate() {
                    let oname = normalize_name(&on.get_str("name").unwrap_or_default());
                    let undeclare = on
                        .get("undeclare")
                        .and_then(|u| u.as_bool())
                        .unwrap_or(false);
                    let pos = items.iter().position(|it| {
                        normalize_name(&it.node.get_str("name").unwrap_or_default()) == oname
                    });
                    match (pos, undeclare) {
                        (Some(p), true) => {
                            items.remove(p);
                        }
                        (None, true) => {}
                        (Some(p), false) => {
                            if let Some(m) = on.as_map() {
                                for e in m {
                                    items[p].node.set(&e.key, e.value.clone());
                                }
                            }
                        }
                        (None, false) => items.push(Item {
                            node: on.clone(),
                            path: format!("{key}[{i}]"),
                        }),
                    }
                }
            }
        }
    }

    /// Apply `--undeclare kind:name` to a collection's items; a bad
    /// argument is reported once (with the images), a name that matches
    /// nothing where its kind is read.
    pub(super) fn apply_undeclares(&mut self, out: &mut [(String, Vec<Item>)], keys: &[&str]) {
        for u in &self.opts.undeclares {
            match Undeclare::parse(u) {
                Err(e) => {
                    if keys.contains(&"images") {
                        self.d.push(Diagnostic::plain("--undeclare", e));
                    }
                }
                Ok(u) => {
                    if let Some((_, items)) = out.iter_mut().find(|(k, _)| *k == u.kind) {
                        let n = normalize_name(&u.name);
                        let before = items.len();
                        items.retain(|it| {
                            normalize_name(&it.node.get_str("name").unwrap_or_default()) != n
                        });
                        if items.len() == before {
                            self.d.push(Diagnostic::plain(
                                "--undeclare",
                                format!("nothing named `{}` in {} to undeclare", u.name, u.kind),
                            ));
                        }
                    }
                }
            }
        }
    }
}
