//! The planning view of `meta-state/`, read fast: what a plan needs of
//! `lineage.yaml` and `pins.yaml`, cached under `.csis/cache/`.
//!
//! A plan needs, of each record, only its identity (build id, series,
//! runtime), its parent build, its fingerprint, its run, its capability
//! stamp (what a pinned child inherits) and a base's vendor image (a moved
//! docker tag makes it due); of the pins, only
//! the image pins. Parsing the full YAML (every record carries its canonical
//! `inputs`) dominates a no-op build, so [`load_for_planning`] reads a compact
//! index instead, derived from the YAML and keyed by the blake3 of the YAML
//! file's bytes:
//!
//! - `.csis/cache/lineage-heads.json`: `{recipe, source, data: [record...]}`
//!   with the identity fields of every record, in append order;
//! - `.csis/cache/pins.bin`: the `images:`, `instances:` and
//!   `pending_replacements:` maps of `pins.yaml` (not its journal of moves).
//!
//! The cache is a pure accelerator: an index whose `source` is not the hash
//! of the file as it is now (edited by hand, by another command, by git) is
//! ignored and rebuilt from a full parse of the file, so deleting `.csis/`
//! never changes a result. The index is written only where `.csis/` already
//! exists (a `csis plan` of a tree never built creates nothing), atomically,
//! so concurrent readers see a whole index or none.
//! The build journal (`.csis/lineage.journal`) is replayed on top, as
//! [`MetaState::load_with_journal`] does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::journal::replay_journal;
use crate::lineage::{BuildRecord, Capabilities, Lineage, VendorImage};
use crate::pins::Pins;
use crate::stamp::FileStat;
use crate::store::{LINEAGE_FILE, PINS_FILE};
use crate::{write_atomic, yamlio, CacheError, LocalDir, MetaState};

/// Version of the index format; an index of another recipe is rebuilt.
const RECIPE: &str = "csis-heads-v8";
const LINEAGE_INDEX: &str = "lineage-heads.bin";
const PINS_INDEX: &str = "pins.bin";

/// The identity fields of one record, in the index's binary form
/// (postcard: fields in order, no names; a base's vendor image, whose
/// unknown fields are kept as read, as its JSON text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Head {
    build_id: String,
    series: String,
    runtime: Option<String>,
    parent: Option<String>,
    fingerprint: Option<String>,
    run: Option<String>,
    /// Adopted from tags (`imported: true`).
    imported: Option<bool>,
    /// The bake's seconds (the scheduler's cost of the next bake).
    bake_seconds: Option<f64>,
    /// The capability stamp (a pinned child inherits its parent build's).
    identity_types: Vec<String>,
    storage_types: Vec<String>,
    /// The run that reinstated it as the head (orders it).
    reinstated_by_run: Option<String>,
    /// A base image's vendor image (a moved docker tag makes it due), as
    /// JSON.
    vendor_image: Option<String>,
}

impl Head {
    fn of(b: &BuildRecord) -> Self {
        Head {
            build_id: b.build_id.clone(),
            series: b.series.clone(),
            runtime: b.runtime.clone(),
            parent: b.parent.clone(),
            fingerprint: b.input_fingerprint.clone(),
            run: b.run.clone(),
            imported: b.imported,
            bake_seconds: b.bake_seconds,
            identity_types: b.capabilities.identity_types.clone(),
            storage_types: b.capabilities.storage_types.clone(),
            reinstated_by_run: b.reinstated_by_run.clone(),
            vendor_image: b
                .vendor_image
                .as_ref()
                .and_then(|v| serde_json::to_string(v).ok()),
        }
    }

    /// The record (None when its vendor image does not read back: the
    /// index is then not trusted).
    fn into_record(self) -> Option<BuildRecord> {
        let mut r = BuildRecord::new(self.build_id, self.series, String::new());
        r.runtime = self.runtime;
        r.parent = self.parent;
        r.input_fingerprint = self.fingerprint;
        r.run = self.run;
        r.imported = self.imported;
        r.bake_seconds = self.bake_seconds;
        r.capabilities = Capabilities {
            identity_types: self.identity_types,
            storage_types: self.storage_types,
        };
        r.reinstated_by_run = self.reinstated_by_run;
        r.vendor_image = match self.vendor_image {
            Some(v) => Some(serde_json::from_str::<VendorImage>(&v).ok()?),
            None => None,
        };
        Some(r)
    }
}

/// The file of an index: what it was derived from, and the data.
#[derive(Serialize, Deserialize)]
struct Index<T> {
    recipe: String,
    /// blake3 (hex) of the source file's bytes.
    source: String,
    /// The source file's metadata when those bytes were read, unless it
    /// was racy then ([`FileStat::is_racy`]): while it holds, the index
    /// answers without the file being read (7 MB at 5,000 builds).
    stat: Option<FileStat>,
    data: T,
}

/// What the index of a source file answers.
enum Indexed<T> {
    /// The source file is absent.
    Missing,
    /// The index is the source's: its metadata held, or its bytes hashed
    /// to the index's source.
    Hit(T),
    /// The source must be parsed: its bytes, their hash, and its metadata
    /// from before they were read.
    Miss {
        bytes: Vec<u8>,
        source: String,
        stat: FileStat,
    },
}

/// The index `name` of the source file `path`: taken by the file's
/// metadata (the no-op stamp's rule: a file changed within the racy
/// window of the index's writing never has its metadata recorded), else
/// by its content hash (then the index is written again with the
/// metadata, so the next read need not read the file).
fn from_index<T: Serialize + DeserializeOwned>(
    local: &Path,
    name: &str,
    path: &Path,
) -> Result<Indexed<T>, CacheError> {
    let stat = FileStat::of(path);
    if !stat.exists() {
        return Ok(Indexed::Missing);
    }
    let index = std::fs::read(cache_dir(local).join(name))
        .ok()
        .and_then(|text| postcard::from_bytes::<Index<T>>(&text).ok())
        .filter(|i| i.recipe == RECIPE);
    let index = match index {
        Some(i) if i.stat == Some(stat) => return Ok(Indexed::Hit(i.data)),
        other => other,
    };
    let Some(bytes) = read_source(path)? else {
        return Ok(Indexed::Missing);
    };
    let source = source_hash(&bytes);
    match index {
        Some(i) if i.source == source => {
            // written again only to record the metadata (a racy file's is
            // not: the index would be rewritten as it was, every read)
            if !stat.is_racy(std::time::SystemTime::now()) {
                write_index(local, name, source, Some(stat), &i.data);
            }
            Ok(Indexed::Hit(i.data))
        }
        _ => Ok(Indexed::Miss {
            bytes,
            source,
            stat,
        }),
    }
}

fn cache_dir(local: &Path) -> PathBuf {
    local.join("cache")
}

/// Read a source file as UTF-8 (None when absent).
fn read_source(path: &Path) -> Result<Option<Vec<u8>>, CacheError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CacheError::io(path, e)),
    }
}

/// A source file's bytes parsed (YAML, errors located in `path`).
fn parse_source<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, CacheError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        CacheError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    yamlio::from_text(&path.to_string_lossy(), text).map_err(|message| CacheError::Parse {
        path: path.to_path_buf(),
        message,
    })
}

fn source_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The index `name` if it was derived from bytes hashing to `source`.
#[cfg(test)]
fn read_index<T: DeserializeOwned>(local: &Path, name: &str, source: &str) -> Option<T> {
    let text = std::fs::read(cache_dir(local).join(name)).ok()?;
    let i: Index<T> = postcard::from_bytes(&text).ok()?;
    (i.recipe == RECIPE && i.source == source).then_some(i.data)
}

/// Write an index, only where `.csis/` exists; failures are ignored (the
/// index is an accelerator). `stat`: the source's metadata from before
/// its bytes were read, kept unless racy now.
fn write_index<T: Serialize>(
    local: &Path,
    name: &str,
    source: String,
    stat: Option<FileStat>,
    data: &T,
) {
    if !local.is_dir() {
        return;
    }
    let i = Index {
        recipe: RECIPE.to_string(),
        source,
        stat: stat.filter(|s| !s.is_racy(std::time::SystemTime::now())),
        data,
    };
    if let Ok(text) = postcard::to_stdvec(&i) {
        let path = cache_dir(local).join(name);
        let _ = write_atomic(&path, &text);
        // the index's JSON form, before csis-heads-v7: nothing reads it
        let legacy = if name == PINS_INDEX {
            "pin-images.json"
        } else {
            "lineage-heads.json"
        };
        let _ = std::fs::remove_file(cache_dir(local).join(legacy));
    }
}

fn light_lineage(heads: Vec<Head>) -> Option<Lineage> {
    Some(Lineage {
        builds: heads
            .into_iter()
            .map(Head::into_record)
            .collect::<Option<_>>()?,
        extra: BTreeMap::new(),
    })
}

/// A record as the index keeps it (its identity fields only).
fn light(b: &BuildRecord) -> BuildRecord {
    Head::of(b)
        .into_record()
        .expect("a vendor image reads back the JSON written of it")
}

/// What the plan reads of `pins.yaml`: the image pins, and for the fleet
/// the instance pins and the pending replacements (not the journal of
/// moves).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PinsView {
    images: BTreeMap<String, String>,
    instances: BTreeMap<String, String>,
    pending_replacements: BTreeMap<String, String>,
}

impl PinsView {
    fn of(p: &Pins) -> Self {
        PinsView {
            images: p.images.clone(),
            instances: p.instances.clone(),
            pending_replacements: p.pending_replacements.clone(),
        }
    }

    fn into_pins(self) -> Pins {
        Pins {
            images: self.images,
            instances: self.instances,
            pending_replacements: self.pending_replacements,
            ..Pins::default()
        }
    }
}

/// `lineage.yaml` and `pins.yaml` as the planner needs them, with the
/// journal of an interrupted build merged in (as
/// [`MetaState::load_with_journal`]), read from the index when it is
/// current.
///
/// The records hold only `build_id`, `series`, `runtime`, `parent`,
/// `input_fingerprint`, `run`, `imported`, `bake_seconds`, `capabilities`
/// and `vendor_image` (no `inputs`, mods, chain...; records from
/// the journal are whole); the pins hold `images`, `instances` and
/// `pending_replacements` (not `upgrades`). Use
/// [`MetaState::load_with_journal`] for anything else.
pub fn load_for_planning(
    meta: &MetaState,
    local: &LocalDir,
) -> Result<(Lineage, Pins), CacheError> {
    if meta.is_remote() {
        return meta.load_with_journal(&local.journal());
    }
    let dir = local.dir();
    let lpath = meta.dir().join(LINEAGE_FILE);
    let mut lineage = match from_index::<Vec<Head>>(dir, LINEAGE_INDEX, &lpath)? {
        Indexed::Missing => Lineage::default(),
        Indexed::Hit(heads) => match light_lineage(heads) {
            Some(lineage) => lineage,
            None => parse_lineage(dir, &lpath, None)?,
        },
        Indexed::Miss {
            bytes,
            source,
            stat,
        } => parse_lineage(dir, &lpath, Some((bytes, source, stat)))?,
    };
    for line in lineage.dedupe() {
        log::warn!("{}: {line}", meta.dir().display());
    }
    let ppath = meta.dir().join(PINS_FILE);
    let mut pins = match from_index::<PinsView>(dir, PINS_INDEX, &ppath)? {
        Indexed::Missing => Pins::default(),
        Indexed::Hit(view) => view.into_pins(),
        Indexed::Miss {
            bytes,
            source,
            stat,
        } => {
            let full: Pins = parse_source(&ppath, &bytes)?;
            let view = PinsView::of(&full);
            write_index(dir, PINS_INDEX, source, Some(stat), &view);
            view.into_pins()
        }
    };
    let before = lineage.builds.len();
    if replay_journal(&local.journal(), &mut lineage, &mut pins) > 0 {
        // Journal records are whole: keep the view uniform.
        for b in &mut lineage.builds[before..] {
            *b = light(b);
        }
    }
    for line in pins.restore_from_lineage(&lineage) {
        log::warn!("{line}");
    }
    Ok((lineage, pins))
}

/// `lineage.yaml` parsed whole and its index written (from `read`: its
/// bytes, their hash and its metadata; None = read it now).
fn parse_lineage(
    dir: &Path,
    lpath: &Path,
    read: Option<(Vec<u8>, String, FileStat)>,
) -> Result<Lineage, CacheError> {
    let (bytes, source, stat) = match read {
        Some(r) => r,
        None => {
            let stat = FileStat::of(lpath);
            let bytes = read_source(lpath)?.unwrap_or_default();
            let source = source_hash(&bytes);
            (bytes, source, stat)
        }
    };
    let full: Lineage = parse_source(lpath, &bytes)?;
    let heads: Vec<Head> = full.builds.iter().map(Head::of).collect();
    write_index(dir, LINEAGE_INDEX, source, Some(stat), &heads);
    Ok(light_lineage(heads).expect("a vendor image reads back the JSON written of it"))
}

/// The files a plan reads of the records: every file of `meta-state/`
/// (lineage, pins and revocations through [`load_for_planning`], and what
/// the plan reads beside them: releases, the fleet's records, test
/// results), and the build journal. The index under `.csis/cache/` only
/// follows them.
/// None for records on a store, which only a read tells.
pub fn planning_sources(meta: &MetaState, local: &LocalDir) -> Option<Vec<PathBuf>> {
    if meta.is_remote() {
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(meta.dir())
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files.push(local.journal());
    Some(files)
}

/// Record the index of `lineage.yaml` whose text was just written (by the
/// [`crate::Recorder`]), so the next plan need not parse it. `local` is
/// `.csis/`.
pub(crate) fn store_lineage_index(local: &Path, text: &[u8], lineage: &Lineage) {
    let heads: Vec<Head> = lineage.builds.iter().map(Head::of).collect();
    write_index(local, LINEAGE_INDEX, source_hash(text), None, &heads);
}

/// Record the index of `pins.yaml` whose text was just written.
pub(crate) fn store_pins_index(local: &Path, text: &[u8], pins: &Pins) {
    write_index(
        local,
        PINS_INDEX,
        source_hash(text),
        None,
        &PinsView::of(pins),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, series: &str, rt: Option<&str>, parent: &str, fp: &str) -> BuildRecord {
        let mut r = BuildRecord::new(id, series, "x");
        r.runtime = rt.map(str::to_string);
        r.parent = Some(parent.into());
        r.input_fingerprint = Some(fp.into());
        r.run = Some("2026_11_30t07_44_28_123456".into());
        r.inputs = Some(serde_json::json!({"inputs": {"series": series}}));
        r.chain = vec!["a".into()];
        r
    }

    /// The planning view of `l`, through the index's form.
    fn indexed(l: &Lineage) -> Lineage {
        light_lineage(l.builds.iter().map(Head::of).collect()).unwrap()
    }

    fn setup() -> (tempfile::TempDir, MetaState, LocalDir) {
        let t = tempfile::tempdir().unwrap();
        let m = MetaState::of_tree(t.path());
        let local = LocalDir::of_tree(t.path());
        (t, m, local)
    }

    fn sample() -> (Lineage, Pins) {
        let mut l = Lineage::default();
        let mut b1 = rec("b1", "base", Some("rt"), "vendor", "f1");
        // the planning view keeps a base's vendor image (a moved tag is due)
        b1.vendor_image = Some(VendorImage {
            reference: "busybox:1".into(),
            id: "sha256:aa".into(),
            movable: true,
            extra: Default::default(),
        });
        b1.capabilities = Capabilities {
            identity_types: vec!["posix".into()],
            storage_types: vec!["nfs".into(), "ebs".into()],
        };
        b1.bake_seconds = Some(41.5);
        l.add_build(b1);
        l.add_build(rec("w1", "web", Some("rt"), "b1", "f2"));
        l.add_build(rec("old", "web", None, "b1", "f3"));
        let mut p = Pins::default();
        p.move_image_pin("web", "rt", "b1", Some("r"), "bind");
        p.instances.insert("i-1".into(), "w1".into());
        (l, p)
    }

    #[test]
    fn absent_files_read_empty_and_create_nothing() {
        let (t, m, local) = setup();
        let (l, p) = load_for_planning(&m, &local).unwrap();
        assert!(l.builds.is_empty());
        assert_eq!(p, Pins::default());
        assert!(!t.path().join(".csis").exists());
    }

    #[test]
    fn light_view_equals_the_full_files_identity_fields() {
        let (_t, m, local) = setup();
        let (l, p) = sample();
        m.save_lineage(&l).unwrap();
        m.save_pins(&p).unwrap();
        // no .csis/ (as after a clone): read from the YAML, no index written
        let _ = std::fs::remove_dir_all(local.dir());
        let (l1, p1) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l1, indexed(&l));
        assert_eq!(l1.builds[0].vendor_image, l.builds[0].vendor_image);
        assert_eq!(p1.images, p.images);
        // the fleet's part of the pins is kept, the journal of moves is not
        assert_eq!(p1.instances, p.instances);
        assert!(!p.upgrades.is_empty() && p1.upgrades.is_empty());
        assert!(!local.dir().join("cache").exists());
        // with .csis/: the first read writes the index, the second uses it
        local.ensure().unwrap();
        assert_eq!(load_for_planning(&m, &local).unwrap().0, l1);
        let idx = local.dir().join("cache").join(LINEAGE_INDEX);
        assert!(idx.exists());
        assert!(local.dir().join("cache").join(PINS_INDEX).exists());
        let (l2, p2) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l2, l1);
        assert_eq!(p2, p1);
    }

    #[test]
    fn a_stale_index_is_ignored_and_rebuilt() {
        let (_t, m, local) = setup();
        local.ensure().unwrap();
        let (mut l, p) = sample();
        m.save_lineage(&l).unwrap();
        m.save_pins(&p).unwrap();
        load_for_planning(&m, &local).unwrap();
        // the file changes behind csis's back (git pull, hand edit)
        l.add_build(rec("w2", "web", Some("rt"), "b1", "f9"));
        m.save_lineage(&l).unwrap();
        let (l2, _) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l2, indexed(&l));
        assert_eq!(l2.head("web", "rt").unwrap().build_id, "w2");
        // a corrupt index is ignored
        std::fs::write(local.dir().join("cache").join(LINEAGE_INDEX), b"{not json").unwrap();
        assert_eq!(load_for_planning(&m, &local).unwrap().0, indexed(&l));
    }

    #[test]
    fn the_recorder_leaves_a_current_index() {
        let (_t, m, local) = setup();
        let r = crate::Recorder::open(m.clone(), local.journal()).unwrap();
        r.record(rec("b1", "base", Some("rt"), "vendor", "f1"), None)
            .unwrap();
        r.record(
            rec("w1", "web", Some("rt"), "b1", "f2"),
            Some(crate::PinBinding {
                image: "web".into(),
                runtime: "rt".into(),
                parent_build: "b1".into(),
            }),
        )
        .unwrap();
        r.flush().unwrap();
        drop(r);
        let lsrc = source_hash(&std::fs::read(m.dir().join(LINEAGE_FILE)).unwrap());
        let psrc = source_hash(&std::fs::read(m.dir().join(PINS_FILE)).unwrap());
        let heads: Vec<Head> = read_index(local.dir(), LINEAGE_INDEX, &lsrc).unwrap();
        let view: PinsView = read_index(local.dir(), PINS_INDEX, &psrc).unwrap();
        assert_eq!(
            light_lineage(heads).unwrap(),
            indexed(&m.lineage().unwrap())
        );
        assert_eq!(view, PinsView::of(&m.pins().unwrap()));
        assert_eq!(view.images.get("web@rt").map(String::as_str), Some("b1"));
    }

    /// The lineage index's recorded metadata (None: not recorded).
    fn index_stat(local: &LocalDir) -> Option<FileStat> {
        let text = std::fs::read(cache_dir(local.dir()).join(LINEAGE_INDEX)).unwrap();
        postcard::from_bytes::<Index<Vec<Head>>>(&text)
            .unwrap()
            .stat
    }

    fn set_mtime(path: &Path, ago: std::time::Duration) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(std::time::SystemTime::now() - ago).unwrap();
    }

    #[test]
    fn the_index_is_taken_by_metadata_unless_racy_and_a_moved_file_is_read() {
        let (_t, m, local) = setup();
        let r = crate::Recorder::open(m.clone(), local.journal()).unwrap();
        r.record(rec("b1", "base", Some("rt"), "vendor", "f1"), None)
            .unwrap();
        r.flush().unwrap();
        let lpath = m.dir().join(LINEAGE_FILE);
        // just written: racy, so the index keeps no metadata of it
        load_for_planning(&m, &local).unwrap();
        assert_eq!(index_stat(&local), None);
        // as written a minute ago: its bytes hash to the index's source,
        // and the index is written again with its metadata
        set_mtime(&lpath, std::time::Duration::from_secs(60));
        let (l, _) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l.builds[0].build_id, "b1");
        assert_eq!(index_stat(&local), Some(FileStat::of(&lpath)));
        // while the metadata holds, the index answers without the file:
        // an index whose data says otherwise is believed
        let path = cache_dir(local.dir()).join(LINEAGE_INDEX);
        let mut i: Index<Vec<Head>> = postcard::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
        i.data[0].build_id = "from-the-index".into();
        std::fs::write(&path, postcard::to_stdvec(&i).unwrap()).unwrap();
        let (l, _) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l.builds[0].build_id, "from-the-index");
        // a file written since is read again, even of the same size and
        // with its mtime set back (its ctime moved)
        let mtime = std::fs::metadata(&lpath).unwrap().modified().unwrap();
        let text = std::fs::read_to_string(&lpath).unwrap();
        assert!(text.contains("build_id: b1"), "{text}");
        std::fs::write(&lpath, text.replace("build_id: b1", "build_id: b9")).unwrap();
        let f = std::fs::File::options().write(true).open(&lpath).unwrap();
        f.set_modified(mtime).unwrap();
        let (l, _) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l.builds[0].build_id, "b9");
    }

    #[test]
    fn the_journal_is_replayed_on_top() {
        let (_t, m, local) = setup();
        local.ensure().unwrap();
        let (l, p) = sample();
        m.save_lineage(&l).unwrap();
        m.save_pins(&p).unwrap();
        load_for_planning(&m, &local).unwrap();
        // a build interrupted after journaling w3 (not yet in lineage.yaml)
        let w3 = rec("w3", "web", Some("rt"), "b2", "f4");
        let line = serde_json::json!({
            "record": w3,
            "pin": {"image": "web", "runtime": "rt", "parent_build": "b2"},
        });
        std::fs::write(local.journal(), format!("{line}\n")).unwrap();
        let (full_l, full_p) = m.load_with_journal(&local.journal()).unwrap();
        let (l2, p2) = load_for_planning(&m, &local).unwrap();
        assert_eq!(l2, indexed(&full_l));
        assert_eq!(p2.images, full_p.images);
        assert_eq!(l2.head("web", "rt").unwrap().build_id, "w3");
        assert_eq!(p2.image_pin("web", "rt"), Some("b2"));
        assert!(l2.builds.iter().all(|b| b.inputs.is_none()));
    }
}
