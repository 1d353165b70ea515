//! What a bake recipe cannot honour, refused at load with the file, line and
//! field: an update policy or exclusion the family's package manager has no
//! way to apply, an identity or storage type csis knows no prerequisites
//! of, an identity type a runtime cannot run (the OPA agent on docker), a
//! machine type the runtime does not declare (D21), a storage type no
//! storage builder provides (N6).

use super::Loader;
use crate::groups::STORAGE_BUILDER_TYPES;
use crate::tree::{Origin, Tree};
use csis_schema::model::{article, UpdatePolicyKind, RUNTIME_TYPE_MODELS};
use csis_schema::yaml::join_path;

/// Identity types a base image can declare (group builder kinds).
pub const IDENTITY_TYPES: &[&str] = &["okta", "posix"];
/// Storage types a base image can declare (storage builder kinds).
pub const STORAGE_TYPES: &[&str] = &["ebs", "efs", "s3", "pd", "gcs", "filestore", "volume"];

impl Loader<'_> {
    pub(super) fn check_recipe(&mut self, t: &Tree) {
        self.check_machine_types(t);
        for os in &t.os_builders {
            let o = &os.origin;
            let pm = os.model.package_manager();
            let u = os.model.effective_update();
            if pm == "apk" && u.policy == UpdatePolicyKind::Security {
                self.d.error_hint(
                    o.field("update"),
                    &join_path(&join_path(&o.path, "update"), "policy"),
                    format!(
                        "update policy `security` cannot be honoured on family {}: apk has no security-only updates",
                        os.model.family
                    ),
                    "use `full`, `packages` or `none`",
                );
            }
            if pm == "apk" && !u.exclude.is_empty() {
                self.d.error(
                    o.field("update"),
                    &join_path(&join_path(&o.path, "update"), "exclude"),
                    format!(
                        "update `exclude` cannot be honoured on family {}: apk upgrades cannot exclude packages",
                        os.model.family
                    ),
                );
            }
            if u.policy == UpdatePolicyKind::Packages && u.packages.is_empty() {
                self.d.error(
                    o.field("update"),
                    &join_path(&join_path(&o.path, "update"), "packages"),
                    "update policy `packages` names no packages to update",
                );
            }
            for (i, it) in os.model.identity_types.iter().enumerate() {
                let path = format!("{}[{i}]", join_path(&o.path, "identity_types"));
                if !IDENTITY_TYPES.contains(&it.as_str()) {
                    self.d.error_hint(
                        o.field("identity_types"),
                        &path,
                        format!("unknown identity type `{it}`: its base-image prerequisites are not known"),
                        format!("identity types: {}", IDENTITY_TYPES.join(", ")),
                    );
                    continue;
                }
                if it == "okta" {
                    for e in os.active_runtimes() {
                        let Some(rt) = e.runtime.as_deref().and_then(|r| t.runtime(r)) else {
                            continue;
                        };
                        if !rt.kind.model().opa_agent {
                            let ty = rt.type_name();
                            self.d.error(
                                o.field("identity_types"),
                                &path,
                                format!(
                                    "identity type `okta` cannot be honoured on {ty} runtime {}: the OPA agent needs systemd, and an OPA group is refused on {} {ty} runtime (use `posix`)",
                                    rt.name, article(ty)
                                ),
                            );
                        }
                    }
                }
            }
            for (i, st) in os.model.storage_types.iter().enumerate() {
                if !STORAGE_TYPES.contains(&st.as_str()) {
                    self.d.error_hint(
                        o.item("storage_types", i),
                        &format!("{}[{i}]", join_path(&o.path, "storage_types")),
                        format!("unknown storage type `{st}`: its prerequisites are not known"),
                        format!("storage types: {}", STORAGE_TYPES.join(", ")),
                    );
                    continue;
                }
                self.check_storage_builder(t, os, i, st);
            }
        }
    }

    /// A declared storage type needs a configured storage builder (config
    /// §"Base images and capabilities"): some storage builder of the tree
    /// is of that type. As the original, on any runtime: its complete
    /// starter declares ebs on an OS builder baking on aws-east1 with the
    /// one ebs builder on aws-east2. `volume` is docker's own (a named
    /// volume, no storage builder type): accepted when the OS builder
    /// bakes on a docker (or dummy) runtime.
    fn check_storage_builder(&mut self, t: &Tree, os: &crate::tree::OsBuilder, i: usize, st: &str) {
        let o = &os.origin;
        let path = format!("{}[{i}]", join_path(&o.path, "storage_types"));
        let owner = RUNTIME_TYPE_MODELS
            .iter()
            .find(|m| m.own_storage_types.contains(&st));
        if let Some(owner) = owner {
            let kept = os.active_runtimes().any(|e| {
                e.runtime
                    .as_deref()
                    .and_then(|r| t.runtime(r))
                    .map(|r| r.kind.model())
                    .is_some_and(|m| m.name == owner.name || m.simulates_any)
            });
            if !kept && os.active_runtimes().next().is_some() {
                let ty = owner.name;
                let a = article(ty);
                self.d.error_hint(
                    o.item("storage_types", i),
                    &path,
                    format!("storage type `{st}` has no storage builder: it is {a} {ty} runtime's own named {st}, and no runtime of this OS builder is {ty}"),
                    format!("declare `{st}` on an OS builder that bakes on {a} {ty} runtime"),
                );
            }
            return;
        }
        let Some(kind) = STORAGE_BUILDER_TYPES.iter().find(|k| k.token == st) else {
            return;
        };
        if !t.storage_builders.iter().any(|b| b.storage_type == st) {
            self.d.error_hint(
                o.item("storage_types", i),
                &path,
                format!("storage type `{st}` has no storage builder configured"),
                format!(
                    "declare a storage builder of type {} in cfg/storage-builders.yml",
                    kind.builder_type
                ),
            );
        }
    }

    /// An image entry's `machine_type` (an OS entry's `default_machine_type`)
    /// on a runtime that declares its machine types (docker, dummy) must
    /// name one of them: the bake would be refused by the runtime otherwise.
    fn check_machine_types(&mut self, t: &Tree) {
        let declared = |rt: Option<&str>| -> Option<(String, Vec<String>)> {
            let rt = t.runtime(rt?)?;
            let names = (rt.kind.model().machine_types)(&rt.kind)?;
            Some((rt.name.clone(), names))
        };
        let mut found: Vec<(Origin, &'static str, String, String, Vec<String>)> = Vec::new();
        for img in &t.images {
            for e in img.active_runtimes() {
                let Some(mt) = named(e.entry.machine_type.as_deref()) else {
                    continue;
                };
                if let Some((rt, names)) = declared(e.runtime.as_deref()) {
                    if !names.contains(&mt) {
                        found.push((e.origin.clone(), "machine_type", mt, rt, names));
                    }
                }
            }
        }
        for os in &t.os_builders {
            for e in os.active_runtimes() {
                let Some(mt) = named(e.entry.default_machine_type.as_deref()) else {
                    continue;
                };
                if let Some((rt, names)) = declared(e.runtime.as_deref()) {
                    if !names.contains(&mt) {
                        found.push((e.origin.clone(), "default_machine_type", mt, rt, names));
                    }
                }
            }
        }
        for (o, field, mt, rt, names) in found {
            let hint = if names.is_empty() {
                format!("runtime {rt} declares no machine_types")
            } else {
                format!("declared machine_types: {}", names.join(", "))
            };
            self.d.error_hint(
                o.field(field),
                &join_path(&o.path, field),
                format!("machine type `{mt}` is not declared by runtime {rt}"),
                hint,
            );
        }
    }
}

/// A machine type named (not empty, not `default`).
fn named(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|m| !m.is_empty() && !m.eq_ignore_ascii_case("default"))
        .map(str::to_string)
}
