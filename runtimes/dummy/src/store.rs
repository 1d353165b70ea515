//! The dummy runtime's store: builds, bake attempts and release marks in
//! `<runtime>.json`, every change appended to `<runtime>.log` first and
//! the snapshot rewritten when cheap, all under the `<runtime>.lock` flock
//! that processes sharing a store take.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use csis_runtime::{Result, RuntimeError};
use serde::{Deserialize, Serialize};

use crate::DummyRuntime;
use csis_schema::tags;

/// The store, as written to `.csis/dummy/<runtime>.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DummyStore {
    pub counter: u64,
    /// build id -> image.
    pub images: BTreeMap<String, StoredImage>,
    /// Every bake attempt, in order (`series`, `ok`): lets tests count bakes.
    #[serde(default)]
    pub bakes: Vec<BakeAttempt>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StoredImage {
    pub name: String,
    pub series: String,
    pub created: u64,
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub released: BTreeSet<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BakeAttempt {
    pub label: String,
    pub series: String,
    pub ok: bool,
}

/// The store in memory, with its write-behind: every change is appended to
/// `<runtime>.log` (one JSON line) and the snapshot `<runtime>.json` is
/// rewritten when that costs little (at most a tenth of the time), and
/// when the runtime is dropped. Readers replay the log over the snapshot,
/// so a kill -9 loses nothing, and a store of 20,000 images costs O(1) per
/// bake instead of a full rewrite.
pub(crate) struct Mem {
    pub(crate) store: Option<DummyStore>,
    /// What the files looked like after our last read or write: another
    /// instance (another process, or a second runtime object) that changed
    /// them makes us reload instead of overwriting its changes.
    pub(crate) seen: Option<FileSig>,
    pub(crate) log_lines: usize,
    pub(crate) last_compact: Option<std::time::Instant>,
    pub(crate) compact_cost: Duration,
}

/// One change of the store (a line of `<runtime>.log`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Op {
    Bake {
        id: String,
        counter: u64,
        image: StoredImage,
        attempt: BakeAttempt,
    },
    Attempt {
        attempt: BakeAttempt,
    },
    Retag {
        id: String,
        tags: BTreeMap<String, String>,
    },
    Dispose {
        id: String,
    },
    Release {
        id: String,
        series: String,
        model: String,
    },
}

fn apply(s: &mut DummyStore, op: &Op) {
    match op {
        Op::Bake {
            id,
            counter,
            image,
            attempt,
        } => {
            s.counter = s.counter.max(*counter);
            s.images.insert(id.clone(), image.clone());
            s.bakes.push(attempt.clone());
        }
        Op::Attempt { attempt } => s.bakes.push(attempt.clone()),
        Op::Retag { id, tags } => {
            if let Some(img) = s.images.get_mut(id) {
                img.tags.extend(tags.clone());
            }
        }
        Op::Dispose { id } => {
            s.images.remove(id);
        }
        Op::Release { id, series, model } => {
            if let Some(img) = s.images.get_mut(id) {
                img.released.insert(model.clone());
                img.tags
                    .insert(format!("{}release", tags::PREFIX), model.clone());
                img.tags
                    .insert(format!("{}series", tags::PREFIX), series.clone());
            }
        }
    }
}

/// `op` (a retag or a release) when the store has its image, else the refusal.
pub(crate) fn on_image(s: &DummyStore, id: &str, op: Op) -> (Option<Op>, Result<()>) {
    if s.images.contains_key(id) {
        (Some(op), Ok(()))
    } else {
        let e = RuntimeError::Refused(format!("no image {id} on dummy runtime"));
        (None, Err(e))
    }
}

pub(crate) fn log_path(store: &Path) -> PathBuf {
    store.with_extension("log")
}

/// (snapshot size, snapshot mtime, log size)
type FileSig = (Option<(u64, Option<std::time::SystemTime>)>, u64);

fn file_sig(store: &Path) -> FileSig {
    let snap = std::fs::metadata(store)
        .ok()
        .map(|m| (m.len(), m.modified().ok()));
    let log = std::fs::metadata(log_path(store))
        .map(|m| m.len())
        .unwrap_or(0);
    (snap, log)
}

impl DummyRuntime {
    /// The store as it is now.
    pub fn store(&self) -> DummyStore {
        let mut m = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let _held = self.store_lock();
        self.loaded(&mut m).clone()
    }

    /// The store's lock (`<runtime>.lock`, an exclusive `flock`), held while
    /// the files are read or changed: runs in separate processes (and
    /// checkouts sharing one `store:`) never lose each other's changes.
    fn store_lock(&self) -> Option<StoreLock> {
        let path = self.store_path().with_extension("lock");
        if let Some(d) = path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        fs4::FileExt::lock(&f).ok()?;
        Some(StoreLock(f))
    }

    fn loaded<'a>(&self, m: &'a mut Mem) -> &'a mut DummyStore {
        let path = self.store_path();
        let sig = file_sig(&path);
        if m.store.is_none() || m.seen.as_ref() != Some(&sig) {
            m.store = Some(read_store(&path));
            m.seen = Some(sig);
            m.log_lines = 0;
        }
        m.store.as_mut().expect("loaded")
    }

    /// Apply the change `f` decides, log it, and compact when cheap.
    pub(crate) fn update<T>(&self, f: impl FnOnce(&DummyStore) -> (Option<Op>, T)) -> Result<T> {
        let mut m = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let _held = self.store_lock();
        let path = self.store_path();
        let fail = |e: std::io::Error| RuntimeError::Failed(format!("{}: {e}", path.display()));
        let (op, out) = f(self.loaded(&mut m));
        if let Some(op) = op {
            // the store `f` just read: no second look at the files
            apply(m.store.as_mut().expect("loaded"), &op);
            append_line(&log_path(&path), &op).map_err(fail)?;
            m.log_lines += 1;
            m.seen = Some(file_sig(&path));
            let due = m
                .last_compact
                .is_none_or(|t| t.elapsed() >= m.compact_cost * 10);
            if due {
                self.compact(&mut m).map_err(fail)?;
            }
        }
        Ok(out)
    }

    fn compact(&self, m: &mut Mem) -> std::io::Result<()> {
        let t0 = std::time::Instant::now();
        let path = self.store_path();
        if let Some(s) = &m.store {
            write_store(&path, s)?;
        }
        let _ = std::fs::remove_file(log_path(&path));
        m.log_lines = 0;
        m.seen = Some(file_sig(&path));
        m.last_compact = Some(std::time::Instant::now());
        m.compact_cost = t0.elapsed();
        Ok(())
    }
}

/// `<state_dir>/<runtime>.json`
pub fn store_path(state_dir: &Path, runtime: &str) -> PathBuf {
    state_dir.join(format!("{runtime}.json"))
}

/// Read a dummy store: the snapshot `<runtime>.json` (empty when absent)
/// with the changes of `<runtime>.log` replayed (a torn last line is ignored).
pub fn read_store(path: &Path) -> DummyStore {
    let mut s: DummyStore = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if let Ok(text) = std::fs::read_to_string(log_path(path)) {
        for line in text.lines() {
            match serde_json::from_str::<Op>(line) {
                Ok(op) => apply(&mut s, &op),
                Err(_) => break,
            }
        }
    }
    s
}

fn append_line(path: &Path, op: &Op) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut line = serde_json::to_vec(op).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(&line)
}

/// A held store lock (released when dropped).
struct StoreLock(std::fs::File);

impl Drop for StoreLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

impl Drop for DummyRuntime {
    fn drop(&mut self) {
        let mut m = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let _held = self.store_lock();
        // Compact only what we know is current: if another instance changed
        // the files since, leave them (readers replay the log).
        if m.log_lines > 0 && m.seen == Some(file_sig(&self.store_path())) {
            let _ = self.compact(&mut m);
        }
    }
}

fn write_store(path: &Path, s: &DummyStore) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
