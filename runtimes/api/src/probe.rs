//! Version probes (`packer version`, `ansible-playbook --version`, ...),
//! run once per process and cached under the tree's `.csis/cache/` by the
//! binary's resolved path, size, mtime and inode: a build or dry run that
//! probes nothing new runs no subprocess (issue 23 item 4).
//!
//! The cache is only ever a copy of what the binary printed. A binary that
//! changed (another size, mtime or inode) is probed again; one modified in
//! the last two seconds is probed and kept in memory only (the racy-file
//! rule: a second write within the same mtime tick would go unseen); a
//! cache file that does not parse is ignored and rewritten.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The cache file, under the directory [`set_cache_dir`] names.
pub const PROBES_FILE: &str = "probes.json";
/// At most this many entries are kept on disk (the newest win).
const MAX_ENTRIES: usize = 256;
/// A binary modified more recently than this is not cached on disk.
const RACY: Duration = Duration::from_secs(2);

/// What a probe printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl ProbeOutput {
    /// Standard output, or standard error when that is empty (some tools,
    /// aws v1 among them, print their version there).
    pub fn text(&self) -> &str {
        if self.stdout.trim().is_empty() {
            &self.stderr
        } else {
            &self.stdout
        }
    }
}

/// The identity of one probe: the binary as found, its metadata, the
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Key {
    path: PathBuf,
    len: u64,
    mtime_ns: u128,
    ino: u64,
    args: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    key: Key,
    out: ProbeOutput,
    /// When it was probed (seconds since the epoch), to keep the newest.
    at: u64,
}

#[derive(Default)]
struct Cache {
    dir: Option<PathBuf>,
    loaded: bool,
    entries: HashMap<Key, Entry>,
    /// Probes run by this process (for tests and reports).
    runs: usize,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    cache().lock().unwrap_or_else(|e| e.into_inner())
}

/// Keep probes under `dir` (the tree's `.csis/cache/`). The first call of
/// a process wins; later calls with another directory are ignored, so one
/// process reads one cache.
pub fn set_cache_dir(dir: &Path) {
    let mut c = lock();
    if c.dir.is_none() {
        c.dir = Some(dir.to_path_buf());
        c.loaded = false;
    }
}

/// How many probe subprocesses this process has run.
pub fn runs() -> usize {
    lock().runs
}

/// `binary` as the shell would find it: a path with a slash as given (when
/// it is an executable file), else the first executable file of that name
/// on `PATH`.
pub fn resolve(binary: &str) -> Option<PathBuf> {
    if binary.contains('/') {
        let p = PathBuf::from(binary);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(binary))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The key of a probe and whether it is old enough to keep on disk.
fn key_of(binary: &str, args: &[&str]) -> Option<(Key, bool)> {
    use std::os::unix::fs::MetadataExt;
    let path = resolve(binary)?;
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let m = std::fs::metadata(&path).ok()?;
    let mtime = m.modified().ok()?;
    let settled = SystemTime::now()
        .duration_since(mtime)
        .map(|age| age >= RACY)
        .unwrap_or(false);
    let mtime_ns = mtime
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let key = Key {
        path,
        len: m.len(),
        mtime_ns,
        ino: m.ino(),
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    Some((key, settled))
}

impl Cache {
    fn file(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(PROBES_FILE))
    }

    fn load(&mut self) {
        if self.loaded {
            return;
        }
        self.loaded = true;
        let Some(file) = self.file() else { return };
        let Ok(text) = std::fs::read_to_string(&file) else {
            return;
        };
        // a cache that does not parse is rebuilt, never trusted
        let Ok(list) = serde_json::from_str::<Vec<Entry>>(&text) else {
            return;
        };
        for e in list {
            self.entries.entry(e.key.clone()).or_insert(e);
        }
    }

    fn save(&self) {
        let Some(file) = self.file() else { return };
        let mut list: Vec<&Entry> = self.entries.values().collect();
        list.sort_by_key(|e| std::cmp::Reverse(e.at));
        list.truncate(MAX_ENTRIES);
        let Ok(text) = serde_json::to_string(&list) else {
            return;
        };
        // best effort: a cache that cannot be written is only slower
        let _ = write_atomic(&file, text.as_bytes());
    }
}

fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{PROBES_FILE}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn cached(key: &Key) -> Option<ProbeOutput> {
    let mut c = lock();
    c.load();
    c.entries.get(key).map(|e| e.out.clone())
}

fn remember(key: Key, out: &ProbeOutput, settled: bool) {
    let mut c = lock();
    c.runs += 1;
    c.entries.insert(
        key.clone(),
        Entry {
            key,
            out: out.clone(),
            at: now_s(),
        },
    );
    if settled {
        c.save();
    }
}

fn output_of(o: std::process::Output) -> ProbeOutput {
    ProbeOutput {
        success: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `binary args...`, from the cache when this binary answered before; an
/// error when it cannot run (not found: `ErrorKind::NotFound`).
pub fn run(binary: &str, args: &[&str]) -> std::io::Result<ProbeOutput> {
    let Some((key, settled)) = key_of(binary, args) else {
        // not found (or unreadable): let the spawn say why, uncached
        return std::process::Command::new(binary)
            .args(args)
            .output()
            .map(output_of);
    };
    if let Some(out) = cached(&key) {
        return Ok(out);
    }
    let out = output_of(std::process::Command::new(&key.path).args(args).output()?);
    remember(key, &out, settled);
    Ok(out)
}

/// [`run`] for async callers: the subprocess runs on tokio's process
/// support, the cache is the same.
pub async fn run_async(binary: &str, args: &[&str]) -> std::io::Result<ProbeOutput> {
    let Some((key, settled)) = key_of(binary, args) else {
        return tokio::process::Command::new(binary)
            .args(args)
            .output()
            .await
            .map(output_of);
    };
    if let Some(out) = cached(&key) {
        return Ok(out);
    }
    let out = output_of(
        tokio::process::Command::new(&key.path)
            .args(args)
            .output()
            .await?,
    );
    remember(key, &out, settled);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        csis_testkit::write_executable(&p, &format!("#!/bin/sh\n{body}\n")).unwrap();
        p
    }

    // One test: the cache is process-wide.
    #[test]
    fn probes_once_and_again_when_the_binary_changes() {
        let t = tempfile::tempdir().unwrap();
        let count = t.path().join("count");
        let body = format!("echo x >> {}; echo 'tool v1.2.3'", count.display());
        let bin = script(t.path(), "tool", &body);
        let b = bin.to_str().unwrap();
        let calls = || {
            std::fs::read_to_string(&count)
                .unwrap_or_default()
                .lines()
                .count()
        };

        let first = run(b, &["--version"]).unwrap();
        assert_eq!(first.text().trim(), "tool v1.2.3");
        assert!(first.success);
        assert_eq!(run(b, &["--version"]).unwrap(), first);
        assert_eq!(calls(), 1, "the second probe came from the cache");

        // other arguments are another probe
        run(b, &["version"]).unwrap();
        assert_eq!(calls(), 2);

        // a replaced binary (new inode, new size) is probed again
        std::fs::remove_file(&bin).unwrap();
        script(t.path(), "tool", &format!("{body}; echo more"));
        let again = run(b, &["--version"]).unwrap();
        assert_eq!(calls(), 3);
        assert!(again.stdout.contains("more"));

        // a missing binary is an error of its kind, never cached
        let missing = run("/nonexistent/csis-probe-tool", &["--version"]).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn the_disk_cache_round_trips_and_a_corrupt_one_is_rebuilt() {
        let t = tempfile::tempdir().unwrap();
        let key = Key {
            path: "/usr/bin/tool".into(),
            len: 3,
            mtime_ns: 7,
            ino: 9,
            args: vec!["--version".into()],
        };
        let out = ProbeOutput {
            success: true,
            stdout: "tool 1.0".into(),
            stderr: String::new(),
        };
        let mut c = Cache {
            dir: Some(t.path().to_path_buf()),
            ..Default::default()
        };
        c.entries.insert(
            key.clone(),
            Entry {
                key: key.clone(),
                out: out.clone(),
                at: 1,
            },
        );
        c.save();
        let mut d = Cache {
            dir: Some(t.path().to_path_buf()),
            ..Default::default()
        };
        d.load();
        assert_eq!(d.entries.get(&key).map(|e| &e.out), Some(&out));

        std::fs::write(t.path().join(PROBES_FILE), "{not json").unwrap();
        let mut e = Cache {
            dir: Some(t.path().to_path_buf()),
            ..Default::default()
        };
        e.load();
        assert!(
            e.entries.is_empty(),
            "a cache that does not parse is not trusted"
        );
    }

    #[test]
    fn resolves_names_on_path_and_refuses_plain_files() {
        assert!(resolve("sh").is_some());
        let t = tempfile::tempdir().unwrap();
        let plain = t.path().join("plain");
        std::fs::write(&plain, "x").unwrap();
        assert!(!is_executable(&plain));
        assert!(resolve("csis-surely-not-on-path-xyz").is_none());
    }
}
