//! The entries of `cfg/` other than runtimes and OS builders: executables,
//! state backends, image builders and mod builders, each read into its
//! strict model and checked; declarations of types csis reads but does
//! not implement yet are counted, and references to them are not errors.

use super::{Item, Loader};
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::yaml::{join_path, Node};

impl Loader<'_> {
    pub(super) fn load_executable(&mut self, mut it: Item) -> Option<ExecutableEntry> {
        let (name, _) = self.head(&it.node, &it.path, false)?;
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let model: Executable = self.typed(&it.node, &it.path)?;
        Some(ExecutableEntry {
            name: normalize_name(&name),
            model,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn note_unused(&mut self, what: &str, node: &Node, set: Which) {
        let mut names = vec![node.get_str("name").unwrap_or_default()];
        if let Some(a) = node.get("aliases").and_then(|a| a.as_seq()) {
            names.extend(a.iter().filter_map(|x| x.scalar_text()));
        }
        let s = match set {
            Which::Runtime => &mut self.unused_runtimes,
            Which::ImageBuilder => &mut self.unused_image_builders,
            Which::Backend => &mut self.unused_backends,
        };
        for n in names {
            s.insert(normalize_name(&n));
        }
        if let Some(u) = self.unused.iter_mut().find(|u| u.what == what) {
            u.count += 1;
        } else {
            self.unused.push(UnusedSection {
                what: what.into(),
                count: 1,
                place: "cfg/".into(),
            });
        }
    }

    pub(super) fn load_backend(&mut self, mut it: Item) -> Option<StateBackend> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if UNUSED_STATE_BACKEND_TYPES.contains(&ty.as_str()) {
            self.note_unused(&format!("{ty} state backends"), &it.node, Which::Backend);
            return None;
        }
        if ty != "s3" && ty != "local" {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown state backend type `{ty}`"),
                "csis implements s3 and local (gcs is read but not used yet)",
            );
            return None;
        }
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let common: Option<BuilderCommon> = self.typed(
            &it.node.filter_map(|k| BUILDER_COMMON_KEYS.contains(&k)),
            &it.path,
        );
        let own = it.node.filter_map(|k| !BUILDER_COMMON_KEYS.contains(&k));
        let kind = if ty == "s3" {
            self.typed::<S3Backend>(&own, &it.path)
                .map(StateBackendKind::S3)
        } else {
            self.typed::<LocalBackend>(&own, &it.path)
                .map(StateBackendKind::Local)
        };
        let (common, kind) = (common?, kind?);
        match &kind {
            StateBackendKind::S3(s) => {
                if s.key.trim().trim_matches('/').is_empty() {
                    let l = it
                        .node
                        .get("key")
                        .map(|k| k.loc.clone())
                        .unwrap_or(it.node.loc.clone());
                    self.d
                        .error(&l, &join_path(&it.path, "key"), "key may not be empty");
                }
                if s.bucket.trim().is_empty() {
                    let l = it
                        .node
                        .get("bucket")
                        .map(|k| k.loc.clone())
                        .unwrap_or(it.node.loc.clone());
                    self.d.error(
                        &l,
                        &join_path(&it.path, "bucket"),
                        "bucket may not be empty",
                    );
                }
            }
            StateBackendKind::Local(lb) => {
                let p = lb.path.trim();
                if p == "/" || p.split(['/', '\\']).any(|seg| seg == "." || seg == "..") {
                    let l = it
                        .node
                        .get("path")
                        .map(|k| k.loc.clone())
                        .unwrap_or(it.node.loc.clone());
                    self.d.error(
                        &l,
                        &join_path(&it.path, "path"),
                        format!("`{p}` is refused: no `.`/`..` segments and not a bare `/`"),
                    );
                }
            }
        }
        Some(StateBackend {
            name: normalize_name(&name),
            display: name,
            common,
            kind,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn load_image_builder(&mut self, mut it: Item) -> Option<ImageBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if UNUSED_IMAGE_BUILDER_TYPES.contains(&ty.as_str()) {
            self.note_unused(
                &format!("{ty} image builders"),
                &it.node,
                Which::ImageBuilder,
            );
            return None;
        }
        let Some(kind) = ImageBuilderKind::parse(&ty) else {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(&t.loc, &join_path(&it.path, "type"), format!("unknown image builder type `{ty}`"), "csis implements packer-ebs, packer-docker, docker and dummy (packer-gce is read but not used yet)");
            return None;
        };
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let model: ImageBuilderModel = self.typed(&it.node, &it.path)?;
        Some(ImageBuilder {
            name: normalize_name(&name),
            display: name,
            model,
            kind,
            runtime: String::new(),
            executable: None,
            origin: Origin::of(&it.node, it.path),
        })
    }

    pub(super) fn load_mod_builder(&mut self, mut it: Item) -> Option<ModBuilder> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        let Some(kind) = ModKind::parse(&ty) else {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown mod builder type `{ty}`"),
                "mod builder types: ansible, bash-remote",
            );
            return None;
        };
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        self.render_this(&mut it.node, &it.path, &["execute_command"], false);
        let model: ModBuilderModel = self.typed(&it.node, &it.path)?;
        let wrong: &[&str] = match kind {
            ModKind::Ansible => &["execute_command", "environment_vars"],
            ModKind::BashRemote => &["ansible_connection"],
        };
        for k in wrong {
            if let Some(n) = it.node.get(k) {
                if !n.is_null() && !n.as_seq().is_some_and(|s| s.is_empty()) {
                    self.d.error(
                        &n.loc,
                        &join_path(&it.path, k),
                        format!("`{k}` does not apply to mod builders of type {ty}"),
                    );
                }
            }
        }
        if let Some(ec) = &model.execute_command {
            if ec.contains(".Path") {
                let l = it
                    .node
                    .get("execute_command")
                    .map(|n| n.loc.clone())
                    .unwrap_or(it.node.loc.clone());
                self.d.error(&l, &join_path(&it.path, "execute_command"), "a packer `{{ .Path }}` cannot be written in cfg/ (csis supplies the script path)");
            }
        }
        self.secrets_of_mod_builder(&it, &model);
        Some(ModBuilder {
            name: normalize_name(&name),
            display: name,
            model,
            kind,
            executable: None,
            origin: Origin::of(&it.node, it.path),
        })
    }
}

impl Loader<'_> {
    /// A secret (`ENC[...]`, `{{ ENV }}`) where csis cannot keep it out of
    /// the emission is refused at its line: in `execute_command` (the
    /// command packer writes in its HCL and prints), and in
    /// `extra_arguments` anywhere but as an `-e`/`--extra-vars` value
    /// (which csis hands to ansible as a 0600 `@file`).
    fn secrets_of_mod_builder(&mut self, it: &Item, model: &ModBuilderModel) {
        use csis_schema::secret::contains;
        if model.execute_command.as_deref().is_some_and(contains) {
            let l = it
                .node
                .get("execute_command")
                .map(|n| n.loc.clone())
                .unwrap_or(it.node.loc.clone());
            self.d.error_hint(
                &l,
                &join_path(&it.path, "execute_command"),
                "`execute_command` holds a secret, which packer would write in its build file",
                "pass the secret as an `environment_vars` entry (kept in a 0600 file) and name the variable",
            );
        }
        let args = &model.extra_arguments;
        let nodes = it.node.get("extra_arguments").and_then(|n| n.as_seq());
        for (i, a) in args.iter().enumerate() {
            if !contains(a) {
                continue;
            }
            let after_flag = i > 0 && (args[i - 1] == "-e" || args[i - 1] == "--extra-vars");
            let vars = if after_flag {
                Some(a.as_str())
            } else {
                a.strip_prefix("--extra-vars=")
            };
            let ok = vars.is_some_and(|v| {
                let v = v.trim_start();
                !v.starts_with('@') && (v.starts_with(['{', '[']) || v.contains('='))
            });
            if ok {
                continue;
            }
            let l = nodes
                .and_then(|s| s.get(i))
                .map(|n| n.loc.clone())
                .unwrap_or(it.node.loc.clone());
            self.d.error_hint(
                &l,
                &format!("{}[{i}]", join_path(&it.path, "extra_arguments")),
                "this extra argument holds a secret, which packer would write in its build file",
                "a secret may be an `-e`/`--extra-vars` value (`-e`, then `key=value` or JSON): csis hands it to ansible as a 0600 file",
            );
        }
    }
}

pub(super) enum Which {
    Runtime,
    ImageBuilder,
    Backend,
}
