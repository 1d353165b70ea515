//! `meta-state/` as a whole: reading the files csis owns and writing them
//! atomically; and [`Recorder`], which writes a record the moment a bake
//! succeeds.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::atomic::write_atomic;
use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::releases::Releases;
use crate::{yamlio, CacheError};

pub const LINEAGE_FILE: &str = "lineage.yaml";
pub const PINS_FILE: &str = "pins.yaml";
pub const RELEASES_FILE: &str = "releases.yaml";

/// The `meta-state/` directory of a tree (committed by users).
#[derive(Debug, Clone)]
pub struct MetaState {
    dir: PathBuf,
}

impl MetaState {
    /// `<tree root>/meta-state`.
    pub fn of_tree(root: &Path) -> Self {
        MetaState {
            dir: root.join("meta-state"),
        }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        MetaState { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read<T: DeserializeOwned + Default>(&self, file: &str) -> Result<T, CacheError> {
        let path = self.dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                yamlio::from_text(&path.to_string_lossy(), &text).map_err(|message| CacheError::Parse { path, message })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(CacheError::io(&path, e)),
        }
    }

    fn write<T: Serialize>(&self, file: &str, value: &T) -> Result<bool, CacheError> {
        let path = self.dir.join(file);
        let text = yamlio::to_text(value).map_err(|message| CacheError::Parse {
            path: path.clone(),
            message,
        })?;
        write_atomic(&path, text.as_bytes()).map_err(|e| CacheError::io(&path, e))
    }

    /// `lineage.yaml` (empty when absent).
    pub fn lineage(&self) -> Result<Lineage, CacheError> {
        self.read(LINEAGE_FILE)
    }
    pub fn pins(&self) -> Result<Pins, CacheError> {
        self.read(PINS_FILE)
    }
    pub fn releases(&self) -> Result<Releases, CacheError> {
        self.read(RELEASES_FILE)
    }
    /// Write `lineage.yaml` atomically; false when unchanged.
    pub fn save_lineage(&self, l: &Lineage) -> Result<bool, CacheError> {
        self.write(LINEAGE_FILE, l)
    }
    pub fn save_pins(&self, p: &Pins) -> Result<bool, CacheError> {
        self.write(PINS_FILE, p)
    }
    pub fn save_releases(&self, r: &Releases) -> Result<bool, CacheError> {
        self.write(RELEASES_FILE, r)
    }
}

/// The pin side of a record: the image whose parent pin the bake binds
/// (first bind) or moves (`follow`).
#[derive(Debug, Clone)]
pub struct PinBinding {
    pub image: String,
    pub runtime: String,
    /// The parent build the bake started from.
    pub parent_build: String,
}

/// Records bakes as they succeed. Holds the lineage and pins in memory and
/// writes both files after every record (lineage first: the record is the
/// truth; a pin can always be re-derived from the record's `parent`).
/// Callers must hold the [`crate::TreeLock`].
#[derive(Debug)]
pub struct Recorder {
    meta: MetaState,
    state: Mutex<(Lineage, Pins)>,
}

impl Recorder {
    pub fn open(meta: MetaState) -> Result<Self, CacheError> {
        let lineage = meta.lineage()?;
        let pins = meta.pins()?;
        Ok(Recorder {
            meta,
            state: Mutex::new((lineage, pins)),
        })
    }

    /// Append one record (a duplicate build id is ignored) and bind or move
    /// the parent pin, writing both files atomically before returning.
    /// Returns the pin operation performed (`bind`/`follow`), if any.
    pub fn record(
        &self,
        record: BuildRecord,
        pin: Option<PinBinding>,
    ) -> Result<Option<&'static str>, CacheError> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (lineage, pins) = &mut *guard;
        let run = record.run.clone();
        lineage.add_build(record);
        self.meta.save_lineage(lineage)?;
        let mut op = None;
        if let Some(p) = pin {
            let kind = if pins.image_pin(&p.image, &p.runtime).is_none() {
                "bind"
            } else {
                "follow"
            };
            if pins.move_image_pin(&p.image, &p.runtime, &p.parent_build, run.as_deref(), kind) {
                self.meta.save_pins(pins)?;
                op = Some(kind);
            }
        }
        Ok(op)
    }

    /// A copy of the lineage as recorded so far.
    pub fn lineage(&self) -> Lineage {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    pub fn pins(&self) -> Pins {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }
}
