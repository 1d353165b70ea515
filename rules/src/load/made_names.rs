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
/// text, written at once: every image's name is made at every load).
fn made_name(parts: [&str; 3]) -> String {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b'-');
        }
        push_tag_safe(&mut out, p);
    }
    String::from_utf8(out).expect("ASCII only")
}

/// Replace what a docker tag cannot carry with `-`.
pub fn tag_safe(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    push_tag_safe(&mut out, s);
    String::from_utf8(out).expect("ASCII only")
}

/// `s` made tag-safe onto `out`, byte by byte: what a tag can carry is
/// ASCII, and a character outside ASCII is one `-` (its first byte writes
/// it, its continuation bytes nothing).
fn push_tag_safe(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-' {
            out.push(b);
        } else if b & 0xC0 != 0x80 {
            out.push(b'-');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name written at once is the joined text made tag-safe, a
    /// character a tag cannot carry (ASCII or not) one `-`.
    #[test]
    fn a_made_name_is_the_joined_text_made_tag_safe() {
        for parts in [
            ["web", "aws-bake", "2026_12_05t00_00_00_000000"],
            ["wéb app/1", "b:1", "t+z"],
            ["", "", ""],
            ["日本", "ü-ß", "€ 😀 x"],
        ] {
            let joined = parts.join("-");
            assert_eq!(made_name(parts), tag_safe(&joined), "{parts:?}");
            // one `-` per character a tag cannot carry
            let by_char: String = joined
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            assert_eq!(tag_safe(&joined), by_char, "{parts:?}");
        }
        assert_eq!(made_name(["wéb app", "b", "t"]), "w-b-app-b-t");
    }
}
