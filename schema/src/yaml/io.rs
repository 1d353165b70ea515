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
