//! Resolution of the series: an OS builder's runtime entries, an image's
//! parent, primary builder, runtime entries and modifications (each
//! checked against its mod builder's kind).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{is_absent, known, Loader};
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::yaml::join_path;

impl Loader<'_> {
    /// Each OS builder's runtime entries: their image builder and runtime, no
    /// builder twice, no label twice, what a docker daemon can answer; and
    /// someone must be able to reach its machines (N9).
    pub(super) fn resolve_os_builders(&mut self, t: &mut Tree) {
        for i in 0..t.os_builders.len() {
            let mut seen_ib: HashMap<String, usize> = HashMap::new();
            let mut seen_label: HashSet<String> = HashSet::new();
            let os_path = t.os_builders[i].origin.path.clone();
            for j in 0..t.os_builders[i].runtimes.len() {
                let e = &t.os_builders[i].runtimes[j];
                let path = e.origin.path.clone();
                let o = e.origin.clone();
                let ibn = e.entry.image_builder.clone();
                let (ib, rt) = self.resolve_builder_ref(t, &ibn, &o);
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
                    let runtime_type = r.type_name();
                    self.check_base_entry(t, &t.os_builders[i], e, runtime_type);
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
    }

    /// Each image's parent (`source_image`: an image, else an OS builder, else
    /// the default OS builder), its primary image builder, its runtime entries
    /// and its modifications (their mod builder, checked against its kind);
    /// but not the images `kept` says came resolved (empty: none did).
    pub(super) fn resolve_images(&mut self, t: &mut Tree, kept: &[bool]) {
        for i in 0..t.images.len() {
            if kept.get(i).copied().unwrap_or(false) {
                continue;
            }
            // borrowed, not copied: every image is resolved at every load
            let img = &t.images[i];
            let path = &img.origin.path;
            let o = &img.origin;
            let src = &img.model.source_image;
            let parent = if is_absent(src) {
                match t.os_builders_by_name.default {
                    Some(o) => Some(Parent::Os(t.os_builders[o].name.clone())),
                    None => {
                        self.d.error_hint(
                            o.field("source_image"),
                            &join_path(path, "source_image"),
                            "`source_image: default` but no OS builder has is_default: true",
                            "name the OS builder or image this image is built from",
                        );
                        None
                    }
                }
            } else if let Some(j) = t.images_by_name.get(src) {
                if j == i {
                    self.d.error(
                        o.field("source_image"),
                        &join_path(path, "source_image"),
                        format!("image `{}` is its own source_image", img.display),
                    );
                    None
                } else {
                    Some(Parent::Image(t.images[j].name.clone()))
                }
            } else if let Some(o) = t.os_builders_by_name.get(src) {
                Some(Parent::Os(t.os_builders[o].name.clone()))
            } else {
                let mut names: Vec<&str> =
                    t.os_builders.iter().map(|o| o.display.as_str()).collect();
                names.extend(t.images.iter().take(20).map(|i| i.display.as_str()));
                self.d.error_hint(
                    o.field("source_image"),
                    &join_path(path, "source_image"),
                    format!("source_image `{src}` names no OS builder or image"),
                    known("OS builders and images", names.into_iter()),
                );
                None
            };
            let ty = &img.model.type_;
            let primary = match t.image_builders_by_name.get(ty) {
                Some(b) => Some(t.image_builders[b].name.clone()),
                None if self.unused_image_builders.contains(&normalize_name(ty)) => None,
                None if is_absent(ty) => None,
                None => {
                    self.d.error_hint(
                        o.field("type"),
                        &join_path(path, "type"),
                        format!("image builder `{ty}` is not declared"),
                        known(
                            "image builders",
                            t.image_builders.iter().map(|b| b.display.as_str()),
                        ),
                    );
                    None
                }
            };
            // a few runtimes and mods per image: their duplicates found by
            // a scan of those before
            let mut resolved_rt: Vec<(Option<String>, Option<String>)> =
                Vec::with_capacity(img.runtimes.len());
            for e in &img.runtimes {
                let (ib, rt) = self.resolve_builder_ref(t, &e.entry.image_builder, &e.origin);
                if let Some(b) = &ib {
                    if let Some(prev) = resolved_rt.iter().rposition(|(x, _)| x.as_ref() == Some(b))
                    {
                        self.d.error(e.origin.field("image_builder"), &join_path(&e.origin.path, "image_builder"), format!("image builder `{}` appears twice in runtimes (also runtimes[{prev}])", e.entry.image_builder));
                    }
                }
                resolved_rt.push((ib, rt));
            }
            let mut resolved_mods = Vec::with_capacity(img.mods.len());
            let mut mod_names: Vec<String> = Vec::with_capacity(img.mods.len());
            for m in &img.mods {
                let mp = &m.origin.path;
                let name = normalize_name(&m.item.name);
                let dup = mod_names.iter().rposition(|n| *n == name);
                mod_names.push(name);
                if let Some(prev) = dup {
                    self.d.error(
                        m.origin.field("name"),
                        &join_path(mp, "name"),
                        format!(
                            "duplicate modification name `{}` (also modifications[{prev}])",
                            m.item.name
                        ),
                    );
                }
                let r = match t.mod_builders_by_name.get(&m.item.type_) {
                    Some(b) => Some((t.mod_builders[b].name.clone(), t.mod_builders[b].kind)),
                    None => {
                        if is_absent(&m.item.type_) {
                            self.d.error_hint(m.origin.field("type"), &join_path(mp, "type"), "this modification names no type and no mod builder has is_default: true", "name the mod builder (`type: <name>`), or mark one is_default: true");
                        } else {
                            self.d.error_hint(
                                m.origin.field("type"),
                                &join_path(mp, "type"),
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
                    self.check_mod(&m.item, *kind, &m.origin, mp);
                }
                resolved_mods.push(r);
            }
            let img = Arc::make_mut(&mut t.images[i]);
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
    }

    pub(super) fn check_mod(&mut self, m: &ModItem, kind: ModKind, origin: &Origin, path: &str) {
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
