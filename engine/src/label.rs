//! Labels: `//<path>[@<runtime>][:<kind>]`.
//!
//! Examples: `//images/dask@aws-east2`, `//os/deb12@docker-local`,
//! `//images/dask@aws-east2:bake`. The path is one or more `/`-separated
//! non-empty segments; the runtime and the kind are optional. A graph node's
//! label always carries its kind (see [`crate::Node::new`]); the label without
//! its kind is the node's *target* (several nodes, e.g. `emit`, `bake`,
//! `retag`, share one target).
//!
//! Ordering and equality are by (path, runtime, kind); display is canonical,
//! so `label.to_string().parse() == label`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parsed label. Cheap to clone: one shared string (`Arc<str>`) holding
/// the canonical text, with the positions of `@` and `:`.
#[derive(Clone)]
pub struct Label {
    text: Arc<str>,
    /// End of the path (index of `@`, or of `:`, or the length).
    path_end: u32,
    /// End of the runtime (index of `:`, or the length); == path_end if none.
    rt_end: u32,
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}
impl Eq for Label {}
impl Hash for Label {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state)
    }
}
impl Ord for Label {
    /// By path, then runtime (none first), then kind (none first).
    fn cmp(&self, other: &Self) -> Ordering {
        (self.path(), self.runtime(), self.kind()).cmp(&(
            other.path(),
            other.runtime(),
            other.kind(),
        ))
    }
}
impl PartialOrd for Label {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A label (or a pattern) that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label `{input}`: {reason}")]
pub struct LabelError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl LabelError {
    pub(crate) fn new(input: &str, reason: impl Into<String>) -> Self {
        LabelError {
            input: input.to_string(),
            reason: reason.into(),
        }
    }
}

/// Characters that may not appear inside a segment, a runtime or a kind.
pub(crate) fn bad_char(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, '/' | '@' | ':' | '"' | '\\')
}

pub(crate) fn check_word(input: &str, what: &str, word: &str) -> Result<(), LabelError> {
    match word_problem(what, word) {
        Some(reason) => Err(LabelError::new(input, reason)),
        None => Ok(()),
    }
}

/// What is wrong with a segment, runtime or kind (`what`), if anything.
fn word_problem(what: &str, word: &str) -> Option<String> {
    if word.is_empty() {
        return Some(format!("empty {what}"));
    }
    // Printable ASCII but for the separators is fine, byte by byte (every
    // node's label is checked); anything else asks `bad_char`.
    let plain = |b: u8| b > b' ' && b < 0x7f && !matches!(b, b'/' | b'@' | b':' | b'"' | b'\\');
    if word.bytes().all(plain) {
        return None;
    }
    let c = word.chars().find(|c| bad_char(*c))?;
    Some(format!("{what} `{word}` contains {c:?}"))
}

/// Split `text` (without the leading `//`) into (path, runtime, kind).
pub(crate) fn split_parts(text: &str) -> (&str, Option<&str>, Option<&str>) {
    // The kind follows the last ':' (':' cannot appear elsewhere).
    let (rest, kind) = match text.rfind(':') {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let (path, runtime) = match rest.find('@') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    (path, runtime, kind)
}

impl Label {
    /// Build a label from parts. `path` is e.g. `images/dask` (no leading `//`).
    pub fn new(path: &str, runtime: Option<&str>, kind: Option<&str>) -> Result<Label, LabelError> {
        // (the label as given is written only for an error)
        let problem = path
            .split('/')
            .find_map(|seg| word_problem("path segment", seg))
            .or_else(|| runtime.and_then(|r| word_problem("runtime", r)))
            .or_else(|| kind.and_then(|k| word_problem("kind", k)));
        if let Some(reason) = problem {
            let shown = format!(
                "//{path}{}{}",
                runtime.map(|r| format!("@{r}")).unwrap_or_default(),
                kind.map(|k| format!(":{k}")).unwrap_or_default()
            );
            return Err(LabelError::new(&shown, reason));
        }
        Ok(Label::from_parts(path, runtime, kind))
    }

    /// Assemble from checked parts.
    fn from_parts(path: &str, runtime: Option<&str>, kind: Option<&str>) -> Label {
        let mut text = String::with_capacity(
            2 + path.len() + runtime.map_or(0, |r| r.len() + 1) + kind.map_or(0, |k| k.len() + 1),
        );
        text.push_str("//");
        text.push_str(path);
        let path_end = text.len() as u32;
        if let Some(r) = runtime {
            text.push('@');
            text.push_str(r);
        }
        let rt_end = text.len() as u32;
        if let Some(k) = kind {
            text.push(':');
            text.push_str(k);
        }
        Label {
            text: text.into(),
            path_end,
            rt_end,
        }
    }

    /// The canonical text, e.g. `//images/dask@aws-east2:bake`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Parse `//path[@runtime][:kind]`.
    pub fn parse(text: &str) -> Result<Label, LabelError> {
        let body = text
            .strip_prefix("//")
            .ok_or_else(|| LabelError::new(text, "a label starts with `//`"))?;
        if body.matches('@').count() > 1 {
            return Err(LabelError::new(text, "more than one `@`"));
        }
        if body.matches(':').count() > 1 {
            return Err(LabelError::new(text, "more than one `:`"));
        }
        let (path, runtime, kind) = split_parts(body);
        if path.split('/').any(|s| s == "...") {
            return Err(LabelError::new(
                text,
                "`...` is a pattern, not a label (use Pattern::parse)",
            ));
        }
        Label::new(path, runtime, kind).map_err(|e| LabelError::new(text, e.reason))
    }

    /// The path without `//`, e.g. `images/dask`.
    pub fn path(&self) -> &str {
        &self.text[2..self.path_end as usize]
    }

    /// The path's segments, e.g. `["images", "dask"]`.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.path().split('/')
    }

    /// The last segment (e.g. the image name `dask`).
    pub fn name(&self) -> &str {
        let p = self.path();
        p.rsplit('/').next().unwrap_or(p)
    }

    /// The runtime after `@`, if any.
    pub fn runtime(&self) -> Option<&str> {
        let (a, b) = (self.path_end as usize, self.rt_end as usize);
        (b > a).then(|| &self.text[a + 1..b])
    }

    /// The node kind after `:`, if any.
    pub fn kind(&self) -> Option<&str> {
        let b = self.rt_end as usize;
        (self.text.len() > b).then(|| &self.text[b + 1..])
    }

    /// The same label with `kind` (replacing any kind it had).
    pub fn with_kind(&self, kind: &str) -> Result<Label, LabelError> {
        if let Some(reason) = word_problem("kind", kind) {
            return Err(LabelError::new(&self.text, reason));
        }
        Ok(Label::from_parts(self.path(), self.runtime(), Some(kind)))
    }

    /// The same label with `runtime` (replacing any runtime it had).
    pub fn with_runtime(&self, runtime: &str) -> Result<Label, LabelError> {
        if let Some(reason) = word_problem("runtime", runtime) {
            return Err(LabelError::new(&self.text, reason));
        }
        Ok(Label::from_parts(self.path(), Some(runtime), self.kind()))
    }

    /// The label without its kind: the target shared by a target's nodes.
    pub fn target(&self) -> Label {
        if self.kind().is_none() {
            return self.clone();
        }
        Label::from_parts(self.path(), self.runtime(), None)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Label({self})")
    }
}

impl FromStr for Label {
    type Err = LabelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Label::parse(s)
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Label::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_refused_exactly_for_what_bad_char_refuses() {
        for b in 0u8..128 {
            let c = b as char;
            let w = format!("a{c}b");
            assert_eq!(word_problem("w", &w).is_none(), !bad_char(c), "{c:?}");
        }
        for (w, ok) in [
            ("ünï", true),
            ("a\u{a0}b", false),
            ("a\u{85}b", false),
            ("\u{3000}", false),
        ] {
            assert_eq!(word_problem("w", w).is_none(), ok, "{w:?}");
        }
    }

    #[test]
    fn parse_and_display_round_trip() {
        for s in [
            "//images/dask@aws-east2",
            "//os/deb12@docker-local",
            "//images/dask@aws-east2:bake",
            "//images/dask",
            "//images/dask:emit",
            "//a/b/c.d_e-f@rt",
        ] {
            let l = Label::parse(s).unwrap();
            assert_eq!(l.to_string(), s);
            assert_eq!(l.to_string().parse::<Label>().unwrap(), l);
        }
    }

    #[test]
    fn parts() {
        let l = Label::parse("//images/dask@aws-east2:bake").unwrap();
        assert_eq!(l.path(), "images/dask");
        assert_eq!(l.name(), "dask");
        assert_eq!(l.runtime(), Some("aws-east2"));
        assert_eq!(l.kind(), Some("bake"));
        assert_eq!(l.target().to_string(), "//images/dask@aws-east2");
        assert_eq!(
            l.target().with_kind("emit").unwrap().to_string(),
            "//images/dask@aws-east2:emit"
        );
        assert_eq!(l.segments().collect::<Vec<_>>(), ["images", "dask"]);
    }

    #[test]
    fn rejects_bad_labels() {
        for s in [
            "images/dask",
            "//",
            "//images//dask",
            "//images/dask@",
            "//images/dask@a@b",
            "//images/dask:",
            "//images/dask:a:b",
            "//images/da sk",
            "//images/...",
        ] {
            let e = Label::parse(s).unwrap_err();
            assert_eq!(e.input, s, "{e}");
        }
    }

    #[test]
    fn serde_as_string() {
        let l = Label::parse("//os/deb12@docker-local:resolve").unwrap();
        let j = serde_json::to_string(&l).unwrap();
        assert_eq!(j, "\"//os/deb12@docker-local:resolve\"");
        assert_eq!(serde_json::from_str::<Label>(&j).unwrap(), l);
        assert!(serde_json::from_str::<Label>("\"nope\"").is_err());
    }
}
