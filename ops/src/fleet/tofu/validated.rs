//! The roots a dry run validated, remembered (issue 23 item 4: a dry run
//! that checks nothing new runs no subprocess): a root whose files, whose
//! module sources and whose executable are as they were when its `init
//! -backend=false` and `validate` last passed is not checked again. The
//! record is `.csis/cache/tofu-validated.json`, root directory -> the blake3
//! of what the check read; a failed check is never remembered, and a file
//! that does not parse is ignored and rewritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use csis_cache::stamp::FileStat;

/// The record, under the tree's `.csis/cache/`.
pub const FILE: &str = "tofu-validated.json";

/// What `init` and `validate` write in a root: not part of its input.
const WRITTEN_BY_TOFU: &[&str] = &[".terraform", ".terraform.lock.hcl", "tfplan"];

/// The remembered checks of one tree.
pub struct Validated {
    file: PathBuf,
    known: BTreeMap<String, String>,
}

impl Validated {
    pub fn open(cache_dir: &Path) -> Validated {
        let file = cache_dir.join(FILE);
        let known = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Validated { file, known }
    }

    /// Did the root in `dir` pass with this `key` before?
    pub fn passed(&self, root: &str, key: &str) -> bool {
        self.known.get(root).is_some_and(|k| k == key)
    }

    /// Remember a pass (a failure is not remembered: it is checked again).
    pub fn remember(&mut self, root: &str, key: String) {
        self.known.insert(root.to_string(), key);
    }

    /// Write the record (best effort: a cache that cannot be written costs
    /// the next dry run its checks, nothing else).
    pub fn save(&self) {
        if let Some(dir) = self.file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(text) = serde_json::to_vec_pretty(&self.known) {
            let tmp = self.file.with_extension("json.tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &self.file);
            }
        }
    }
}

/// The digest of the module sources the roots call (every file under
/// `modules`), read once per dry run; None when they are no folder here (a
/// URL, a missing folder: the roots are then always checked) or a file
/// cannot be read.
pub fn modules_digest(modules: &Path) -> Option<blake3::Hash> {
    if !modules.is_dir() {
        return None;
    }
    let mut h = blake3::Hasher::new();
    hash_files(&mut h, modules, modules, false)?;
    Some(h.finalize())
}

/// The key of a check of the root in `dir` with `executable` (resolved):
/// the executable's path and identity (as the no-op stamp keeps a file:
/// size, times, inode, device), every file of the root
/// but what tofu writes there, the module sources' [`modules_digest`];
/// None when the executable changed in the last second, there is no
/// digest of the module sources, or a file cannot be read (then the check
/// runs).
pub fn key(executable: &Path, dir: &Path, modules: Option<&blake3::Hash>) -> Option<String> {
    let modules = modules?;
    let exe = std::fs::canonicalize(executable).ok()?;
    // the no-op stamp's identity of a file, and its racy rule
    let stat = FileStat::of(&exe);
    if stat.is_racy(SystemTime::now()) {
        return None;
    }
    let mut text = String::new();
    stat.encode(&mut text);
    let mut h = blake3::Hasher::new();
    h.update(exe.as_os_str().as_encoded_bytes());
    h.update(text.as_bytes());
    hash_files(&mut h, dir, dir, true)?;
    h.update(b"\0modules\0");
    h.update(modules.as_bytes());
    Some(h.finalize().to_hex().to_string())
}

/// Every file below `dir` (sorted, by its path relative to `base` and its
/// content) into `h`; at the root of a tofu root, what tofu writes skipped.
fn hash_files(h: &mut blake3::Hasher, base: &Path, dir: &Path, root: bool) -> Option<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if root && dir == base && WRITTEN_BY_TOFU.iter().any(|w| name == *w) {
            continue;
        }
        let path = e.path();
        let ty = e.file_type().ok()?;
        if ty.is_dir() {
            hash_files(h, base, &path, root)?;
        } else if ty.is_file() {
            let rel = path.strip_prefix(base).ok()?;
            h.update(rel.as_os_str().as_encoded_bytes());
            h.update(b"\0");
            h.update(&std::fs::read(&path).ok()?);
            h.update(b"\0");
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_moves_with_the_roots_files_and_its_modules_not_with_what_tofu_writes() {
        let t = tempfile::tempdir().unwrap();
        let (root, modules) = (t.path().join("root"), t.path().join("tfmodules"));
        std::fs::create_dir_all(root.join(".terraform/providers")).unwrap();
        std::fs::create_dir_all(modules.join("aws_storage_ebs")).unwrap();
        std::fs::write(root.join("main.tf"), "a").unwrap();
        std::fs::write(modules.join("aws_storage_ebs/main.tf"), "m").unwrap();
        // an executable old enough to be trusted
        let exe = t.path().join("tofu");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let old = SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&exe)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let k = || key(&exe, &root, modules_digest(&modules).as_ref()).unwrap();
        let first = k();
        std::fs::write(root.join(".terraform/providers/x"), "downloaded").unwrap();
        std::fs::write(root.join(".terraform.lock.hcl"), "lock").unwrap();
        std::fs::write(root.join("tfplan"), "plan").unwrap();
        assert_eq!(k(), first, "what tofu writes is no input");
        std::fs::write(root.join("main.tf"), "b").unwrap();
        let second = k();
        assert_ne!(second, first, "a root file changed");
        std::fs::write(modules.join("aws_storage_ebs/main.tf"), "n").unwrap();
        assert_ne!(k(), second, "a module source changed");
        // the executable replaced just now: no key, the check runs
        std::fs::write(&exe, "#!/bin/sh\nexit 0\n").unwrap();
        assert_eq!(key(&exe, &root, modules_digest(&modules).as_ref()), None);
        std::fs::File::options()
            .write(true)
            .open(&exe)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(key(&exe, &root, modules_digest(&modules).as_ref()).is_some());
        let remote = modules_digest(&t.path().join("git::https"));
        assert_eq!(key(&exe, &root, remote.as_ref()), None, "remote modules");

        let mut v = Validated::open(t.path());
        assert!(!v.passed("storage/x", "k"));
        v.remember("storage/x", "k".into());
        v.save();
        let v = Validated::open(t.path());
        assert!(v.passed("storage/x", "k") && !v.passed("storage/x", "other"));
        std::fs::write(t.path().join(FILE), "not json").unwrap();
        assert!(!Validated::open(t.path()).passed("storage/x", "k"));
    }
}
