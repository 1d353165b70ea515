//! The operator's secrets: `ENC[age:...]` markers written, found, opened and
//! rotated in the tree's YAML text, and the public-safe scan.
//!
//! - [`seal`]: a tree's `encryption.recipients` and encrypting a value to
//!   them (the marker the loader's [`crate::crypt`] opens).
//! - [`markers`]: every scalar of a YAML file with its byte span and field
//!   path; rewriting chosen scalars in place, the rest of the file kept
//!   byte for byte; encrypting fields of a file, rotating every marker of a
//!   tree, the plaintexts a tree carries encrypted (for CI's log masks).
//! - [`public_safe`]: the scan for material that must never be public
//!   (keys, tokens, identities, plans and state by name, addresses and long
//!   tokens outside prose and tests), honouring `public_safe.allow`.
//!
//! These read the tree's files raw, before and without a load: the
//! recipients and allow list are read before decryption (the loader refuses
//! markers there), and `encrypt` needs no identity.

use std::path::{Path, PathBuf};

use crate::crypt::Identities;
use csis_schema::yaml::{self, Node, Value};

pub mod markers;
pub mod public_safe;
pub mod seal;

pub use markers::{MarkerAt, Plaintexts};
pub use public_safe::{Finding, ScanReport};
pub use seal::Recipients;

/// The settings of `cfg/*.yml` these commands read raw: as the loader merges
/// `cfg/`, a later file's top-level key replaces an earlier one's.
#[derive(Debug, Clone, Default)]
pub struct RawSettings {
    /// `encryption.recipients`.
    pub recipients: Vec<String>,
    /// `public_safe.allow`.
    pub allow: Vec<String>,
    /// The file `encryption` came from (for messages).
    pub recipients_from: Option<String>,
}

/// Read `encryption.recipients` and `public_safe.allow` from the tree's
/// `cfg/` files without loading the tree.
pub fn raw_settings(root: &Path) -> Result<RawSettings, String> {
    let cfg = root.join("cfg");
    if !cfg.is_dir() {
        return Err(format!(
            "{}: not a configuration tree: there is no cfg/ directory",
            root.display()
        ));
    }
    let mut out = RawSettings::default();
    for f in crate::load::tree_files(root)
        .into_iter()
        .filter(|p| p.parent() == Some(cfg.as_path()))
    {
        let node = yaml::parse_file(&f, root).map_err(|d| d.to_string())?;
        let display = display_path(&f, root);
        if let Some(e) = node.get("encryption") {
            out.recipients = strings_at(e, "recipients", &display, "encryption.recipients")?;
            out.recipients_from = Some(display.clone());
        }
        if let Some(p) = node.get("public_safe") {
            out.allow = strings_at(p, "allow", &display, "public_safe.allow")?;
        }
    }
    Ok(out)
}

/// `public_safe.allow` of one `_config.yml` (`public-safe --config`).
pub fn allow_of_file(file: &Path) -> Result<Vec<String>, String> {
    let root = file.parent().unwrap_or(Path::new("."));
    let node = yaml::parse_file(file, root).map_err(|d| d.to_string())?;
    match node.get("public_safe") {
        Some(p) => strings_at(p, "allow", &file.display().to_string(), "public_safe.allow"),
        None => Ok(Vec::new()),
    }
}

fn strings_at(node: &Node, key: &str, file: &str, path: &str) -> Result<Vec<String>, String> {
    let Some(v) = node.get(key) else {
        return Ok(Vec::new());
    };
    match &v.value {
        Value::Null => Ok(Vec::new()),
        Value::Seq(items) => items
            .iter()
            .map(|n| {
                n.as_str().map(str::to_string).ok_or_else(|| {
                    format!(
                        "{}:{}:{}: `{path}`: expected a list of strings",
                        file, n.loc.line, n.loc.column
                    )
                })
            })
            .collect(),
        _ => Err(format!(
            "{}:{}:{}: `{path}`: expected a list of strings, found {}",
            file,
            v.loc.line,
            v.loc.column,
            v.kind_name()
        )),
    }
}

/// Every YAML file of the tree that may carry markers: the files the loader
/// reads ([`crate::load::tree_files`]) and the overlays under `overlays/`.
pub fn tree_yaml_files(root: &Path) -> Vec<PathBuf> {
    let mut out = crate::load::tree_files(root);
    let ov = root.join("overlays");
    if ov.is_dir() {
        let mut more: Vec<PathBuf> = walkdir::WalkDir::new(&ov)
            .sort_by_file_name()
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.into_path())
            .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
            .collect();
        out.append(&mut more);
    }
    out
}

/// The identities `CSIS_CONFIG_IDENTITY` names (as the loader reads them):
/// `setting` is the variable's value, None or blank when unset.
pub fn identities(setting: Option<&str>) -> Result<Identities, String> {
    match setting.map(str::trim).filter(|s| !s.is_empty()) {
        None => Err("no identity: set CSIS_CONFIG_IDENTITY to an age secret key, an identity file or a directory of *.age-identity files".into()),
        Some(s) => Identities::from_setting(s),
    }
}

/// `text` with every `ENC[age:...]` in it opened: a whole marker, or markers
/// inside a longer value (a value derived from ciphertext carries it, e.g.
/// `name@ENC[age:...]`). Text without a marker comes back as it is.
pub fn open_markers(ids: &Identities, text: &str) -> Result<String, String> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"ENC\[age:[A-Za-z0-9+/=\s]*\]").expect("marker"));
    if !text.contains(crate::crypt::PREFIX) {
        return Ok(text.to_string());
    }
    if crate::crypt::is_marker(text) {
        return ids.decrypt(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for m in re.find_iter(text) {
        out.push_str(&text[pos..m.start()]);
        out.push_str(&ids.decrypt(m.as_str())?);
        pos = m.end();
    }
    out.push_str(&text[pos..]);
    if out.contains(crate::crypt::PREFIX) {
        return Err("the value holds an ENC[age: marker that is not well formed".into());
    }
    Ok(out)
}

/// A value read from stdin: one trailing newline (LF or CRLF) dropped, as
/// `echo value |` adds it.
pub fn strip_one_newline(mut s: String) -> String {
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    s
}

/// `path` relative to `root`, with `/` separators.
pub(crate) fn display_path(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Write `text` to `path` atomically: a temporary file in the same
/// directory, the original's permissions, then a rename over it.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("{}: cannot create a temporary file: {e}", path.display()))?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path)
        .map_err(|e| format!("{}: cannot replace: {}", path.display(), e.error))?;
    Ok(())
}
