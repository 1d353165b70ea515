//! A node's inputs as the graph keeps them: their canonical encoding (the
//! fingerprint recipe's `value(v)`, [`crate::fingerprint`]), not a JSON
//! tree. A plan of 5,000 images holds ~15,000 nodes' inputs; as maps of
//! `String` keys and `Value`s they took ~17 MB of the plan's ~80 MB heap,
//! encoded they take a few, and the fingerprint hashes the bytes as they
//! are (no walk of a tree per node). The value comes back whole
//! ([`Inputs::to_value`]) or one field at a time ([`Inputs::get`]) where a
//! reader needs it: an explanation, a record's canonical document, the
//! graph page, a dispose node's `keep`.

use std::fmt;

use serde_json::{Map, Number, Value};

/// Canonically encoded inputs. Two values equal as JSON (whatever their
/// key order) have equal encodings, so `==` is JSON equality.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Inputs(Box<[u8]>);

impl Inputs {
    /// The encoding of `v`.
    pub fn new(v: &Value) -> Self {
        let mut out = Vec::with_capacity(64);
        encode(&mut out, v);
        Inputs(out.into_boxed_slice())
    }

    /// `null`.
    pub fn null() -> Self {
        Inputs(Box::new(*b"n"))
    }

    /// The encoded bytes (what the fingerprint hashes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The value, decoded.
    pub fn to_value(&self) -> Value {
        let mut r = Reader(&self.0);
        r.value()
    }

    /// The value of the top-level field `key` (`None` when the inputs are
    /// not an object or have no such field), decoding only that field.
    pub fn get(&self, key: &str) -> Option<Value> {
        let mut r = Reader(&self.0);
        let n = r.object_len()?;
        for _ in 0..n {
            if r.raw() == key.as_bytes() {
                return Some(r.value());
            }
            r.skip();
        }
        None
    }

    /// Set the top-level field `key` to `v` (added or replaced, in key
    /// order), re-encoding only that field.
    ///
    /// # Panics
    /// If the inputs are not an object: a caller's bug, as indexing a
    /// `Value` that is not a map to assign would be.
    pub fn set(&mut self, key: &str, v: &Value) {
        let mut r = Reader(&self.0);
        let n = r
            .object_len()
            .expect("inputs to set a field in are an object");
        let total = self.0.len();
        let (mut at, mut end, mut found) = (total, total, false);
        for _ in 0..n {
            let start = total - r.0.len();
            match r.raw().cmp(key.as_bytes()) {
                std::cmp::Ordering::Less => r.skip(),
                std::cmp::Ordering::Equal => {
                    r.skip();
                    (at, end, found) = (start, total - r.0.len(), true);
                    break;
                }
                std::cmp::Ordering::Greater => {
                    (at, end) = (start, start);
                    break;
                }
            }
        }
        let mut out = Vec::with_capacity(total + key.len() + 64);
        out.push(b'{');
        let len = if found { n } else { n + 1 };
        out.extend_from_slice(&(len as u64).to_le_bytes());
        out.extend_from_slice(&self.0[9..at]);
        enc_str(&mut out, key);
        encode(&mut out, v);
        out.extend_from_slice(&self.0[end..]);
        self.0 = out.into_boxed_slice();
    }
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs::null()
    }
}

impl fmt::Debug for Inputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Inputs({})", self.to_value())
    }
}

impl From<&Value> for Inputs {
    fn from(v: &Value) -> Self {
        Inputs::new(v)
    }
}

pub(crate) fn enc_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `value(v)` of the recipe.
pub(crate) fn encode(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(b'n'),
        Value::Bool(false) => out.push(b'f'),
        Value::Bool(true) => out.push(b't'),
        Value::Number(n) => {
            out.push(b'#');
            enc_str(out, &n.to_string());
        }
        Value::String(s) => {
            out.push(b's');
            enc_str(out, s);
        }
        Value::Array(a) => {
            out.push(b'[');
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            for x in a {
                encode(out, x);
            }
        }
        Value::Object(m) => {
            out.push(b'{');
            out.extend_from_slice(&(m.len() as u64).to_le_bytes());
            // Keys in byte order. serde_json's default map iterates sorted
            // already; with `preserve_order` it may not: then sort a copy.
            let sorted = m
                .keys()
                .zip(m.keys().skip(1))
                .all(|(a, b)| a.as_bytes() < b.as_bytes());
            if sorted {
                for (k, x) in m {
                    enc_str(out, k);
                    encode(out, x);
                }
            } else {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                for (k, x) in entries {
                    enc_str(out, k);
                    encode(out, x);
                }
            }
        }
    }
}

/// A reader of bytes [`encode`] wrote (only ever those: a malformed
/// encoding is a bug here, and panics).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn byte(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn len(&mut self) -> usize {
        let b: [u8; 8] = self.take(8).try_into().expect("eight bytes");
        u64::from_le_bytes(b) as usize
    }
    /// A string's bytes (a key compared, a value skipped: no UTF-8 check).
    fn raw(&mut self) -> &'a [u8] {
        let n = self.len();
        self.take(n)
    }
    fn str(&mut self) -> &'a str {
        std::str::from_utf8(self.raw()).expect("encoded from a str")
    }
    /// The number of fields when an object comes next (consumed), else
    /// `None` (nothing consumed).
    fn object_len(&mut self) -> Option<usize> {
        if self.0.first() != Some(&b'{') {
            return None;
        }
        self.byte();
        Some(self.len())
    }
    fn value(&mut self) -> Value {
        match self.byte() {
            b'n' => Value::Null,
            b'f' => Value::Bool(false),
            b't' => Value::Bool(true),
            b'#' => Value::Number(self.str().parse::<Number>().expect("encoded from a number")),
            b's' => Value::String(self.str().to_string()),
            b'[' => {
                let n = self.len();
                Value::Array((0..n).map(|_| self.value()).collect())
            }
            b'{' => {
                let n = self.len();
                let mut m = Map::new();
                for _ in 0..n {
                    let k = self.str().to_string();
                    m.insert(k, self.value());
                }
                Value::Object(m)
            }
            t => panic!("no value is encoded with tag {t}"),
        }
    }
    fn skip(&mut self) {
        match self.byte() {
            b'n' | b'f' | b't' => {}
            b'#' | b's' => {
                self.raw();
            }
            b'[' => {
                for _ in 0..self.len() {
                    self.skip();
                }
            }
            b'{' => {
                for _ in 0..self.len() {
                    self.raw();
                    self.skip();
                }
            }
            t => panic!("no value is encoded with tag {t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn samples() -> Vec<Value> {
        vec![
            Value::Null,
            json!(true),
            json!(false),
            json!(0),
            json!(-7),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.25e-7),
            json!(""),
            json!("ünïcødé"),
            json!([]),
            json!({}),
            json!([1, "a", null, [true], {"k": {}}]),
            json!({"b": 1, "a": [{"z": 2, "y": "x"}], "": null, "mods": []}),
        ]
    }

    #[test]
    fn a_value_decodes_to_itself() {
        for v in samples() {
            let i = Inputs::new(&v);
            assert_eq!(i.to_value(), v, "{v}");
            assert_eq!(i.as_bytes(), crate::canonical_bytes(&v).as_slice(), "{v}");
        }
    }

    #[test]
    fn equal_values_are_equal_inputs_and_different_ones_not() {
        let a = json!({"x": 1, "y": [1, 2]});
        let b: Value = serde_json::from_str(r#"{"y": [1, 2], "x": 1}"#).unwrap();
        assert_eq!(Inputs::new(&a), Inputs::new(&b));
        assert_ne!(Inputs::new(&a), Inputs::new(&json!({"x": 1, "y": [2, 1]})));
        assert_ne!(Inputs::new(&json!(1)), Inputs::new(&json!("1")));
    }

    #[test]
    fn a_field_is_read_alone() {
        let v = json!({"a": [1, {"b": "c"}], "keep": 3, "z": {"q": null}});
        let i = Inputs::new(&v);
        assert_eq!(i.get("keep"), Some(json!(3)));
        assert_eq!(i.get("z"), Some(json!({"q": null})));
        assert_eq!(i.get("a"), Some(json!([1, {"b": "c"}])));
        assert_eq!(i.get("b"), None);
        assert_eq!(Inputs::new(&json!([1])).get("a"), None);
        assert_eq!(Inputs::null().get("a"), None);
    }

    #[test]
    fn a_field_set_is_the_encoding_of_the_value_with_it_set() {
        let base = json!({"b": 1, "d": [true], "f": "x"});
        for (key, v) in [
            ("a", json!([1, 2])),
            ("b", json!({"new": null})),
            ("c", json!("mid")),
            ("d", json!(false)),
            ("f", json!(9)),
            ("g", json!([])),
        ] {
            let mut i = Inputs::new(&base);
            i.set(key, &v);
            let mut want = base.clone();
            want[key] = v.clone();
            assert_eq!(i, Inputs::new(&want), "{key} = {v}");
            assert_eq!(i.to_value(), want);
        }
        let mut empty = Inputs::new(&json!({}));
        empty.set("mods", &json!([]));
        assert_eq!(empty.to_value(), json!({"mods": []}));
    }

    #[test]
    #[should_panic(expected = "an object")]
    fn a_field_is_not_set_in_a_value_that_is_no_object() {
        Inputs::new(&json!([1])).set("a", &json!(1));
    }
}
