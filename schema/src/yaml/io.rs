//! Plain helpers for meta-state files (the cache crate): a typed value to
//! YAML text and back, errors located.

use std::path::Path;

use serde::Serialize;

use super::de::from_node;
use super::parse::{decode_utf8, parse_str};
use crate::diag::Diagnostic;

/// Serialize a value to YAML text.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, String> {
    serde_saphyr::to_string(value).map_err(|e| e.to_string())
}

/// Parse YAML text into a typed value; errors name `label` (the file), line,
/// column and field path.
///
/// Through the spanned parse and its deserializer, as the tree's files (the
/// lenient coercions of `from_node`, a repeated key's later value winning).
/// serde-saphyr's typed deserializer was tried first here, on the files csis
/// writes itself: it read them at ~550 instructions a byte against the
/// spanned parse's ~300, refused the lineage of some 5,000 builds at its node
/// budget (parsed again with spans then), and instantiated itself for every
/// record type (a third of the cache crate's code, the longest unit of a
/// first install).
pub fn from_str<T: serde::de::DeserializeOwned>(label: &str, text: &str) -> Result<T, Diagnostic> {
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
