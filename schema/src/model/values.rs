//! The value shapes several models share: free-form JSON (`config:`,
//! `query:`), `true`/`false` or a list of names, one string or a list, an
//! integer or `default`.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Free-form YAML carried as JSON (`config:` maps, `query:`).
pub type Json = serde_json::Value;
/// A free-form mapping.
pub type JsonMap = IndexMap<String, Json>;

pub(crate) fn default_true() -> bool {
    true
}
pub(crate) fn default_str() -> String {
    "default".to_string()
}
pub(crate) fn is_default_sentinel(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || t.eq_ignore_ascii_case("default")
}

/// `true`/`false`, or a list of names (`apply_release: [aws-east2]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BoolOrList {
    Bool(bool),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for BoolOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BoolOrList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false or a list of names")
            }
            fn visit_bool<E>(self, v: bool) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(false))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BoolOrList, E> {
                match v.trim().to_ascii_lowercase().as_str() {
                    "true" | "yes" | "on" => Ok(BoolOrList::Bool(true)),
                    "false" | "no" | "off" => Ok(BoolOrList::Bool(false)),
                    _ => Err(E::custom(format!(
                        "expected true, false or a list of names, found `{v}`"
                    ))),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<BoolOrList, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<String>()? {
                    out.push(x);
                }
                Ok(BoolOrList::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for BoolOrList {
    fn default() -> Self {
        BoolOrList::Bool(false)
    }
}

impl BoolOrList {
    /// Does the setting allow `name` (a builder or runtime name)?
    pub fn allows(&self, names: &[&str]) -> bool {
        match self {
            BoolOrList::Bool(b) => *b,
            BoolOrList::List(l) => l.iter().any(|x| names.iter().any(|n| x == n)),
        }
    }
}

/// A list that also accepts one string (`admin_public_keys: "ssh-ed25519 ..."`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "OneOrManyRepr")]
pub struct OneOrMany(pub Vec<String>);

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrManyRepr {
    One(String),
    Many(Vec<String>),
}
impl From<OneOrManyRepr> for OneOrMany {
    fn from(r: OneOrManyRepr) -> Self {
        match r {
            OneOrManyRepr::One(s) => OneOrMany(vec![s]),
            OneOrManyRepr::Many(v) => OneOrMany(v),
        }
    }
}

/// An integer, or the sentinel `default` (disk sizes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum IntOrDefault {
    #[default]
    Default,
    Value(u32),
}

impl IntOrDefault {
    pub fn get(self) -> Option<u32> {
        match self {
            IntOrDefault::Default => None,
            IntOrDefault::Value(v) => Some(v),
        }
    }
}

impl Serialize for IntOrDefault {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrDefault::Default => s.serialize_str("default"),
            IntOrDefault::Value(v) => s.serialize_u32(*v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrDefault {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IntOrDefault;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size in GB or `default`")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrDefault, E> {
                if v <= 0 || v > u32::MAX as i64 {
                    return Err(E::custom(format!(
                        "a size must be a positive number of GB, not {v}"
                    )));
                }
                Ok(IntOrDefault::Value(v as u32))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrDefault, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<IntOrDefault, E> {
                if v.fract() == 0.0 {
                    self.visit_i64(v as i64)
                } else {
                    Err(E::custom(format!(
                        "a size must be a whole number of GB, not {v}"
                    )))
                }
            }
            fn visit_unit<E>(self) -> Result<IntOrDefault, E> {
                Ok(IntOrDefault::Default)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrDefault, E> {
                let t = v.trim();
                if is_default_sentinel(t) {
                    Ok(IntOrDefault::Default)
                } else if let Ok(n) = t
                    .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                    .parse::<i64>()
                {
                    self.visit_i64(n)
                } else {
                    Err(E::custom(format!(
                        "expected a size in GB or `default`, found `{v}`"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}
