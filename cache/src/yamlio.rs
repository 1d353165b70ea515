//! The one place csis-cache turns records into text and back. YAML goes
//! through `csis_schema::yaml` (the workspace's single YAML module).
//!
//! Keys are written sorted: records are first turned into a
//! `serde_json::Value` (whose maps are ordered), then emitted.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Serialize with sorted keys.
pub fn to_text<T: Serialize>(value: &T) -> Result<String, String> {
    let v = serde_json::to_value(value).map_err(|e| e.to_string())?;
    csis_schema::yaml::to_string(&v)
}

/// Parse a meta-state file (`label` names it in errors).
pub fn from_text<T: DeserializeOwned>(label: &str, text: &str) -> Result<T, String> {
    if text.trim().is_empty() {
        return serde_json::from_value(serde_json::Value::Object(Default::default()))
            .map_err(|e| e.to_string());
    }
    csis_schema::yaml::from_str(label, text).map_err(|d| {
        format!(
            "{}: {}{}",
            d.location(),
            if d.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", d.path)
            },
            d.message
        )
    })
}
