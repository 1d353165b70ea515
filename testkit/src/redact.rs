//! Redaction of what changes from run to run in csis's JSON reports (ids,
//! times, fingerprints, the tree's path), so that a snapshot holds only the
//! stable shape.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Redactions: build ids become `[build-N]` in order of appearance; run
/// ids `[run]`; 64-hex fingerprints `[fp-N]` in order of appearance, and a
/// shorter hex value under a fingerprint key `[fp-N:LEN]` (N the whole one
/// it begins, so a record holding a prefix where the whole belongs does
/// not snapshot the same); the tree's path `[root]`; times 0.
pub struct Redact {
    root: String,
    ids: BTreeMap<String, String>,
    /// Fingerprints in order of appearance (`[fp-N]` is the Nth).
    fps: Vec<String>,
    /// Names given to ids ([`Redact::name`]), replaced first.
    named: Vec<(String, String)>,
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn is_run_id(s: &str) -> bool {
    // 2026_12_01t10_10_03_123456
    let b = s.as_bytes();
    b.len() >= 19 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'_' && b[10] == b't'
}

/// `dddd-dd-dd-dddddd` -> `[time]`.
fn redact_times(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let shape = "dddd-dd-dd-dddddd";
    let fits = |i: usize| {
        i + shape.len() <= b.len()
            && shape.chars().zip(&b[i..]).all(|(p, c)| {
                if p == 'd' {
                    c.is_ascii_digit()
                } else {
                    *c == p
                }
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if fits(i) {
            out.push_str("[time]");
            i += shape.len();
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

impl Redact {
    /// Redactions for the tree at `root`.
    pub fn new(root: &Path) -> Redact {
        Redact {
            root: root.display().to_string(),
            ids: BTreeMap::new(),
            fps: Vec::new(),
            named: Vec::new(),
        }
    }

    /// Redact `id` (a build id of any runtime) as `name` wherever it
    /// appears, before any other redaction: a snapshot then says which
    /// build it is (`[web.0]`) rather than in which order it appeared.
    pub fn name(&mut self, id: &str, name: &str) {
        if !id.is_empty() && !self.named.iter().any(|(i, _)| i == id) {
            self.named.push((id.to_string(), name.to_string()));
            // a longer id first, so that no id is cut by another it holds
            self.named.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
        }
    }

    /// A string redacted: the root, build ids, times in names, run ids.
    pub fn text(&mut self, s: &str) -> String {
        let mut s = s.replace(&self.root, "[root]");
        for (id, name) in &self.named {
            s = s.replace(id.as_str(), name);
        }
        // Build ids inside strings (`dummy-<hex>-<n>`).
        let mut out = String::new();
        while let Some(i) = s.find("dummy-") {
            out.push_str(&s[..i]);
            let rest = &s[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(rest.len());
            let id = &rest[..end];
            let n = self.ids.len() + 1;
            let name = self
                .ids
                .entry(id.to_string())
                .or_insert_with(|| {
                    if id.starts_with("dummy-vendor-") {
                        "[vendor-image]".to_string()
                    } else {
                        format!("[build-{n}]")
                    }
                })
                .clone();
            out.push_str(&name);
            s = rest[end..].to_string();
        }
        out.push_str(&s);
        // Times in names (`web-sim-bake-2026-12-01-114805`).
        let out = redact_times(&out);
        // Run ids anywhere in the string.
        let mut res = String::new();
        let chars: Vec<char> = out.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let tail: String = chars[i..].iter().take(26).collect();
            if is_run_id(&tail) && (i == 0 || !chars[i - 1].is_ascii_digit()) {
                let mut j = i;
                while j < chars.len()
                    && (chars[j].is_ascii_digit() || chars[j] == '_' || chars[j] == 't')
                {
                    j += 1;
                }
                res.push_str("[run]");
                i = j;
            } else {
                res.push(chars[i]);
                i += 1;
            }
        }
        res
    }

    /// `[fp-N]` for a whole fingerprint, `[fp-N:LEN]` for a shorter one.
    fn fingerprint(&mut self, s: &str) -> String {
        let at = |fps: &[String]| fps.iter().position(|f| f.starts_with(s));
        let n = match at(&self.fps) {
            Some(i) => i + 1,
            None => {
                self.fps.push(s.to_string());
                self.fps.len()
            }
        };
        if s.len() == 64 {
            format!("[fp-{n}]")
        } else {
            format!("[fp-{n}:{}]", s.len())
        }
    }

    /// A JSON value redacted: every string (and key) as [`Redact::text`],
    /// whole fingerprints, fingerprint fields, and times and ages set to 0.
    pub fn value(&mut self, v: Value) -> Value {
        match v {
            Value::String(s) => {
                if s.len() == 64 && is_hex(&s) {
                    return Value::String(self.fingerprint(&s));
                }
                Value::String(self.text(&s))
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|x| self.value(x)).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, x)| {
                        let x = match k.as_str() {
                            "elapsed_ms" | "created" | "age_days" => Value::from(0),
                            "time" if x.is_string() => Value::String("[time]".into()),
                            // `csis-test-<runtime>-<series>-<pid>`
                            "instance"
                                if x.as_str().is_some_and(|s| s.starts_with("csis-test-")) =>
                            {
                                Value::String("[test-machine]".into())
                            }
                            "previous" | "current" | "csis_fingerprint" | "fingerprint"
                                if x.as_str().is_some_and(is_hex) =>
                            {
                                Value::String(self.fingerprint(x.as_str().unwrap_or_default()))
                            }
                            _ => self.value(x),
                        };
                        (self.text(&k), x)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_times_runs_fingerprints_and_the_root_are_redacted() {
        let root = Path::new("/tmp/x/tree");
        let mut r = Redact::new(root);
        let fp = "a".repeat(64);
        let v = r.value(json!({
            "build": "dummy-0123abcd-1",
            "again": "dummy-0123abcd-1",
            "other": "dummy-4567ef01-2",
            "vendor": "dummy-vendor-deb12",
            "name": "web-sim-bake-2026-12-01-114805",
            "run": "run 2026_12_01t10_10_03_123456 done",
            "path": "/tmp/x/tree/meta-state/lineage.yaml",
            "fingerprint": "abcdef012345",
            "whole": fp,
            "again_whole": fp,
            "csis_fingerprint": &fp[..16],
            "elapsed_ms": 17,
            "kept": 3,
        }));
        assert_eq!(
            v,
            json!({
                "build": "[build-1]",
                "again": "[build-1]",
                "other": "[build-2]",
                "vendor": "[vendor-image]",
                "name": "web-sim-bake-[time]",
                "run": "run [run] done",
                "path": "[root]/meta-state/lineage.yaml",
                "fingerprint": "[fp-2:12]",
                "whole": "[fp-1]",
                "again_whole": "[fp-1]",
                "csis_fingerprint": "[fp-1:16]",
                "elapsed_ms": 0,
                "kept": 3,
            })
        );
    }

    #[test]
    fn named_ids_keep_their_names() {
        let mut r = Redact::new(Path::new("/tmp/x/tree"));
        r.name("dummy-0123abcd-1", "[web.0]");
        r.name("dummy-0123abcd-12", "[web.1]");
        assert_eq!(
            r.text("disposed dummy-0123abcd-12, kept dummy-0123abcd-1 and dummy-4567ef01-2"),
            "disposed [web.1], kept [web.0] and [build-1]"
        );
    }
}
