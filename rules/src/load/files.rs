//! The files a load reads: the YAML files of `cfg/` and of the collection
//! directories, in the loader's order (symbolic links followed, loops and
//! unreadable entries reported), parsed from disk or taken from the
//! caller's parses.

use std::path::{Path, PathBuf};

use super::Loader;
use csis_schema::diag::Diagnostic;
use csis_schema::yaml::{self, Node};

impl Loader<'_> {
    /// The parsed YAML files of `dir` (recursively or not), in the
    /// loader's order: from the caller's parses when given, else from disk.
    pub(super) fn parsed_files(
        &mut self,
        dir: &Path,
        recursive: bool,
    ) -> Vec<Result<Node, Diagnostic>> {
        if let Some(pre) = self.pre.as_mut() {
            // A BTreeMap of paths iterates component by component, which is
            // walkdir's `sort_by_file_name` depth-first order.
            let keys: Vec<PathBuf> = pre
                .keys()
                .filter(|p| {
                    let inside = if recursive {
                        p.starts_with(dir)
                    } else {
                        p.parent() == Some(dir)
                    };
                    inside && p.extension().is_some_and(|x| x == "yml" || x == "yaml")
                })
                .cloned()
                .collect();
            return keys.iter().filter_map(|k| pre.remove(k)).collect();
        }
        let (files, unreadable) = yaml_files_checked(dir, recursive, &self.root);
        self.d.items.extend(unreadable);
        if recursive {
            return yaml::parse_files(&files, &self.root);
        }
        let mut out = Vec::with_capacity(files.len());
        for f in &files {
            out.push(yaml::parse_file(f, &self.root));
        }
        out
    }
}

/// The YAML files of `dir` (recursively or not), and a diagnostic for each
/// entry that cannot be read. Symbolic links are followed everywhere (to
/// files and, when recursive, to directories); a link that leads back to a
/// directory it lies in is refused as a loop, a dangling link as unreadable.
pub(super) fn yaml_files_checked(
    dir: &Path,
    recursive: bool,
    root: &Path,
) -> (Vec<PathBuf>, Vec<Diagnostic>) {
    let display = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    };
    let is_yaml = |p: &Path| p.extension().is_some_and(|x| x == "yml" || x == "yaml");
    let mut diags = Vec::new();
    let mut out: Vec<PathBuf> = Vec::new();
    if recursive {
        for e in walkdir::WalkDir::new(dir)
            .follow_links(true)
            .sort_by_file_name()
        {
            match e {
                Ok(e) => {
                    if e.file_type().is_file() {
                        out.push(e.into_path());
                    }
                }
                Err(err) => {
                    let at = err.path().map(display).unwrap_or_else(|| display(dir));
                    let msg = if let Some(anc) = err.loop_ancestor() {
                        format!(
                            "a symbolic link loop: this leads back to {}; refused",
                            display(anc)
                        )
                    } else {
                        match err.io_error() {
                            Some(io) => format!("cannot read: {io}"),
                            None => format!("cannot read: {err}"),
                        }
                    };
                    // Only YAML files and directories matter; a bad link to
                    // anything else is still reported, it may be either.
                    diags.push(Diagnostic::plain(&at, msg));
                }
            }
        }
    } else {
        match std::fs::read_dir(dir) {
            Err(e) => diags.push(Diagnostic::plain(
                &display(dir),
                format!("cannot read: {e}"),
            )),
            Ok(rd) => {
                for e in rd {
                    match e {
                        Err(e) => diags.push(Diagnostic::plain(
                            &display(dir),
                            format!("cannot read: {e}"),
                        )),
                        Ok(e) => {
                            let p = e.path();
                            if !is_yaml(&p) {
                                continue;
                            }
                            match std::fs::metadata(&p) {
                                Ok(m) if m.is_file() => out.push(p),
                                Ok(_) => {}
                                Err(err) => diags.push(Diagnostic::plain(
                                    &display(&p),
                                    format!("cannot read: {err}"),
                                )),
                            }
                        }
                    }
                }
            }
        }
    }
    out.retain(|p| is_yaml(p));
    if !recursive {
        out.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    }
    (out, diags)
}

pub(super) fn yaml_files(dir: &Path, recursive: bool) -> Vec<PathBuf> {
    yaml_files_checked(dir, recursive, dir).0
}
