//! Storages resolved: their builder, runtime and storage type, the fields
//! their builder's type asks for and those a docker volume has no use for.

use super::lifecycle::lifecycle_problem;
use super::{named, Refused, Unused};
use crate::fleet::*;
use crate::groups::storage_type;
use crate::load::{known, Loader};
use crate::tree::{normalize_name, Tree};
use csis_schema::yaml::join_path;

impl Loader<'_> {
    pub(super) fn resolve_storages(
        &mut self,
        t: &mut Tree,
        storages: Vec<Storage>,
        unused: &mut Unused,
    ) {
        let _ = self.index_of(&storages);
        let mut keep = Vec::new();
        for mut s in storages {
            match self.resolve_storage(t, &mut s, &unused.refused) {
                Ok(true) => keep.push(s),
                Ok(false) => {
                    self.count_unused("gcloud storages", "storages/");
                    let names = std::iter::once(&s.display).chain(s.model.aliases.iter());
                    unused.storages.extend(names.map(|n| normalize_name(n)));
                }
                Err(()) => {
                    let names = std::iter::once(&s.display).chain(s.model.aliases.iter());
                    let refused = &mut unused.refused.storages;
                    refused.extend(names.map(|n| normalize_name(n)));
                }
            }
        }
        self.refuse_one_label(&keep);
        t.storages_by_name = self.quiet_index_of(&keep);
        t.storages = keep;
    }

    /// Two storages whose names differ only by `-`, `.` or `_` make one
    /// tofu module label (`data_1`) in their builder's root, and one
    /// archive name (`csis-data-1-archive`): a restore of one would read
    /// the other's snapshot. Refused at the second one's name, for two of
    /// one builder or two whose builders archive.
    fn refuse_one_label(&mut self, storages: &[Storage]) {
        // the module label (`csis_tofu::hv::label`), which the archive
        // name is made of (`ops`'s `archive_name`)
        let key = |s: &Storage| s.display.replace(['-', '.'], "_");
        let mut seen: Vec<(String, &Storage)> = Vec::new();
        for s in storages {
            let k = key(s);
            let other = seen.iter().find(|(ok, o)| {
                *ok == k && (o.builder == s.builder || (o.supports_archive && s.supports_archive))
            });
            if let Some((_, o)) = other {
                let o_loc = o.origin.field("name");
                self.d.error_hint(
                    s.origin.field("name"),
                    &join_path(&s.origin.path, "name"),
                    format!(
                        "storage `{}` makes the same tofu label and archive name as storage `{}` ({}:{}): `{}` and `csis-{}-archive`",
                        s.display,
                        o.display,
                        o_loc.file.path,
                        o_loc.line,
                        k,
                        k.replace('_', "-")
                    ),
                    "names that differ only by `-`, `.` or `_` are one storage to tofu and to an archive: rename one",
                );
            } else {
                seen.push((k, s));
            }
        }
    }

    /// Fill in a storage from its builder; Ok(false): its builder keeps it
    /// on a runtime csis does not run.
    fn resolve_storage(
        &mut self,
        t: &Tree,
        s: &mut Storage,
        refused: &Refused,
    ) -> Result<bool, ()> {
        let o = s.origin.clone();
        let bname = s.model.type_.clone().unwrap_or_else(|| "default".into());
        let Some(b) = t.storage_builder(&bname) else {
            if refused.storage_builders.contains(&normalize_name(&bname)) {
                return Err(());
            }
            self.d.error_hint(
                o.field("type"),
                &join_path(&o.path, "type"),
                if normalize_name(&bname) == "default" {
                    format!(
                        "storage `{}` has no type and the tree declares no default storage builder",
                        s.display
                    )
                } else {
                    format!(
                        "storage `{}`: type `{bname}` names no declared storage builder",
                        s.display
                    )
                },
                known(
                    "storage builders",
                    t.storage_builders.iter().map(|b| b.display.as_str()),
                ),
            );
            return Err(());
        };
        let Some(rt) = b.runtime.clone() else {
            return Ok(false);
        };
        let kind = storage_type(&b.model.type_).expect("a loaded storage builder has a known type");
        s.builder = b.name.clone();
        s.builder_type = b.model.type_.clone();
        s.storage_type = kind.token.to_string();
        s.runtime = rt;
        s.attach = kind.attach;
        s.posix = kind.posix;
        s.supports_archive = kind.supports_archive;
        s.size_gb = s.model.size.or(b.model.size);
        if s.bucket_name.is_none() && matches!(kind.token, "s3" | "gcs") {
            s.bucket_name = Some(b.model.bucket_name.clone().unwrap_or(s.display.clone()));
        }
        let mut tags = b.model.tags.clone();
        if let Some(vt) = b.model.variables.get("tags").and_then(|v| v.as_object()) {
            for (k, v) in vt {
                if let Some(v) = v.as_str() {
                    tags.insert(k.clone(), v.to_string());
                }
            }
        }
        tags.extend(s.model.tags.clone());
        s.tags = tags;
        self.check_storage_fields(t, s)?;
        Ok(true)
    }

    /// A storage's groups, share mode, requested state and runtime.
    fn check_storage_fields(&mut self, t: &Tree, s: &mut Storage) -> Result<(), ()> {
        let o = s.origin.clone();
        let before = self.d.items.len();
        for (i, g) in s.model.groups.iter().enumerate() {
            let at = o.item("groups", i);
            let path = format!("{}[{i}]", join_path(&o.path, "groups"));
            if g.trim().eq_ignore_ascii_case("all") {
                self.d.error(at, &path, "`ALL` is refused: a storage lists the groups allowed to attach it (or is public_read)");
            } else if let Some(gr) = t.group(g) {
                s.groups.push(gr.name.clone());
            } else {
                self.d.error_hint(
                    at,
                    &path,
                    format!("group `{g}` is not declared in groups/"),
                    known("groups", t.groups.iter().map(|g| g.display.as_str())),
                );
            }
        }
        let mode = s.model.share_mode.clone().unwrap_or(SHARE_MODES[0].into());
        if !SHARE_MODES.contains(&mode.trim()) {
            self.d.error(
                o.field("share_mode"),
                &join_path(&o.path, "share_mode"),
                format!("share_mode `{mode}` is neither \"2770\" (private per group) nor \"2775\" (read-shared)"),
            );
        }
        s.share_mode = mode.trim().to_string();
        if s.requested == StorageState::Archived && !s.supports_archive {
            self.d.error(
                o.field("state"),
                &join_path(&o.path, "state"),
                format!(
                    "storage `{}` of type {} cannot be archived (only ebs and pd storages can)",
                    s.display, s.builder_type
                ),
            );
        }
        if let Some((k, m)) = s
            .lifecycle
            .as_ref()
            .and_then(|l| lifecycle_problem(&s.storage_type, l))
        {
            let path = join_path(&o.path, "lifecycle");
            let path = if k.is_empty() {
                path
            } else {
                join_path(&path, &k)
            };
            self.d.error(o.field("lifecycle"), &path, m);
        }
        self.refuse_without_effect(s);
        if let Some(r) = named(s.model.runtime.as_deref()) {
            if t.runtime(&r).is_none() && !self.unused_runtimes.contains(&normalize_name(&r)) {
                self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&o.path, "runtime"),
                    format!("runtime `{r}` names no declared runtime"),
                    known("runtimes", t.runtimes.iter().map(|r| r.display.as_str())),
                );
            }
        }
        if self.d.items.len() > before {
            return Err(());
        }
        Ok(())
    }

    /// A field a docker volume has no use for is refused at its line: it
    /// would enter the storage's fingerprint and change nothing.
    fn refuse_without_effect(&mut self, s: &Storage) {
        if s.storage_type != "volume" {
            return;
        }
        let o = &s.origin;
        let set = [
            ("size", s.model.size.is_some()),
            ("bucket_name", s.model.bucket_name.is_some()),
            ("availability_zone", s.model.availability_zone.is_some()),
            ("config", !s.model.config.is_empty()),
        ];
        for (field, _) in set.iter().filter(|(_, on)| *on) {
            self.d.error(
                o.field(field),
                &join_path(&o.path, field),
                format!(
                    "a docker volume has no `{field}`: storage `{}` would change nothing by it",
                    s.display
                ),
            );
        }
        self.refuse_label_tags(
            o,
            &s.model.tags,
            &format!("storage `{}`", s.display),
            "volume",
        );
    }
}
