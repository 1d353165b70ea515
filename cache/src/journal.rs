//! The build journal (`.csis/lineage.journal`; on a store, one per run
//! under `.csis/lineage.journal.d/`): one JSON line per record, appended and
//! fsynced before a bake is reported finished, with the pin it binds or
//! moves ([`PinBinding`]). A reader merges it over `meta-state/`
//! ([`replay_journal`]); the [`crate::Recorder`] writes it and empties it
//! once both files hold its records.

use std::path::{Path, PathBuf};

use crate::fleet::{FleetOp, FleetRecords};
use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::remote::Remote;
use crate::CacheError;

/// The pin side of a record: the image whose parent pin the bake binds
/// (first bind) or moves (`follow`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PinBinding {
    pub image: String,
    pub runtime: String,
    /// The parent build the bake started from.
    pub parent_build: String,
}

/// One line of the journal (`.csis/lineage.journal`): a build record (and
/// the pin it binds), or a fleet operation ([`FleetOp`]). A record already
/// in the lineage whose `reinstated_by_run` is newer reinstates it as the
/// head ([`Lineage::reinstate`]). Journals written
/// before the fleet (`{record, pin}`) read as they always did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawEntry")]
pub(crate) struct JournalEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) record: Option<BuildRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pin: Option<PinBinding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fleet: Option<FleetOp>,
}

#[derive(serde::Deserialize)]
struct RawEntry {
    #[serde(default)]
    record: Option<BuildRecord>,
    #[serde(default)]
    pin: Option<PinBinding>,
    #[serde(default)]
    fleet: Option<FleetOp>,
}

impl TryFrom<RawEntry> for JournalEntry {
    type Error = String;
    fn try_from(r: RawEntry) -> Result<Self, String> {
        if r.record.is_none() && r.fleet.is_none() {
            return Err("neither a build record nor a fleet operation".into());
        }
        Ok(JournalEntry {
            record: r.record,
            pin: r.pin,
            fleet: r.fleet,
        })
    }
}

impl JournalEntry {
    pub(crate) fn build(record: BuildRecord, pin: Option<PinBinding>) -> Self {
        JournalEntry {
            record: Some(record),
            pin,
            fleet: None,
        }
    }
    pub(crate) fn fleet(op: FleetOp) -> Self {
        JournalEntry {
            record: None,
            pin: None,
            fleet: Some(op),
        }
    }
    /// Its change to lineage and pins (idempotent).
    pub(crate) fn apply(&self, lineage: &mut Lineage, pins: &mut Pins) -> bool {
        let mut added = false;
        if let Some(rec) = &self.record {
            added = lineage.add_build(rec.clone())
                || rec
                    .reinstated_by_run
                    .as_deref()
                    .is_some_and(|run| lineage.reinstate(&rec.build_id, run));
            if let Some(p) = &self.pin {
                apply_pin(pins, p, Some(rec.order_run()).filter(|r| !r.is_empty()));
            }
        }
        if let Some(op) = &self.fleet {
            op.apply_pins(pins);
        }
        added
    }
}

/// Apply a pin binding (first bind, or `follow` when it moves).
pub(crate) fn apply_pin(
    pins: &mut Pins,
    p: &PinBinding,
    run: Option<&str>,
) -> Option<&'static str> {
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
pub(crate) fn read_journal(path: &Path) -> (Vec<JournalEntry>, Vec<String>, String) {
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
pub(crate) fn rejected_path(journal: &Path) -> PathBuf {
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
        log::warn!("{p}");
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
        if e.apply(lineage, pins) {
            added += 1;
        }
    }
    (added, problems, rejected)
}

/// Merge the journal's fleet operations into the fleet records (their pin
/// side is [`replay_journal`]'s). Returns how many operations it held.
pub fn replay_fleet_journal(journal: &Path, fleet: &mut FleetRecords) -> usize {
    let (entries, _, _) = read_journal(journal);
    let mut n = 0;
    for op in entries.iter().filter_map(|e| e.fleet.as_ref()) {
        op.apply_records(fleet);
        n += 1;
    }
    n
}

pub(crate) fn journal_nonempty(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false)
}

pub(crate) fn append_sync(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
pub(crate) fn remote_journal_dir(journal: &Path) -> PathBuf {
    let mut d = journal.as_os_str().to_owned();
    d.push(".d");
    PathBuf::from(d)
}

pub(crate) fn truncate(p: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(p) {
        let _ = f.set_len(0);
        let _ = f.sync_all();
    }
}

/// Write one journal entry to the store: the record into its series'
/// object and the pin move, conditionally, retried on a lost race; a fleet
/// operation into `pins.json` and the fleet files
/// ([`crate::remote::transact_fleet`]).
pub(crate) fn push_entry(r: &Remote, e: &JournalEntry) -> Result<(), CacheError> {
    if let Some(op) = &e.fleet {
        crate::remote::transact_fleet(&r.store, |p, f| {
            op.apply_pins(p);
            op.apply_records(f);
        })?;
    }
    let Some(record) = &e.record else {
        return Ok(());
    };
    let mut keys = vec![crate::remote::series_key(&record.series)];
    if let Some(p) = &e.pin {
        let k = crate::remote::series_key(&p.image);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    crate::remote::transact(&r.store, Some(&keys), |l, p| {
        e.apply(l, p);
    })?;
    Ok(())
}
