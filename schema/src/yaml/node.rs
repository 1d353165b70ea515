//! The spanned YAML node: a [`Value`] with its [`Loc`], and the mapping
//! [`Entry`]. What the loader walks, overlays and renders templates in.

use serde::Serialize;

use crate::span::Loc;

/// A YAML value with its location.
#[derive(Debug, Clone)]
pub struct Node {
    pub value: Value,
    pub loc: Loc,
}

/// A mapping entry: key text, key location, value.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: String,
    pub key_loc: Loc,
    pub value: Node,
}

#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

impl Node {
    pub fn new(value: Value, loc: Loc) -> Node {
        Node { value, loc }
    }
    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Scalar text (strings, numbers and booleans as written).
    pub fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_map(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_map_mut(&mut self) -> Option<&mut Vec<Entry>> {
        match &mut self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    /// The entry of a mapping under `key` (last one wins on duplicates).
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.as_map()?.iter().rev().find(|e| e.key == key)
    }
    /// The value of a mapping under `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.as_map_mut()?
            .iter_mut()
            .rev()
            .find(|e| e.key == key)
            .map(|e| &mut e.value)
    }
    /// The string under `key`, if it is a scalar.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.get(key).and_then(|n| n.scalar_text())
    }
    /// Set (or add) `key` in a mapping.
    pub fn set(&mut self, key: &str, value: Node) {
        let loc = value.loc.clone();
        if let Some(m) = self.as_map_mut() {
            if let Some(e) = m.iter_mut().find(|e| e.key == key) {
                e.value = value;
            } else {
                m.push(Entry {
                    key: key.to_string(),
                    key_loc: loc,
                    value,
                });
            }
        }
    }
    /// Remove `key` from a mapping, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Node> {
        let m = self.as_map_mut()?;
        let i = m.iter().position(|e| e.key == key)?;
        Some(m.remove(i).value)
    }
    /// A mapping node holding only the entries whose key satisfies `keep`.
    pub fn filter_map(&self, keep: impl Fn(&str) -> bool) -> Node {
        match &self.value {
            Value::Map(m) => Node {
                value: Value::Map(m.iter().filter(|e| keep(&e.key)).cloned().collect()),
                loc: self.loc.clone(),
            },
            _ => self.clone(),
        }
    }
    /// Short name of the node kind, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
    /// Visit every node (depth first, self first).
    pub fn walk(&self, f: &mut impl FnMut(&Node)) {
        f(self);
        match &self.value {
            Value::Seq(s) => s.iter().for_each(|n| n.walk(f)),
            Value::Map(m) => m.iter().for_each(|e| e.value.walk(f)),
            _ => {}
        }
    }
    /// Does any string scalar below satisfy `pred`?
    pub fn any_str(&self, pred: &impl Fn(&str) -> bool) -> bool {
        match &self.value {
            Value::Str(s) => pred(s),
            Value::Seq(s) => s.iter().any(|n| n.any_str(pred)),
            Value::Map(m) => m.iter().any(|e| e.value.any_str(pred)),
            _ => false,
        }
    }
    /// Convert to a JSON value (free-form `config:` maps, template contexts).
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(s) => serde_json::Value::Array(s.iter().map(Node::to_json).collect()),
            Value::Map(m) => serde_json::Value::Object(
                m.iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match &self.value {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(v) => s.serialize_str(v),
            Value::Seq(v) => {
                let mut q = s.serialize_seq(Some(v.len()))?;
                for n in v {
                    q.serialize_element(n)?;
                }
                q.end()
            }
            Value::Map(m) => {
                let mut q = s.serialize_map(Some(m.len()))?;
                for e in m {
                    q.serialize_entry(&e.key, &e.value)?;
                }
                q.end()
            }
        }
    }
}
