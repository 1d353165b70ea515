//! [`Recorder`]: writes a record the moment a bake succeeds, to the
//! journal first, then to `meta-state/` (or its store), and keeps the
//! planning index of both files ([`crate::heads`]) current.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::atomic::write_atomic;
use crate::fleet::FleetRecords;
use crate::journal::{
    append_sync, apply_pin, journal_nonempty, push_entry, read_journal, rejected_path,
    remote_journal_dir, replay_journal_checked, truncate, JournalEntry, PinBinding,
};

mod fleet_ops;
use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::store::{MetaState, LINEAGE_FILE, PINS_FILE};
use crate::{yamlio, CacheError};

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
    /// The fleet files, once read (the first fleet operation or question).
    fleet: Option<FleetRecords>,
    /// The fleet files changed since they were written.
    fleet_dirty: bool,
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
                fleet: None,
                fleet_dirty: false,
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
            log::warn!("{p}");
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
            fleet: None,
            fleet_dirty: false,
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
        self.write_fleet(st)?;
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
        let entry = JournalEntry::build(record.clone(), pin.clone());
        self.append_entry(&mut st, &entry)?;
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

    /// Make the recorded `build_id` its series' head again as of `run`
    /// ([`Lineage::reinstate`]): the bake of `run` found its very inputs
    /// and parent already baked as that build, so nothing bakes twice. The
    /// pin binds or follows as for a bake. Durable (journal) when this
    /// returns, as [`Recorder::record`].
    pub fn reinstate(
        &self,
        build_id: &str,
        run: &str,
        pin: Option<PinBinding>,
    ) -> Result<Option<&'static str>, CacheError> {
        let mut st = self.loaded()?;
        if let Some(f) = &st.failure {
            return Err(CacheError::Parse {
                path: self.journal.clone(),
                message: format!(
                    "an earlier record could not be written ({f}); nothing more is recorded"
                ),
            });
        }
        let lpath = self.meta.dir().join(LINEAGE_FILE);
        let Some(pos) = st
            .lineage
            .builds
            .iter()
            .position(|b| b.build_id == build_id)
        else {
            return Err(CacheError::Parse {
                path: lpath,
                message: format!("build {build_id} is not recorded: it cannot be reinstated"),
            });
        };
        let mut record = st.lineage.builds[pos].clone();
        record.reinstated_by_run = Some(run.to_string());
        let frag = fragment(&record).map_err(|message| CacheError::Parse {
            path: lpath.clone(),
            message,
        })?;
        let entry = JournalEntry::build(record, pin.clone());
        self.append_entry(&mut st, &entry)?;
        if let Some(r) = self.meta.remote()? {
            if let Err(e) = push_entry(r, &entry) {
                st.failure = Some(e.to_string());
                return Err(e);
            }
            truncate(&self.journal);
        } else {
            st.pending += 1;
        }
        st.lineage.reinstate(build_id, run);
        if st.fragments.len() == st.lineage.builds.len() {
            st.fragments[pos] = frag;
        }
        let op = pin
            .as_ref()
            .and_then(|p| apply_pin(&mut st.pins, p, Some(run)));
        if !self.meta.is_remote() {
            if let Err(e) = self.write_out(&mut st) {
                st.failure = Some(e.to_string());
                return Err(e);
            }
        }
        Ok(op)
    }

    /// Append one entry to the journal, fsynced; a write that fails marks
    /// the recorder failed (nothing more is recorded).
    fn append_entry(&self, st: &mut RecState, entry: &JournalEntry) -> Result<(), CacheError> {
        let mut line = serde_json::to_string(entry).map_err(|e| CacheError::Parse {
            path: self.journal.clone(),
            message: e.to_string(),
        })?;
        line.push('\n');
        append_sync(&self.journal, line.as_bytes()).map_err(|e| {
            let e = CacheError::io(&self.journal, e);
            st.failure = Some(e.to_string());
            e
        })
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
        st.fleet = None;
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
            log::warn!("{p}");
        }
        for e in &entries {
            push_entry(r, e)?;
        }
        if !rejected.is_empty() {
            append_sync(&rejected_path(&path), rejected.as_bytes())
                .map_err(|e| CacheError::io(&rejected_path(&path), e))?;
        }
        if !entries.is_empty() {
            log::info!(
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
