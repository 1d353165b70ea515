//! Instances resolved: their builder, runtime, image and group, machine
//! type and failure policy, and their mounts (a declared, active storage on
//! the same runtime that the image's group may attach, of a storage type
//! the image's base declares; a single-attach storage on one instance).

use std::collections::HashMap;

use super::{is_duration, machine_types, named, Declaration, Unused};
use crate::fleet::*;
use crate::load::{known, Loader};
use crate::tree::{normalize_name, Origin, RuntimeEntry, Tree};
use csis_schema::yaml::join_path;

impl Loader<'_> {
    pub(super) fn resolve_instances(
        &mut self,
        t: &mut Tree,
        decls: Vec<Declaration>,
        unused: &Unused,
    ) {
        let all: Vec<Instance> = decls.iter().map(|d| d.instance.clone()).collect();
        let _ = self.index_of(&all);
        let mut keep = Vec::new();
        // storage (canonical) -> the first instance mounting it
        let mut single: HashMap<String, String> = HashMap::new();
        for Declaration {
            mut instance,
            attach,
        } in decls
        {
            match self.resolve_instance(t, &mut instance, unused) {
                Ok(true) => {}
                Ok(false) => {
                    self.count_unused("gcloud instances", "instances/");
                    continue;
                }
                Err(()) => continue,
            }
            if self.resolve_mounts(t, &mut instance, &attach, &mut single, unused) {
                keep.push(instance);
            }
        }
        t.instances_by_name = self.quiet_index_of(&keep);
        t.instances = keep;
    }

    /// An instance's builder, runtime, image, group, machine type and
    /// failure policy; Ok(false): it stands on a builder csis does not run.
    fn resolve_instance(
        &mut self,
        t: &Tree,
        i: &mut Instance,
        unused: &Unused,
    ) -> Result<bool, ()> {
        let o = i.origin.clone();
        let bname = i.model.type_.clone().unwrap_or_else(|| "default".into());
        let Some(b) = t.instance_builder(&bname) else {
            return self.no_instance_builder(t, i, &bname, unused);
        };
        i.builder = b.name.clone();
        i.builder_type = b.type_.clone();
        i.runtime = b.runtime.clone();
        let rt = t.runtime(&b.runtime).expect("a kept builder's runtime");
        if let Some(r) = named(i.model.runtime.as_deref()) {
            if t.runtime(&r).map(|x| x.name.as_str()) != Some(rt.name.as_str()) {
                self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&o.path, "runtime"),
                    format!(
                        "instance `{}` names runtime `{r}`, but its instance builder `{}` runs on {}",
                        i.name, b.display, rt.display
                    ),
                    "the builder's runtime governs: drop `runtime:` or name an instance builder on that runtime",
                );
                return Err(());
            }
        }
        i.on_failure = i
            .model
            .on_failure
            .or(rt.common.on_failure)
            .unwrap_or_default();
        i.teardown_after = i
            .model
            .teardown_after
            .clone()
            .or(rt.common.teardown_after.clone());
        if i.builder_type == "docker" {
            let display = b.display.clone();
            self.refuse_without_effect_on_docker(i, &display)?;
        }
        self.check_instance_fields(t, i, rt)?;
        self.resolve_instance_image(t, i)?;
        Ok(true)
    }

    /// A field a docker-built instance has no use for is refused at its
    /// line (nothing on a container realises it: no zone, no teardown
    /// after a delay, no builder config); a tag becomes a container label,
    /// so one of csis's own names (`csis_...`) or a sealed value is refused.
    fn refuse_without_effect_on_docker(&mut self, i: &Instance, builder: &str) -> Result<(), ()> {
        let o = &i.origin;
        let m = &i.model;
        let before = self.d.items.len();
        let set = [
            ("teardown_after", m.teardown_after.is_some()),
            ("availability_zone", m.availability_zone.is_some()),
            ("config", !m.config.is_empty()),
        ];
        for (field, _) in set.iter().filter(|(_, on)| *on) {
            self.d.error(
                o.field(field),
                &join_path(&o.path, field),
                format!(
                    "`{field}` has no effect on a docker instance (builder {builder}, type docker): remove it"
                ),
            );
        }
        self.refuse_label_tags(o, &m.tags, &format!("instance `{}`", i.name), "container");
        if self.d.items.len() > before {
            return Err(());
        }
        Ok(())
    }

    /// An instance whose builder is not among those csis runs: Ok(false)
    /// when it is one on gcloud, else refused (once).
    fn no_instance_builder(
        &mut self,
        t: &Tree,
        i: &Instance,
        bname: &str,
        unused: &Unused,
    ) -> Result<bool, ()> {
        let o = &i.origin;
        if unused.instance_builders.contains(&normalize_name(bname)) {
            return Ok(false);
        }
        if unused
            .refused
            .instance_builders
            .contains(&normalize_name(bname))
        {
            return Err(());
        }
        self.d.error_hint(
            o.field("type"),
            &join_path(&o.path, "type"),
            if normalize_name(bname) == "default" {
                format!(
                    "instance `{}` has no type and the tree declares no default instance builder",
                    i.name
                )
            } else {
                format!(
                    "instance `{}`: type `{bname}` names no declared instance builder",
                    i.name
                )
            },
            known(
                "instance builders",
                t.instance_builders.iter().map(|b| b.display.as_str()),
            ),
        );
        Err(())
    }

    fn check_instance_fields(
        &mut self,
        _t: &Tree,
        i: &mut Instance,
        rt: &RuntimeEntry,
    ) -> Result<(), ()> {
        let o = &i.origin;
        if let Some(ta) = &i.model.teardown_after {
            if !is_duration(ta) {
                self.d.error_hint(
                    o.field("teardown_after"),
                    &join_path(&o.path, "teardown_after"),
                    format!("`{ta}` is not a duration"),
                    "write <number> then m, h or d (e.g. 90m)",
                );
                return Err(());
            }
        }
        i.machine_type = named(i.model.machine_type.as_deref());
        let Some(mt) = &i.machine_type else {
            return Ok(());
        };
        let Some(declared) = machine_types(rt) else {
            return Ok(());
        };
        if declared.contains(mt) {
            return Ok(());
        }
        self.d.error_hint(
            o.field("machine_type"),
            &join_path(&o.path, "machine_type"),
            format!(
                "machine type `{mt}` is not declared by runtime {}",
                rt.display
            ),
            if declared.is_empty() {
                format!("runtime {} declares no machine_types", rt.display)
            } else {
                format!("declared machine_types: {}", declared.join(", "))
            },
        );
        Err(())
    }

    /// The image (declared, baked on the instance's runtime) and its group.
    fn resolve_instance_image(&mut self, t: &Tree, i: &mut Instance) -> Result<(), ()> {
        let o = &i.origin;
        let (at, path) = (o.field("image"), join_path(&o.path, "image"));
        let Some(img) = t.image(&i.model.image) else {
            self.d.error_hint(
                at,
                &path,
                format!("instance `{}`: unknown image `{}`", i.name, i.model.image),
                known("images", t.images.iter().map(|x| x.display.as_str())),
            );
            return Err(());
        };
        let Some(g) = img.model.group.as_deref() else {
            self.d.error_hint(
                at,
                &path,
                format!(
                    "image `{}` has no `group`: an image an instance boots needs one (the instance's group)",
                    img.display
                ),
                format!("set `group:` on image {} ({})", img.display, img.origin.display()),
            );
            return Err(());
        };
        if img.runtime_entry(&i.runtime).is_none() {
            self.d.error_hint(
                at,
                &path,
                format!(
                    "image `{}` is not baked on runtime {}, where instance `{}` stands",
                    img.display, i.runtime, i.name
                ),
                "add a runtimes[] entry for that runtime to the image, or use an instance builder on one it bakes on",
            );
            return Err(());
        }
        i.image = img.name.clone();
        i.group = t
            .group(g)
            .map(|x| x.name.clone())
            .unwrap_or_else(|| normalize_name(g));
        Ok(())
    }

    /// The mounts of an instance, in declared order (a duplicate storage
    /// name keeps the later item); false when one is refused.
    fn resolve_mounts(
        &mut self,
        t: &Tree,
        i: &mut Instance,
        attach: &[Origin],
        single: &mut HashMap<String, String>,
        unused: &Unused,
    ) -> bool {
        let before = self.d.items.len();
        let items = i.model.storages.clone();
        let mut mounts: Vec<Mount> = Vec::new();
        for (k, a) in items.iter().enumerate() {
            let o = attach.get(k).cloned().unwrap_or_else(|| i.origin.clone());
            let Some(m) = self.mount_of(t, i, a, &o, unused) else {
                continue;
            };
            mounts.retain(|x| x.storage != m.storage);
            mounts.push(m);
        }
        for m in &mounts {
            let s = t.storage(&m.storage).expect("a mounted storage");
            if s.attach != Attach::Single {
                continue;
            }
            match single.get(&s.name) {
                Some(first) if *first != i.name => {
                    let o = items
                        .iter()
                        .rposition(|a| normalize_name(&a.name) == s.name)
                        .and_then(|p| attach.get(p))
                        .unwrap_or(&i.origin);
                    self.d.error_hint(
                        o.field("name"),
                        &join_path(&o.path, "name"),
                        format!(
                            "storage `{}` ({}) attaches to one instance, and instance `{first}` already mounts it",
                            s.display, s.storage_type
                        ),
                        "mount it on one instance, or use a storage type that attaches to many (efs, s3, volume)",
                    );
                }
                _ => {
                    single.insert(s.name.clone(), i.name.clone());
                }
            }
        }
        i.mounts = mounts;
        self.d.items.len() == before
    }

    /// One `storages:` item of an instance: a declared, active storage its
    /// group may attach, of a type its image's base declares.
    fn mount_of(
        &mut self,
        t: &Tree,
        i: &Instance,
        a: &AttachModel,
        o: &Origin,
        unused: &Unused,
    ) -> Option<Mount> {
        let (at, path) = (o.field("name"), join_path(&o.path, "name"));
        let Some(s) = t.storage(&a.name) else {
            if unused.refused.storages.contains(&normalize_name(&a.name)) {
                return None;
            }
            if unused.storages.contains(&normalize_name(&a.name)) {
                self.d.error(
                    at,
                    &path,
                    format!(
                        "instance `{}` on runtime {} mounts storage `{}`, which lives on a runtime csis does not run",
                        i.name, i.runtime, a.name
                    ),
                );
                return None;
            }
            self.d.error_hint(
                at,
                &path,
                format!(
                    "instance `{}` mounts storage `{}`, which storages/ does not declare",
                    i.name, a.name
                ),
                known("storages", t.storages.iter().map(|s| s.display.as_str())),
            );
            return None;
        };
        if let Some((msg, hint)) = mount_refusal(t, i, s) {
            self.d.error_hint(at, &path, msg, hint);
            return None;
        }
        self.mount_point_of(i, a, o, s)
    }

    fn mount_point_of(
        &mut self,
        i: &Instance,
        a: &AttachModel,
        o: &Origin,
        s: &Storage,
    ) -> Option<Mount> {
        let mp = a
            .mount_point
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_MOUNT_POINT.to_string());
        let bad = !mp.starts_with('/')
            || mp == "/"
            || mp.split('/').any(|c| c == "..")
            || mp.chars().any(|c| c.is_whitespace() || c.is_control());
        if bad {
            self.d.error(
                o.field("mount_point"),
                &join_path(&o.path, "mount_point"),
                format!("mount_point `{mp}` is not an absolute path below / (no spaces, no `..`)"),
            );
            return None;
        }
        if i.builder_type == "docker" {
            let set = [
                ("min_size", a.min_size.is_some()),
                ("tags", !a.tags.is_empty()),
                ("config", !a.config.is_empty()),
            ];
            let mut refused = false;
            for (field, _) in set.iter().filter(|(_, on)| *on) {
                refused = true;
                self.d.error(
                    o.field(field),
                    &join_path(&o.path, field),
                    format!(
                        "`{field}` has no effect on a storage mounted by a docker instance (builder {}, type docker): remove it",
                        i.builder
                    ),
                );
            }
            if refused {
                return None;
            }
        }
        if a.min_size == Some(0) {
            self.d.error(
                o.field("min_size"),
                &join_path(&o.path, "min_size"),
                "min_size must be positive",
            );
            return None;
        }
        Some(Mount {
            storage: s.name.clone(),
            mount_point: mp,
            storage_type: s.storage_type.clone(),
            builder: s.builder.clone(),
            group: i.group.clone(),
            share_mode: s.share_mode.clone(),
            public_read: s.public_read,
        })
    }
}

/// Why instance `i` may not mount storage `s` (a message and a hint).
fn mount_refusal(t: &Tree, i: &Instance, s: &Storage) -> Option<(String, String)> {
    if s.requested != StorageState::Active {
        let state = match s.requested {
            StorageState::Archived => "archived",
            _ => "destroyed",
        };
        return Some((
            format!(
                "storage `{}` is requested {state}: only an active storage is mounted",
                s.display
            ),
            "set `state: active` on the storage, or remove this item".into(),
        ));
    }
    if s.runtime != i.runtime {
        return Some((
            format!(
                "storage `{}` lives on runtime {}, instance `{}` on {}",
                s.display, s.runtime, i.name, i.runtime
            ),
            "mount a storage whose storage builder is on the instance's runtime".into(),
        ));
    }
    if !s.public_read && !s.groups.contains(&i.group) {
        return Some((
            format!(
                "storage `{}` allows groups [{}], not `{}` (the group of image {})",
                s.display,
                s.groups.join(", "),
                i.group,
                i.image
            ),
            format!(
                "add `{}` to the storage's groups, or make it public_read",
                i.group
            ),
        ));
    }
    let img = t.image(&i.image)?;
    let types = t.capability_stamp(img).storage_types;
    if types.contains(&s.storage_type) {
        return None;
    }
    let root = t
        .chain_root(img)
        .map(|r| r.display.clone())
        .unwrap_or_default();
    Some((
        format!(
            "storage `{}` is of type {}, but base image {root} of image {} declares storage types [{}]",
            s.display, s.storage_type, img.display, types.join(", ")
        ),
        format!("add `{}` to storage_types of {root}", s.storage_type),
    ))
}
