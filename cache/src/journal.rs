//! The build journal (`.csis/lineage.journal`; on a store, one per run
//! under `.csis/lineage.journal.d/`): one JSON line per record, appended and
//! fsynced before a bake is reported finished, with the pin it binds or
//! moves ([`PinBinding`]). A reader merges it over `meta-state/`
//! ([`replay_journal`]); the [`crate::Recorder`] writes it and empties it
//! once both files hold its records.

use std::path::{Path, PathBuf};

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

/// One line of the journal (`.csis/lineage.journal`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct JournalEntry {
    pub(crate) record: BuildRecord,
    #[serde(default)]
    pub(crate) pin: Option<PinBinding>,
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
/// object and the pin move, conditionally, retried on a lost race.
pub(crate) fn push_entry(r: &Remote, e: &JournalEntry) -> Result<(), CacheError> {
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
