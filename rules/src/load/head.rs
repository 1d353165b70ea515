//! An entry's head: its `name`, `type` and `aliases`, checked before
//! anything of it is decrypted or rendered (present, not templated, not
//! encrypted, not a reserved name).

use super::Loader;
use crate::crypt;
use crate::template;
use csis_schema::yaml::{join_path, Node};

impl Loader<'_> {
    /// Check an entry's `name` and `type` before anything renders: present,
    /// no `{{`, not encrypted, not reserved. Returns (name, type).
    pub(super) fn head(
        &mut self,
        node: &Node,
        path: &str,
        need_type: bool,
    ) -> Option<(String, Option<String>)> {
        if node.as_map().is_none() {
            self.d.error(
                &node.loc,
                path,
                format!("expected a mapping, found {}", node.kind_name()),
            );
            return None;
        }
        let mut ok = true;
        let name = match node.get("name") {
            None => {
                self.d.error(&node.loc, path, "missing field `name`");
                return None;
            }
            Some(n) => n,
        };
        let name_s = name.scalar_text().unwrap_or_default();
        let np = join_path(path, "name");
        if template::is_template(&name_s) {
            self.d.error(
                &name.loc,
                &np,
                "a name may not contain `{{` (names are read before templating)",
            );
            ok = false;
        } else if crypt::contains_marker(&name_s) {
            self.d.error(&name.loc, &np, "a name may not be encrypted");
            ok = false;
        } else if let Some(p) = name_problem(&name_s) {
            self.d.error(&name.loc, &np, p);
            ok = false;
        }
        let ty = node.get("type");
        let ty_s = ty.and_then(|t| t.scalar_text());
        if let (Some(t), Some(ts)) = (ty, ty_s.as_ref()) {
            let tp = join_path(path, "type");
            if template::is_template(ts) {
                self.d.error(
                    &t.loc,
                    &tp,
                    "a type may not contain `{{` (types are read before templating)",
                );
                ok = false;
            } else if crypt::contains_marker(ts) {
                self.d.error(&t.loc, &tp, "a type may not be encrypted");
                ok = false;
            }
        } else if need_type {
            self.d.error(&node.loc, path, "missing field `type`");
            ok = false;
        }
        if let Some(al) = node.get("aliases").and_then(|a| a.as_seq()) {
            for (i, a) in al.iter().enumerate() {
                let s = a.scalar_text().unwrap_or_default();
                if let Some(p) = name_problem(&s) {
                    self.d.error(
                        &a.loc,
                        &format!("{path}.aliases[{i}]"),
                        p.replace("name", "alias"),
                    );
                    ok = false;
                }
            }
        }
        ok.then(|| {
            (
                name_s.trim().to_string(),
                ty_s.map(|t| t.trim().to_string()),
            )
        })
    }
}

/// Reserved names and characters.
pub(super) fn name_problem(name: &str) -> Option<String> {
    let n = name.trim();
    if n.is_empty() {
        return Some("a name may not be empty".into());
    }
    if n.eq_ignore_ascii_case("default") || n.eq_ignore_ascii_case("self") {
        return Some(format!("`{n}` is a reserved name"));
    }
    if n.contains('/') || n.contains('\\') {
        return Some(format!("a name may not contain `/` or `\\`: `{n}`"));
    }
    None
}
