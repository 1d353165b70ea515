//! Scalars of a YAML file with their byte spans, and rewriting some of them
//! in place: everything outside the rewritten spans stays byte for byte.
//! On that: encrypting fields of a file, rotating every marker of a tree to
//! the current recipients, and the plaintexts a tree carries encrypted.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::crypt::{self, Identities};
use csis_schema::yaml::{self, join_path, Node, Value};

use super::seal::{stanza_count, Recipients};
use super::{display_path, write_atomic};

/// Where a value is: file (relative to the tree), line, column, field path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarkerAt {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub field: String,
}

impl std::fmt::Display for MarkerAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.field
        )
    }
}

/// One scalar of a file.
#[derive(Debug, Clone)]
pub struct Scalar {
    /// Field path (`config.admin_public_keys[0]`).
    pub path: String,
    pub line: u32,
    pub column: u32,
    /// Byte span in the file's text (quotes and block indicators included).
    pub offset: usize,
    pub len: usize,
    /// The value, when it is a string.
    pub string: Option<String>,
    /// The mapping key whose value is this scalar, or a list holding it directly.
    pub owner: Option<String>,
    /// Inside a flow collection (`[a, b]`, `{k: v}`), where a plain marker may not stand.
    pub in_flow: bool,
}

impl Scalar {
    pub fn is_marker(&self) -> bool {
        self.string.as_deref().is_some_and(crypt::is_marker)
    }
}

/// A YAML file read for rewriting.
#[derive(Debug)]
pub struct YamlFile {
    pub path: PathBuf,
    /// Relative to the tree's root.
    pub display: String,
    pub text: String,
    pub node: Node,
}

impl YamlFile {
    pub fn read(path: &Path, root: &Path) -> Result<YamlFile, String> {
        let display = display_path(path, root);
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{display}: cannot read: {e}"))?;
        YamlFile::from_text(path, display, text)
    }

    pub fn from_text(path: &Path, display: String, text: String) -> Result<YamlFile, String> {
        let node = yaml::parse_str(&display, path, &text).map_err(|d| d.to_string())?;
        Ok(YamlFile {
            path: path.to_path_buf(),
            display,
            text,
            node,
        })
    }

    /// Every scalar, in document order; a scalar reached twice (an alias, a
    /// merge key) is listed once, at its first path.
    pub fn scalars(&self) -> Vec<Scalar> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        walk(&self.node, "", None, false, &self.text, &mut seen, &mut out);
        out
    }

    fn at(&self, s: &Scalar) -> MarkerAt {
        MarkerAt {
            file: self.display.clone(),
            line: s.line,
            column: s.column,
            field: s.path.clone(),
        }
    }

    /// The text with each `(scalar, value)` written in the scalar's place
    /// (a marker, or a plaintext written back), checked by parsing it again:
    /// each rewritten field must read back as its value, or nothing is returned.
    pub fn rewritten(&self, edits: &[(&Scalar, String)]) -> Result<String, String> {
        let mut sorted: Vec<&(&Scalar, String)> = edits.iter().collect();
        sorted.sort_by_key(|(s, _)| s.offset);
        let mut out = String::with_capacity(self.text.len() + edits.len() * 300);
        let mut pos = 0usize;
        for (s, marker) in &sorted {
            if s.offset < pos || s.offset + s.len > self.text.len() {
                return Err(format!(
                    "{}: overlapping rewrites at {}",
                    self.display, s.path
                ));
            }
            let (start, end, with) = replacement(&self.text, s, marker);
            if start < pos {
                return Err(format!(
                    "{}: overlapping rewrites at {}",
                    self.display, s.path
                ));
            }
            out.push_str(&self.text[pos..start]);
            out.push_str(&with);
            pos = end;
        }
        out.push_str(&self.text[pos..]);
        let again = YamlFile::from_text(&self.path, self.display.clone(), out).map_err(|e| {
            format!(
                "{}: the rewritten file does not parse ({e}); nothing written",
                self.display
            )
        })?;
        let back = again.scalars();
        for (s, marker) in &sorted {
            if !back
                .iter()
                .any(|b| b.path == s.path && b.string.as_deref() == Some(marker.as_str()))
            {
                return Err(format!(
                    "{}:{}: `{}` does not read back as written after the rewrite; nothing written",
                    self.display, s.line, s.path
                ));
            }
        }
        Ok(again.text)
    }
}

fn walk(
    node: &Node,
    path: &str,
    owner: Option<&str>,
    in_flow: bool,
    text: &str,
    seen: &mut HashSet<usize>,
    out: &mut Vec<Scalar>,
) {
    let starts = |c: char| {
        text.get(node.loc.offset as usize..)
            .is_some_and(|t| t.starts_with(c))
    };
    match &node.value {
        Value::Map(entries) => {
            let flow = in_flow || starts('{');
            for e in entries {
                walk(
                    &e.value,
                    &join_path(path, &e.key),
                    Some(&e.key),
                    flow,
                    text,
                    seen,
                    out,
                );
            }
        }
        Value::Seq(items) => {
            let flow = in_flow || starts('[');
            for (i, n) in items.iter().enumerate() {
                let o = match n.value {
                    Value::Seq(_) | Value::Map(_) => None,
                    _ => owner,
                };
                walk(n, &format!("{path}[{i}]"), o, flow, text, seen, out);
            }
        }
        Value::Null => {}
        _ => {
            if !seen.insert(node.loc.offset as usize) {
                return;
            }
            out.push(Scalar {
                path: path.to_string(),
                line: node.loc.line,
                column: node.loc.column,
                offset: node.loc.offset as usize,
                len: node.loc.len as usize,
                string: node.as_str().map(str::to_string),
                owner: owner.map(str::to_string),
                in_flow,
            });
        }
    }
}

/// The byte range to replace for scalar `s`, and its replacement. A block
/// scalar's span is its content only: the range then starts at its `|`/`>`
/// indicator (a comment after it is kept) and the content lines go.
fn replacement(text: &str, s: &Scalar, marker: &str) -> (usize, usize, String) {
    let end = s.offset + s.len;
    let orig = &text[s.offset..end];
    let first = orig.trim_start().chars().next();
    if !matches!(first, Some('"' | '\'')) {
        let before = &text[..s.offset];
        let head = before.trim_end();
        let ls = head.rfind('\n').map(|p| p + 1).unwrap_or(0);
        // the indicator line: `key: |-  # comment`, `- >`
        let line = &head[ls..];
        let (code, _comment) = match line.find(" #") {
            Some(c) => (&line[..c], &line[c..]),
            None => (line, ""),
        };
        let code = code.trim_end();
        let tok_start = code
            .rfind(|c: char| c.is_whitespace())
            .map(|p| p + 1)
            .unwrap_or(0);
        let tok = &code[tok_start..];
        let is_block = head.len() < before.len()
            && before[head.len()..].contains('\n')
            && tok.len() <= 3
            && tok.starts_with(['|', '>'])
            && tok[1..].chars().all(|c| matches!(c, '-' | '+' | '1'..='9'));
        if is_block {
            let ind = ls + tok_start;
            let eol = ls + line.len();
            // the span may end inside the next line's indentation: keep that
            let tail = &orig[orig.trim_end().len()..];
            let nl = tail.rfind('\n').map(|p| &tail[p..]).unwrap_or("");
            let v = if crypt::is_marker(marker) {
                marker.to_string()
            } else {
                serde_json::to_string(marker).unwrap_or_default()
            };
            return (ind, end, format!("{v}{}{nl}", &text[ind + tok.len()..eol]));
        }
    }
    (s.offset, end, token(orig, marker, s.in_flow))
}

/// The text that replaces a scalar's span `orig` with `marker`: its quoting
/// kept, a block scalar's trailing line breaks kept, quoted inside a flow
/// collection. A marker holds no quote, backslash or space, so every form is
/// the marker itself. Any other value (a plaintext written back) is a
/// double-quoted scalar with JSON's escapes, which YAML reads as written.
fn token(orig: &str, marker: &str, in_flow: bool) -> String {
    let t = orig.trim_end();
    let suffix = &orig[t.len()..];
    if !crypt::is_marker(marker) {
        let q = serde_json::to_string(marker).unwrap_or_default();
        return format!("{q}{suffix}");
    }
    if t.starts_with('"') || (in_flow && !t.starts_with('\'')) {
        format!("\"{marker}\"{suffix}")
    } else if t.starts_with('\'') {
        format!("'{marker}'{suffix}")
    } else {
        format!("{marker}{suffix}")
    }
}

// ---------------------------------------------------------------------------
// encrypt --file F --field NAME

/// A field not encrypted, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    #[serde(flatten)]
    pub at: MarkerAt,
    pub reason: String,
}

/// What encrypting fields of one file did.
#[derive(Debug, Clone, Serialize)]
pub struct FieldsReport {
    pub file: String,
    /// Values now markers.
    pub encrypted: Vec<MarkerAt>,
    /// Values that were markers already (left as they are).
    pub already_encrypted: Vec<MarkerAt>,
    /// Values left in clear (not strings, empty).
    pub skipped: Vec<Skipped>,
    /// The file was rewritten.
    pub written: bool,
}

/// Encrypt, in `path`, every scalar value and list element of a mapping key
/// named in `fields`, to `to`. The file is rewritten atomically (unless
/// `write` is false), everything else in it byte for byte.
pub fn encrypt_fields(
    path: &Path,
    root: &Path,
    fields: &[String],
    to: &Recipients,
    write: bool,
) -> Result<FieldsReport, String> {
    let f = YamlFile::read(path, root)?;
    let scalars = f.scalars();
    let mut report = FieldsReport {
        file: f.display.clone(),
        encrypted: Vec::new(),
        already_encrypted: Vec::new(),
        skipped: Vec::new(),
        written: false,
    };
    let mut edits: Vec<(&Scalar, String)> = Vec::new();
    for s in &scalars {
        if !s
            .owner
            .as_ref()
            .is_some_and(|o| fields.iter().any(|f| f == o))
        {
            continue;
        }
        let at = f.at(s);
        match s.string.as_deref() {
            Some(v) if crypt::is_marker(v) => report.already_encrypted.push(at),
            Some(v) if crypt::contains_marker(v) => report.skipped.push(Skipped {
                at,
                reason: "holds a marker inside a longer string".into(),
            }),
            Some("") => report.skipped.push(Skipped {
                at,
                reason: "empty".into(),
            }),
            Some(v) => {
                edits.push((s, to.encrypt(v)?));
                report.encrypted.push(at);
            }
            None => report.skipped.push(Skipped {
                at,
                reason: "not a string (a number or boolean stays in clear: the loader decrypts to a string)".into(),
            }),
        }
    }
    if report.encrypted.is_empty()
        && report.already_encrypted.is_empty()
        && report.skipped.is_empty()
    {
        return Err(format!(
            "{}: no field named {} holds a value",
            f.display,
            fields
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !edits.is_empty() {
        let text = f.rewritten(&edits)?;
        if write {
            write_atomic(&f.path, &text)?;
            report.written = true;
        }
    }
    Ok(report)
}

/// What writing fields of one file back in clear did.
#[derive(Debug, Clone, Serialize)]
pub struct ClearReport {
    pub file: String,
    /// Markers now written in clear.
    pub decrypted: Vec<MarkerAt>,
    /// Values of those fields that were not markers.
    pub not_encrypted: Vec<MarkerAt>,
    pub written: bool,
}

/// The inverse of [`encrypt_fields`]: every marker that is the value (or a
/// list element) of a key named in `fields` is written in clear, as a
/// double-quoted scalar. Nothing is written unless every such marker opens.
pub fn decrypt_fields(
    path: &Path,
    root: &Path,
    fields: &[String],
    ids: &Identities,
    write: bool,
) -> Result<ClearReport, String> {
    let f = YamlFile::read(path, root)?;
    let scalars = f.scalars();
    let mut report = ClearReport {
        file: f.display.clone(),
        decrypted: Vec::new(),
        not_encrypted: Vec::new(),
        written: false,
    };
    let mut edits: Vec<(&Scalar, String)> = Vec::new();
    for s in scalars
        .iter()
        .filter(|s| s.owner.as_ref().is_some_and(|o| fields.contains(o)))
    {
        let at = f.at(s);
        if s.is_marker() {
            let plain = ids
                .decrypt(s.string.as_deref().unwrap_or_default())
                .map_err(|e| format!("{at}: {e}; nothing written"))?;
            edits.push((s, plain));
            report.decrypted.push(at);
        } else {
            report.not_encrypted.push(at);
        }
    }
    if report.decrypted.is_empty() && report.not_encrypted.is_empty() {
        return Err(format!(
            "{}: no field named {} holds a value",
            f.display,
            fields
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !edits.is_empty() {
        let text = f.rewritten(&edits)?;
        if write {
            write_atomic(&f.path, &text)?;
            report.written = true;
        }
    }
    Ok(report)
}

// ---------------------------------------------------------------------------
// reencrypt

/// A marker of the tree, and how many recipients its header holds.
#[derive(Debug, Clone, Serialize)]
pub struct RotatedMarker {
    #[serde(flatten)]
    pub at: MarkerAt,
    /// Recipient stanzas in the marker's age header before the rotation.
    pub stanzas_before: Option<usize>,
}

/// The markers of one file.
#[derive(Debug, Clone, Serialize)]
pub struct RotatedFile {
    pub file: String,
    pub markers: Vec<RotatedMarker>,
}

/// What a rotation did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
pub struct ReencryptReport {
    pub dry_run: bool,
    /// The current `encryption.recipients`, counted.
    pub recipients: usize,
    /// Files holding markers, each rewritten (unless dry).
    pub files: Vec<RotatedFile>,
    pub markers: usize,
}

/// Why a rotation wrote nothing.
#[derive(Debug)]
pub enum ReencryptError {
    /// Markers that the identity does not open (with the reason).
    Unopened(Vec<(MarkerAt, String)>),
    Other(String),
}

impl std::fmt::Display for ReencryptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReencryptError::Other(s) => f.write_str(s),
            ReencryptError::Unopened(v) => {
                write!(
                    f,
                    "{} encrypted value(s) do not open; nothing written",
                    v.len()
                )?;
                for (at, why) in v {
                    write!(f, "\n  {at}: {why}")?;
                }
                Ok(())
            }
        }
    }
}

impl From<String> for ReencryptError {
    fn from(s: String) -> Self {
        ReencryptError::Other(s)
    }
}

/// Read every tree file holding a marker.
fn files_with_markers(root: &Path) -> Result<Vec<(YamlFile, Vec<Scalar>)>, String> {
    let mut out = Vec::new();
    for p in super::tree_yaml_files(root) {
        let text = std::fs::read_to_string(&p)
            .map_err(|e| format!("{}: cannot read: {e}", display_path(&p, root)))?;
        if !text.contains(crypt::PREFIX) {
            continue;
        }
        let f = YamlFile::from_text(&p, display_path(&p, root), text)?;
        let markers: Vec<Scalar> = f.scalars().into_iter().filter(Scalar::is_marker).collect();
        if !markers.is_empty() {
            out.push((f, markers));
        }
    }
    Ok(out)
}

/// Where every marker of the tree's files is (nothing decrypted).
pub fn tree_markers(root: &Path) -> Result<Vec<MarkerAt>, String> {
    Ok(files_with_markers(root)?
        .iter()
        .flat_map(|(f, ms)| ms.iter().map(|s| f.at(s)).collect::<Vec<_>>())
        .collect())
}

/// Decrypt every marker of the tree with `ids` and encrypt it again to `to`,
/// writing each file in place atomically. Nothing is written unless every
/// marker opens; a dry run decrypts (to check) and writes nothing.
pub fn reencrypt(
    root: &Path,
    ids: &Identities,
    to: &Recipients,
    dry_run: bool,
) -> Result<ReencryptReport, ReencryptError> {
    let files = files_with_markers(root)?;
    let mut unopened = Vec::new();
    let mut plans: Vec<(&YamlFile, Vec<(&Scalar, String)>)> = Vec::new();
    for (f, markers) in &files {
        let mut edits = Vec::new();
        for s in markers {
            let m = s.string.as_deref().unwrap_or_default();
            match ids.decrypt(m) {
                Ok(plain) => edits.push((s, plain)),
                Err(e) => unopened.push((f.at(s), e)),
            }
        }
        plans.push((f, edits));
    }
    if !unopened.is_empty() {
        return Err(ReencryptError::Unopened(unopened));
    }
    let mut report = ReencryptReport {
        dry_run,
        recipients: to.len(),
        files: Vec::new(),
        markers: 0,
    };
    let mut texts = Vec::new();
    for (f, edits) in &plans {
        let mut sealed = Vec::with_capacity(edits.len());
        for (s, plain) in edits {
            sealed.push((*s, to.encrypt(plain)?));
        }
        texts.push((f.path.clone(), f.rewritten(&sealed)?));
        report.markers += edits.len();
        report.files.push(RotatedFile {
            file: f.display.clone(),
            markers: edits
                .iter()
                .map(|(s, _)| RotatedMarker {
                    at: f.at(s),
                    stanzas_before: s.string.as_deref().and_then(stanza_count),
                })
                .collect(),
        });
    }
    if !dry_run {
        for (p, t) in texts {
            write_atomic(&p, &t)?;
        }
    }
    Ok(report)
}

// ---------------------------------------------------------------------------
// the plaintexts (mask, public-safe)

/// The distinct plaintexts a tree carries encrypted. Debug never shows them.
pub struct Plaintexts {
    values: Vec<String>,
    /// How many markers they came from.
    pub markers: usize,
}

impl std::fmt::Debug for Plaintexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Plaintexts({} values from {} markers)",
            self.values.len(),
            self.markers
        )
    }
}

impl Plaintexts {
    /// Decrypt every marker of the tree's files with `ids`.
    pub fn of_tree(root: &Path, ids: &Identities) -> Result<Plaintexts, ReencryptError> {
        let mut set = BTreeSet::new();
        let mut unopened = Vec::new();
        let mut markers = 0;
        for (f, ms) in files_with_markers(root)? {
            for s in &ms {
                markers += 1;
                match ids.decrypt(s.string.as_deref().unwrap_or_default()) {
                    Ok(p) => {
                        set.insert(p);
                    }
                    Err(e) => unopened.push((f.at(s), e)),
                }
            }
        }
        if !unopened.is_empty() {
            return Err(ReencryptError::Unopened(unopened));
        }
        Ok(Plaintexts {
            values: set.into_iter().collect(),
            markers,
        })
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// What to mask in a log: each line of each value (a log is matched line
    /// by line, so a multi-line value is masked per line), without a
    /// trailing `\r`, of at least `min` characters, distinct, longest first.
    /// Returns the strings and how many non-empty lines were shorter than `min`.
    pub fn mask_values(&self, min: usize) -> (Vec<String>, usize) {
        let mut set = BTreeSet::new();
        let mut short = 0;
        for v in &self.values {
            for line in v.lines() {
                let l = line.strip_suffix('\r').unwrap_or(line);
                if l.trim().is_empty() {
                    continue;
                }
                if l.chars().count() < min {
                    short += 1;
                } else {
                    set.insert(l.to_string());
                }
            }
        }
        let mut out: Vec<String> = set.into_iter().collect();
        out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        (out, short)
    }
}

/// A GitHub Actions `::add-mask::` line for `value`, with the workflow
/// command data escaping (`%`, CR, LF) the runner undoes.
pub fn add_mask_line(value: &str) -> String {
    let v = value
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    format!("::add-mask::{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> YamlFile {
        YamlFile::from_text(Path::new("t.yml"), "t.yml".into(), text.into()).unwrap()
    }

    #[test]
    fn spans_cover_plain_quoted_and_block_scalars() {
        let text =
            "a: plain # c\nb: \"dq\"\nc: 'sq'\nd: |\n  one\n  two\ne: [x, \"y\"]\nf:\n  - el\n";
        let f = file(text);
        let s = f.scalars();
        let span = |p: &str| {
            let s = s.iter().find(|s| s.path == p).unwrap();
            &text[s.offset..s.offset + s.len]
        };
        assert_eq!(span("a"), "plain");
        assert_eq!(span("b"), "\"dq\"");
        assert_eq!(span("c"), "'sq'");
        assert!(span("d").starts_with("one"), "{:?}", span("d"));
        assert!(span("d").contains("two"), "{:?}", span("d"));
        assert_eq!(span("e[0]"), "x");
        assert_eq!(span("f[0]"), "el");
        assert!(s.iter().find(|s| s.path == "e[1]").unwrap().in_flow);
        assert!(!s.iter().find(|s| s.path == "f[0]").unwrap().in_flow);
        assert_eq!(
            s.iter()
                .find(|s| s.path == "f[0]")
                .unwrap()
                .owner
                .as_deref(),
            Some("f")
        );
    }

    #[test]
    fn rewriting_keeps_everything_else_byte_for_byte() {
        let text = "# head\na: plain   # c\nb: \"dq\"\nd: |\n  one\n  two\ne: [x, \"y\"]\nz: 1\n";
        let f = file(text);
        let s = f.scalars();
        let pick = |p: &str| s.iter().find(|s| s.path == p).unwrap();
        let m = "ENC[age:QUJD+/=]".to_string();
        let out = f
            .rewritten(&[
                (pick("a"), m.clone()),
                (pick("b"), m.clone()),
                (pick("d"), m.clone()),
                (pick("e[0]"), m.clone()),
            ])
            .unwrap();
        assert_eq!(
            out,
            "# head\na: ENC[age:QUJD+/=]   # c\nb: \"ENC[age:QUJD+/=]\"\nd: ENC[age:QUJD+/=]\ne: [\"ENC[age:QUJD+/=]\", \"y\"]\nz: 1\n"
        );
    }

    #[test]
    fn block_scalars_lose_their_content_and_keep_their_comment() {
        let text = "d: |-  # why\n  one\n\n  two\nl:\n  - >\n    folded\n  - x\nz: |\n  last";
        let f = file(text);
        let s = f.scalars();
        let pick = |p: &str| s.iter().find(|s| s.path == p).unwrap();
        let m = "ENC[age:QUJD]".to_string();
        let out = f
            .rewritten(&[
                (pick("d"), m.clone()),
                (pick("l[0]"), m.clone()),
                (pick("z"), m.clone()),
            ])
            .unwrap();
        assert_eq!(
            out,
            "d: ENC[age:QUJD]  # why\nl:\n  - ENC[age:QUJD]\n  - x\nz: ENC[age:QUJD]"
        );
    }

    #[test]
    fn an_anchored_value_keeps_its_anchor() {
        let f = file("a: &x secret\nb: *x\n");
        let s = f.scalars();
        let out = f.rewritten(&[(&s[0], "ENC[age:QUJD]".into())]).unwrap();
        assert_eq!(out, "a: &x ENC[age:QUJD]\nb: *x\n");
    }

    #[test]
    fn a_plaintext_is_written_back_double_quoted() {
        let f = file("a: ENC[age:QUJD]  # c\nb:\n  - 'ENC[age:QUJD]'\n");
        let s = f.scalars();
        let out = f
            .rewritten(&[(&s[0], "it's \"x\": y\n#z".into()), (&s[1], "plain".into())])
            .unwrap();
        assert_eq!(
            out,
            "a: \"it's \\\"x\\\": y\\n#z\"  # c\nb:\n  - \"plain\"\n"
        );
    }

    #[test]
    fn aliases_are_rewritten_once() {
        let f = file("a: &x secret\nb: *x\n");
        let s = f.scalars();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].path, "a");
    }

    #[test]
    fn mask_values_split_lines_and_skip_short_ones() {
        let p = Plaintexts {
            values: vec![
                "short".into(),
                "line-one-long\r\nline-two-long\n".into(),
                "100%-secret".into(),
            ],
            markers: 3,
        };
        let (v, short) = p.mask_values(8);
        assert_eq!(short, 1);
        assert_eq!(v, vec!["line-one-long", "line-two-long", "100%-secret"]);
        assert_eq!(add_mask_line("100%-secret"), "::add-mask::100%25-secret");
    }
}
