//! The tree lock: one `csis build` per tree at a time (`.csis/lock`).
//!
//! The lock is the OS's advisory lock on the file (`flock`), held by the
//! open file: nothing written into the file takes part in it. The file
//! holds a note for the other processes, `pid N`, once its holder says so
//! ([`TreeLock::note_holder`]): a holder that only reads and answers at
//! once (a build answered by its no-op stamp) writes nothing, so a no-op
//! build neither writes nor syncs the lock file. The note is never synced
//! to disk: only a live process reads it (from the page cache), and after a
//! crash the lock is free and the note means nothing.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::CacheError;

/// Held for as long as it lives; dropping it releases the lock (the OS also
/// releases it when the process dies, even by kill -9).
#[derive(Debug)]
pub struct TreeLock {
    file: File,
    path: PathBuf,
    /// Whether the holder's note is in the file.
    noted: AtomicBool,
}

impl TreeLock {
    /// Take the lock of the tree whose `.csis/` directory is `csis_dir`,
    /// and say who holds it (the note other processes print).
    /// `wait = false`: fail at once with [`CacheError::Locked`] when another
    /// process holds it. `wait = true`: block until it is free, calling
    /// `on_wait` once before waiting (to tell the user).
    pub fn acquire(
        csis_dir: &Path,
        wait: bool,
        on_wait: impl FnOnce(&str),
    ) -> Result<TreeLock, CacheError> {
        let lock = TreeLock::acquire_unnoted(csis_dir, wait, on_wait)?;
        lock.note_holder();
        Ok(lock)
    }

    /// [`TreeLock::acquire`] without the note: the lock excludes every
    /// other holder all the same, and the file is left as it is when it is
    /// already empty (nothing is written). A process that waits meanwhile
    /// is told no holder. Call [`TreeLock::note_holder`] before work that
    /// takes time.
    pub fn acquire_unnoted(
        csis_dir: &Path,
        wait: bool,
        on_wait: impl FnOnce(&str),
    ) -> Result<TreeLock, CacheError> {
        fs::create_dir_all(csis_dir).map_err(|e| CacheError::io(csis_dir, e))?;
        let path = csis_dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CacheError::io(&path, e))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim().to_string();
                if !wait {
                    return Err(CacheError::Locked { path, holder });
                }
                on_wait(&holder);
                loop {
                    match fs4::FileExt::try_lock(&file) {
                        Ok(()) => break,
                        Err(fs4::TryLockError::WouldBlock) => {
                            std::thread::sleep(Duration::from_millis(100))
                        }
                        Err(fs4::TryLockError::Error(e)) => return Err(CacheError::io(&path, e)),
                    }
                }
            }
            Err(fs4::TryLockError::Error(e)) => return Err(CacheError::io(&path, e)),
        }
        // A note left by a holder that died (a release empties the file):
        // it names no holder any more.
        if file.metadata().map(|m| m.len() != 0).unwrap_or(true) {
            let _ = file.set_len(0);
        }
        Ok(TreeLock {
            file,
            path,
            noted: AtomicBool::new(false),
        })
    }

    /// Write the holder's note (`pid N`) into the lock file, once; not
    /// synced (see the module docs).
    pub fn note_holder(&self) {
        if self.noted.swap(true, Ordering::Relaxed) {
            return;
        }
        // The file is empty and its offset 0 (acquire_unnoted).
        let _ = (&self.file).write_all(format!("pid {}\n", std::process::id()).as_bytes());
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TreeLock {
    fn drop(&mut self) {
        if *self.noted.get_mut() {
            let _ = self.file.set_len(0);
        }
        let _ = fs4::FileExt::unlock(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(dir: &Path) -> Option<String> {
        match TreeLock::acquire(dir, false, |_| {}) {
            Ok(_) => None,
            Err(CacheError::Locked { holder, .. }) => Some(holder),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_holder_excludes_others_and_names_itself() {
        let d = tempfile::tempdir().unwrap();
        let l = TreeLock::acquire(d.path(), false, |_| {}).unwrap();
        let note = format!("pid {}", std::process::id());
        assert_eq!(held_by(d.path()).as_deref(), Some(note.as_str()));
        drop(l);
        assert_eq!(fs::read_to_string(d.path().join("lock")).unwrap(), "");
        assert_eq!(held_by(d.path()), None, "released");
    }

    #[test]
    fn an_unnoted_holder_writes_nothing_and_still_excludes() {
        let d = tempfile::tempdir().unwrap();
        drop(TreeLock::acquire(d.path(), false, |_| {}).unwrap());
        let path = d.path().join("lock");
        let before = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let l = TreeLock::acquire_unnoted(d.path(), false, |_| {}).unwrap();
        assert_eq!(held_by(d.path()).as_deref(), Some(""), "excluded, no note");
        drop(l);
        assert_eq!(
            fs::metadata(&path).unwrap().modified().unwrap(),
            before,
            "an unnoted holder neither wrote nor truncated the file"
        );
        assert_eq!(held_by(d.path()), None, "released");
    }

    #[test]
    fn a_note_is_written_once_when_asked_and_a_dead_holders_note_is_cleared() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock");
        // What a holder killed with its note in the file leaves.
        fs::write(&path, "pid 1\n").unwrap();
        let l = TreeLock::acquire_unnoted(d.path(), false, |_| {}).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "", "stale note cleared");
        l.note_holder();
        l.note_holder();
        let note = format!("pid {}\n", std::process::id());
        assert_eq!(fs::read_to_string(&path).unwrap(), note);
        assert_eq!(held_by(d.path()).unwrap(), note.trim());
        drop(l);
        assert_eq!(fs::read_to_string(&path).unwrap(), "");
    }
}
