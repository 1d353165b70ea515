//! Parsing: serde-saphyr's parser, granit, event by event, into a spanned
//! [`Node`] tree (anchors, aliases and `<<` merge keys resolved; YAML 1.2
//! core-schema scalars, numbers with a leading zero kept as strings; a
//! duplicate key keeps the later value), within the input limits
//! [`MAX_ALIAS_NODES`] and [`MAX_DEPTH`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{self, Visitor};
use serde::Deserialize;

use super::node::{Entry, Node, Value};
use crate::diag::{Diagnostic, Severity};
use crate::span::{Loc, SourceFile};

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

type Span = serde_saphyr::granit_parser::Span;
/// A parse error: (line, column, message).
type Failure = (u32, u32, String);

/// Build the node tree from the parser's events (anchors, aliases and `<<`
/// merge keys resolved). Errors are (line, column, message).
fn build_from_events(file: &Arc<SourceFile>) -> Result<Option<Node>, Failure> {
    use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
    let mut b = Builder {
        file,
        stack: Vec::new(),
        anchors: std::collections::HashMap::new(),
        root: None,
        documents: 0,
        expanded: 0,
    };
    for ev in Parser::new_from_str(&file.text) {
        let (event, span) = ev.map_err(|e| {
            let m = e.marker();
            (m.line() as u32, m.col() as u32 + 1, e.info())
        })?;
        match event {
            Event::DocumentStart(..) => b.document_start(&span)?,
            Event::Scalar(v, style, anchor, tag) => {
                let tag_suffix = tag.as_ref().map(|t| {
                    if t.is_yaml_core_schema() {
                        t.suffix().to_string()
                    } else {
                        String::from("!")
                    }
                });
                let plain = style == ScalarStyle::Plain;
                b.scalar(
                    &span,
                    resolve_scalar(&v, plain, tag_suffix.as_deref()),
                    anchor,
                )
            }
            Event::SequenceStart(_, anchor, _) => b.start(&span, anchor, true)?,
            Event::MappingStart(_, anchor, _) => b.start(&span, anchor, false)?,
            Event::SequenceEnd | Event::MappingEnd => b.end(),
            Event::Alias(id) => b.alias(&span, id)?,
            _ => {}
        }
    }
    Ok(b.root)
}

/// The tree being built from a file's events: the open lists and
/// mappings, the anchors seen, the root once closed.
struct Builder<'f> {
    file: &'f Arc<SourceFile>,
    stack: Vec<Frame>,
    anchors: std::collections::HashMap<usize, (Node, Size)>,
    root: Option<Node>,
    documents: usize,
    /// Nodes produced by aliases so far (see MAX_ALIAS_NODES).
    expanded: usize,
}

impl Builder<'_> {
    fn failure(&self, span: &Span, message: String) -> Failure {
        let l = marker_loc(self.file, span);
        (l.line, l.column, message)
    }

    /// A file holds one document.
    fn document_start(&mut self, span: &Span) -> Result<(), Failure> {
        self.documents += 1;
        if self.documents > 1 {
            return Err(self.failure(
                span,
                "a file holds one YAML document; found a second".into(),
            ));
        }
        Ok(())
    }

    /// A scalar (resolved: `value`), anchored when `anchor` is not 0.
    fn scalar(&mut self, span: &Span, value: Value, anchor: usize) {
        let node = Node {
            value,
            loc: marker_loc(self.file, span),
        };
        let size = Size {
            nodes: 1,
            height: 0,
        };
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        self.add(node, size);
    }

    /// A list (`seq`) or a mapping opens, within [`MAX_DEPTH`].
    fn start(&mut self, span: &Span, anchor: usize, seq: bool) -> Result<(), Failure> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.failure(
                span,
                format!("lists and mappings nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        let loc = marker_loc(self.file, span);
        let size = Size {
            nodes: 1,
            height: 0,
        };
        self.stack.push(if seq {
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
        });
        Ok(())
    }

    /// The innermost list or mapping closes: its merged keys after its
    /// own, then it is a node of its parent.
    fn end(&mut self) {
        let (node, anchor, size) = match self.stack.pop() {
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
            None => return,
        };
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        self.add(node, size);
    }

    /// An alias repeats its anchor's node, within [`MAX_ALIAS_NODES`] and
    /// [`MAX_DEPTH`].
    fn alias(&mut self, span: &Span, id: usize) -> Result<(), Failure> {
        let Some((node, size)) = self.anchors.get(&id) else {
            return Err(self.failure(span, "alias to an unknown anchor".to_string()));
        };
        let (node, size) = (node.clone(), *size);
        self.expanded = self.expanded.saturating_add(size.nodes);
        if self.expanded > MAX_ALIAS_NODES {
            return Err(self.failure(
                span,
                format!(
                    "aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias costs every node it repeats); refused"
                ),
            ));
        }
        if self.stack.len() + size.height >= MAX_DEPTH {
            return Err(self.failure(
                span,
                format!("this alias nests lists and mappings deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.add(node, size);
        Ok(())
    }

    /// A finished node: counted in its parent's size, then the root, an
    /// item of its list, or a key or value of its mapping.
    fn add(&mut self, node: Node, size: Size) {
        match self.stack.last_mut() {
            Some(Frame::Seq { size: s, .. }) | Some(Frame::Map { size: s, .. }) => {
                s.add_child(size)
            }
            None => {}
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                merged,
                key,
                ..
            }) => match key.take() {
                None => *key = Some(node),
                Some(k) if k.as_str() == Some("<<") => merge(merged, node),
                Some(k) => set_entry(entries, k, node),
            },
        }
    }
}

/// A `<<` merge: explicit keys win; earlier merged maps win over later ones.
fn merge(merged: &mut Vec<Entry>, node: Node) {
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
}

/// A mapping's entry `k: node`; a key seen before takes the later value, as
/// the original's YAML reader does.
fn set_entry(entries: &mut Vec<Entry>, k: Node, node: Node) {
    let key_text = k.scalar_text().unwrap_or_else(|| match k.value {
        Value::Null => "null".to_string(),
        _ => format!("{}", k.to_json()),
    });
    if let Some(prev) = entries.iter_mut().find(|e| e.key == key_text) {
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

/// Parse an already-registered source file. A duplicate mapping key keeps
/// the later value silently, as the original's YAML reader does.
pub fn parse_source(file: Arc<SourceFile>) -> Result<Node, Diagnostic> {
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
                secret_span: false,
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
    parse_source(file)
}

/// Parse many files, in parallel (one thread per core), keeping their order.
pub fn parse_files(paths: &[PathBuf], root: &Path) -> Vec<Result<Node, Diagnostic>> {
    crate::par_map(paths, |p| parse_file(p, root))
}
