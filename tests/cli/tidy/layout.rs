//! "one module layout": a module with modules inside it is a folder with
//! its `mod.rs`, as most of the workspace writes it, never a file `x.rs`
//! beside a folder `x/` (issue 24 item 4); a reader finds a module's code
//! in one place whichever crate it is in.

/// "F: x.rs beside x/": each file of a source folder (paths relative to
/// it) named as a folder of the same files.
pub fn beside_its_folder(files: &[&str]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| {
            let stem = f.strip_suffix(".rs")?;
            let folder = format!("{stem}/");
            files.iter().any(|g| g.starts_with(&folder)).then(|| {
                format!("{f}: a module file beside its folder {folder}; make it {stem}/mod.rs")
            })
        })
        .collect()
}

#[test]
fn a_module_with_modules_inside_is_a_folder_with_its_mod_rs() {
    let root = super::workspace();
    let mut found = Vec::new();
    let mut folders = 0;
    for (_, dir) in super::source_folders(&super::cargo_metadata()) {
        folders += 1;
        let text = super::files_under(&dir);
        let files: Vec<&str> = text.keys().map(String::as_str).collect();
        let shown = dir
            .strip_prefix(&root)
            .unwrap_or(&dir)
            .display()
            .to_string();
        found.extend(
            beside_its_folder(&files)
                .into_iter()
                .map(|f| format!("{shown}/{f}")),
        );
    }
    assert!(folders >= 10, "found the crates: {folders}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[cfg(test)]
mod checks {
    use super::*;

    #[test]
    fn layout_rule_fails_on_a_module_file_beside_its_folder() {
        let files = [
            "lib.rs",
            "recorder.rs",
            "recorder/fleet_ops.rs",
            "load/mod.rs",
            "load/fleet.rs",
            "load/fleet/instances.rs",
            "plain.rs",
            "plain_more/x.rs",
        ];
        assert_eq!(
            beside_its_folder(&files),
            [
                "recorder.rs: a module file beside its folder recorder/; make it recorder/mod.rs",
                "load/fleet.rs: a module file beside its folder load/fleet/; make it load/fleet/mod.rs",
            ]
        );
        assert!(beside_its_folder(&["a/mod.rs", "a/b.rs", "c.rs"]).is_empty());
    }
}
