//! Atomic file writes: temp file in the same directory, fsync, rename,
//! fsync the directory. A reader sees the old file or the new one, never a
//! half-written one, and a kill -9 at any point loses nothing already renamed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically. Returns false (and writes nothing)
/// when the file already holds exactly these bytes.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if let Ok(old) = fs::read(path) {
        if old == bytes {
            return Ok(false);
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(true)
}
