//! The names a bake makes: an image's or a base image's final (artifact)
//! name, `<series>-<builder or runtime>-<timestamp>`, made safe for a tag.

use crate::tree::{Image, ImageRuntime, OsBuilder, OsRuntime, Tree};

impl Tree {
    /// The final (artifact) name of an image bake, as made for a tag:
    /// `<series>-<builder>-<timestamp>` with what a tag cannot carry replaced by `-`.
    pub fn image_final_name(&self, image: &Image, entry: &ImageRuntime) -> String {
        tag_safe(&format!(
            "{}-{}-{}",
            image.display,
            entry.image_builder.as_deref().unwrap_or(&entry.label),
            self.execution.timestamp
        ))
    }
    /// The final name of a base bake: `<os>-<runtime>-<timestamp>`, made tag-safe.
    pub fn os_final_name(&self, os: &OsBuilder, entry: &OsRuntime) -> String {
        tag_safe(&format!(
            "{}-{}-{}",
            os.display,
            entry.runtime.as_deref().unwrap_or(&entry.label),
            self.execution.timestamp
        ))
    }
}

/// Replace what a docker tag cannot carry with `-`.
pub fn tag_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}
