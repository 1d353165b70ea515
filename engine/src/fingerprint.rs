//! Fingerprints: blake3 over a domain-separated canonical encoding.
//!
//! ## Recipe `csis-fingerprint-v1`
//!
//! ```text
//! blake3(
//!   str(RECIPE)                         -- "csis-fingerprint-v1"
//!   str(kind)                           -- e.g. "bake"
//!   value(inputs)                       -- canonical, see below
//!   u64(number of hashed deps)
//!   for each hashed dep, sorted by (name, fingerprint bytes):
//!     str(name) bytes32(fingerprint)
//! )
//! str(s)   = u64_le(byte length) ++ utf8 bytes
//! value(v) = 'n'                                   null
//!          | 'f' | 't'                             false / true
//!          | '#' str(number as JSON text)          numbers (serde_json's shortest form)
//!          | 's' str(s)                            strings
//!          | '[' u64(len) value(item)*             arrays, in order
//!          | '{' u64(len) (str(key) value(v))*     objects, keys sorted bytewise
//! ```
//!
//! Every piece is typed and length-prefixed, so no two different inputs share
//! an encoding; object key order never matters. Changing any of this is a
//! recipe change: bump [`RECIPE`] (every fingerprint then moves once).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::inputs::{enc_str, encode, Inputs};

/// The fingerprint recipe version, hashed first into every fingerprint.
pub const RECIPE: &str = "csis-fingerprint-v1";

/// A 32-byte blake3 fingerprint. Displays (and serializes) as 64 hex chars.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Fingerprint([u8; 32]);

/// Text that is not 64 hex characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fingerprint `{0}`: expected 64 hex characters")]
pub struct FingerprintParseError(pub String);

impl Fingerprint {
    /// Wrap raw bytes.
    pub const fn from_bytes(b: [u8; 32]) -> Self {
        Fingerprint(b)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Full lowercase hex (64 chars).
    pub fn to_hex(&self) -> String {
        self.hex_str().to_string()
    }

    /// The 64 lowercase hex digits as bytes, on the stack (a writer of
    /// many fingerprints, `csis plan --json`, allocates none).
    pub fn hex_bytes(&self) -> [u8; 64] {
        self.hex_str().0
    }

    /// The 64 lowercase hex digits, written with a table (no formatter
    /// call per byte: `to_hex` runs once per node of every plan).
    fn hex_str(&self) -> HexDigits {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[(b >> 4) as usize];
            out[2 * i + 1] = DIGITS[(b & 0xf) as usize];
        }
        HexDigits(out)
    }

    /// The first 16 hex chars: the form stamped into tags (`csis_fingerprint`).
    pub fn short(&self) -> String {
        self.prefix(16)
    }

    /// The first `n` hex chars (`n` <= 64), e.g. 12 for plan reasons.
    pub fn prefix(&self, n: usize) -> String {
        self.hex_str().as_str()[..n.min(64)].to_string()
    }

    /// Parse 64 hex chars (either case).
    pub fn from_hex(s: &str) -> Result<Self, FingerprintParseError> {
        let err = || FingerprintParseError(s.to_string());
        if s.len() != 64 {
            return Err(err());
        }
        // A digit's value by table, 0xff for a byte that is none (a plan
        // reads one recorded fingerprint per build); either case.
        const DIGIT: [u8; 256] = {
            let mut t = [0xffu8; 256];
            let mut i = 0;
            while i < 10 {
                t[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                t[b'a' as usize + i] = 10 + i as u8;
                t[b'A' as usize + i] = 10 + i as u8;
                i += 1;
            }
            t
        };
        let mut out = [0u8; 32];
        let mut bad = 0u8;
        for (o, pair) in out.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
            let (hi, lo) = (DIGIT[pair[0] as usize], DIGIT[pair[1] as usize]);
            bad |= (hi | lo) & 0xf0;
            *o = hi << 4 | (lo & 0x0f);
        }
        if bad != 0 {
            return Err(err());
        }
        Ok(Fingerprint(out))
    }

    /// Whether `short` (e.g. a 16-char tag value) is a prefix of this fingerprint.
    pub fn starts_with(&self, short: &str) -> bool {
        !short.is_empty()
            && short.len() <= 64
            && self
                .hex_str()
                .as_str()
                .as_bytes()
                .starts_with(short.to_ascii_lowercase().as_bytes())
    }

    /// The fingerprint of one node: see the module docs for the recipe.
    /// `hashed_deps` may be in any order; it is sorted here.
    pub fn compute(kind: &str, inputs: &Value, hashed_deps: &[(&str, Fingerprint)]) -> Self {
        let mut buf = Vec::new();
        Fingerprint::head(&mut buf, kind);
        encode(&mut buf, inputs);
        Fingerprint::finish(&mut buf, &mut hashed_deps.to_vec())
    }

    /// [`Fingerprint::compute`] of inputs already encoded (a node's,
    /// [`Inputs`]): the same fingerprint as of their value. `buf` is reused
    /// from one node to the next (the encoding is hashed in one call);
    /// `hashed_deps` is sorted in place.
    pub fn compute_encoded(
        buf: &mut Vec<u8>,
        kind: &str,
        inputs: &Inputs,
        hashed_deps: &mut [(&str, Fingerprint)],
    ) -> Self {
        buf.clear();
        Fingerprint::head(buf, kind);
        buf.extend_from_slice(inputs.as_bytes());
        Fingerprint::finish(buf, hashed_deps)
    }

    /// The fingerprint of a node with no hashed dependency (a node's
    /// inputs as [`Node`](crate::Node) holds them).
    pub fn of_inputs(kind: &str, inputs: &Inputs) -> Self {
        Fingerprint::compute_encoded(&mut Vec::new(), kind, inputs, &mut [])
    }

    /// The recipe and the kind, the encoding's first pieces.
    fn head(buf: &mut Vec<u8>, kind: &str) {
        enc_str(buf, RECIPE);
        enc_str(buf, kind);
    }

    /// The hashed dependencies after the inputs in `buf`, and the hash.
    fn finish(buf: &mut Vec<u8>, hashed_deps: &mut [(&str, Fingerprint)]) -> Self {
        hashed_deps.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
        buf.extend_from_slice(&(hashed_deps.len() as u64).to_le_bytes());
        for (name, fp) in hashed_deps.iter() {
            enc_str(buf, name);
            buf.extend_from_slice(&fp.0);
        }
        Fingerprint(*blake3::hash(buf).as_bytes())
    }

    /// blake3 of arbitrary bytes (e.g. a file's content for an input field).
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Fingerprint(*blake3::hash(bytes).as_bytes())
    }
}

/// A fingerprint's 64 hex digits on the stack.
struct HexDigits([u8; 64]);

impl HexDigits {
    fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written into it.
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl fmt::Display for HexDigits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hex_str().as_str())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.prefix(16))
    }
}

impl FromStr for Fingerprint {
    type Err = FingerprintParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fingerprint::from_hex(s)
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The digits as one str: no formatter and no String (a plan
        // serializes one per node).
        s.serialize_str(self.hex_str().as_str())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Fingerprint::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

/// The canonical encoding of a value (what [`Fingerprint::compute`] hashes
/// for the inputs). Two values have equal encodings iff they are equal as
/// JSON values regardless of object key order.
pub fn canonical_bytes(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, v);
    out
}

/// One field that differs between two canonical input values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldChange {
    /// Path to the field, e.g. `mods[1].content` (empty for the root).
    pub path: String,
    /// The old value; `None` when the field was added.
    pub old: Option<Value>,
    /// The new value; `None` when the field was removed.
    pub new: Option<Value>,
    /// The innermost list item the field is in, by its `path` or `name`
    /// when it has one that did not change (`playbooks/web.yml`), so that
    /// people need not count list items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
}

fn short_value(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(Value::String(s)) if s.chars().count() > 24 => {
            let head: String = s.chars().take(8).collect();
            format!("{head}..")
        }
        Some(Value::String(s)) => s.clone(),
        Some(x @ (Value::Array(_) | Value::Object(_))) => {
            let t = x.to_string();
            if t.chars().count() > 40 {
                let head: String = t.chars().take(36).collect();
                format!("{head}..")
            } else {
                t
            }
        }
        Some(x) => x.to_string(),
    }
}

/// A content hash or fingerprint: shown by its first 8 characters.
fn is_digest(s: &str) -> bool {
    s.len() >= 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Two texts that differ, each cut to a window around the first difference
/// (so `--explain` shows what changed, not a common prefix).
fn around_difference(a: &str, b: &str) -> (String, String) {
    const WIDTH: usize = 48;
    let ac: Vec<char> = a.chars().collect();
    let bc: Vec<char> = b.chars().collect();
    if ac.len() <= WIDTH && bc.len() <= WIDTH {
        return (a.to_string(), b.to_string());
    }
    let first = ac.iter().zip(&bc).take_while(|(x, y)| x == y).count();
    let start = first.saturating_sub(16);
    let cut = |c: &[char]| {
        let end = (start + WIDTH).min(c.len());
        let mid: String = c[start.min(c.len())..end].iter().collect();
        format!(
            "{}{mid}{}",
            if start > 0 { ".." } else { "" },
            if end < c.len() { ".." } else { "" }
        )
    };
    (cut(&ac), cut(&bc))
}

/// How inputs mark a redacted value (a token standing for a secret).
pub const REDACTED_PREFIX: &str = "<secret:";

impl fmt::Display for FieldChange {
    /// `mods[1].content: 3f2a8c1d.. -> 9b1c22e0..`, or with the item's
    /// name: `mods[0].files[0].blake3 (playbooks/web.yml): cdf8.. -> 8471..`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(root)".to_string()
        } else {
            match &self.item {
                Some(i) => format!("{} ({i})", self.path),
                None => self.path.clone(),
            }
        };
        if let (Some(Value::String(a)), Some(Value::String(b))) = (&self.old, &self.new) {
            // A redacted value (`<secret:HEX>`, a keyed hash in place of a
            // secret): say so rather than show two tokens.
            if a.contains(REDACTED_PREFIX) || b.contains(REDACTED_PREFIX) {
                return write!(f, "{path}: a secret value changed");
            }
            if !is_digest(a) || !is_digest(b) {
                let (a, b) = around_difference(a, b);
                return write!(f, "{path}: {a} -> {b}");
            }
        }
        write!(
            f,
            "{path}: {} -> {}",
            short_value(&self.old),
            short_value(&self.new)
        )
    }
}

fn key_path(base: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (base.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{base}.{key}"),
        (_, false) => format!("{base}[{}]", Value::String(key.to_string())),
    }
}

/// An item's identity: its unchanged `path` or `name` string.
fn item_name(a: &Value, b: &Value) -> Option<String> {
    ["path", "name"]
        .iter()
        .find_map(|k| match (a.get(k), b.get(k)) {
            (Some(Value::String(x)), Some(Value::String(y))) if x == y => Some(x.clone()),
            _ => None,
        })
}

fn diff_into(
    path: &str,
    item: &Option<String>,
    old: &Value,
    new: &Value,
    out: &mut Vec<FieldChange>,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = key_path(path, k);
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff_into(&p, item, x, y, out),
                    (x, y) => out.push(FieldChange {
                        path: p,
                        old: x.cloned(),
                        new: y.cloned(),
                        item: item.clone(),
                    }),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{path}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => {
                        let named = item_name(x, y).or_else(|| item.clone());
                        diff_into(&p, &named, x, y, out)
                    }
                    (x, y) => out.push(FieldChange {
                        path: p,
                        old: x.cloned(),
                        new: y.cloned(),
                        item: item.clone(),
                    }),
                }
            }
        }
        (a, b) => {
            if a != b {
                out.push(FieldChange {
                    path: path.to_string(),
                    old: Some(a.clone()),
                    new: Some(b.clone()),
                    item: item.clone(),
                })
            }
        }
    }
}

/// Field-by-field differences between two canonical input values, in path
/// order (object keys sorted, array items by index). Equal values give an
/// empty list. Used by `csis plan --explain`.
pub fn diff(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff_into("", &None, old, new, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hex_is_each_byte_as_two_lowercase_digits() {
        for seed in 0u8..=255 {
            let mut bytes = [0u8; 32];
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = seed
                    .wrapping_mul(31)
                    .wrapping_add((i as u8).wrapping_mul(97));
            }
            let f = Fingerprint::from_bytes(bytes);
            let slow: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(f.to_hex(), slow);
            assert_eq!(f.to_string(), slow);
            assert_eq!(f.prefix(12), slow[..12]);
            assert!(f.starts_with(&slow[..16].to_ascii_uppercase()));
            assert!(!f.starts_with(&format!("{slow}0")));
        }
    }

    #[test]
    fn hex_round_trip_and_short() {
        let f = Fingerprint::compute("bake", &json!({"a": 1}), &[]);
        let hex = f.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(f.short().len(), 16);
        assert!(hex.starts_with(&f.short()));
        assert!(f.starts_with(&f.short()));
        assert_eq!(Fingerprint::from_hex(&hex).unwrap(), f);
        assert_eq!(Fingerprint::from_hex(&hex.to_uppercase()).unwrap(), f);
        assert!(Fingerprint::from_hex("abc").is_err());
        assert!(Fingerprint::from_hex(&"g".repeat(64)).is_err());
        let j = serde_json::to_string(&f).unwrap();
        assert_eq!(j, format!("\"{hex}\""));
        assert_eq!(serde_json::from_str::<Fingerprint>(&j).unwrap(), f);
    }

    #[test]
    fn encoding_is_typed() {
        // Values that a naive text concatenation would confuse.
        let pairs = [
            (json!("1"), json!(1)),
            (json!(null), json!("null")),
            (json!(["ab", "c"]), json!(["a", "bc"])),
            (json!({"a": "b"}), json!({"ab": ""})),
            (json!([]), json!({})),
            (json!(true), json!("true")),
            (json!([[1], 2]), json!([1, [2]])),
        ];
        for (a, b) in pairs {
            assert_ne!(canonical_bytes(&a), canonical_bytes(&b), "{a} vs {b}");
            assert_ne!(
                Fingerprint::compute("k", &a, &[]),
                Fingerprint::compute("k", &b, &[])
            );
        }
    }

    #[test]
    fn a_changed_field_names_the_list_item_it_is_in() {
        let old = json!({"mods": [{"name": "setup", "files": [
            {"path": "a.yml", "blake3": "1".repeat(64)},
            {"path": "b.yml", "blake3": "2".repeat(64)}]}]});
        let mut new = old.clone();
        new["mods"][0]["files"][1]["blake3"] = json!("3".repeat(64));
        let d = diff(&old, &new);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "mods[0].files[1].blake3");
        assert_eq!(d[0].item.as_deref(), Some("b.yml"));
        assert_eq!(
            d[0].to_string(),
            "mods[0].files[1].blake3 (b.yml): 22222222.. -> 33333333.."
        );
        // A renamed item is not named by its old name; the enclosing one is.
        new["mods"][0]["files"][1]["path"] = json!("c.yml");
        let d = diff(&old, &new);
        assert!(
            d.iter().all(|c| c.item.as_deref() == Some("setup")),
            "{d:?}"
        );
        // Outside any named item: no name.
        let d = diff(&json!({"disk": 8}), &json!({"disk": 9}));
        assert_eq!(d[0].item, None);
        assert_eq!(d[0].to_string(), "disk: 8 -> 9");
    }

    #[test]
    fn a_changed_text_is_shown_around_its_difference() {
        let old = json!({"script": ["echo '<h1>hello from csis</h1>' > /srv/www/index.html"]});
        let new =
            json!({"script": ["echo '<h1>hello again from csis</h1>' > /srv/www/index.html"]});
        let shown: Vec<String> = diff(&old, &new).iter().map(|c| c.to_string()).collect();
        assert_eq!(shown.len(), 1);
        assert!(shown[0].starts_with("script[0]: "), "{}", shown[0]);
        assert!(shown[0].contains("hello from"), "{}", shown[0]);
        assert!(shown[0].contains("hello again"), "{}", shown[0]);
        let short: Vec<String> = diff(&json!({"a": "x"}), &json!({"a": "y"}))
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(short, ["a: x -> y"]);
    }

    #[test]
    fn diff_field_by_field() {
        let old = json!({"series": "dask", "mods": [{"name": "a", "content": "3f2a".repeat(16)}, {"name": "b"}], "disk": 20});
        let new = json!({"series": "dask", "mods": [{"name": "a", "content": "9b1c".repeat(16)}], "disk": 30, "x y": true});
        let d = diff(&old, &new);
        let shown: Vec<String> = d.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            shown,
            [
                "disk: 20 -> 30",
                "mods[0].content (a): 3f2a3f2a.. -> 9b1c9b1c..",
                "mods[1]: {\"name\":\"b\"} -> (absent)",
                "[\"x y\"]: (absent) -> true",
            ]
        );
        assert!(diff(&old, &old).is_empty());
    }
}
