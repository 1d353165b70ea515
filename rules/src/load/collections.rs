//! The collection directories (`images/`, `groups/`, `storages/`,
//! `instances/`): every YAML file of one read recursively into its items
//! per key, then the overlays and undeclares applied.

use super::{Item, Loader};
use csis_schema::diag::Diagnostic;
use csis_schema::yaml::{Node, Value};

impl Loader<'_> {
    /// Read a collection directory: per key, its items, with overlays and
    /// undeclares applied.
    pub(super) fn read_collection(
        &mut self,
        dir: &str,
        keys: &[&str],
        overlays: &[Node],
    ) -> Vec<(String, Vec<Item>)> {
        let mut out: Vec<(String, Vec<Item>)> =
            keys.iter().map(|k| (k.to_string(), Vec::new())).collect();
        let path = self.root.join(dir);
        if self.pre.is_none() {
            // Present but not a readable directory: refused, not "0 images".
            match std::fs::metadata(&path) {
                Ok(m) if !m.is_dir() => self.d.push(
                    Diagnostic::plain(dir, format!("`{dir}` is not a directory"))
                        .with_hint(format!("{dir}/ holds YAML files; move this file into it")),
                ),
                Err(e)
                    if e.kind() != std::io::ErrorKind::NotFound
                        || path.symlink_metadata().is_ok() =>
                {
                    self.d.push(Diagnostic::plain(
                        &format!("{dir}/"),
                        format!("cannot read: {e}"),
                    ))
                }
                _ => {}
            }
        }
        if path.is_dir() {
            for parsed in self.parsed_files(&path, true) {
                self.file_items(dir, keys, parsed, &mut out);
            }
        }
        self.apply_overlays(&mut out, overlays);
        self.apply_undeclares(&mut out, keys);
        out
    }

    /// The items of one parsed file of a collection directory, per key
    /// into `out` (which holds a slot per key of `keys`).
    pub(super) fn file_items(
        &mut self,
        dir: &str,
        keys: &[&str],
        parsed: Result<Node, Diagnostic>,
        out: &mut [(String, Vec<Item>)],
    ) {
        let node = match parsed {
            Ok(n) => n,
            Err(d) => {
                self.d.push(d);
                return;
            }
        };
        let Value::Map(entries) = node.value else {
            if !node.is_null() {
                self.d.error(
                    &node.loc,
                    "",
                    format!(
                        "a {dir}/ file must hold a mapping, found {}",
                        node.kind_name()
                    ),
                );
            }
            return;
        };
        for e in entries {
            let Some(slot) = out.iter_mut().find(|(k, _)| *k == e.key) else {
                self.d.error_hint(
                    &e.key_loc,
                    &e.key,
                    format!("unexpected key in a {dir}/ file"),
                    format!("a {dir}/ file holds {}", keys.join(" / ")),
                );
                continue;
            };
            match e.value.value {
                Value::Seq(items) => {
                    for (i, n) in items.into_iter().enumerate() {
                        slot.1.push(Item {
                            node: n,
                            path: format!("{}[{i}]", e.key),
                        });
                    }
                }
                Value::Null => {}
                _ => self.d.error(
                    &e.value.loc,
                    &e.key,
                    format!("expected a list, found {}", e.value.kind_name()),
                ),
            }
        }
    }
}
