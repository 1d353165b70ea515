//! The files a load reads: the YAML files of `cfg/` and of the collection
//! directories, in the loader's order (symbolic links followed, loops and
//! unreadable entries reported, a directory or special file named like a
//! YAML file refused without being opened), parsed from disk (through the
//! parse cache when the load has one, `parse_cache`) or taken from the
//! caller's parses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::parse_cache::ParseCache;
use super::{Loader, Pre};
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
        if self.pre.is_some() {
            return self
                .pre_paths(dir, recursive)
                .iter()
                .filter_map(|k| self.take_pre(k).map(|p| Arc::unwrap_or_clone(p.parse)))
                .collect();
        }
        let (files, unreadable) = yaml_files_checked(dir, recursive, &self.root);
        self.d.items.extend(unreadable);
        if let Some(at) = &self.opts.parse_cache {
            let cache = self.parse_cache.get_or_insert_with(|| ParseCache::open(at));
            return cache.parse_files(&files, &self.root);
        }
        if recursive {
            return yaml::parse_files(&files, &self.root);
        }
        let mut out = Vec::with_capacity(files.len());
        for f in &files {
            out.push(yaml::parse_file(f, &self.root));
        }
        out
    }

    /// The paths of the caller's parses in `dir` (recursively or not), in
    /// the loader's order: a BTreeMap of paths iterates component by
    /// component, which is walkdir's `sort_by_file_name` depth-first order.
    pub(super) fn pre_paths(&self, dir: &Path, recursive: bool) -> Vec<PathBuf> {
        let Some(pre) = &self.pre else {
            return Vec::new();
        };
        pre.keys()
            .filter(|p| {
                let inside = if recursive {
                    p.starts_with(dir)
                } else {
                    p.parent() == Some(dir)
                };
                inside && p.extension().is_some_and(|x| x == "yml" || x == "yaml")
            })
            .cloned()
            .collect()
    }

    /// The caller's parse of `path`, taken (each is read once).
    pub(super) fn take_pre(&mut self, path: &Path) -> Option<Pre> {
        self.pre.as_mut()?.remove(path)
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
        let mut walk = walkdir::WalkDir::new(dir)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter();
        while let Some(e) = walk.next() {
            match e {
                Ok(e) => {
                    if e.file_type().is_file() {
                        out.push(e.into_path());
                    } else if e.depth() > 0 && is_yaml(e.path()) {
                        // never opened: a fifo would block the load
                        diags.push(not_a_file(&display(e.path()), e.file_type()));
                        if e.file_type().is_dir() {
                            walk.skip_current_dir();
                        }
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
                            // metadata only: a fifo is never opened
                            match std::fs::metadata(&p) {
                                Ok(m) if m.is_file() => out.push(p),
                                Ok(m) => diags.push(not_a_file(&display(&p), m.file_type())),
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

/// The refusal of a path named like a YAML file that is not a regular
/// file (a directory, a fifo, a socket, a device): nothing is read from it.
fn not_a_file(at: &str, ft: std::fs::FileType) -> Diagnostic {
    let what = if ft.is_dir() {
        "a directory"
    } else {
        special_kind(ft)
    };
    Diagnostic::plain(
        at,
        format!("named like a YAML file but is {what}, not a regular file: refused, not read"),
    )
    .with_hint(
        "a tree's *.yml and *.yaml paths must be files (or links to files); rename or remove it",
    )
}

#[cfg(unix)]
fn special_kind(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        "a fifo"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: std::fs::FileType) -> &'static str {
    "a special file"
}

pub(super) fn yaml_files(dir: &Path, recursive: bool) -> Vec<PathBuf> {
    yaml_files_checked(dir, recursive, dir).0
}
