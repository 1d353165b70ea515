//! `meta-state/` as a whole: reading the files csis owns and writing them
//! atomically; and [`Recorder`], which writes a record the moment a bake
//! succeeds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::atomic::write_atomic;
use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::releases::Releases;
use crate::remote::Remote;
use crate::{yamlio, CacheError};

pub const LINEAGE_FILE: &str = "lineage.yaml";
pub const PINS_FILE: &str = "pins.yaml";
pub const RELEASES_FILE: &str = "releases.yaml";

/// The records of a tree: its `meta-state/` directory (committed by
/// users), or the object store its `meta_state:` (or `--meta-state`) names
/// ([`crate::remote`]).
#[derive(Debug, Clone)]
pub struct MetaState {
    dir: PathBuf,
    /// `.csis/parsed/`: each file's parsed form as JSON, keyed by the blake3
    /// of its text (a no-op build of a large tree reads JSON, not YAML).
    parsed: Option<PathBuf>,
    /// The store when the records are remote (or why it could not be opened).
    remote: Option<Result<Arc<Remote>, String>>,
}

impl MetaState {
    /// The records of the tree at `root`: `<root>/meta-state` (parsed
    /// copies cached in `<root>/.csis/parsed/`), or its store.
    pub fn of_tree(root: &Path) -> Self {
        let mut m = MetaState::local_of_tree(root);
        match crate::remote::remote_for(root) {
            Ok(None) => {}
            Ok(Some(r)) => {
                m.remote = Some(Ok(r));
                m.parsed = None;
            }
            Err(e) => {
                m.remote = Some(Err(e));
                m.parsed = None;
            }
        }
        m
    }

    /// `<root>/meta-state` whatever store the tree names (`csis state pull/push`).
    pub fn local_of_tree(root: &Path) -> Self {
        MetaState {
            dir: root.join("meta-state"),
            parsed: Some(root.join(".csis").join("parsed")),
            remote: None,
        }
    }

    /// A meta-state directory anywhere (no cache).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        MetaState {
            dir: dir.into(),
            parsed: None,
            remote: None,
        }
    }

    /// Are the records on an object store?
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The store's URL, or `local`.
    pub fn location(&self) -> String {
        match &self.remote {
            None => "local".into(),
            Some(Ok(r)) => r.store.url().to_string(),
            Some(Err(e)) => e.clone(),
        }
    }

    /// The object store (for leases), when remote.
    pub fn store(&self) -> Result<Option<Arc<crate::objstore::Store>>, CacheError> {
        Ok(self.remote()?.map(|r| r.store.clone()))
    }

    pub(crate) fn remote(&self) -> Result<Option<&Arc<Remote>>, CacheError> {
        match &self.remote {
            None => Ok(None),
            Some(Ok(r)) => Ok(Some(r)),
            Some(Err(e)) => Err(CacheError::Store {
                url: String::new(),
                message: e.clone(),
            }),
        }
    }

    /// `csis state push`: add every record of `lineage` the store lacks and
    /// set the pins of `pins` (image, instance and pending pins; moves not
    /// yet there are appended), conditionally, retried on a lost race.
    /// Returns how many records were added.
    pub fn push_records(&self, lineage: &Lineage, pins: &Pins) -> Result<usize, CacheError> {
        let Some(r) = self.remote()? else {
            return Err(CacheError::Store {
                url: "local".into(),
                message: "the records are local: there is no store to push to".into(),
            });
        };
        let (added, _, _) = crate::remote::transact(&r.store, None, |l, p| {
            let mut added = 0;
            for b in &lineage.builds {
                if l.add_build(b.clone()) {
                    added += 1;
                }
            }
            p.images
                .extend(pins.images.iter().map(|(k, v)| (k.clone(), v.clone())));
            p.instances
                .extend(pins.instances.iter().map(|(k, v)| (k.clone(), v.clone())));
            p.pending_replacements.extend(
                pins.pending_replacements
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            for m in &pins.upgrades {
                if !p.upgrades.contains(m) {
                    p.upgrades.push(m.clone());
                }
            }
            added
        })?;
        Ok(added)
    }

    /// Lineage and pins in one read.
    pub fn lineage_and_pins(&self) -> Result<(Lineage, Pins), CacheError> {
        if let Some(r) = self.remote()? {
            return r.load();
        }
        Ok((self.lineage()?, self.pins()?))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn parsed_path(&self, file: &str) -> Option<PathBuf> {
        self.parsed.as_ref().map(|d| d.join(format!("{file}.json")))
    }

    /// Keep the parsed form of `text` (best effort: a cache).
    pub(crate) fn store_parsed<T: Serialize>(&self, file: &str, text: &[u8], value: &T) {
        let Some(p) = self.parsed_path(file) else {
            return;
        };
        if !self.dir.join(file).exists() && !text.is_empty() {
            return;
        }
        let Ok(json) = serde_json::to_vec(value) else {
            return;
        };
        let mut out = blake3::hash(text).to_hex().as_bytes().to_vec();
        out.push(b'\n');
        out.extend_from_slice(&json);
        let _ = write_atomic(&p, &out);
    }

    fn load_parsed<T: DeserializeOwned>(&self, file: &str, text: &[u8]) -> Option<T> {
        let bytes = std::fs::read(self.parsed_path(file)?).ok()?;
        let nl = bytes.iter().position(|&b| b == b'\n')?;
        if bytes[..nl] != *blake3::hash(text).to_hex().as_bytes() {
            return None;
        }
        serde_json::from_slice(&bytes[nl + 1..]).ok()
    }

    pub(crate) fn read<T: DeserializeOwned + Serialize + Default>(
        &self,
        file: &str,
    ) -> Result<T, CacheError> {
        if let Some(r) = self.remote()? {
            let label = format!("{}/{file}", r.store.url());
            return match r.read_text(file)? {
                None => Ok(T::default()),
                Some(text) => {
                    yamlio::from_text(&label, &text).map_err(|message| CacheError::Parse {
                        path: PathBuf::from(label.clone()),
                        message,
                    })
                }
            };
        }
        let path = self.dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Some(v) = self.load_parsed(file, text.as_bytes()) {
                    return Ok(v);
                }
                let v: T = yamlio::from_text(&path.to_string_lossy(), &text)
                    .map_err(|message| CacheError::Parse { path, message })?;
                self.store_parsed(file, text.as_bytes(), &v);
                Ok(v)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(CacheError::io(&path, e)),
        }
    }

    pub(crate) fn write<T: Serialize>(&self, file: &str, value: &T) -> Result<bool, CacheError> {
        let path = self.dir.join(file);
        let text = yamlio::to_text(value).map_err(|message| CacheError::Parse {
            path: path.clone(),
            message,
        })?;
        if let Some(r) = self.remote()? {
            return r.write_text(file, &text);
        }
        let changed = write_atomic(&path, text.as_bytes()).map_err(|e| CacheError::io(&path, e))?;
        if changed {
            self.store_parsed(file, text.as_bytes(), value);
        }
        Ok(changed)
    }

    /// `lineage.yaml` (empty when absent).
    pub fn lineage(&self) -> Result<Lineage, CacheError> {
        if let Some(r) = self.remote()? {
            return Ok(r.load()?.0);
        }
        self.read(LINEAGE_FILE)
    }
    pub fn pins(&self) -> Result<Pins, CacheError> {
        if let Some(r) = self.remote()? {
            return Ok(r.load()?.1);
        }
        self.read(PINS_FILE)
    }
    pub fn releases(&self) -> Result<Releases, CacheError> {
        self.read(RELEASES_FILE)
    }
    /// `lineage.yaml` and `pins.yaml` with the journal of an interrupted
    /// build merged in (what the next build will write): use this to plan.
    pub fn load_with_journal(&self, journal: &Path) -> Result<(Lineage, Pins), CacheError> {
        if self.is_remote() {
            // Journals of runs on a store are replayed into it by the next
            // recorder (see [`Recorder::open`]).
            let (l, mut p) = self.lineage_and_pins()?;
            for line in p.restore_from_lineage(&l) {
                eprintln!("warning: {line}");
            }
            return Ok((l, p));
        }
        let mut l = self.lineage()?;
        let mut p = self.pins()?;
        replay_journal(journal, &mut l, &mut p);
        for line in p.restore_from_lineage(&l) {
            eprintln!("warning: {line}");
        }
        Ok((l, p))
    }

    /// Write `lineage.yaml` atomically; false when unchanged.
    /// On a store: conditional on what this process read (an error, and
    /// nothing written, when another runner changed the records since).
    pub fn save_lineage(&self, l: &Lineage) -> Result<bool, CacheError> {
        if let Some(r) = self.remote()? {
            return r.save(Some(l), None);
        }
        self.write(LINEAGE_FILE, l)
    }
    pub fn save_pins(&self, p: &Pins) -> Result<bool, CacheError> {
        if let Some(r) = self.remote()? {
            return r.save(None, Some(p));
        }
        self.write(PINS_FILE, p)
    }
    pub fn save_releases(&self, r: &Releases) -> Result<bool, CacheError> {
        self.write(RELEASES_FILE, r)
    }
}

/// A record holds no secret value in clear (the compile already put tokens
/// in the inputs; this covers every other field, `extra` included).
fn redact_record(r: &mut BuildRecord) {
    if !csis_schema::secret::any() {
        return;
    }
    if let Ok(mut v) = serde_json::to_value(&*r) {
        let before = v.clone();
        csis_schema::secret::redact_json(&mut v);
        if v != before {
            if let Ok(x) = serde_json::from_value(v) {
                *r = x;
            }
        }
    }
}

/// The pin side of a record: the image whose parent pin the bake binds
/// (first bind) or moves (`follow`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PinBinding {
    pub image: String,
    pub runtime: String,
    /// The parent build the bake started from.
    pub parent_build: String,
}

/// One line of the journal (`.csis/lineage.journal`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct JournalEntry {
    record: BuildRecord,
    #[serde(default)]
    pin: Option<PinBinding>,
}

/// Apply a pin binding (first bind, or `follow` when it moves).
fn apply_pin(pins: &mut Pins, p: &PinBinding, run: Option<&str>) -> Option<&'static str> {
    let kind = if pins.image_pin(&p.image, &p.runtime).is_none() {
        "bind"
    } else {
        "follow"
    };
    pins.move_image_pin(&p.image, &p.runtime, &p.parent_build, run, kind)
        .then_some(kind)
}

/// Read the journal's entries. A torn last line (a kill in the middle of
/// an append: its bake was never reported finished) is ignored; any other
/// line that is not an entry is skipped, kept in `<journal>.rejected`, and
/// reported (the returned problems); the entries after it are kept.
fn read_journal(path: &Path) -> (Vec<JournalEntry>, Vec<String>, String) {
    let Ok(bytes) = std::fs::read(path) else {
        return (Vec::new(), Vec::new(), String::new());
    };
    let text = String::from_utf8_lossy(&bytes);
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let mut rejected = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<JournalEntry>(line) {
            Ok(e) => out.push(e),
            Err(_) if i + 1 == lines.len() && !complete => {}
            Err(e) => {
                problems.push(format!(
                    "{}:{}: not a journal entry ({e}); skipped, kept in {}.rejected",
                    path.display(),
                    i + 1,
                    path.display()
                ));
                rejected.push_str(line);
                rejected.push('\n');
            }
        }
    }
    (out, problems, rejected)
}

/// `<journal>.rejected`: where the lines a replay skipped are kept when the
/// journal is emptied.
fn rejected_path(journal: &Path) -> PathBuf {
    let mut r = journal.as_os_str().to_owned();
    r.push(".rejected");
    PathBuf::from(r)
}

/// Merge the journal's records and pin moves into `lineage` and `pins` (what
/// a reader sees after an interrupted build; duplicates are ignored).
/// Returns how many records were added. Lines that are not entries are
/// skipped and reported on stderr (see [`replay_journal_checked`]).
pub fn replay_journal(journal: &Path, lineage: &mut Lineage, pins: &mut Pins) -> usize {
    let (added, problems, _) = replay_journal_checked(journal, lineage, pins);
    for p in problems {
        eprintln!("warning: {p}");
    }
    added
}

/// [`replay_journal`], returning the problems instead of printing them, and
/// the skipped lines.
pub fn replay_journal_checked(
    journal: &Path,
    lineage: &mut Lineage,
    pins: &mut Pins,
) -> (usize, Vec<String>, String) {
    let mut added = 0;
    let (entries, problems, rejected) = read_journal(journal);
    for e in entries {
        let run = e.record.run.clone();
        if lineage.add_build(e.record) {
            added += 1;
        }
        if let Some(p) = &e.pin {
            apply_pin(pins, p, run.as_deref());
        }
    }
    (added, problems, rejected)
}

/// Records bakes as they succeed. Holds the lineage and pins in memory.
///
/// Every record is first appended to a journal (`.csis/lineage.journal`,
/// one JSON line, fsynced) before [`Recorder::record`] returns, so a kill -9
/// loses nothing finished. `lineage.yaml` and `pins.yaml` are then rewritten
/// atomically (temp + fsync + rename) at once, unless the last rewrite was so
/// recent that rewriting again would spend more than a tenth of the time
/// writing (bursts of instant dummy bakes on trees of thousands of images);
/// [`Recorder::flush`] writes whatever is pending, and opening a recorder or
/// reading with [`MetaState::lineage_with_journal`] replays the journal.
/// Callers must hold the [`crate::TreeLock`].
///
/// The records are read on first use, not at [`Recorder::open`] (unless a
/// journal is left to settle), so a build where nothing is due reads
/// nothing more. Should that first read fail, [`Recorder::record`] and
/// [`Recorder::flush`] return the error and the lookups answer as if
/// nothing were recorded.
#[derive(Debug)]
pub struct Recorder {
    meta: MetaState,
    journal: PathBuf,
    state: Mutex<RecState>,
    /// On a store: this process's own journal, locked while it lives (a
    /// journal nobody holds is a dead run's, replayed by the next recorder).
    _journal_lock: Option<std::fs::File>,
}

#[derive(Debug)]
struct RecState {
    /// False until the records are read (see [`Recorder::loaded`]).
    loaded: bool,
    lineage: Lineage,
    pins: Pins,
    /// The YAML text of each record as an item of `builds:` (records never
    /// change once appended, so each is serialized once).
    fragments: Vec<String>,
    /// Records in the journal not yet in `lineage.yaml`.
    pending: usize,
    last_write: Option<std::time::Instant>,
    last_write_cost: std::time::Duration,
    /// Journal lines the replay skipped: kept in `<journal>.rejected` before
    /// the journal is emptied.
    rejected: String,
    /// What the replay reported about them.
    problems: Vec<String>,
    /// The first record that could not be written: every later one is
    /// refused (see [`Recorder::failure`]).
    failure: Option<String>,
}

/// One record as a `builds:` list item (`- build_id: ...`).
fn fragment(b: &BuildRecord) -> Result<String, String> {
    yamlio::to_text(&[b])
}

impl RecState {
    /// `lineage.yaml` text: `builds:` and the cached fragments; the same text
    /// [`MetaState::save_lineage`] writes.
    fn lineage_text(&self) -> Result<String, String> {
        if !self.lineage.extra.is_empty() || self.fragments.len() != self.lineage.builds.len() {
            return yamlio::to_text(&self.lineage);
        }
        if self.fragments.is_empty() {
            return yamlio::to_text(&self.lineage);
        }
        let mut s =
            String::with_capacity(self.fragments.iter().map(String::len).sum::<usize>() + 8);
        s.push_str("builds:\n");
        for f in &self.fragments {
            s.push_str(f);
        }
        Ok(s)
    }
}

impl Recorder {
    /// Open the records of a tree; `journal` is `.csis/lineage.journal`
    /// ([`crate::LocalDir::journal`]). A journal left by an interrupted build
    /// is merged and written out at once.
    pub fn open(meta: MetaState, journal: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let mut journal: PathBuf = journal.into();
        let mut journal_lock = None;
        if meta.is_remote() {
            // Many runs share one `.csis/` on a store: one journal each.
            let dir = remote_journal_dir(&journal);
            std::fs::create_dir_all(&dir).map_err(|e| CacheError::io(&dir, e))?;
            replay_orphan_journals(&meta, &dir)?;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            journal = dir.join(format!("{}-{nanos}.journal", std::process::id()));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&journal)
                .map_err(|e| CacheError::io(&journal, e))?;
            fs4::FileExt::lock(&f).map_err(|e| CacheError::io(&journal, e))?;
            journal_lock = Some(f);
        }
        let r = Recorder {
            _journal_lock: journal_lock,
            meta,
            journal,
            state: Mutex::new(RecState {
                loaded: false,
                lineage: Lineage::default(),
                pins: Pins::default(),
                fragments: Vec::new(),
                pending: 0,
                last_write: None,
                last_write_cost: std::time::Duration::ZERO,
                rejected: String::new(),
                problems: Vec::new(),
                failure: None,
            }),
        };
        if journal_nonempty(&r.journal) {
            r.flush()?;
        }
        Ok(r)
    }

    /// The state with the records read (once), the journal merged in.
    fn loaded(&self) -> Result<std::sync::MutexGuard<'_, RecState>, CacheError> {
        let mut st = self.lock();
        if st.loaded {
            return Ok(st);
        }
        let (mut lineage, mut pins) = self.meta.lineage_and_pins()?;
        let (replayed, problems, rejected) =
            replay_journal_checked(&self.journal, &mut lineage, &mut pins);
        let mut problems = problems;
        let restored = pins.restore_from_lineage(&lineage);
        problems.extend(restored.iter().cloned());
        for p in &problems {
            eprintln!("warning: {p}");
        }
        // Restored pins are written out with the next write.
        let replayed = replayed + usize::from(!restored.is_empty());
        let path = self.meta.dir().join(LINEAGE_FILE);
        let fragments = lineage
            .builds
            .iter()
            .map(fragment)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| CacheError::Parse { path, message })?;
        *st = RecState {
            loaded: true,
            lineage,
            pins,
            fragments,
            pending: replayed,
            last_write: None,
            last_write_cost: std::time::Duration::ZERO,
            rejected,
            problems,
            failure: None,
        };
        Ok(st)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write_out(&self, st: &mut RecState) -> Result<(), CacheError> {
        let t0 = std::time::Instant::now();
        if let Some(r) = self.meta.remote()? {
            // Every record went to the store as it was made; what the
            // journal holds (a record whose write failed) goes now.
            let (entries, _, _) = read_journal(&self.journal);
            for e in entries {
                push_entry(r, &e)?;
            }
            truncate(&self.journal);
            st.pending = 0;
            st.last_write = Some(std::time::Instant::now());
            st.last_write_cost = t0.elapsed();
            return Ok(());
        }
        let lpath = self.meta.dir().join(LINEAGE_FILE);
        let text = st.lineage_text().map_err(|message| CacheError::Parse {
            path: lpath.clone(),
            message,
        })?;
        if write_atomic(&lpath, text.as_bytes()).map_err(|e| CacheError::io(&lpath, e))? {
            self.meta
                .store_parsed(LINEAGE_FILE, text.as_bytes(), &st.lineage);
        }
        self.meta.save_pins(&st.pins)?;
        // The planning index of both files (crate::heads), so the next plan
        // reads neither YAML.
        if let Some(local) = self.journal.parent() {
            crate::heads::store_lineage_index(local, text.as_bytes(), &st.lineage);
            let ppath = self.meta.dir().join(PINS_FILE);
            if let Ok(ptext) = std::fs::read(&ppath) {
                crate::heads::store_pins_index(local, &ptext, &st.pins);
            }
        }
        // Both files hold everything the journal held: empty it (what it
        // held that was not an entry is kept aside first).
        if !st.rejected.is_empty() {
            append_sync(&rejected_path(&self.journal), st.rejected.as_bytes())
                .map_err(|e| CacheError::io(&rejected_path(&self.journal), e))?;
            st.rejected.clear();
        }
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&self.journal) {
            let _ = f.set_len(0);
            let _ = f.sync_all();
        }
        st.pending = 0;
        st.last_write = Some(std::time::Instant::now());
        st.last_write_cost = t0.elapsed();
        Ok(())
    }

    /// Append one record (a duplicate build id is ignored) and bind or move
    /// the parent pin. The record is durable (journal) when this returns.
    /// Returns the pin operation performed (`bind`/`follow`), if any.
    pub fn record(
        &self,
        mut record: BuildRecord,
        pin: Option<PinBinding>,
    ) -> Result<Option<&'static str>, CacheError> {
        redact_record(&mut record);
        let mut st = self.loaded()?;
        if let Some(f) = &st.failure {
            return Err(CacheError::Parse {
                path: self.journal.clone(),
                message: format!(
                    "an earlier record could not be written ({f}); nothing more is recorded"
                ),
            });
        }
        if st.lineage.find(&record.build_id).is_some() {
            return Ok(None);
        }
        let lpath = self.meta.dir().join(LINEAGE_FILE);
        let frag = fragment(&record).map_err(|message| CacheError::Parse {
            path: lpath.clone(),
            message,
        })?;
        // 1. the journal, fsynced
        let entry = JournalEntry {
            record: record.clone(),
            pin: pin.clone(),
        };
        let mut line = serde_json::to_string(&entry).map_err(|e| CacheError::Parse {
            path: self.journal.clone(),
            message: e.to_string(),
        })?;
        line.push('\n');
        if let Err(e) = append_sync(&self.journal, line.as_bytes()) {
            let e = CacheError::io(&self.journal, e);
            st.failure = Some(e.to_string());
            return Err(e);
        }
        // 2. the store, when remote: one conditional write of the series' object
        if let Some(r) = self.meta.remote()? {
            if let Err(e) = push_entry(r, &entry) {
                st.failure = Some(e.to_string());
                return Err(e);
            }
            truncate(&self.journal);
            let run = record.run.clone();
            st.lineage.add_build(record);
            let op = pin
                .as_ref()
                .and_then(|p| apply_pin(&mut st.pins, p, run.as_deref()));
            return Ok(op);
        }
        // 2. memory
        let run = record.run.clone();
        st.lineage.add_build(record);
        st.fragments.push(frag);
        let op = pin
            .as_ref()
            .and_then(|p| apply_pin(&mut st.pins, p, run.as_deref()));
        st.pending += 1;
        // 3. the files, unless a rewrite just happened
        let due = match st.last_write {
            None => true,
            Some(t) => t.elapsed() >= st.last_write_cost * 10,
        };
        if due {
            if let Err(e) = self.write_out(&mut st) {
                st.failure = Some(e.to_string());
                return Err(e);
            }
        }
        Ok(op)
    }

    /// Why records can no longer be written (the journal or `lineage.yaml`
    /// failed once: a directory in its place, a full disk), if they cannot.
    /// A build stops baking then: a bake it cannot record is wasted.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    /// What reading the journal found wrong (lines that were not entries,
    /// each skipped and kept in `<journal>.rejected`).
    pub fn journal_problems(&self) -> Vec<String> {
        self.lock().problems.clone()
    }

    /// Write `lineage.yaml` and `pins.yaml` if records are pending.
    pub fn flush(&self) -> Result<(), CacheError> {
        if !self.lock().loaded && !journal_nonempty(&self.journal) {
            return Ok(()); // nothing read, nothing recorded
        }
        let mut st = self.loaded()?;
        if st.pending > 0 || journal_nonempty(&self.journal) {
            self.write_out(&mut st)?;
        }
        Ok(())
    }

    /// Look at the records as recorded so far without copying them all
    /// (`f` runs under the recorder's lock: keep it short).
    pub fn read<T>(&self, f: impl FnOnce(&Lineage, &Pins) -> T) -> Result<T, CacheError> {
        let st = self.loaded()?;
        Ok(f(&st.lineage, &st.pins))
    }

    /// Change the records in place (a disposal during the build:
    /// `retention::forget_build`) and write both files at once. What the
    /// journal holds is written out first, so the journal is empty when
    /// `f` drops a record and a replay can never bring it back.
    ///
    /// On a store, `f` runs on the records as they are now (another
    /// runner's included) and its changes are written conditionally; on a
    /// lost race `f` runs again on what won (so `f` must be idempotent).
    pub fn update<T>(
        &self,
        mut f: impl FnMut(&mut Lineage, &mut Pins) -> T,
    ) -> Result<T, CacheError> {
        let mut st = self.loaded()?;
        if let Some(r) = self.meta.remote()? {
            if journal_nonempty(&self.journal) {
                self.write_out(&mut st)?;
            }
            let (out, l, p) = crate::remote::transact(&r.store, None, &mut f)?;
            st.lineage = l;
            st.pins = p;
            st.fragments.clear();
            return Ok(out);
        }
        if st.pending > 0 || journal_nonempty(&self.journal) {
            self.write_out(&mut st)?;
        }
        let st = &mut *st;
        let out = f(&mut st.lineage, &mut st.pins);
        let path = self.meta.dir().join(LINEAGE_FILE);
        st.fragments = st
            .lineage
            .builds
            .iter()
            .map(fragment)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| CacheError::Parse { path, message })?;
        self.write_out(st)?;
        Ok(out)
    }

    /// Read the records again (on a store: what other runners recorded
    /// since). Locally the recorder already holds everything.
    pub fn refresh(&self) -> Result<(), CacheError> {
        if !self.meta.is_remote() {
            return Ok(());
        }
        let mut st = self.loaded()?;
        let (l, p) = self.meta.lineage_and_pins()?;
        st.lineage = l;
        st.pins = p;
        st.fragments.clear();
        Ok(())
    }

    /// Are the records on an object store?
    pub fn is_remote(&self) -> bool {
        self.meta.is_remote()
    }

    /// The build id of the series head on a runtime, as recorded so far.
    pub fn head_build(&self, series: &str, runtime: &str) -> Option<String> {
        self.loaded()
            .ok()?
            .lineage
            .head(series, runtime)
            .map(|b| b.build_id.clone())
    }

    /// One recorded build.
    pub fn find(&self, build_id: &str) -> Option<BuildRecord> {
        self.loaded().ok()?.lineage.find(build_id).cloned()
    }

    /// A copy of the lineage as recorded so far (O(records): prefer
    /// [`Recorder::head_build`] / [`Recorder::find`] in loops).
    pub fn lineage(&self) -> Lineage {
        self.loaded()
            .map(|st| st.lineage.clone())
            .unwrap_or_default()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.flush();
        // A run's own journal on a store goes once everything is written.
        if self._journal_lock.is_some() && !journal_nonempty(&self.journal) {
            let _ = std::fs::remove_file(&self.journal);
        }
    }
}

fn journal_nonempty(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false)
}

fn append_sync(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// `.csis/lineage.journal.d/`: the journals of runs on a store.
fn remote_journal_dir(journal: &Path) -> PathBuf {
    let mut d = journal.as_os_str().to_owned();
    d.push(".d");
    PathBuf::from(d)
}

fn truncate(p: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(p) {
        let _ = f.set_len(0);
        let _ = f.sync_all();
    }
}

/// Write one journal entry to the store: the record into its series'
/// object and the pin move, conditionally, retried on a lost race.
fn push_entry(r: &Remote, e: &JournalEntry) -> Result<(), CacheError> {
    let mut keys = vec![crate::remote::series_key(&e.record.series)];
    if let Some(p) = &e.pin {
        let k = crate::remote::series_key(&p.image);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let run = e.record.run.clone();
    crate::remote::transact(&r.store, Some(&keys), |l, p| {
        l.add_build(e.record.clone());
        if let Some(pin) = &e.pin {
            apply_pin(p, pin, run.as_deref());
        }
    })?;
    Ok(())
}

/// Replay the journals of runs that died (no process holds their lock)
/// into the store, then remove them.
fn replay_orphan_journals(meta: &MetaState, dir: &Path) -> Result<(), CacheError> {
    let Some(r) = meta.remote()? else {
        return Ok(());
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for ent in rd.flatten() {
        let path = ent.path();
        if path.extension().is_none_or(|x| x != "journal") {
            continue;
        }
        let Ok(f) = std::fs::OpenOptions::new().append(true).open(&path) else {
            continue;
        };
        match fs4::FileExt::try_lock(&f) {
            Ok(()) => {}
            Err(_) => continue, // a live run's
        }
        let (entries, problems, rejected) = read_journal(&path);
        for p in problems {
            eprintln!("warning: {p}");
        }
        for e in &entries {
            push_entry(r, e)?;
        }
        if !rejected.is_empty() {
            append_sync(&rejected_path(&path), rejected.as_bytes())
                .map_err(|e| CacheError::io(&rejected_path(&path), e))?;
        }
        if !entries.is_empty() {
            eprintln!(
                "note: {} record(s) of an interrupted run written to {} from {}",
                entries.len(),
                r.store.url(),
                path.display()
            );
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}
