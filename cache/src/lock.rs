//! The tree lock: one `csis build` per tree at a time (`.csis/lock`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::CacheError;

/// Held for as long as it lives; dropping it releases the lock (the OS also
/// releases it when the process dies, even by kill -9).
#[derive(Debug)]
pub struct TreeLock {
    file: File,
    path: PathBuf,
}

impl TreeLock {
    /// Take the lock of the tree whose `.csis/` directory is `csis_dir`.
    /// `wait = false`: fail at once with [`CacheError::Locked`] when another
    /// process holds it. `wait = true`: block until it is free, calling
    /// `on_wait` once before waiting (to tell the user).
    pub fn acquire(
        csis_dir: &Path,
        wait: bool,
        on_wait: impl FnOnce(&str),
    ) -> Result<TreeLock, CacheError> {
        fs::create_dir_all(csis_dir).map_err(|e| CacheError::io(csis_dir, e))?;
        let path = csis_dir.join("lock");
        let mut file = OpenOptions::new()
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
        // Say who holds it (for the other process's message). Not part of the lock.
        let _ = file.set_len(0);
        let _ = writeln!(file, "pid {}", std::process::id());
        let _ = file.sync_all();
        Ok(TreeLock { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TreeLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = fs4::FileExt::unlock(&self.file);
    }
}
