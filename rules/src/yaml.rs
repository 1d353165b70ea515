//! The one module that knows serde-saphyr.
//!
//! A YAML file is parsed (serde-saphyr's parser, granit, event by event;
//! anchors, aliases and `<<` merge keys resolved; YAML 1.2 core-schema
//! scalars, numbers with a leading zero kept as strings; a duplicate key
//! keeps the later value) into a spanned [`Node`] tree (every scalar, list and
//! mapping carries its [`Loc`]: file, line, column, byte offset). Typed values
//! are then deserialized from nodes with [`from_node`], whose errors carry the
//! file, line, column and field path of the offending node
//! (`runtime_builders[0].credentials.profile_nme`).
//!
//! The deserializer is lenient where the original (pydantic, lax mode) is:
//! a number or boolean where a string is declared becomes its text, a null
//! where a list or mapping is declared becomes empty, a numeric string where a
//! number is declared becomes the number.
//!
//! [`to_string`] / [`from_str`] are the helpers the cache crate uses for its
//! meta-state files.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::diag::{Diagnostic, Severity};

/// One source file: its display path (relative to the tree root when it lies
/// inside it) and its text, kept for rendering diagnostics with spans.
#[derive(Debug)]
pub struct SourceFile {
    /// Display path (`cfg/runtime-builders.yml`).
    pub path: String,
    /// Absolute (or as-given) path on disk.
    pub abs: PathBuf,
    pub text: Arc<str>,
}

/// Where a node is: file, 1-based line and column, byte offset and length.
#[derive(Debug, Clone)]
pub struct Loc {
    pub file: Arc<SourceFile>,
    pub line: u32,
    pub column: u32,
    pub offset: u32,
    pub len: u32,
}

impl Loc {
    /// A location with no position in a file (line 0), e.g. for a value
    /// given on the command line.
    pub fn detached(label: &str) -> Loc {
        Loc {
            file: Arc::new(SourceFile {
                path: label.to_string(),
                abs: PathBuf::from(label),
                text: Arc::from(""),
            }),
            line: 0,
            column: 0,
            offset: 0,
            len: 0,
        }
    }

    /// `file:line:col`
    pub fn display(&self) -> String {
        format!("{}:{}:{}", self.file.path, self.line, self.column)
    }
}

impl PartialEq for Loc {
    fn eq(&self, other: &Self) -> bool {
        self.file.path == other.file.path && self.line == other.line && self.column == other.column
    }
}

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

// ---------------------------------------------------------------------------
// Parsing (serde-saphyr -> Node)

thread_local! {
    /// The file being parsed (nodes take their location's file from it).
    static PARSING: std::cell::RefCell<Option<Arc<SourceFile>>> = const { std::cell::RefCell::new(None) };
}

/// A node deserialized by serde-saphyr with its span: one allocation per
/// node, the file taken from [`PARSING`].
struct SpannedNode(Node);

impl<'de> Deserialize<'de> for SpannedNode {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<RawValue>::deserialize(d)?;
        let file = PARSING
            .with(|p| p.borrow().clone())
            .expect("parsing a file");
        Ok(SpannedNode(Node {
            value: s.value.0,
            loc: loc_of(&file, &s.referenced),
        }))
    }
}

struct RawValue(Value);

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<RawValue, E> {
                Ok(RawValue(Value::Null))
            }
            fn visit_none<E>(self) -> Result<RawValue, E> {
                Ok(RawValue(Value::Null))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<RawValue, D::Error> {
                RawValue::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<RawValue, E> {
                Ok(RawValue(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawValue, E> {
                Ok(RawValue(Value::Int(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawValue, E> {
                Ok(RawValue(if v <= i64::MAX as u64 {
                    Value::Int(v as i64)
                } else {
                    Value::Str(v.to_string())
                }))
            }
            fn visit_i128<E>(self, v: i128) -> Result<RawValue, E> {
                Ok(RawValue(Value::Str(v.to_string())))
            }
            fn visit_u128<E>(self, v: u128) -> Result<RawValue, E> {
                Ok(RawValue(Value::Str(v.to_string())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawValue, E> {
                Ok(RawValue(Value::Float(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawValue, E> {
                Ok(RawValue(Value::Str(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<RawValue, E> {
                Ok(RawValue(Value::Str(v)))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<RawValue, E> {
                Ok(RawValue(Value::Str(
                    String::from_utf8_lossy(v).into_owned(),
                )))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<RawValue, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0));
                while let Some(SpannedNode(x)) = a.next_element()? {
                    out.push(x);
                }
                Ok(RawValue(Value::Seq(out)))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<RawValue, A::Error> {
                let mut out: Vec<Entry> = Vec::with_capacity(a.size_hint().unwrap_or(0));
                while let Some(SpannedNode(k)) = a.next_key()? {
                    let SpannedNode(value) = a.next_value()?;
                    let key = k.scalar_text().unwrap_or_else(|| match k.value {
                        Value::Null => "null".to_string(),
                        _ => format!("{}", k.to_json()),
                    });
                    if let Some(prev) = out.iter_mut().find(|e| e.key == key) {
                        // As the original's YAML reader does: the later value wins.
                        prev.value = value;
                        prev.key_loc = k.loc;
                    } else {
                        out.push(Entry {
                            key,
                            key_loc: k.loc,
                            value,
                        });
                    }
                }
                Ok(RawValue(Value::Map(out)))
            }
        }
        d.deserialize_any(V)
    }
}

fn loc_of(file: &Arc<SourceFile>, l: &serde_saphyr::Location) -> Loc {
    let span = l.span();
    Loc {
        file: file.clone(),
        line: l.line() as u32,
        column: l.column() as u32,
        offset: span.byte_offset().unwrap_or(0) as u32,
        len: span.byte_len().unwrap_or(0) as u32,
    }
}

/// The same tree through serde-saphyr's `Spanned` (slower; kept to
/// cross-check the event builder in tests).
pub fn parse_source_serde(file: Arc<SourceFile>) -> Result<Option<Node>, String> {
    PARSING.with(|p| *p.borrow_mut() = Some(file.clone()));
    let parsed = serde_saphyr::from_str_with_options::<Option<SpannedNode>>(&file.text, options());
    PARSING.with(|p| *p.borrow_mut() = None);
    parsed.map(|o| o.map(|n| n.0)).map_err(|e| e.to_string())
}

enum Frame {
    Seq {
        items: Vec<Node>,
        loc: Loc,
        anchor: usize,
        size: Size,
    },
    Map {
        entries: Vec<Entry>,
        merged: Vec<Entry>,
        key: Option<Node>,
        loc: Loc,
        anchor: usize,
        size: Size,
    },
}

/// How many nodes a subtree holds and how deep it goes (the cost an alias
/// to it adds).
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: usize,
    height: usize,
}

impl Size {
    fn add_child(&mut self, child: Size) {
        self.nodes = self.nodes.saturating_add(child.nodes);
        self.height = self.height.max(child.height + 1);
    }
}

/// The most nodes the aliases of one file may produce (each alias costs
/// the node count of what it refers to): serde-saphyr's `max_nodes`
/// default. A few hundred bytes of nested aliases would otherwise expand
/// to gigabytes.
pub const MAX_ALIAS_NODES: usize = 250_000;

/// The deepest nesting of lists and mappings a file may hold, aliases
/// included (every later walk of the tree recurses).
pub const MAX_DEPTH: usize = 128;

fn marker_loc(file: &Arc<SourceFile>, span: &serde_saphyr::granit_parser::Span) -> Loc {
    let start = span.start.byte_offset().unwrap_or(0);
    let end = span.end.byte_offset().unwrap_or(start);
    Loc {
        file: file.clone(),
        line: span.start.line() as u32,
        column: span.start.col() as u32 + 1,
        offset: start as u32,
        len: end.saturating_sub(start) as u32,
    }
}

/// Resolve a scalar as YAML 1.2's core schema does (plus: numbers with a
/// leading zero stay strings, `0644` and account ids keep their digits).
fn resolve_scalar(v: &str, plain: bool, tag: Option<&str>) -> Value {
    match tag {
        Some("str") => return Value::Str(v.to_string()),
        Some("null") => return Value::Null,
        Some("bool") | Some("int") | Some("float") => {}
        Some(_) | None if !plain => return Value::Str(v.to_string()),
        _ => {}
    }
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let b = v.as_bytes();
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) {
        if digits.len() > 1 && digits.starts_with('0') {
            return Value::Str(v.to_string());
        }
        return match v.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Str(v.to_string()),
        };
    }
    if let Some(h) = v.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(h, 16) {
            return Value::Int(i);
        }
    }
    if let Some(o) = v.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(o, 8) {
            return Value::Int(i);
        }
    }
    let first = b.first().copied().unwrap_or(b' ');
    if (first.is_ascii_digit() || first == b'.' || first == b'-' || first == b'+')
        && v.bytes().any(|c| c.is_ascii_digit())
        && v.bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        if let Ok(f) = v.parse::<f64>() {
            return Value::Float(f);
        }
    }
    Value::Str(v.to_string())
}

/// Build the node tree from the parser's events (anchors, aliases and `<<`
/// merge keys resolved). Errors are (line, column, message).
fn build_from_events(file: &Arc<SourceFile>) -> Result<Option<Node>, (u32, u32, String)> {
    use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
    use std::collections::HashMap;
    let text: &str = &file.text;
    let parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, (Node, Size)> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    // Nodes produced by aliases so far (see MAX_ALIAS_NODES).
    let mut expanded: usize = 0;

    fn grow(stack: &mut [Frame], child: Size) {
        match stack.last_mut() {
            Some(Frame::Seq { size, .. }) | Some(Frame::Map { size, .. }) => size.add_child(child),
            None => {}
        }
    }

    fn push(stack: &mut [Frame], root: &mut Option<Node>, node: Node) {
        match stack.last_mut() {
            None => *root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                merged,
                key,
                ..
            }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    if k.as_str() == Some("<<") {
                        // merge: explicit keys win; earlier merged maps win over later ones
                        let sources: Vec<Node> = match node.value {
                            Value::Seq(v) => v,
                            _ => vec![node],
                        };
                        for src in sources {
                            if let Value::Map(m) = src.value {
                                for e in m {
                                    if !merged.iter().any(|x| x.key == e.key) {
                                        merged.push(e);
                                    }
                                }
                            }
                        }
                        return;
                    }
                    let key_text = k.scalar_text().unwrap_or_else(|| match k.value {
                        Value::Null => "null".to_string(),
                        _ => format!("{}", k.to_json()),
                    });
                    if let Some(prev) = entries.iter_mut().find(|e| e.key == key_text) {
                        // As the original's YAML reader does: the later value wins.
                        prev.value = node;
                        prev.key_loc = k.loc;
                    } else {
                        entries.push(Entry {
                            key: key_text,
                            key_loc: k.loc,
                            value: node,
                        });
                    }
                }
            },
        }
    }

    for ev in parser {
        let (event, span) = ev.map_err(|e| {
            let m = e.marker();
            (m.line() as u32, m.col() as u32 + 1, e.info())
        })?;
        match event {
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    let l = marker_loc(file, &span);
                    return Err((
                        l.line,
                        l.column,
                        "a file holds one YAML document; found a second".into(),
                    ));
                }
            }
            Event::Scalar(v, style, anchor, tag) => {
                let tag_suffix = tag.as_ref().map(|t| {
                    if t.is_yaml_core_schema() {
                        t.suffix().to_string()
                    } else {
                        String::from("!")
                    }
                });
                let node = Node {
                    value: resolve_scalar(&v, style == ScalarStyle::Plain, tag_suffix.as_deref()),
                    loc: marker_loc(file, &span),
                };
                if anchor > 0 {
                    anchors.insert(
                        anchor,
                        (
                            node.clone(),
                            Size {
                                nodes: 1,
                                height: 0,
                            },
                        ),
                    );
                }
                grow(
                    &mut stack,
                    Size {
                        nodes: 1,
                        height: 0,
                    },
                );
                push(&mut stack, &mut root, node);
            }
            Event::SequenceStart(_, anchor, _) | Event::MappingStart(_, anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    let l = marker_loc(file, &span);
                    return Err((
                        l.line,
                        l.column,
                        format!("lists and mappings nest deeper than {MAX_DEPTH} levels"),
                    ));
                }
                let loc = marker_loc(file, &span);
                let size = Size {
                    nodes: 1,
                    height: 0,
                };
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq {
                        items: Vec::new(),
                        loc,
                        anchor,
                        size,
                    }
                } else {
                    Frame::Map {
                        entries: Vec::new(),
                        merged: Vec::new(),
                        key: None,
                        loc,
                        anchor,
                        size,
                    }
                })
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, size) = match stack.pop() {
                    Some(Frame::Seq {
                        items,
                        loc,
                        anchor,
                        size,
                    }) => (
                        Node {
                            value: Value::Seq(items),
                            loc,
                        },
                        anchor,
                        size,
                    ),
                    Some(Frame::Map {
                        mut entries,
                        merged,
                        loc,
                        anchor,
                        size,
                        ..
                    }) => {
                        for e in merged {
                            if !entries.iter().any(|x| x.key == e.key) {
                                entries.push(e);
                            }
                        }
                        (
                            Node {
                                value: Value::Map(entries),
                                loc,
                            },
                            anchor,
                            size,
                        )
                    }
                    None => continue,
                };
                if anchor > 0 {
                    anchors.insert(anchor, (node.clone(), size));
                }
                grow(&mut stack, size);
                push(&mut stack, &mut root, node);
            }
            Event::Alias(id) => {
                let l = marker_loc(file, &span);
                let (node, size) = anchors.get(&id).ok_or((
                    l.line,
                    l.column,
                    "alias to an unknown anchor".to_string(),
                ))?;
                expanded = expanded.saturating_add(size.nodes);
                if expanded > MAX_ALIAS_NODES {
                    return Err((
                        l.line,
                        l.column,
                        format!(
                            "aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias costs every node it repeats); refused"
                        ),
                    ));
                }
                if stack.len() + size.height >= MAX_DEPTH {
                    return Err((
                        l.line,
                        l.column,
                        format!(
                            "this alias nests lists and mappings deeper than {MAX_DEPTH} levels"
                        ),
                    ));
                }
                let (node, size) = (node.clone(), *size);
                grow(&mut stack, size);
                push(&mut stack, &mut root, node);
            }
            _ => {}
        }
    }
    Ok(root)
}

fn options() -> serde_saphyr::Options {
    let mut o = serde_saphyr::Options::default();
    // `mode: 0644` stays the string "0644"; account ids keep their zeros.
    o.leading_zero_numbers_as_strings = true;
    o.with_snippet = false;
    o.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    o
}

/// Parse YAML text into a node tree. `path` is the display path used in
/// locations. An empty document is a null node.
pub fn parse_str(path: &str, abs: &Path, text: &str) -> Result<Node, Diagnostic> {
    let file = Arc::new(SourceFile {
        path: path.to_string(),
        abs: abs.to_path_buf(),
        text: Arc::from(text),
    });
    parse_source(file)
}

/// Parse an already-registered source file.
pub fn parse_source(file: Arc<SourceFile>) -> Result<Node, Diagnostic> {
    parse_source_w(file, &mut Vec::new())
}

/// Parse a source file. `warnings` is reserved for parse warnings (none
/// today: a duplicate key keeps the later value silently, as the original's
/// YAML reader does).
pub fn parse_source_w(
    file: Arc<SourceFile>,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Node, Diagnostic> {
    let text = file.text.clone();
    let doc_loc = Loc {
        file: file.clone(),
        line: 1,
        column: 1,
        offset: 0,
        len: 0,
    };
    if text.trim().is_empty()
        || text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
        })
    {
        return Ok(Node::new(Value::Null, doc_loc));
    }
    let _ = warnings;
    match build_from_events(&file) {
        Ok(Some(node)) => Ok(node),
        Ok(None) => Ok(Node::new(Value::Null, doc_loc)),
        Err((line, column, msg)) => {
            let offset = line_col_to_offset(&text, line, column);
            Err(Diagnostic {
                file: file.path.clone(),
                line,
                column,
                path: String::new(),
                message: format!("invalid YAML: {msg}"),
                hint: None,
                severity: Severity::Error,
                offset,
                len: 1,
                source: Some(file.clone()),
            })
        }
    }
}

fn line_col_to_offset(text: &str, line: u32, column: u32) -> u32 {
    let mut off = 0usize;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line as usize {
            let col = (column.max(1) - 1) as usize;
            let byte = l.char_indices().nth(col).map(|(b, _)| b).unwrap_or(l.len());
            return (off + byte) as u32;
        }
        off += l.len();
    }
    off as u32
}

/// The text of a file read as bytes; invalid UTF-8 is refused at the line
/// and column (in characters) where the first bad byte sits.
pub fn decode_utf8(label: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let good = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        let mut d = Diagnostic::plain(
            label,
            format!(
                "not UTF-8 text: invalid byte 0x{:02x} at byte offset {at}",
                bytes[at]
            ),
        );
        d.line = line as u32;
        d.column = column as u32;
        d.with_hint("csis reads YAML files as UTF-8; re-save the file in that encoding")
    })
}

/// Read and parse a file. `root` is used to make the display path relative.
pub fn parse_file(path: &Path, root: &Path) -> Result<Node, Diagnostic> {
    parse_file_w(path, root, &mut Vec::new())
}

/// [`parse_file`] with a place for parse warnings (see [`parse_source_w`]).
pub fn parse_file_w(
    path: &Path,
    root: &Path,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Node, Diagnostic> {
    let display = path
        .strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/");
    let bytes = std::fs::read(path)
        .map_err(|e| Diagnostic::plain(&display, format!("cannot read: {e}")))?;
    let text = decode_utf8(&display, bytes)?;
    let file = Arc::new(SourceFile {
        path: display,
        abs: path.to_path_buf(),
        text: Arc::from(text.as_str()),
    });
    parse_source_w(file, warnings)
}

// ---------------------------------------------------------------------------
// Field paths

/// A field path, built as a linked list while descending (no allocation
/// unless an error is reported).
#[derive(Clone, Copy)]
pub enum FieldPath<'a> {
    Root(&'a str),
    Key(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl FieldPath<'_> {
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s);
        s
    }
    fn render_into(&self, s: &mut String) {
        match self {
            FieldPath::Root(r) => s.push_str(r),
            FieldPath::Key(p, k) => {
                p.render_into(s);
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            FieldPath::Index(p, i) => {
                p.render_into(s);
                s.push('[');
                s.push_str(&i.to_string());
                s.push(']');
            }
        }
    }
}

/// Join a rendered path and a key.
pub fn join_path(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

// ---------------------------------------------------------------------------
// Deserializing typed values from nodes

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

// ---------------------------------------------------------------------------
// Plain helpers for meta-state files (the cache crate)

/// Serialize a value to YAML text.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, String> {
    serde_saphyr::to_string(value).map_err(|e| e.to_string())
}

/// Parse YAML text into a typed value; errors name `label` (the file), line,
/// column and field path.
pub fn from_str<T: serde::de::DeserializeOwned>(label: &str, text: &str) -> Result<T, Diagnostic> {
    // Fast path for files csis writes itself (meta-state): no spans. Only when
    // it fails is the text parsed again with spans, for a located diagnostic
    // and the lenient coercions of `from_node`.
    if let Ok(v) = serde_saphyr::from_str::<T>(text) {
        return Ok(v);
    }
    let node = parse_str(label, Path::new(label), text)?;
    from_node::<T>(&node, "")
}

/// Parse a YAML file into a typed value (see [`from_str`]).
pub fn read_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Diagnostic> {
    let label = path.to_string_lossy().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| Diagnostic::plain(&label, format!("cannot read: {e}")))?;
    from_str(&label, &decode_utf8(&label, bytes)?)
}

/// Parse many files, in parallel (one thread per core), keeping their order.
pub fn parse_files(paths: &[PathBuf], root: &Path) -> Vec<Result<Node, Diagnostic>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if threads <= 1 || paths.len() < 4 {
        return paths.iter().map(|p| parse_file(p, root)).collect();
    }
    let mut slots: Vec<Option<Result<Node, Diagnostic>>> = (0..paths.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    paths
                        .iter()
                        .enumerate()
                        .skip(t)
                        .step_by(threads)
                        .map(|(i, p)| (i, parse_file(p, root)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("parser thread") {
                slots[i] = Some(r);
            }
        }
    });
    slots.into_iter().map(|r| r.expect("parsed")).collect()
}
