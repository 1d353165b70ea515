//! The persistent parse cache (issue 23, item 1): each YAML file's spanned
//! parse kept in `.csis/cache/parse.bin` (postcard), so that a load after
//! one edit parses only the edited file, as ninja answers from its log.
//!
//! An entry is keyed by the file's path and the blake3 of its text. The
//! file is read every time (its text is the diagnostics' source, and the
//! read and the hash of a 5,000-image tree cost about a millisecond), so
//! no metadata is trusted and no file can be racy: a parse is taken from
//! the cache only for exactly the text it was made from. Only successful
//! parses are kept (a file that does not parse is parsed again, for its
//! diagnostic).
//!
//! What is kept is the parse of the text on disk, before templates and
//! before `ENC[...]` values are decrypted: the cache holds nothing the file
//! does not hold in the same form.
//!
//! The cache file starts with the blake3 of the rest, then the format, the
//! csis version and the running binary's size and mtime: a cache that does
//! not open, does not check or was written by another binary is ignored
//! and rewritten, never trusted. Entries decode on the parse threads; the
//! file is rewritten (atomically) only when an entry was added or a file
//! is gone, and only where the parent of the directory
//! `LoadOptions::parse_cache` names exists (`.csis/`).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, EnumAccess, SeqAccess, VariantAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeTuple};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use csis_schema::diag::Diagnostic;
use csis_schema::yaml::{self, Entry, Loc, Node, SourceFile, Value};

/// The cache's file name under the directory `LoadOptions::parse_cache` names.
pub const FILE: &str = "parse.bin";
const FORMAT: &str = "csis-parse-cache 1";

/// What makes a cache file this binary's.
#[derive(Serialize, Deserialize, PartialEq, Eq)]
struct Header {
    format: String,
    version: String,
    /// The running binary's size and mtime (ns): a rebuilt csis may parse
    /// differently.
    exe: (u64, i128),
}

impl Header {
    fn current() -> Header {
        let exe = std::env::current_exe()
            .and_then(std::fs::metadata)
            .map(|m| {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as i128);
                (m.len(), mtime)
            })
            .unwrap_or((0, 0));
        Header {
            format: FORMAT.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            exe,
        }
    }
}

/// One file's entry: its text's hash and its encoded node tree.
struct Cached {
    hash: [u8; 32],
    node: Vec<u8>,
}

/// What a file's parse leaves for the next cache file.
enum Kept {
    /// Its entry, taken from the cache.
    Hit,
    /// A new entry.
    New(Cached),
    /// Nothing (the file does not parse, or could not be encoded).
    Nothing,
}

/// The cache of one load.
pub(super) struct ParseCache {
    file: PathBuf,
    header: Header,
    /// What the cache file held when the load began, by absolute path
    /// (less the entries this load took).
    old: HashMap<PathBuf, Cached>,
    /// How many entries the cache file held.
    old_len: usize,
    /// What this load parsed, by absolute path: the next cache file.
    new: HashMap<PathBuf, Cached>,
    hits: usize,
    misses: usize,
}

impl ParseCache {
    /// The cache under `dir` (`.csis/cache/`): what it holds when it opens
    /// and checks, else nothing.
    pub(super) fn open(dir: &Path) -> ParseCache {
        let file = dir.join(FILE);
        let header = Header::current();
        let old = std::fs::read(&file)
            .ok()
            .and_then(|bytes| decode_file(&bytes, &header))
            .unwrap_or_default();
        ParseCache {
            file,
            header,
            old_len: old.len(),
            old,
            new: HashMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// Parse `paths` (display paths relative to `root`), on up to one
    /// thread per core, each from the cache when its text is the cached
    /// one: what [`yaml::parse_files`] answers, in the same order.
    pub(super) fn parse_files(
        &mut self,
        paths: &[PathBuf],
        root: &Path,
    ) -> Vec<Result<Node, Diagnostic>> {
        let old = &self.old;
        let done = csis_schema::par_map(paths, |p| parse_one(old, p, root));
        let mut out = Vec::with_capacity(done.len());
        for (p, (result, kept)) in paths.iter().zip(done) {
            match kept {
                // From the cache: its entry moves to the next cache file.
                Kept::Hit => {
                    self.hits += 1;
                    if let Some(k) = self.old.remove(p) {
                        self.new.insert(p.clone(), k);
                    }
                }
                Kept::New(k) => {
                    self.misses += 1;
                    self.new.insert(p.clone(), k);
                }
                Kept::Nothing => self.misses += 1,
            }
            out.push(result);
        }
        out
    }

    /// Write the cache when it changed: an entry added, or a file of the
    /// previous load not read by this one. Best effort: a cache that
    /// cannot be written only makes the next load slower.
    pub(super) fn save(self) {
        if std::env::var_os("CSIS_TIMING").is_some() {
            log::info!(
                target: "csis::timing",
                "timing: parse cache: {} of {} files from the cache",
                self.hits,
                self.hits + self.misses
            );
        }
        let same = self.misses == 0 && self.old_len == self.new.len();
        let Some(dir) = self.file.parent() else {
            return;
        };
        // The cache directory is made only where its parent (`.csis/`) is.
        if same || (!dir.is_dir() && std::fs::create_dir(dir).is_err()) {
            return;
        }
        let mut entries: Vec<(&PathBuf, &Cached)> = self.new.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let body: Vec<(String, [u8; 32], &[u8])> = entries
            .into_iter()
            .map(|(p, k)| (p.to_string_lossy().into_owned(), k.hash, &k.node[..]))
            .collect();
        let Ok(rest) = postcard::to_stdvec(&(&self.header, body)) else {
            return;
        };
        let mut bytes = blake3::hash(&rest).as_bytes().to_vec();
        bytes.extend_from_slice(&rest);
        let tmp = self
            .file
            .with_file_name(format!(".{FILE}.{}", std::process::id()));
        if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, &self.file).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The entries of a cache file that checks and is this binary's.
fn decode_file(bytes: &[u8], header: &Header) -> Option<HashMap<PathBuf, Cached>> {
    let (sum, rest) = bytes.split_at_checked(32)?;
    if blake3::hash(rest).as_bytes() != sum {
        return None;
    }
    type Body<'a> = (Header, Vec<(String, [u8; 32], &'a [u8])>);
    let (h, body): Body = postcard::from_bytes(rest).ok()?;
    if h != *header {
        return None;
    }
    Some(
        body.into_iter()
            .map(|(p, hash, node)| {
                (
                    PathBuf::from(p),
                    Cached {
                        hash,
                        node: node.to_vec(),
                    },
                )
            })
            .collect(),
    )
}

/// One file: read, hashed, decoded from its entry or parsed (and encoded).
fn parse_one(
    old: &HashMap<PathBuf, Cached>,
    path: &Path,
    root: &Path,
) -> (Result<Node, Diagnostic>, Kept) {
    let display = path
        .strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/");
    let text = match std::fs::read(path) {
        Err(e) => {
            let d = Diagnostic::plain(&display, format!("cannot read: {e}"));
            return (Err(d), Kept::Nothing);
        }
        Ok(bytes) => match yaml::decode_utf8(&display, bytes) {
            Ok(t) => t,
            Err(d) => return (Err(d), Kept::Nothing),
        },
    };
    let hash = *blake3::hash(text.as_bytes()).as_bytes();
    let file = Arc::new(SourceFile {
        path: display,
        abs: path.to_path_buf(),
        text: Arc::from(text.as_str()),
    });
    let cached = old.get(path).filter(|k| k.hash == hash);
    if let Some(node) = cached.and_then(|k| decode_node(&k.node, &file)) {
        return (Ok(node), Kept::Hit);
    }
    let parsed = yaml::parse_source(file);
    let kept = match parsed.as_ref().ok().and_then(encode_node) {
        Some(node) => Kept::New(Cached { hash, node }),
        None => Kept::Nothing,
    };
    (parsed, kept)
}

// -- the encoding of a node tree -------------------------------------------
//
// A node is a pair: its location (line, column, offset, length) and its
// value, an enum (null, bool, int, float, string, list of nodes, mapping:
// a list of (key, key location, value node)). The file of every location
// is the one being decoded.

fn encode_node(n: &Node) -> Option<Vec<u8>> {
    postcard::to_stdvec(&Enc(n)).ok()
}

fn decode_node(bytes: &[u8], file: &Arc<SourceFile>) -> Option<Node> {
    let mut d = postcard::Deserializer::from_bytes(bytes);
    let node = NodeSeed(file).deserialize(&mut d).ok()?;
    d.finalize().ok()?.is_empty().then_some(node)
}

type At = (u32, u32, u32, u32);

fn at(l: &Loc) -> At {
    (l.line, l.column, l.offset, l.len)
}

fn loc(file: &Arc<SourceFile>, (line, column, offset, len): At) -> Loc {
    Loc {
        file: file.clone(),
        line,
        column,
        offset,
        len,
    }
}

struct Enc<'a>(&'a Node);
struct EncValue<'a>(&'a Value);
struct EncEntry<'a>(&'a Entry);

impl Serialize for Enc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&at(&self.0.loc))?;
        t.serialize_element(&EncValue(&self.0.value))?;
        t.end()
    }
}

impl Serialize for EncValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => s.serialize_unit_variant("V", 0, "N"),
            Value::Bool(b) => s.serialize_newtype_variant("V", 1, "B", b),
            Value::Int(i) => s.serialize_newtype_variant("V", 2, "I", i),
            Value::Float(f) => s.serialize_newtype_variant("V", 3, "F", f),
            Value::Str(v) => s.serialize_newtype_variant("V", 4, "S", v),
            Value::Seq(v) => s.serialize_newtype_variant("V", 5, "L", &EncSeq(v)),
            Value::Map(m) => s.serialize_newtype_variant("V", 6, "M", &EncMap(m)),
        }
    }
}

struct EncSeq<'a>(&'a [Node]);
struct EncMap<'a>(&'a [Entry]);

impl Serialize for EncSeq<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.0.len()))?;
        for n in self.0 {
            q.serialize_element(&Enc(n))?;
        }
        q.end()
    }
}

impl Serialize for EncMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.0.len()))?;
        for e in self.0 {
            q.serialize_element(&EncEntry(e))?;
        }
        q.end()
    }
}

impl Serialize for EncEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(3)?;
        t.serialize_element(&self.0.key)?;
        t.serialize_element(&at(&self.0.key_loc))?;
        t.serialize_element(&Enc(&self.0.value))?;
        t.end()
    }
}

/// Decodes a node, its locations in `.0`.
#[derive(Clone, Copy)]
struct NodeSeed<'f>(&'f Arc<SourceFile>);
#[derive(Clone, Copy)]
struct ValueSeed<'f>(&'f Arc<SourceFile>);
#[derive(Clone, Copy)]
struct SeqSeed<'f>(&'f Arc<SourceFile>);
#[derive(Clone, Copy)]
struct MapSeed<'f>(&'f Arc<SourceFile>);
#[derive(Clone, Copy)]
struct EntrySeed<'f>(&'f Arc<SourceFile>);

const VARIANTS: &[&str] = &["N", "B", "I", "F", "S", "L", "M"];

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_tuple(2, self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a cached node")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
        let at: At = a
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let value = a
            .next_element_seed(ValueSeed(self.0))?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(Node {
            value,
            loc: loc(self.0, at),
        })
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_enum("V", VARIANTS, self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a cached value")
    }
    fn visit_enum<A: EnumAccess<'de>>(self, a: A) -> Result<Value, A::Error> {
        let (tag, v) = a.variant::<u32>()?;
        Ok(match tag {
            0 => {
                v.unit_variant()?;
                Value::Null
            }
            1 => Value::Bool(v.newtype_variant()?),
            2 => Value::Int(v.newtype_variant()?),
            3 => Value::Float(v.newtype_variant()?),
            4 => Value::Str(v.newtype_variant()?),
            5 => Value::Seq(v.newtype_variant_seed(SeqSeed(self.0))?),
            6 => Value::Map(v.newtype_variant_seed(MapSeed(self.0))?),
            n => {
                return Err(de::Error::invalid_value(
                    de::Unexpected::Unsigned(n.into()),
                    &self,
                ))
            }
        })
    }
}

impl<'de> DeserializeSeed<'de> for SeqSeed<'_> {
    type Value = Vec<Node>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Node>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SeqSeed<'_> {
    type Value = Vec<Node>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("cached list items")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<Node>, A::Error> {
        let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(4096));
        while let Some(n) = a.next_element_seed(NodeSeed(self.0))? {
            out.push(n);
        }
        Ok(out)
    }
}

impl<'de> DeserializeSeed<'de> for MapSeed<'_> {
    type Value = Vec<Entry>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Entry>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MapSeed<'_> {
    type Value = Vec<Entry>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("cached mapping entries")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<Entry>, A::Error> {
        let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(4096));
        while let Some(e) = a.next_element_seed(EntrySeed(self.0))? {
            out.push(e);
        }
        Ok(out)
    }
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Entry;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_tuple(3, self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a cached mapping entry")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Entry, A::Error> {
        let key: String = a
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let key_at: At = a
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        let value = a
            .next_element_seed(NodeSeed(self.0))?
            .ok_or_else(|| de::Error::invalid_length(2, &self))?;
        Ok(Entry {
            key,
            key_loc: loc(self.0, key_at),
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node's value and location, as text (the file's path included).
    fn shape(n: &Node, out: &mut String) {
        use std::fmt::Write;
        let l = &n.loc;
        let _ = write!(
            out,
            "[{}:{}:{}:{}+{}]",
            l.file.path, l.line, l.column, l.offset, l.len
        );
        match &n.value {
            Value::Seq(s) => s.iter().for_each(|c| shape(c, out)),
            Value::Map(m) => m.iter().for_each(|e| {
                let k = &e.key_loc;
                let _ = write!(
                    out,
                    "{{{}@{}:{}:{}+{}}}",
                    e.key, k.line, k.column, k.offset, k.len
                );
                shape(&e.value, out);
            }),
            v => {
                let _ = write!(out, "{v:?}");
            }
        }
    }

    const TEXT: &str = "a: 1\nb: [x, 2.5, true, null, '007']\nc:\n  - {d: e}\n  - ENC[age:abc]\n";

    #[test]
    fn a_node_tree_decodes_as_it_was_parsed() {
        let file = Arc::new(SourceFile {
            path: "images/x.yml".into(),
            abs: "/t/images/x.yml".into(),
            text: Arc::from(TEXT),
        });
        let parsed = yaml::parse_source(file.clone()).unwrap();
        let bytes = encode_node(&parsed).unwrap();
        let decoded = decode_node(&bytes, &file).unwrap();
        let (mut a, mut b) = (String::new(), String::new());
        shape(&parsed, &mut a);
        shape(&decoded, &mut b);
        assert_eq!(a, b);
        assert!(a.contains("{b@2:1:5+1}"), "{a}");
        // Truncated or extended bytes do not decode.
        assert!(decode_node(&bytes[..bytes.len() - 1], &file).is_none());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_node(&longer, &file).is_none());
    }

    #[test]
    fn a_cache_file_is_trusted_only_when_it_checks() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("a.yml");
        std::fs::write(&f, TEXT).unwrap();
        let paths = vec![f.clone()];
        let mut c = ParseCache::open(tmp.path());
        assert!(c.parse_files(&paths, tmp.path())[0].is_ok());
        assert_eq!((c.hits, c.misses), (0, 1));
        c.save();
        let mut c = ParseCache::open(tmp.path());
        assert!(c.parse_files(&paths, tmp.path())[0].is_ok());
        assert_eq!((c.hits, c.misses), (1, 0));
        // One byte flipped anywhere: the file is not trusted.
        let cache = tmp.path().join(FILE);
        let mut bytes = std::fs::read(&cache).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 1;
        std::fs::write(&cache, &bytes).unwrap();
        let mut c = ParseCache::open(tmp.path());
        assert!(c.old.is_empty());
        assert!(c.parse_files(&paths, tmp.path())[0].is_ok());
        assert_eq!((c.hits, c.misses), (0, 1));
        c.save();
        // The edited file is parsed again, the edit seen.
        std::fs::write(&f, "a: 2\n").unwrap();
        let mut c = ParseCache::open(tmp.path());
        let n = c.parse_files(&paths, tmp.path()).remove(0).unwrap();
        assert_eq!((c.hits, c.misses), (0, 1));
        assert!(matches!(n.get("a").unwrap().value, Value::Int(2)));
    }
}
