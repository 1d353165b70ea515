//! `meta-state/` as a whole ([`MetaState`]): reading the files csis owns
//! and writing them atomically, locally or on the tree's store. The
//! journal is `crate::journal`; the writer of records as bakes succeed,
//! [`crate::Recorder`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::atomic::write_atomic;
use crate::journal::replay_journal;
use crate::lineage::Lineage;
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

    /// `lineage.yaml` (empty when absent). A build recorded twice is read
    /// once (the first record) and reported; the next write drops the copy.
    pub fn lineage(&self) -> Result<Lineage, CacheError> {
        if let Some(r) = self.remote()? {
            return Ok(r.load()?.0);
        }
        let mut l: Lineage = self.read(LINEAGE_FILE)?;
        for line in l.dedupe() {
            log::warn!("{}: {line}", self.dir.display());
        }
        Ok(l)
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
                log::warn!("{line}");
            }
            return Ok((l, p));
        }
        let mut l = self.lineage()?;
        let mut p = self.pins()?;
        replay_journal(journal, &mut l, &mut p);
        for line in p.restore_from_lineage(&l) {
            log::warn!("{line}");
        }
        Ok((l, p))
    }

    /// The fleet's records (`launch-params.yaml`, `instance-state.yaml`,
    /// `storage-state.yaml`; each empty when absent).
    pub fn fleet(&self) -> Result<crate::fleet::FleetRecords, CacheError> {
        crate::fleet::FleetRecords::load(self)
    }

    /// The fleet's records and the pins with the journal of an interrupted
    /// build merged in (what the next build will write): use this to plan.
    pub fn fleet_with_journal(
        &self,
        journal: &Path,
    ) -> Result<(Pins, crate::fleet::FleetRecords), CacheError> {
        let (_, pins) = self.load_with_journal(journal)?;
        let mut fleet = self.fleet()?;
        if !self.is_remote() {
            crate::journal::replay_fleet_journal(journal, &mut fleet);
        }
        Ok((pins, fleet))
    }

    /// Write the fleet's three files (each atomic; on a store each
    /// conditional on what was read). False when none changed. The
    /// recorder's fleet operations are the way to change them in a build.
    pub fn save_fleet(&self, f: &crate::fleet::FleetRecords) -> Result<bool, CacheError> {
        f.save(self)
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
