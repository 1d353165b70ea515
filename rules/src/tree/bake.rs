//! What a bake of an image or base image takes from the tree, beyond its
//! entries: the capability stamp of its chain, the bake user, disk and
//! machine type, retention, tags, vendor owners and query, the content
//! inputs of its mods, the in-bake assertions and post-bake tests.

use super::*;

fn names_user(s: Option<&str>) -> Option<String> {
    match s {
        Some(u) if !u.trim().is_empty() && !u.trim().eq_ignore_ascii_case("default") => {
            Some(u.trim().to_string())
        }
        _ => None,
    }
}

const DEFAULT_DISK_GB: u32 = 200;

impl Tree {
    /// The capabilities of the chain root (N24).
    pub fn capability_stamp(&self, image: &Image) -> CapabilityStamp {
        let root = self.chain_root(image);
        CapabilityStamp {
            identity_types: root
                .map(|o| o.model.identity_types.clone())
                .unwrap_or_default(),
            storage_types: root
                .map(|o| o.model.storage_types.clone())
                .unwrap_or_default(),
        }
    }

    /// Capability stamp of a base image.
    pub fn os_capability_stamp(&self, os: &OsBuilder) -> CapabilityStamp {
        CapabilityStamp {
            identity_types: os.model.identity_types.clone(),
            storage_types: os.model.storage_types.clone(),
        }
    }

    /// The bake user of an image on one of its runtime entries (config.md §F):
    /// image entry `ssh_username`, chain root's entry on the same runtime,
    /// OS `config_username`, runtime `ssh_username`, runtime
    /// `default_config_username`, family default.
    pub fn image_bake_user(&self, image: &Image, entry: &ImageRuntime) -> Option<String> {
        let rt = entry.runtime.as_deref().and_then(|r| self.runtime(r))?;
        let root = self.chain_root(image)?;
        names_user(Some(&entry.entry.ssh_username))
            .or_else(|| {
                root.runtime_entry(&rt.name)
                    .and_then(|e| names_user(Some(&e.entry.ssh_username)))
            })
            .or_else(|| self.bake_user_tail(root, rt))
    }

    /// The bake user of a base image on one of its runtime entries.
    pub fn os_bake_user(&self, os: &OsBuilder, entry: &OsRuntime) -> Option<String> {
        let rt = entry.runtime.as_deref().and_then(|r| self.runtime(r))?;
        names_user(Some(&entry.entry.ssh_username)).or_else(|| self.bake_user_tail(os, rt))
    }

    fn bake_user_tail(&self, os: &OsBuilder, rt: &RuntimeEntry) -> Option<String> {
        names_user(os.model.config_username.as_deref())
            .or_else(|| names_user(Some(&rt.common.ssh_username)))
            .or_else(|| names_user(rt.common.default_config_username.as_deref()))
            .or_else(|| Some((rt.kind.model().default_user)(&os.model).to_string()))
    }

    /// The bake disk of an image: its `primary_disk_size`, else the chain
    /// root's `default_primary_disk_size`, else 200 GB.
    pub fn image_disk_size(&self, image: &Image) -> u32 {
        image
            .model
            .primary_disk_size
            .and_then(IntOrDefault::get)
            .or_else(|| {
                self.chain_root(image)
                    .and_then(|o| o.model.default_primary_disk_size.get())
            })
            .unwrap_or(DEFAULT_DISK_GB)
    }

    /// The bake disk of a base image on a runtime entry: the entry's
    /// `default_primary_disk_size`, else the builder's, else 200 GB.
    pub fn os_disk_size(&self, os: &OsBuilder, entry: &OsRuntime) -> u32 {
        entry
            .entry
            .default_primary_disk_size
            .and_then(IntOrDefault::get)
            .or_else(|| os.model.default_primary_disk_size.get())
            .unwrap_or(DEFAULT_DISK_GB)
    }

    /// The bake machine type of an image entry: the entry's `machine_type`,
    /// the image builder's `default_machine_type`, the runtime's.
    pub fn image_machine_type(&self, entry: &ImageRuntime) -> Option<String> {
        names_user(entry.entry.machine_type.as_deref())
            .or_else(|| self.builder_machine_type(entry.image_builder.as_deref()))
    }

    /// The bake machine type of a base image entry.
    pub fn os_machine_type(&self, entry: &OsRuntime) -> Option<String> {
        names_user(entry.entry.default_machine_type.as_deref())
            .or_else(|| self.builder_machine_type(entry.image_builder.as_deref()))
    }

    fn builder_machine_type(&self, ib: Option<&str>) -> Option<String> {
        let ib = self.image_builder(ib?)?;
        names_user(Some(&ib.model.default_machine_type)).or_else(|| {
            self.runtime(&ib.runtime)
                .map(|r| r.common.default_machine_type.clone())
        })
    }

    /// Builds kept per series of `image` on `runtime` (None = keep all).
    pub fn retention_keep(&self, image: &Image, runtime: &str) -> Option<u32> {
        image
            .model
            .retention
            .as_ref()
            .map(|r| r.keep)
            .or_else(|| self.runtime(runtime).and_then(|r| r.common.retention_keep))
    }

    /// The tags of a bake: runtime tags, image builder tags, image (or OS)
    /// tags, entry tags, later wins; a value from `ENC[...]` or `{{ ENV }}`
    /// as its token (see [`secret_tags_as_tokens`]).
    pub fn image_tags(
        &self,
        image: &Image,
        entry: &ImageRuntime,
    ) -> indexmap::IndexMap<String, String> {
        self.bake_tags(
            entry.runtime.as_deref(),
            entry.image_builder.as_deref(),
            [&image.model.tags, &entry.entry.tags],
        )
    }

    /// The keys of [`Tree::image_tags`], in its order, without making
    /// the values (the offline checks of every image read the keys alone).
    pub fn image_tag_keys(&self, image: &Image, entry: &ImageRuntime) -> Vec<String> {
        let mut keys: indexmap::IndexSet<&str> = indexmap::IndexSet::new();
        for level in self.tag_levels(
            entry.runtime.as_deref(),
            entry.image_builder.as_deref(),
            [&image.model.tags, &entry.entry.tags],
        ) {
            keys.extend(level.keys().map(String::as_str));
        }
        if !csis_schema::secret::any() {
            return keys.into_iter().map(str::to_string).collect();
        }
        // as secret_tags_as_tokens: each key as its token, the first of
        // equal tokens keeping its place
        let tokens: indexmap::IndexSet<String> = keys
            .into_iter()
            .map(|k| csis_schema::secret::redact(k).into_owned())
            .collect();
        tokens.into_iter().collect()
    }

    /// Where a bake's tags come from, in order (later keys win): its
    /// runtime's, its image builder's, then `own` (the series', its runtime
    /// entry's).
    fn tag_levels<'a>(
        &'a self,
        runtime: Option<&str>,
        image_builder: Option<&str>,
        own: [&'a indexmap::IndexMap<String, String>; 2],
    ) -> impl Iterator<Item = &'a indexmap::IndexMap<String, String>> {
        let rt = runtime
            .and_then(|r| self.runtime(r))
            .map(|r| &r.common.tags);
        let ib = image_builder
            .and_then(|b| self.image_builder(b))
            .map(|b| &b.model.tags);
        rt.into_iter().chain(ib).chain(own)
    }

    /// A bake's tags ([`Tree::tag_levels`], later keys winning); secret
    /// values as their tokens.
    fn bake_tags(
        &self,
        runtime: Option<&str>,
        image_builder: Option<&str>,
        own: [&indexmap::IndexMap<String, String>; 2],
    ) -> indexmap::IndexMap<String, String> {
        let mut t = indexmap::IndexMap::new();
        for level in self.tag_levels(runtime, image_builder, own) {
            t.extend(level.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        secret_tags_as_tokens(t)
    }

    /// The tags of a base bake (runtime, builder, OS, entry).
    pub fn os_tags(&self, os: &OsBuilder, entry: &OsRuntime) -> indexmap::IndexMap<String, String> {
        self.bake_tags(
            entry.runtime.as_deref(),
            entry.image_builder.as_deref(),
            [&os.model.tags, &entry.entry.tags],
        )
    }

    /// The vendor-image owners of a base entry: OS owners, the runtime's
    /// `default_owners`, the entry's own, deduplicated in order.
    pub fn os_owners(&self, os: &OsBuilder, entry: &OsRuntime) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let rt_owners = entry
            .runtime
            .as_deref()
            .and_then(|r| self.runtime(r))
            .and_then(|r| r.common.default_owners.clone())
            .unwrap_or_default();
        for o in os
            .model
            .owners
            .iter()
            .chain(rt_owners.iter())
            .chain(entry.entry.owners.iter())
        {
            if !out.contains(o) {
                out.push(o.clone());
            }
        }
        out
    }

    /// The vendor query of a base entry: the builder's `query` merged with the
    /// entry's, key by key (one level into `filters`).
    pub fn os_query(&self, os: &OsBuilder, entry: &OsRuntime) -> JsonMap {
        let mut q = os.model.query.clone();
        for (k, v) in &entry.entry.query {
            match (q.get_mut(k), v) {
                (Some(Json::Object(a)), Json::Object(b)) => {
                    for (k2, v2) in b {
                        a.insert(k2.clone(), v2.clone());
                    }
                }
                _ => {
                    q.insert(k.clone(), v.clone());
                }
            }
        }
        q
    }

    /// The content inputs of an image's modifications, in declared order.
    pub fn mod_inputs(&self, image: &Image) -> Vec<ModInput> {
        image
            .mods
            .iter()
            .map(|m| {
                let mb = self.mod_builder(&m.builder);
                let declared: Vec<String> = match m.kind {
                    ModKind::Ansible => m.item.playbooks.clone(),
                    ModKind::BashRemote => m.item.scripts.clone(),
                };
                ModInput {
                    name: m.item.name.clone(),
                    builder: m.builder.clone(),
                    kind: m.kind,
                    config: m.item.config.clone(),
                    files: declared.iter().map(|p| self.root.join(p)).collect(),
                    declared_files: declared,
                    inline: m.item.script.clone(),
                    ensure: m.item.ensure.clone(),
                    extra_arguments: mb
                        .map(|b| b.model.extra_arguments.clone())
                        .unwrap_or_default(),
                    environment_vars: mb
                        .map(|b| b.model.environment_vars.clone())
                        .unwrap_or_default(),
                    execute_command: mb.and_then(|b| b.model.execute_command.clone()),
                    binary: mb
                        .and_then(|b| b.executable.as_deref())
                        .and_then(|e| self.executable(e))
                        .map(|e| e.model.binary().to_string()),
                }
            })
            .collect()
    }

    /// The in-bake assertions of an image (its own `tests`, package checks
    /// for the chain root's package manager).
    pub fn image_tests(&self, image: &Image) -> Vec<InBakeTest> {
        let pm = self
            .chain_root(image)
            .map(|o| o.model.package_manager())
            .unwrap_or("dnf");
        tests_to_commands(&image.model.tests, pm)
    }

    /// The in-bake assertions of a base image on one entry: the entry's
    /// `tests` replace the builder's.
    pub fn os_tests(&self, os: &OsBuilder, entry: &OsRuntime) -> Vec<InBakeTest> {
        let t = entry.entry.tests.as_ref().unwrap_or(&os.model.tests);
        tests_to_commands(t, os.model.package_manager())
    }

    /// The post-bake tests of an image as commands (`None`: it declares
    /// no `tests.post_bake`): the same assertions as in-bake tests, for the
    /// chain root's package manager, then one per declared mount.
    pub fn post_bake_commands(&self, image: &Image) -> Option<Vec<InBakeTest>> {
        let p = self.post_bake_tests(image)?;
        let pm = self
            .chain_root(image)
            .map(|o| o.model.package_manager())
            .unwrap_or("dnf");
        let t = Tests {
            files: p.files.clone(),
            packages: p.packages.clone(),
            commands: p.commands.clone(),
            services_enabled: p.services_enabled.clone(),
            users: p.users.clone(),
            post_bake: None,
        };
        let mut out = tests_to_commands(&t, pm);
        for m in &p.mounts {
            out.push(InBakeTest {
                description: format!("{m} is mounted"),
                run: format!("grep -qF -- {} /proc/mounts", sh_quote(&format!(" {m} "))),
                expect_rc: 0,
                contains: None,
            });
        }
        Some(out)
    }

    /// The post-bake tests of an image (run by `verify instance`).
    pub fn post_bake_tests<'a>(&'a self, image: &'a Image) -> Option<&'a PostBakeTests> {
        image.model.tests.post_bake.as_ref()
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Turn declared `tests` into shell assertions.
pub fn tests_to_commands(t: &Tests, package_manager: &str) -> Vec<InBakeTest> {
    let mut out = Vec::new();
    for f in &t.files {
        out.push(InBakeTest {
            description: format!("file {} exists", f.path),
            run: format!("test -e {}", sh_quote(&f.path)),
            expect_rc: 0,
            contains: None,
        });
        if let Some(c) = &f.contains {
            out.push(InBakeTest {
                description: format!("file {} contains {c:?}", f.path),
                run: format!("grep -qF -- {} {}", sh_quote(c), sh_quote(&f.path)),
                expect_rc: 0,
                contains: None,
            });
        }
        if let Some(m) = &f.mode {
            let m = m.trim_start_matches('0');
            out.push(InBakeTest {
                description: format!("file {} has mode {m}", f.path),
                run: format!("stat -c %a {}", sh_quote(&f.path)),
                expect_rc: 0,
                contains: Some(m.to_string()),
            });
        }
    }
    for p in &t.packages {
        let run = match package_manager {
            "apt" => format!("dpkg -s {}", sh_quote(p)),
            "apk" => format!("apk info -e {}", sh_quote(p)),
            _ => format!("rpm -q {}", sh_quote(p)),
        };
        out.push(InBakeTest {
            description: format!("package {p} is installed"),
            run,
            expect_rc: 0,
            contains: None,
        });
    }
    for c in &t.commands {
        out.push(InBakeTest {
            description: format!("command `{}`", c.run),
            run: c.run.clone(),
            expect_rc: c.expect_rc.unwrap_or(0),
            contains: c.contains.clone(),
        });
    }
    for s in &t.services_enabled {
        out.push(InBakeTest {
            description: format!("service {s} is enabled"),
            run: format!("systemctl is-enabled {}", sh_quote(s)),
            expect_rc: 0,
            contains: None,
        });
    }
    for u in &t.users {
        out.push(InBakeTest {
            description: format!("user {u} exists"),
            run: format!("id -u {}", sh_quote(u)),
            expect_rc: 0,
            contains: None,
        });
    }
    out
}

/// A bake's tags with each secret (a value from `ENC[...]` or a template's
/// `ENV`) replaced by its token, `<secret:HEX16>`: tags become image labels
/// and cloud tags, which whoever can list images reads, and the state
/// report copies them. The token is the same for every run, identity and
/// tree (a secret's token everywhere), so a tag still tells two values
/// apart and moves when its value does, without showing it.
fn secret_tags_as_tokens(
    t: indexmap::IndexMap<String, String>,
) -> indexmap::IndexMap<String, String> {
    if !csis_schema::secret::any() {
        return t;
    }
    t.into_iter()
        .map(|(k, v)| {
            (
                csis_schema::secret::redact(&k).into_owned(),
                csis_schema::secret::redact(&v).into_owned(),
            )
        })
        .collect()
}
