//! "tag names spelled once": the tag and label names csis stamps are
//! string literals only in `schema/src/tags.rs`; a `csis.` docker label
//! the schema does not name is flagged too.

use std::collections::BTreeSet;

/// The tag and label names `schema/src/tags.rs` defines (every
/// `"csis_..."` and `"csis...."` literal in it: EC2 tags and docker labels
/// alike, the labels a docker runtime once wrote among them).
pub fn tag_names(tags_rs: &str) -> BTreeSet<String> {
    tags_rs
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| is_mark(s))
        .map(str::to_string)
        .collect()
}

/// `csis_x` or `csis.x`: the form of a tag or label csis stamps.
fn is_mark(s: &str) -> bool {
    ["csis_", "csis."].iter().any(|p| {
        s.strip_prefix(p).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
    })
}

/// "F:L spells the tag NAME": a tag name written as a string literal in
/// library code (not in a comment, not in the file's unit tests).
pub fn spelled_tags(path: &str, text: &str, names: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (n, code) in product_lines(text) {
        for name in names {
            if code.contains(&format!("\"{name}\"")) {
                out.push(format!(
                    "{path}:{}: spells the tag {name}; use csis_schema::tags",
                    n + 1
                ));
            }
        }
        // a docker label the schema does not name yet (a `csis_` word may be
        // another thing's name: a security group, a user)
        for lit in code.split('"').skip(1).step_by(2) {
            if lit.starts_with("csis.") && is_mark(lit) && !names.contains(lit) {
                out.push(format!(
                    "{path}:{}: spells the label {lit}; name it in csis_schema::tags",
                    n + 1
                ));
            }
        }
    }
    out
}

/// The lines of a file's product code, numbered from 0 and trimmed at
/// the start: comment lines aside, up to its unit tests (`#[cfg(test)]`).
pub fn product_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .map(str::trim_start)
        .enumerate()
        .take_while(|(_, l)| !l.starts_with("#[cfg(test)]"))
        .filter(|(_, l)| !l.starts_with("//"))
}

#[cfg(test)]
mod checks {
    use super::*;

    #[test]
    fn tag_rule_fails_on_a_spelled_tag() {
        let names = tag_names(
            "pub const SERIES: &str = \"csis_series\";\npub const PREFIX: &str = \"csis_\";",
        );
        assert_eq!(names.iter().collect::<Vec<_>>(), ["csis_series"]);
        let text = "// \"csis_series\" in a comment\nlet s = tags.get(\"csis_series\");\n#[cfg(test)]\nmod tests { const T: &str = \"csis_series\"; }\n";
        assert_eq!(
            spelled_tags("x.rs", text, &names),
            ["x.rs:2: spells the tag csis_series; use csis_schema::tags"]
        );
        assert!(spelled_tags("y.rs", "tags.get(tags::SERIES)", &names).is_empty());
        // docker's labels: named in the schema, or not at all
        let names = tag_names(
            "pub const BAKE: &str = \"csis_bake\";\npub const NAME: &str = \"csis.name\";\nconst F: &str = \"csis.yml\";",
        );
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            ["csis.name", "csis.yml", "csis_bake"]
        );
        let text = "const NAME_LABEL: &str = \"csis.name\";\nconst BAKE_LABEL: &str = \"csis.bake\";\nlet s = \"csis_instances\";\n";
        assert_eq!(
            spelled_tags("d.rs", text, &names),
            [
                "d.rs:1: spells the tag csis.name; use csis_schema::tags",
                "d.rs:2: spells the label csis.bake; name it in csis_schema::tags"
            ]
        );
    }
}
