//! Deserializing typed values from nodes: [`from_node`], whose errors carry
//! the file, line, column and field path of the offending node.
//!
//! The deserializer is lenient where the original (pydantic, lax mode) is:
//! a number or boolean where a string is declared becomes its text, a null
//! where a list or mapping is declared becomes empty, a numeric string where a
//! number is declared becomes the number.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::Deserialize;

use super::node::{Entry, Node, Value};
use super::path::FieldPath;
use crate::diag::Diagnostic;
use crate::span::Loc;

/// A deserialization error with the node it is about.
#[derive(Debug)]
pub struct DeError {
    pub message: String,
    pub loc: Option<Loc>,
    pub path: Option<String>,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for DeError {}
impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            loc: None,
            path: None,
        }
    }
}

impl DeError {
    fn at(mut self, loc: &Loc, path: &FieldPath) -> Self {
        if self.loc.is_none() {
            self.loc = Some(loc.clone());
            self.path = Some(path.render());
        }
        self
    }

    /// Turn into a diagnostic; unknown-field errors become
    /// `<path>: unknown field` with the accepted fields (or a known
    /// replacement) as the hint.
    pub fn into_diagnostic(self, fallback: &Loc) -> Diagnostic {
        let loc = self.loc.unwrap_or_else(|| fallback.clone());
        let path = self.path.unwrap_or_default();
        let (message, hint) = split_serde_message(&self.message, &path);
        Diagnostic::at(&loc, &path, message).with_hint_opt(hint)
    }
}

/// Hints for keys the original retired or never had.
pub fn legacy_hint(field: &str) -> Option<&'static str> {
    Some(match field {
        "security_group_ids" => "security_group_ids was retired (stage 63): move the ids to `addl_security_groups`",
        "profile" => "the AWS profile is `credentials.profile_name`",
        "parameters" => "`parameters` was retired: storage module inputs go under `variables:`",
        "image_name" => "`image_name` was retired (stage 63): pin a vendor image with `image_id`, or use `query`",
        "access_key" | "secret_key" => "no credential belongs in the tree: use `profile` or the environment",
        "skips_credentials_validation" => "the spelling is `skip_credentials_validation`",
        "runtime_classifier" | "executables" => "not a runtime field; remove it",
        "profile_nme" => "did you mean `profile_name`?",
        "groups" => "group ownership lives on the image (`group:`)",
        "output_image_name" => "`output_image_name` belongs to the legacy base_images/ shape",
        _ => return None,
    })
}

fn split_serde_message(msg: &str, path: &str) -> (String, Option<String>) {
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            let field = &rest[..end];
            let tail = rest[end + 1..].trim_start_matches(',').trim();
            let hint = legacy_hint(field).map(str::to_string).or_else(|| {
                if tail.is_empty() {
                    None
                } else {
                    Some(tail.replacen("expected", "accepted:", 1))
                }
            });
            let _ = path;
            return ("unknown field".to_string(), hint);
        }
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        if let Some(end) = rest.find('`') {
            let v = &rest[..end];
            let tail = rest[end + 1..].trim_start_matches(',').trim();
            return (
                format!("unknown value `{v}`"),
                Some(tail.replacen("expected", "accepted:", 1)),
            );
        }
    }
    (msg.to_string(), None)
}

/// Deserialize a typed value from a node; `path` is the field path of the
/// node (`runtime_builders[0]`).
pub fn from_node<'de, T: Deserialize<'de>>(node: &'de Node, path: &str) -> Result<T, Diagnostic> {
    let root = FieldPath::Root(path);
    T::deserialize(NodeDe { node, path: &root }).map_err(|e| e.into_diagnostic(&node.loc))
}

/// Like [`from_node`], but keeps going past unknown fields: each one is
/// reported, dropped, and the value deserialized again, so every unknown key
/// of an entry is reported in one load (up to 64).
pub fn from_node_all<T: serde::de::DeserializeOwned>(
    node: &Node,
    path: &str,
) -> Result<T, Vec<Diagnostic>> {
    let first = match from_node::<T>(node, path) {
        Ok(v) => return Ok(v),
        Err(d) => d,
    };
    let mut out = vec![first];
    let mut work = node.clone();
    for _ in 0..64 {
        let last = out.last().expect("one");
        if last.message != "unknown field" || !remove_key_at(&mut work, last.line, last.column) {
            return Err(out);
        }
        match from_node::<T>(&work, path) {
            Ok(_) => return Err(out),
            Err(d) => out.push(d),
        }
    }
    Err(out)
}

/// Remove the mapping entry whose key is at `line:column`.
fn remove_key_at(node: &mut Node, line: u32, column: u32) -> bool {
    match &mut node.value {
        Value::Map(m) => {
            if let Some(i) = m
                .iter()
                .position(|e| e.key_loc.line == line && e.key_loc.column == column)
            {
                m.remove(i);
                return true;
            }
            m.iter_mut()
                .any(|e| remove_key_at(&mut e.value, line, column))
        }
        Value::Seq(s) => s.iter_mut().any(|n| remove_key_at(n, line, column)),
        _ => false,
    }
}

/// The serde deserializer over a node.
pub struct NodeDe<'a, 'p> {
    node: &'a Node,
    path: &'p FieldPath<'p>,
}

impl<'a, 'p> NodeDe<'a, 'p> {
    pub fn new(node: &'a Node, path: &'p FieldPath<'p>) -> Self {
        NodeDe { node, path }
    }
    fn wrap<T>(&self, r: Result<T, DeError>) -> Result<T, DeError> {
        r.map_err(|e| e.at(&self.node.loc, self.path))
    }
    fn invalid(&self, exp: &str) -> DeError {
        <DeError as de::Error>::custom(format!("expected {exp}, found {}", self.node.kind_name()))
            .at(&self.node.loc, self.path)
    }
}

struct SeqDe<'a, 'p> {
    items: std::slice::Iter<'a, Node>,
    index: usize,
    path: &'p FieldPath<'p>,
}

impl<'de, 'p> de::SeqAccess<'de> for SeqDe<'de, 'p> {
    type Error = DeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            None => Ok(None),
            Some(n) => {
                let p = FieldPath::Index(self.path, self.index);
                self.index += 1;
                seed.deserialize(NodeDe { node: n, path: &p }).map(Some)
            }
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapDe<'a, 'p> {
    entries: std::slice::Iter<'a, Entry>,
    current: Option<&'a Entry>,
    path: &'p FieldPath<'p>,
}

/// Deserializes a mapping key (always a string).
struct KeyDe<'a, 'p> {
    entry: &'a Entry,
    path: &'p FieldPath<'p>,
}

impl<'de, 'p> de::Deserializer<'de> for KeyDe<'de, 'p> {
    type Error = DeError;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let p = FieldPath::Key(self.path, &self.entry.key);
        v.visit_borrowed_str::<DeError>(&self.entry.key)
            .map_err(|e| e.at(&self.entry.key_loc, &p))
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, 'p> de::MapAccess<'de> for MapDe<'de, 'p> {
    type Error = DeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.entries.next() {
            None => Ok(None),
            Some(e) => {
                self.current = Some(e);
                seed.deserialize(KeyDe {
                    entry: e,
                    path: self.path,
                })
                .map(Some)
            }
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let e = self.current.expect("value before key");
        let p = FieldPath::Key(self.path, &e.key);
        seed.deserialize(NodeDe {
            node: &e.value,
            path: &p,
        })
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumDe<'a, 'p> {
    variant: &'a str,
    content: Option<&'a Node>,
    de: NodeDe<'a, 'p>,
}

impl<'de, 'p> de::EnumAccess<'de> for EnumDe<'de, 'p> {
    type Error = DeError;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let v = seed.deserialize(self.variant.into_deserializer())?;
        Ok((v, self))
    }
}

impl<'de, 'p> de::VariantAccess<'de> for EnumDe<'de, 'p> {
    type Error = DeError;
    fn unit_variant(self) -> Result<(), DeError> {
        match self.content {
            None => Ok(()),
            Some(n) if n.is_null() => Ok(()),
            Some(_) => Err(self.de.invalid("a plain value")),
        }
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        match self.content {
            Some(n) => seed.deserialize(NodeDe {
                node: n,
                path: self.de.path,
            }),
            None => Err(self.de.invalid("a mapping")),
        }
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, DeError> {
        match self.content {
            Some(n) => de::Deserializer::deserialize_tuple(
                NodeDe {
                    node: n,
                    path: self.de.path,
                },
                len,
                v,
            ),
            None => Err(self.de.invalid("a list")),
        }
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        match self.content {
            Some(n) => de::Deserializer::deserialize_struct(
                NodeDe {
                    node: n,
                    path: self.de.path,
                },
                "",
                fields,
                v,
            ),
            None => Err(self.de.invalid("a mapping")),
        }
    }
}

impl<'de, 'p> NodeDe<'de, 'p> {
    fn visit_seq_of<V: Visitor<'de>>(&self, items: &'de [Node], v: V) -> Result<V::Value, DeError> {
        self.wrap(v.visit_seq(SeqDe {
            items: items.iter(),
            index: 0,
            path: self.path,
        }))
    }
    fn visit_map_of<V: Visitor<'de>>(
        &self,
        entries: &'de [Entry],
        v: V,
    ) -> Result<V::Value, DeError> {
        self.wrap(v.visit_map(MapDe {
            entries: entries.iter(),
            current: None,
            path: self.path,
        }))
    }
}

macro_rules! de_number {
    ($($m:ident)*) => {$(
        fn $m<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            match &self.node.value {
                Value::Str(s) => {
                    let t = s.trim();
                    if let Ok(i) = t.parse::<i64>() {
                        self.wrap(v.visit_i64(i))
                    } else if let Ok(f) = t.parse::<f64>() {
                        self.wrap(v.visit_f64(f))
                    } else {
                        Err(self.invalid("a number"))
                    }
                }
                _ => self.deserialize_any(v),
            }
        }
    )*};
}

impl<'de, 'p> de::Deserializer<'de> for NodeDe<'de, 'p> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Int(i) => v.visit_i64(*i),
            Value::Float(f) => v.visit_f64(*f),
            Value::Str(s) => v.visit_borrowed_str(s),
            Value::Seq(s) => return self.visit_seq_of(s, v),
            Value::Map(m) => return self.visit_map_of(m, v),
        };
        self.wrap(r)
    }

    de_number! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Bool(b) => self.wrap(v.visit_bool(*b)),
            // YAML 1.1 words, as the original's reader takes them
            Value::Str(s)
                if ["true", "yes", "on"]
                    .iter()
                    .any(|w| s.eq_ignore_ascii_case(w)) =>
            {
                self.wrap(v.visit_bool(true))
            }
            Value::Str(s)
                if ["false", "no", "off"]
                    .iter()
                    .any(|w| s.eq_ignore_ascii_case(w)) =>
            {
                self.wrap(v.visit_bool(false))
            }
            _ => Err(self.invalid("true or false")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Str(s) => self.wrap(v.visit_borrowed_str(s)),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                let t = self.node.scalar_text().unwrap_or_default();
                self.wrap(v.visit_string(t))
            }
            _ => Err(self.invalid("a string")),
        }
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_any(v)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_any(v)
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Null => self.wrap(v.visit_none()),
            _ => {
                let loc = self.node.loc.clone();
                let path = self.path;
                v.visit_some(self).map_err(|e| e.at(&loc, path))
            }
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Null => self.wrap(v.visit_unit()),
            _ => Err(self.invalid("null")),
        }
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(v)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        let loc = self.node.loc.clone();
        let path = self.path;
        v.visit_newtype_struct(self).map_err(|e| e.at(&loc, path))
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Seq(s) => self.visit_seq_of(s, v),
            Value::Null => self.visit_seq_of(&[], v),
            _ => Err(self.invalid("a list")),
        }
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Map(m) => self.visit_map_of(m, v),
            Value::Null => self.visit_map_of(&[], v),
            _ => Err(self.invalid("a mapping")),
        }
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(v)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Str(s) => {
                let r = v.visit_enum(EnumDe {
                    variant: s,
                    content: None,
                    de: NodeDe {
                        node: self.node,
                        path: self.path,
                    },
                });
                self.wrap(r)
            }
            Value::Map(m) if m.len() == 1 => {
                let r = v.visit_enum(EnumDe {
                    variant: &m[0].key,
                    content: Some(&m[0].value),
                    de: NodeDe {
                        node: self.node,
                        path: self.path,
                    },
                });
                self.wrap(r)
            }
            _ => Err(self.invalid("one of the accepted values")),
        }
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
}
