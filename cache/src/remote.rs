//! The records on an object store: which store a tree uses, and
//! how lineage and pins are laid out there so that concurrent writers never
//! lose each other's work.
//!
//! Layout under the store's prefix:
//! - `series/<series>.json`: `{builds: [...], pins: {images, upgrades}}`,
//!   the records of one series (every runtime) and the image pins of that
//!   series with their moves. A bake records with one conditional write of
//!   its series' object, so builds of disjoint series never contend.
//! - `pins.json`: every other part of `pins.yaml` (instances, pending
//!   replacements, legacy bare keys, instance moves, unknown keys).
//! - `lineage.json`: unknown top-level keys of `lineage.yaml`, if any.
//! - `releases.yaml`, `revocations.yaml`: as in `meta-state/`.
//! - `launch-params.yaml`, `instance-state.yaml`, `storage-state.yaml`: as
//!   in `meta-state/`; a fleet operation changes them and `pins.json` in
//!   one [`transact_fleet`].
//! - `leases/<series>@<runtime>.json`: see [`crate::lease`].
//!
//! Every write is conditional: a create is If-None-Match, an update is
//! If-Match on the version read. A change made through [`transact`] is a
//! function of the records: on a lost race the objects are read again and
//! the function applied again (the record operations are idempotent: a
//! build id is added once, a pin already at its build is not moved, a
//! forgotten build stays forgotten). A whole-file save
//! ([`crate::MetaState::save_lineage`]) is conditional on what this process
//! read, and fails rather than overwrite what another runner wrote since.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use csis_schema::model::MetaStateSpec;
use serde::{Deserialize, Serialize};

use crate::fleet::FleetRecords;
use crate::lineage::{BuildRecord, Lineage};
use crate::objstore::{Cond, Store, StoreError, Version};
use crate::pins::Pins;
use crate::CacheError;

pub const SERIES_DIR: &str = "series";
pub const PINS_DOC: &str = "pins.json";
pub const LINEAGE_DOC: &str = "lineage.json";

// ---- which store a tree uses --------------------------------------------------

static OVERRIDE: Mutex<Option<MetaStateSpec>> = Mutex::new(None);
static TREES: Mutex<Option<HashMap<PathBuf, MetaStateSpec>>> = Mutex::new(None);
static OPEN: Mutex<Option<HashMap<String, Arc<Store>>>> = Mutex::new(None);

/// `--meta-state URL`: overrides every tree's `meta_state:`.
pub fn set_override(spec: Option<MetaStateSpec>) {
    *OVERRIDE.lock().unwrap_or_else(|p| p.into_inner()) = spec;
}

/// A loaded tree's `meta_state:` (the load registers it).
pub fn set_tree_spec(root: &Path, spec: MetaStateSpec) {
    TREES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(canonical(root), spec);
}

/// The store a tree's records live in: `--meta-state`, else the loaded
/// tree's `meta_state:`, else `cfg/_config.yml`'s `meta_state:` read raw
/// (for commands that do not load the tree), else `local`.
pub fn spec_for(root: &Path) -> MetaStateSpec {
    if let Some(s) = OVERRIDE.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        return s;
    }
    if let Some(s) = TREES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&canonical(root)).cloned())
    {
        return s;
    }
    peek_config(root).unwrap_or_default()
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn peek_config(root: &Path) -> Option<MetaStateSpec> {
    let path = root.join("cfg").join("_config.yml");
    let text = std::fs::read_to_string(&path).ok()?;
    if !text.contains("meta_state") {
        return None;
    }
    let v: serde_json::Value = csis_schema::yaml::from_str(&path.to_string_lossy(), &text).ok()?;
    MetaStateSpec::parse(v.get("meta_state")?.as_str()?).ok()
}

/// The store of a spec, opened once per process (`None` for `local`).
pub fn open_store(spec: &MetaStateSpec) -> Result<Option<Arc<Store>>, String> {
    if spec.is_local() {
        return Ok(None);
    }
    let key = spec.to_string();
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    let open = open.get_or_insert_with(HashMap::new);
    if let Some(s) = open.get(&key) {
        return Ok(Some(s.clone()));
    }
    let s = Arc::new(
        Store::open(spec)
            .map_err(|e| format!("meta-state store {key}: {e}"))?
            .expect("not local"),
    );
    open.insert(key, s.clone());
    Ok(Some(s))
}

/// Requests made to every store this process opened.
pub fn total_requests() -> u64 {
    OPEN.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|m| m.values().map(|s| s.requests()).sum())
        .unwrap_or(0)
}

// ---- documents ----------------------------------------------------------------

/// The objects read: key -> (version, bytes); `None` = read and absent.
pub(crate) type Docs = BTreeMap<String, Option<(Version, Vec<u8>)>>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct SeriesDoc {
    #[serde(default)]
    builds: Vec<BuildRecord>,
    #[serde(default)]
    pins: Pins,
}

/// A name as one key segment: `[A-Za-z0-9._@-]` kept, anything else `%XX`.
pub(crate) fn segment(name: &str) -> String {
    let mut s = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"._@-".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    if s.starts_with('.') {
        s.replace_range(0..1, "%2E");
    }
    s
}

/// `series/<series>.json`
pub fn series_key(series: &str) -> String {
    format!("{SERIES_DIR}/{}.json", segment(series))
}

fn store_err(store: &Store, e: StoreError) -> CacheError {
    CacheError::Store {
        url: store.url().to_string(),
        message: e.to_string(),
    }
}

fn parse_err(store: &Store, key: &str, e: impl std::fmt::Display) -> CacheError {
    CacheError::Parse {
        path: PathBuf::from(format!("{}/{key}", store.url())),
        message: e.to_string(),
    }
}

/// How many requests of one load (or one lease pass) are in flight at once.
pub(crate) const READ_AHEAD: usize = 16;

/// `f` of each item, up to [`READ_AHEAD`] at once (each lane a thread: a
/// store call blocks on its own runtime), the answers in `items`' order.
pub(crate) fn in_lanes<I: Sync, T: Send>(items: &[I], f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    let lanes = items.len().clamp(1, READ_AHEAD);
    let f = &f;
    let mut got: Vec<(usize, T)> = std::thread::scope(|s| {
        let lanes: Vec<_> = (0..lanes)
            .map(|lane| {
                s.spawn(move || {
                    (items.iter().enumerate().skip(lane).step_by(lanes))
                        .map(|(i, item)| (i, f(item)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        (lanes.into_iter())
            .flat_map(|l| l.join().expect("a store request panicked"))
            .collect()
    });
    got.sort_by_key(|(i, _)| *i);
    got.into_iter().map(|(_, t)| t).collect()
}

/// Read `keys` (absent ones as `None`), [`in_lanes`]: a read asks nothing
/// conditional, so the gets of one load overlap instead of waiting on each
/// other (the store's round trip once per lane, not once per object). The
/// first failure, in key order, is the answer.
pub(crate) fn read_keys(store: &Store, keys: &[String]) -> Result<Docs, CacheError> {
    let got = in_lanes(keys, |k| store.get(k));
    let mut docs = Docs::new();
    for (k, r) in keys.iter().zip(got) {
        let got = r.map_err(|e| store_err(store, e))?;
        docs.insert(k.clone(), got.map(|(b, v)| (v, b)));
    }
    Ok(docs)
}

/// Every object the lineage and pins are made of.
pub(crate) fn read_all(store: &Store) -> Result<Docs, CacheError> {
    let mut keys = store
        .list(SERIES_DIR)
        .map_err(|e| store_err(store, e))?
        .into_iter()
        .filter(|k| k.ends_with(".json"))
        .collect::<Vec<_>>();
    keys.push(PINS_DOC.to_string());
    keys.push(LINEAGE_DOC.to_string());
    read_keys(store, &keys)
}

/// The lineage and pins on `store`, read as a load reads them (the list,
/// then every object, [`READ_AHEAD`] at once).
pub fn read_records(store: &Store) -> Result<(Lineage, Pins), CacheError> {
    merge(store, &read_all(store)?)
}

/// The lineage and pins the objects hold.
pub(crate) fn merge(store: &Store, docs: &Docs) -> Result<(Lineage, Pins), CacheError> {
    let mut lineage = Lineage::default();
    let mut pins = Pins::default();
    if let Some(Some((_, b))) = docs.get(PINS_DOC) {
        pins = serde_json::from_slice(b).map_err(|e| parse_err(store, PINS_DOC, e))?;
    }
    if let Some(Some((_, b))) = docs.get(LINEAGE_DOC) {
        let l: Lineage = serde_json::from_slice(b).map_err(|e| parse_err(store, LINEAGE_DOC, e))?;
        lineage.extra = l.extra;
    }
    for (k, d) in docs {
        if !k.starts_with(SERIES_DIR) {
            continue;
        }
        let Some((_, b)) = d else { continue };
        let doc: SeriesDoc = serde_json::from_slice(b).map_err(|e| parse_err(store, k, e))?;
        for r in doc.builds {
            lineage.add_build(r);
        }
        pins.images.extend(doc.pins.images);
        pins.upgrades.extend(doc.pins.upgrades);
    }
    Ok((lineage, pins))
}

/// The objects of a lineage and pins.
pub(crate) fn split(lineage: &Lineage, pins: &Pins) -> BTreeMap<String, Vec<u8>> {
    let mut series: BTreeMap<String, SeriesDoc> = BTreeMap::new();
    for b in &lineage.builds {
        series
            .entry(b.series.clone())
            .or_default()
            .builds
            .push(b.clone());
    }
    let mut rest = Pins {
        instances: pins.instances.clone(),
        pending_replacements: pins.pending_replacements.clone(),
        extra: pins.extra.clone(),
        ..Default::default()
    };
    for (k, b) in &pins.images {
        match k.split_once('@') {
            Some((image, _)) => {
                series
                    .entry(image.to_string())
                    .or_default()
                    .pins
                    .images
                    .insert(k.clone(), b.clone());
            }
            None => {
                rest.images.insert(k.clone(), b.clone());
            }
        }
    }
    for m in &pins.upgrades {
        if m.kind == "image" {
            series
                .entry(m.name.clone())
                .or_default()
                .pins
                .upgrades
                .push(m.clone());
        } else {
            rest.upgrades.push(m.clone());
        }
    }
    let mut out = BTreeMap::new();
    for (name, doc) in series {
        out.insert(
            series_key(&name),
            serde_json::to_vec(&doc).expect("records serialize"),
        );
    }
    out.insert(
        PINS_DOC.to_string(),
        serde_json::to_vec(&rest).expect("pins serialize"),
    );
    let extra = Lineage {
        builds: Vec::new(),
        extra: lineage.extra.clone(),
    };
    out.insert(
        LINEAGE_DOC.to_string(),
        serde_json::to_vec(&extra).expect("lineage serializes"),
    );
    out
}

/// Write what changed between `before` and `after`, each write conditional
/// on the version in `before`. A key of `before` missing from `after`
/// becomes an empty document. Returns the versions written (to update
/// `before`).
pub(crate) fn write_changes(
    store: &Store,
    before: &Docs,
    after: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<(String, Version, Vec<u8>)>, StoreError> {
    let mut written = Vec::new();
    let empty_series = serde_json::to_vec(&SeriesDoc::default()).expect("serializes");
    let mut keys: Vec<&String> = after.keys().collect();
    for k in before.keys() {
        if !after.contains_key(k) {
            keys.push(k);
        }
    }
    keys.sort();
    keys.dedup();
    for k in keys {
        let new = match after.get(k) {
            Some(b) => b.clone(),
            None if k.starts_with(SERIES_DIR) => empty_series.clone(),
            None => continue,
        };
        let cond = match before.get(k) {
            Some(Some((v, old))) => {
                if *old == new {
                    continue;
                }
                Cond::Match(v.clone())
            }
            _ => {
                // Absent before: nothing to create when there is nothing in it.
                if new == empty_series || is_empty_doc(&new) {
                    continue;
                }
                Cond::Create
            }
        };
        let v = store.put(k, new.clone(), cond)?;
        written.push((k.clone(), v, new));
    }
    Ok(written)
}

fn is_empty_doc(bytes: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(m)) => m.values().all(|v| match v {
            serde_json::Value::Object(o) => o.is_empty(),
            serde_json::Value::Array(a) => a.is_empty(),
            serde_json::Value::Null => true,
            _ => false,
        }),
        _ => false,
    }
}

/// How many times a lost race is retried before giving up.
const MAX_ATTEMPTS: usize = 200;

/// Apply `f` to the records and write what it changed, conditionally; on a
/// lost race read again and apply `f` again. `keys`: the objects `f`
/// reads and changes (`None`: all of them). Returns what `f` returned and
/// the records as written.
pub(crate) fn transact<T>(
    store: &Store,
    keys: Option<&[String]>,
    mut f: impl FnMut(&mut Lineage, &mut Pins) -> T,
) -> Result<(T, Lineage, Pins), CacheError> {
    for attempt in 0..MAX_ATTEMPTS {
        let docs = match keys {
            Some(k) => read_keys(store, k)?,
            None => read_all(store)?,
        };
        let (mut l, mut p) = merge(store, &docs)?;
        let out = f(&mut l, &mut p);
        let mut after = split(&l, &p);
        if let Some(k) = keys {
            after.retain(|key, _| k.contains(key));
        }
        match write_changes(store, &docs, &after) {
            Ok(_) => return Ok((out, l, p)),
            Err(StoreError::Conflict) => backoff(attempt),
            Err(e) => return Err(store_err(store, e)),
        }
    }
    Err(CacheError::Store {
        url: store.url().to_string(),
        message: format!("gave up after {MAX_ATTEMPTS} lost races"),
    })
}

/// The fleet files on a store: as in `meta-state/` (YAML, the same names).
pub const FLEET_FILES: [&str; 3] = [
    crate::launch_params::LAUNCH_PARAMS_FILE,
    crate::instance_state::INSTANCE_STATE_FILE,
    crate::storage_state::STORAGE_STATE_FILE,
];

fn parse_yaml<T: serde::de::DeserializeOwned + Default>(
    store: &Store,
    docs: &Docs,
    key: &str,
) -> Result<T, CacheError> {
    match docs.get(key) {
        Some(Some((_, b))) => {
            let label = format!("{}/{key}", store.url());
            crate::yamlio::from_text(&label, &String::from_utf8_lossy(b))
                .map_err(|m| parse_err(store, key, m))
        }
        _ => Ok(T::default()),
    }
}

fn fleet_of(store: &Store, docs: &Docs) -> Result<FleetRecords, CacheError> {
    Ok(FleetRecords {
        launch: parse_yaml(store, docs, FLEET_FILES[0])?,
        instances: parse_yaml(store, docs, FLEET_FILES[1])?,
        storages: parse_yaml(store, docs, FLEET_FILES[2])?,
    })
}

/// The fleet records on a store, now.
pub(crate) fn read_fleet(store: &Store) -> Result<FleetRecords, CacheError> {
    let keys: Vec<String> = FLEET_FILES.iter().map(|k| k.to_string()).collect();
    fleet_of(store, &read_keys(store, &keys)?)
}

/// The documents of the fleet records that differ from `before`'s.
fn fleet_changes(
    before: &FleetRecords,
    after: &FleetRecords,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, changed: bool, text: Result<String, String>| -> Result<(), String> {
        if changed {
            out.insert(k.to_string(), text?.into_bytes());
        }
        Ok(())
    };
    put(
        FLEET_FILES[0],
        before.launch != after.launch,
        crate::yamlio::to_text(&after.launch),
    )?;
    put(
        FLEET_FILES[1],
        before.instances != after.instances,
        crate::yamlio::to_text(&after.instances),
    )?;
    put(
        FLEET_FILES[2],
        before.storages != after.storages,
        crate::yamlio::to_text(&after.storages),
    )?;
    Ok(out)
}

/// [`transact`] for a fleet operation: `pins.json` (the instance pins and
/// their moves) and the three fleet files, read, changed by `f` and
/// written conditionally; on a lost race read again and apply `f` again
/// (fleet operations are idempotent). A kill between two of the writes
/// leaves the run's journal, which the next recorder pushes again.
pub(crate) fn transact_fleet<T>(
    store: &Store,
    mut f: impl FnMut(&mut Pins, &mut FleetRecords) -> T,
) -> Result<(T, Pins, FleetRecords), CacheError> {
    let mut keys: Vec<String> = FLEET_FILES.iter().map(|k| k.to_string()).collect();
    keys.push(PINS_DOC.to_string());
    for attempt in 0..MAX_ATTEMPTS {
        let docs = read_keys(store, &keys)?;
        let (l, mut p) = merge(store, &docs)?;
        let before = fleet_of(store, &docs)?;
        let mut fleet = before.clone();
        let out = f(&mut p, &mut fleet);
        let mut after = split(&l, &p);
        after.retain(|k, _| k == PINS_DOC);
        after.extend(fleet_changes(&before, &fleet).map_err(|m| parse_err(store, "fleet", m))?);
        match write_changes(store, &docs, &after) {
            Ok(_) => return Ok((out, p, fleet)),
            Err(StoreError::Conflict) => backoff(attempt),
            Err(e) => return Err(store_err(store, e)),
        }
    }
    Err(CacheError::Store {
        url: store.url().to_string(),
        message: format!("gave up after {MAX_ATTEMPTS} lost races"),
    })
}

/// Someone wrote first: back off a little before reading again.
fn backoff(attempt: usize) {
    let jitter = (std::process::id() as u64 * 7 + attempt as u64 * 13) % 50;
    std::thread::sleep(std::time::Duration::from_millis(
        10 + jitter + 10 * attempt.min(20) as u64,
    ));
}

/// What a [`crate::MetaState`] on a store read, so that its whole-file
/// saves are conditional on it.
#[derive(Debug)]
pub struct Remote {
    pub(crate) store: Arc<Store>,
    pub(crate) seen: Mutex<Docs>,
}

impl Remote {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Remote {
            store,
            seen: Mutex::new(Docs::new()),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Docs> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lineage and pins, now (remembered for a later save).
    pub(crate) fn load(&self) -> Result<(Lineage, Pins), CacheError> {
        let docs = read_all(&self.store)?;
        let out = merge(&self.store, &docs)?;
        let mut seen = self.seen();
        seen.retain(|k, _| !(k.starts_with(SERIES_DIR) || k == PINS_DOC || k == LINEAGE_DOC));
        seen.extend(docs);
        Ok(out)
    }

    /// Save a lineage or pins (whichever is given; the other as read),
    /// conditional on what was read.
    pub(crate) fn save(
        &self,
        lineage: Option<&Lineage>,
        pins: Option<&Pins>,
    ) -> Result<bool, CacheError> {
        let needs_read = !self.seen().contains_key(PINS_DOC);
        if needs_read {
            self.load()?;
        }
        let mut seen = self.seen();
        let before: Docs = seen
            .iter()
            .filter(|(k, _)| k.starts_with(SERIES_DIR) || *k == PINS_DOC || *k == LINEAGE_DOC)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (l0, p0) = merge(&self.store, &before)?;
        let after = split(lineage.unwrap_or(&l0), pins.unwrap_or(&p0));
        match write_changes(&self.store, &before, &after) {
            Ok(w) => {
                let changed = !w.is_empty();
                for (k, v, b) in w {
                    seen.insert(k, Some((v, b)));
                }
                Ok(changed)
            }
            Err(StoreError::Conflict) => Err(CacheError::Store {
                url: self.store.url().to_string(),
                message: "another runner changed the records since this command read them; nothing was written, run it again".into(),
            }),
            Err(e) => Err(store_err(&self.store, e)),
        }
    }

    /// A whole file (`releases.yaml`, ...) as text, `None` when absent.
    pub(crate) fn read_text(&self, file: &str) -> Result<Option<String>, CacheError> {
        let got = self
            .store
            .get(file)
            .map_err(|e| store_err(&self.store, e))?;
        let text = got
            .as_ref()
            .map(|(b, _)| String::from_utf8_lossy(b).into_owned());
        self.seen()
            .insert(file.to_string(), got.map(|(b, v)| (v, b)));
        Ok(text)
    }

    /// Write a whole file, conditional on the version read (created when
    /// it was absent). False when unchanged.
    pub(crate) fn write_text(&self, file: &str, text: &str) -> Result<bool, CacheError> {
        if !self.seen().contains_key(file) {
            self.read_text(file)?;
        }
        let mut seen = self.seen();
        let cond = match seen.get(file) {
            Some(Some((v, old))) => {
                if old == text.as_bytes() {
                    return Ok(false);
                }
                Cond::Match(v.clone())
            }
            _ => Cond::Create,
        };
        match self.store.put(file, text.as_bytes().to_vec(), cond) {
            Ok(v) => {
                seen.insert(file.to_string(), Some((v, text.as_bytes().to_vec())));
                Ok(true)
            }
            Err(StoreError::Conflict) => Err(CacheError::Store {
                url: self.store.url().to_string(),
                message: format!("another runner changed {file} since this command read it; nothing was written, run it again"),
            }),
            Err(e) => Err(store_err(&self.store, e)),
        }
    }
}

/// The remote of a root, opened once per process per store.
pub(crate) fn remote_for(root: &Path) -> Result<Option<Arc<Remote>>, String> {
    static REMOTES: OnceLock<Mutex<HashMap<String, Arc<Remote>>>> = OnceLock::new();
    let spec = spec_for(root);
    let Some(store) = open_store(&spec)? else {
        return Ok(None);
    };
    let mut m = REMOTES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    Ok(Some(
        m.entry(spec.to_string())
            .or_insert_with(|| Arc::new(Remote::new(store)))
            .clone(),
    ))
}
