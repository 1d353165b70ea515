//! The one place csis-cache turns records into text and back. YAML goes
//! through `csis_rules::yaml` (the workspace's single YAML module).
//!
//! Keys are written sorted: records are first turned into a
//! `serde_json::Value` (whose maps are ordered), then emitted.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Serialize with sorted keys.
pub fn to_text<T: Serialize>(value: &T) -> Result<String, String> {
    let v = serde_json::to_value(value).map_err(|e| e.to_string())?;
    emit(&v)
}

/// Parse a meta-state file.
pub fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    if text.trim().is_empty() {
        return serde_json::from_value(serde_json::Value::Object(Default::default()))
            .map_err(|e| e.to_string());
    }
    parse(text)
}

#[cfg(not(feature = "interim-json"))]
fn emit(v: &serde_json::Value) -> Result<String, String> {
    csis_rules::yaml::to_string(v).map_err(|e| e.to_string())
}

#[cfg(not(feature = "interim-json"))]
fn parse<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    csis_rules::yaml::from_str(text).map_err(|e| e.to_string())
}

// Interim (before `csis_rules::yaml` exists): JSON, which is valid YAML.
#[cfg(feature = "interim-json")]
fn emit(v: &serde_json::Value) -> Result<String, String> {
    let mut s = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    s.push('\n');
    Ok(s)
}

#[cfg(feature = "interim-json")]
fn parse<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}
