//! The configuration: the files of `cfg/` merged, overlays' `config:`
//! applied key by key, encryption refused where a value is read before
//! decryption, then decrypted, rendered and typed as [`IaConfig`].

use std::path::Path;

use indexmap::IndexMap;

use super::{first_marker, looks_private, public_key_problem, Item, Loader};
use crate::crypt;
use crate::template;
use crate::tree::*;
use csis_schema::diag::Diagnostic;
use csis_schema::model::*;
use csis_schema::yaml::{self, Entry, Loc, Node, Value};

/// Builder lists in `cfg/` (concatenated across files).
pub(super) const BUILDER_LISTS: &[&str] = &[
    "runtime_builders",
    "state_backends",
    "group_builders",
    "user_builders",
    "os_builders",
    "mod_builders",
    "storage_builders",
    "image_builders",
    "instance_builders",
];

/// Fields where an `ENC[age:...]` marker is refused (read raw before load).
pub(super) const ENC_FORBIDDEN_TOP: &[&str] = &["encryption", "public_safe"];

impl Loader<'_> {
    pub(super) fn load_config(
        &mut self,
        scalars: &IndexMap<String, Entry>,
        overlays: &[Node],
        config_map: Option<Loc>,
    ) -> (IaConfig, Option<Origin>) {
        let first_loc = scalars.values().next().map(|e| e.key_loc.clone());
        let Some(first_loc) = first_loc else {
            if !self.d.has_errors() {
                let d = match &config_map {
                    Some(l) => Diagnostic::at(l, "", "missing field `id`"),
                    None => Diagnostic::plain("cfg/_config.yml", "missing field `id`"),
                };
                self.d
                    .push(d.with_hint("cfg/_config.yml declares `id: <identifier>`"));
            }
            return (
                yaml::from_str::<IaConfig>("cfg/_config.yml", "id: ''").expect("default config"),
                None,
            );
        };
        let mut doc = Node::new(
            Value::Map(scalars.values().cloned().collect()),
            config_map.unwrap_or(Loc {
                line: 1,
                column: 1,
                ..first_loc.clone()
            }),
        );
        overlay_config(&mut doc, overlays);
        self.decrypt_config(&mut doc);
        let this = template::to_value(&doc);
        self.render(&mut doc, "", &[("this", &this)], &[]);
        let cfg_node = doc.remove("config");
        let mut cfg: IaConfig = match self.typed::<IaConfig>(&doc, "") {
            Some(c) => c,
            None => {
                yaml::from_str::<IaConfig>("cfg/_config.yml", "id: ''").expect("default config")
            }
        };
        if let (Some(spec), Some(check)) = (&cfg.meta_state, self.opts.meta_state_check) {
            if let Some(message) = check(spec) {
                let loc = doc.get("meta_state").map_or(&doc.loc, |n| &n.loc);
                self.d.error(loc, "meta_state", message);
            }
        }
        if let Some(keys) = cfg_node.and_then(|cn| self.config_keys(&cn)) {
            cfg.config = keys;
        }
        let origin = Origin {
            loc: scalars
                .get("id")
                .map(|e| e.key_loc.clone())
                .unwrap_or(first_loc),
            path: String::new(),
            fields: Default::default(),
            items: Default::default(),
        };
        (cfg, Some(origin))
    }
}

impl Loader<'_> {
    /// Encryption refusals, read raw before decryption, then the rest of
    /// the document decrypted.
    fn decrypt_config(&mut self, doc: &mut Node) {
        let Some(m) = doc.as_map_mut() else {
            return;
        };
        let mut entries = std::mem::take(m);
        for e in entries.iter_mut() {
            if e.key == "config" {
                if let Some(cm) = e.value.as_map_mut() {
                    self.decrypt_config_keys(cm);
                }
            } else if ENC_FORBIDDEN_TOP.contains(&e.key.as_str()) {
                if e.value.any_str(&crypt::contains_marker) {
                    self.d.error(
                        first_marker(&e.value).unwrap_or(&e.value.loc),
                        &e.key,
                        format!(
                            "`{}` may not be encrypted (it is read before decryption)",
                            e.key
                        ),
                    );
                }
            } else {
                let k = e.key.clone();
                self.decrypt(&mut e.value, &k, &[]);
            }
        }
        *doc.as_map_mut().expect("map") = entries;
    }

    /// The `config:` mapping decrypted key by key: an encrypted key, and
    /// an encrypted `apply_*` or `preflight` (read before decryption),
    /// refused.
    fn decrypt_config_keys(&mut self, cm: &mut [Entry]) {
        for ce in cm.iter_mut() {
            let p = format!("config.{}", ce.key);
            if crypt::contains_marker(&ce.key) {
                self.d
                    .error(&ce.key_loc, &p, "a mapping key may not be encrypted");
                continue;
            }
            if (ce.key.starts_with("apply_") || ce.key == "preflight")
                && ce.value.any_str(&crypt::contains_marker)
            {
                let at = first_marker(&ce.value).unwrap_or(&ce.value.loc).clone();
                self.d.error(
                    &at,
                    &p,
                    format!(
                        "`{}` may not be encrypted (it is read before decryption)",
                        ce.key
                    ),
                );
                // refused: do not also report it as a bad value
                ce.value = Node::new(Value::Null, ce.value.loc.clone());
                continue;
            }
            self.decrypt(&mut ce.value, &p, &[]);
        }
    }

    /// The `config:` mapping typed: its known keys, the others kept as
    /// they are, each admin public key checked. None when it is refused.
    fn config_keys(&mut self, cn: &Node) -> Option<ConfigKeys> {
        if cn.as_map().is_none() && !cn.is_null() {
            self.d.error(
                &cn.loc,
                "config",
                format!("expected a mapping, found {}", cn.kind_name()),
            );
            return None;
        }
        let known = cn.filter_map(|k| CONFIG_KEYS.contains(&k));
        let mut keys = self.typed::<ConfigKeys>(&known, "config")?;
        let extra = cn.filter_map(|k| !CONFIG_KEYS.contains(&k));
        if let Some(m) = extra.as_map() {
            keys.extra = m
                .iter()
                .map(|e| (e.key.clone(), e.value.to_json()))
                .collect();
        }
        for (i, k) in keys.admin_public_keys.0.iter().enumerate() {
            let n = cn
                .get("admin_public_keys")
                .map(|a| a.as_seq().and_then(|s| s.get(i)).unwrap_or(a));
            let loc = n.map(|n| n.loc.clone()).unwrap_or(cn.loc.clone());
            let at = format!("config.admin_public_keys[{i}]");
            self.check_admin_key(
                &loc,
                &at,
                k,
                "put the PUBLIC key (ssh-ed25519 AAAA... / ssh-rsa AAAA...) here and keep the private key out of the tree",
            );
        }
        Some(keys)
    }

    /// An admin public key at `loc` (field `at`): a public key, never
    /// private key material (`private_hint` says what to do then).
    pub(super) fn check_admin_key(&mut self, loc: &Loc, at: &str, key: &str, private_hint: &str) {
        if looks_private(key) {
            // the snippet masks the key the span covers
            self.d.push(
                Diagnostic::at(loc, at, "this looks like private key material; admin_public_keys takes public keys only (N9)")
                    .with_hint(private_hint)
                    .secret_span(),
            );
        } else if let Some(why) = public_key_problem(key) {
            self.d.error_hint(
                loc,
                at,
                why,
                "put an OpenSSH public key here, as in a .pub file (ssh-ed25519 AAAA... comment)",
            );
        }
    }
}

/// `config:` overrides from overlays, key by key.
fn overlay_config(doc: &mut Node, overlays: &[Node]) {
    for o in overlays {
        if let Some(oc) = o.get("config").and_then(|c| c.as_map()) {
            if doc.get("config").is_none_or(|c| c.is_null()) {
                doc.set("config", Node::new(Value::Map(vec![]), o.loc.clone()));
            }
            let c = doc.get_mut("config").expect("config");
            for e in oc {
                c.set(&e.key, e.value.clone());
            }
        }
    }
}

impl Loader<'_> {
    /// The files of `cfg/` merged: their scalar keys into one mapping (a
    /// later file's key wins), their builder lists concatenated (each item
    /// keeping its path in its own file), and where the configuration
    /// mapping is.
    #[allow(clippy::type_complexity)]
    pub(super) fn merge_cfg(
        &mut self,
        cfg_dir: &Path,
    ) -> (
        IndexMap<String, Entry>,
        IndexMap<String, Vec<Item>>,
        Option<Loc>,
    ) {
        let mut scalars: IndexMap<String, Entry> = IndexMap::new();
        let mut lists: IndexMap<String, Vec<Item>> = IndexMap::new();
        // Where the configuration mapping is (cfg/_config.yml's, even an
        // empty one, else the first file with a scalar key, else the first
        // mapping of cfg/): a missing `id` is reported there.
        let mut config_map: Option<Loc> = None;
        let mut first_map: Option<Loc> = None;
        for parsed in self.parsed_files(cfg_dir, false) {
            let node = match parsed {
                Ok(n) => n,
                Err(d) => {
                    self.d.push(d);
                    continue;
                }
            };
            let is_config =
                node.loc.file.path.ends_with("/_config.yml") || node.loc.file.path == "_config.yml";
            if is_config && node.is_null() {
                config_map = Some(node.loc.clone());
            }
            if first_map.is_none() && matches!(node.value, Value::Map(_)) {
                first_map = Some(node.loc.clone());
            }
            if matches!(node.value, Value::Map(_))
                && (config_map.is_none() || node.loc.file.path.ends_with("/_config.yml"))
                && !config_map
                    .as_ref()
                    .is_some_and(|l: &Loc| l.file.path.ends_with("/_config.yml"))
                && (node.loc.file.path.ends_with("/_config.yml")
                    || node.as_map().is_some_and(|m| {
                        m.iter().any(|e| {
                            !BUILDER_LISTS.contains(&e.key.as_str()) && e.key != "executables"
                        })
                    }))
            {
                config_map = Some(node.loc.clone());
            }
            let entries = match node.value {
                Value::Null => continue,
                Value::Map(m) => m,
                _ => {
                    self.d.error(
                        &node.loc,
                        "",
                        format!(
                            "a cfg/ file must hold a mapping, found {}",
                            node.kind_name()
                        ),
                    );
                    continue;
                }
            };
            for e in entries {
                if BUILDER_LISTS.contains(&e.key.as_str()) || e.key == "executables" {
                    match e.value.value {
                        Value::Seq(items) => {
                            let list = lists.entry(e.key.clone()).or_default();
                            for (i, n) in items.into_iter().enumerate() {
                                list.push(Item {
                                    node: n,
                                    path: format!("{}[{i}]", e.key),
                                });
                            }
                        }
                        Value::Null => {
                            lists.entry(e.key.clone()).or_default();
                        }
                        _ => self.d.error(
                            &e.value.loc,
                            &e.key,
                            format!("expected a list, found {}", e.value.kind_name()),
                        ),
                    }
                } else {
                    scalars.insert(e.key.clone(), e);
                }
            }
        }
        (scalars, lists, config_map.or(first_map))
    }
}
