//! The labels a docker runtime reads and writes beside the request's tags,
//! below both the runtime and the `packer-docker` root: their names
//! (spelled in [`csis_schema::tags`]), the bake container's marks read in
//! both spellings, and the parent's lineage labels a bake blanks.

use std::collections::{BTreeMap, HashMap};

use csis_schema::tags;

/// Label carrying the final name as made (outside the `csis_` lineage prefix).
pub const NAME_LABEL: &str = tags::DOCKER_NAME;
/// A bake container's mark: the runtime whose bake it is (the original's
/// `csis_` form, as on AWS; [`tags::DOCKER_BAKE_BEFORE`] is still read).
pub const BAKE_LABEL: &str = tags::BAKE;
/// A bake container's owner: `<host>:<pid>` of the csis that runs it.
pub const BAKE_OWNER_LABEL: &str = tags::BAKE_OWNER;
/// The repository a committed build belongs to (found again untagged, when
/// a kill came between `docker commit` and its tag).
pub const REPOSITORY_LABEL: &str = tags::DOCKER_REPOSITORY;
/// Label listing the parent's lineage labels a bake blanked (labels are
/// inherited and cannot be removed); `query_images` leaves them out.
pub const BLANKED_LABEL: &str = tags::DOCKER_BLANKED;

/// Is `key` a bake machine's mark, in either spelling? A committed build
/// carries them blanked (a commit merges the container's labels in): they
/// are not the image's tags.
pub fn is_bake_mark(key: &str) -> bool {
    tags::BAKE_MARKS.contains(&key)
        || tags::BAKE_OWNER_MARKS.contains(&key)
        || key == tags::KEPT_FAILED
}

/// A bake container's owner, by its mark in either spelling.
pub fn bake_owner(labels: &HashMap<String, String>) -> Option<&String> {
    tags::BAKE_OWNER_MARKS
        .iter()
        .find_map(|k| labels.get(*k).filter(|v| !v.is_empty()))
}

/// The labels a commit sets on a build so that the bake container's own
/// marks (either spelling) are not the image's: each blanked.
pub fn blanked_bake_marks() -> impl Iterator<Item = (&'static str, &'static str)> {
    tags::BAKE_MARKS
        .into_iter()
        .chain(tags::BAKE_OWNER_MARKS)
        .map(|k| (k, ""))
}

/// The parent's lineage labels (`csis_*`) a bake does not set, sorted: its
/// image inherits them, so they are blanked (a label cannot be removed) and
/// listed in [`BLANKED_LABEL`], for `query_images` to leave out. A bake
/// machine's blanked mark is not lineage.
pub fn blanked_keys(
    parent_labels: &HashMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out: Vec<String> = parent_labels
        .keys()
        .filter(|k| k.starts_with(tags::PREFIX) && !tags.contains_key(*k) && !is_bake_mark(k))
        .cloned()
        .collect();
    out.sort();
    out
}

/// The keys an image's [`BLANKED_LABEL`] lists (what [`blanked_keys`]
/// wrote): inherited labels that are not the image's own.
pub fn listed_blanked(labels: &HashMap<String, String>) -> Vec<String> {
    labels
        .get(BLANKED_LABEL)
        .map(|b| {
            b.split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_the_bake_marks_are_read() {
        let before = HashMap::from([("csis.bake_owner".to_string(), "h:1".to_string())]);
        assert_eq!(bake_owner(&before).map(String::as_str), Some("h:1"));
        let now = HashMap::from([
            ("csis_bake_owner".to_string(), "h:2".to_string()),
            ("csis.bake_owner".to_string(), String::new()),
        ]);
        assert_eq!(bake_owner(&now).map(String::as_str), Some("h:2"));
        assert!(is_bake_mark("csis_bake") && is_bake_mark("csis.bake"));
        assert!(!is_bake_mark("csis_series"));
        // a parent's blanked marks are not lineage to blank again
        let parent = HashMap::from([
            ("csis_bake".to_string(), String::new()),
            ("csis_bake_owner".to_string(), String::new()),
            ("csis_config".to_string(), "t".to_string()),
        ]);
        assert_eq!(blanked_keys(&parent, &BTreeMap::new()), ["csis_config"]);
        let blanked: Vec<&str> = blanked_bake_marks().map(|(k, _)| k).collect();
        assert_eq!(
            blanked,
            [
                "csis_bake",
                "csis.bake",
                "csis_bake_owner",
                "csis.bake_owner"
            ]
        );
    }
}
