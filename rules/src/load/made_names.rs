//! The names a bake makes: an image's or a base image's final (artifact)
//! name, `<series>-<builder or runtime>-<timestamp>`, made safe for a tag.

use crate::tree::{Image, ImageRuntime, OsBuilder, OsRuntime, Tree};

impl Tree {
    /// The final (artifact) name of an image bake, as made for a tag:
    /// `<series>-<builder>-<timestamp>` with what a tag cannot carry replaced by `-`.
    pub fn image_final_name(&self, image: &Image, entry: &ImageRuntime) -> String {
        made_name([
            image.display.as_str(),
            entry.image_builder.as_deref().unwrap_or(&entry.label),
            &self.execution.timestamp,
        ])
    }
    /// The final name of a base bake: `<os>-<runtime>-<timestamp>`, made tag-safe.
    pub fn os_final_name(&self, os: &OsBuilder, entry: &OsRuntime) -> String {
        made_name([
            os.display.as_str(),
            entry.runtime.as_deref().unwrap_or(&entry.label),
            &self.execution.timestamp,
        ])
    }
}

/// `parts` joined by `-` and made tag-safe ([`tag_safe`] of the joined
/// text, written at once, byte by byte: every image's name is made at
/// every load). A character outside ASCII is one `-`, as in [`tag_safe`]:
/// its first byte writes it, its continuation bytes nothing.
fn made_name(parts: [&str; 3]) -> String {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b'-');
        }
        for &b in p.as_bytes() {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-' {
                out.push(b);
            } else if b & 0xC0 != 0x80 {
                out.push(b'-');
            }
        }
    }
    String::from_utf8(out).expect("ASCII only")
}

fn safe_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
        c
    } else {
        '-'
    }
}

/// Replace what a docker tag cannot carry with `-`.
pub fn tag_safe(s: &str) -> String {
    s.chars().map(safe_char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name written at once is the joined text made tag-safe.
    #[test]
    fn a_made_name_is_the_joined_text_made_tag_safe() {
        for parts in [
            ["web", "aws-bake", "2026_12_05t00_00_00_000000"],
            ["wéb app/1", "b:1", "t+z"],
            ["", "", ""],
            ["日本", "ü-ß", "€ 😀 x"],
        ] {
            assert_eq!(made_name(parts), tag_safe(&parts.join("-")), "{parts:?}");
        }
        assert_eq!(made_name(["wéb app", "b", "t"]), "w-b-app-b-t");
    }
}
