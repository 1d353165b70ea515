//! The per-node transforms of a load, in the order an entry meets them:
//! `ENC[age:...]` markers decrypted (with the identities read once),
//! templates rendered (the entry as `this`), and the node deserialized
//! into its strict model. Every decrypted value and every environment
//! value a template reads is registered as a secret.

use minijinja::Value as JValue;

use super::Loader;
use crate::crypt::{self, Identities};
use crate::template;
use csis_schema::yaml::{self, join_path, Loc, Node, Value};

impl Loader<'_> {
    /// The environment values the templates read are secrets (see
    /// [`csis_schema::secret`]): registered once the tree is rendered.
    pub(super) fn register_env_secrets(&mut self) {
        let reads = self.renderer.reads();
        if reads.env_keys.is_empty() {
            return;
        }
        let key = self
            .identities()
            .map(|i| i.token_key)
            .unwrap_or_else(csis_schema::secret::default_key);
        for k in &reads.env_keys {
            if let Some(v) = self.env.get(k) {
                csis_schema::secret::register(v, &key);
            }
        }
    }

    pub(super) fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        node: &Node,
        path: &str,
    ) -> Option<T> {
        match yaml::from_node_all::<T>(node, path) {
            Ok(v) => Some(v),
            Err(d) => {
                self.d.items.extend(d);
                None
            }
        }
    }

    pub(super) fn identities(&mut self) -> Option<&Identities> {
        if self.identities.is_none() {
            let setting = self
                .opts
                .identity
                .clone()
                .or_else(|| self.env.get("CSIS_CONFIG_IDENTITY").cloned())
                .filter(|s| !s.trim().is_empty());
            self.identities = Some(match setting {
                None => Err("no identity: set CSIS_CONFIG_IDENTITY to an age secret key, an identity file or a directory of *.age-identity files".into()),
                Some(s) => Identities::from_setting(&s),
            });
        }
        self.identities.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// Decrypt every whole-value marker below `node`; refuse markers in keys,
    /// embedded in longer strings, or under `forbidden` keys.
    pub(super) fn decrypt(&mut self, node: &mut Node, path: &str, forbidden: &[&str]) {
        // Nothing to decrypt nor to refuse below: no field path is built
        // (a fifth of a load of 5,000 images built them for nothing).
        if !has_marker(node) {
            return;
        }
        match &mut node.value {
            Value::Str(s) if crypt::contains_marker(s) => {
                if !crypt::is_marker(s) {
                    self.d.error_hint(
                        &node.loc,
                        path,
                        "an ENC[age:...] marker embedded in a longer string is refused",
                        "encrypt the whole value",
                    );
                    return;
                }
                let last = path.rsplit(['.', '[']).next().unwrap_or("");
                if forbidden.contains(&last) {
                    self.d.error(
                        &node.loc,
                        path,
                        format!("`{last}` may not be encrypted (it is read before decryption)"),
                    );
                    return;
                }
                let marker = s.clone();
                let loc = node.loc.clone();
                let result = match self.identities() {
                    Some(ids) => ids.decrypt(&marker),
                    None => Err(self
                        .identities
                        .as_ref()
                        .and_then(|r| r.as_ref().err())
                        .cloned()
                        .unwrap_or_default()),
                };
                match result {
                    Ok(plain) => {
                        // A secret from here on: every copy that leaves the
                        // process is redacted (csis_schema::secret).
                        let key = self
                            .identities()
                            .map(|i| i.token_key)
                            .unwrap_or_else(csis_schema::secret::default_key);
                        csis_schema::secret::register(&plain, &key);
                        *s = plain
                    }
                    Err(e) => self.d.error_hint(
                        &loc,
                        path,
                        format!("cannot decrypt the encrypted value {}: {e}", short_marker(&marker)),
                        "set CSIS_CONFIG_IDENTITY to the tree's age identity (a key, a file, or a directory of *.age-identity files)",
                    ),
                }
            }
            Value::Seq(items) => {
                for (i, n) in items.iter_mut().enumerate() {
                    self.decrypt(n, &format!("{path}[{i}]"), forbidden);
                }
            }
            Value::Map(entries) => {
                for e in entries.iter_mut() {
                    let p = join_path(path, &e.key);
                    if crypt::contains_marker(&e.key) {
                        self.d
                            .error(&e.key_loc, &p, "a mapping key may not be encrypted");
                        continue;
                    }
                    if forbidden.contains(&e.key.as_str())
                        && e.value.any_str(&crypt::contains_marker)
                    {
                        self.d.error(
                            &e.value.loc,
                            &p,
                            format!(
                                "`{}` may not be encrypted (it is read before decryption)",
                                e.key
                            ),
                        );
                        continue;
                    }
                    self.decrypt(&mut e.value, &p, forbidden);
                }
            }
            _ => {}
        }
    }

    /// Render an entry's templates with the entry as `this` (and `image`
    /// for images); the context is built only when something is templated.
    pub(super) fn render_this(
        &mut self,
        node: &mut Node,
        path: &str,
        literal: &[&str],
        as_image: bool,
    ) {
        if !node.any_str(&template::is_template) {
            return;
        }
        let this = template::to_value(node);
        if as_image {
            self.render(node, path, &[("this", &this), ("image", &this)], literal);
        } else {
            self.render(node, path, &[("this", &this)], literal);
        }
    }

    pub(super) fn render(
        &mut self,
        node: &mut Node,
        path: &str,
        scopes: &[(&str, &JValue)],
        literal: &[&str],
    ) {
        if !node.any_str(&template::is_template) {
            return;
        }
        let mut errs = Vec::new();
        self.renderer
            .render_node(node, path, scopes, literal, &mut errs);
        for (loc, p, m) in errs {
            self.d.error(&loc, &p, m);
        }
    }
}

pub(super) fn short_marker(s: &str) -> String {
    let t = s.trim();
    if t.chars().count() > 24 {
        let head: String = t.chars().take(20).collect();
        format!("{head}...]")
    } else {
        t.to_string()
    }
}

/// The location of the first string holding a marker below `node`.
pub(super) fn first_marker(node: &Node) -> Option<&Loc> {
    match &node.value {
        Value::Str(s) if crypt::contains_marker(s) => Some(&node.loc),
        Value::Seq(items) => items.iter().find_map(first_marker),
        Value::Map(m) => m.iter().find_map(|e| first_marker(&e.value)),
        _ => None,
    }
}

/// Whether a marker is in `node`: in a string value or in a mapping key,
/// at any depth.
fn has_marker(node: &Node) -> bool {
    match &node.value {
        Value::Str(s) => crypt::contains_marker(s),
        Value::Seq(items) => items.iter().any(has_marker),
        Value::Map(entries) => entries
            .iter()
            .any(|e| crypt::contains_marker(&e.key) || has_marker(&e.value)),
        _ => false,
    }
}
