//! Leases: instead of one tree lock, a build on a shared store
//! takes a lease per (series, runtime) it bakes, disposes or releases.
//!
//! A lease is the object `leases/<series>@<runtime>.json` holding its
//! owner (run id), host, pid, when it expires and the builds it covers (the
//! parents its bakes stand on). It is created with If-None-Match (the one
//! holder), renewed with If-Match on its version every third of its term
//! while the build runs, and deleted when the build ends. A lease whose
//! term passed (its owner died, or hung) is taken over with If-Match on the
//! version read, and the taker says so. The term is
//! [`lease_seconds`]: `CSIS_LEASE_SECONDS` (default 120). A lease never
//! lasts longer than one term after the store last wrote it (its own
//! `Last-Modified`, not the writer's clock), and a lease whose holder is a
//! process of this host that is gone (a `kill -9`) is taken over at once.
//!
//! Retention never disposes a build that another runner's live lease
//! covers ([`covered_by_others`]). Another runner's: any lease but one of
//! this run id from this process's host and pid (two runners that start in
//! the same microsecond share a run id).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::objstore::{Cond, Store, StoreError, Version};
use crate::remote::segment;
use crate::CacheError;

pub const LEASE_DIR: &str = "leases";
/// The environment variable setting a lease's term in seconds.
pub const LEASE_ENV: &str = "CSIS_LEASE_SECONDS";

/// A lease's term: `CSIS_LEASE_SECONDS`, default 120 s, at least 1.
pub fn lease_seconds() -> f64 {
    std::env::var(LEASE_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .unwrap_or(120.0)
        .max(1.0)
}

/// The object of a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseDoc {
    pub series: String,
    pub runtime: String,
    /// The run id of the build holding it.
    pub owner: String,
    pub host: String,
    pub pid: u32,
    /// Seconds since the epoch.
    pub acquired: f64,
    pub expires: f64,
    /// Builds this run stands on (parents of its bakes): not disposed by others.
    #[serde(default)]
    pub covers: Vec<String>,
}

impl LeaseDoc {
    pub fn holder(&self) -> String {
        format!("{}:{} (run {})", self.host, self.pid, self.owner)
    }
}

/// `leases/<series>@<runtime>.json`
pub fn lease_key(series: &str, runtime: &str) -> String {
    format!(
        "{LEASE_DIR}/{}.json",
        segment(&format!("{series}@{runtime}"))
    )
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// This machine's name (`/etc/hostname`, `HOSTNAME`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// When a lease ends: the expiry its writer wrote, but never later than
/// one term after the store last wrote it (`modified`, the store's own
/// clock): a writer whose clock runs fast, or a bad write, cannot hold a
/// lease past its term.
pub fn expires_at(written: f64, modified: Option<SystemTime>, term: f64) -> f64 {
    match modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok()) {
        Some(m) => written.min(m.as_secs_f64() + term),
        None => written,
    }
}

/// Is the lease's holder a process of this host that is no longer
/// running? The rule bake machines follow (`csis_runtime::owner`):
/// another host's holder, or one this host cannot tell, is not.
fn holder_gone(doc: &LeaseDoc, this_host: &str) -> bool {
    if doc.host != this_host || doc.pid == 0 || doc.pid == std::process::id() {
        return false;
    }
    let proc = std::path::Path::new("/proc");
    proc.join("self").exists() && !proc.join(doc.pid.to_string()).exists()
}

/// What taking the leases met (typed: the binary words it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LeaseEvent {
    /// Held by another live runner: waiting.
    Waiting { key: String, holder: String },
    /// Its term had passed: taken over.
    TakenOver {
        key: String,
        holder: String,
        expired: f64,
    },
    /// Its holder was a process of this host that is gone (a `kill -9`):
    /// taken over at once.
    TakenFromDead { key: String, holder: String },
}

/// Leases held by this process; renewed by a thread while alive, deleted
/// when dropped.
pub struct Leases {
    store: Arc<Store>,
    owner: String,
    host: String,
    term: f64,
    held: Arc<Mutex<BTreeMap<String, (LeaseDoc, Version)>>>,
    stop: Arc<AtomicBool>,
    renewer: Option<std::thread::JoinHandle<()>>,
    /// Renewals that found the lease taken by someone else.
    lost: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for Leases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Leases({:?})", self.keys())
    }
}

fn err(store: &Store, e: StoreError) -> CacheError {
    CacheError::Store {
        url: store.url().to_string(),
        message: e.to_string(),
    }
}

impl Leases {
    /// No lease yet; `owner` is the run id.
    pub fn new(store: Arc<Store>, owner: &str) -> Leases {
        let term = lease_seconds();
        let held: Arc<Mutex<BTreeMap<String, (LeaseDoc, Version)>>> = Default::default();
        let stop = Arc::new(AtomicBool::new(false));
        let lost: Arc<Mutex<Vec<String>>> = Default::default();
        let renewer = {
            let (store, held, stop, lost) =
                (store.clone(), held.clone(), stop.clone(), lost.clone());
            std::thread::Builder::new()
                .name("csis-lease".into())
                .spawn(move || renew_loop(&store, &held, &stop, &lost, term))
                .ok()
        };
        Leases {
            store,
            owner: owner.to_string(),
            host: host_name(),
            term,
            held,
            stop,
            renewer,
            lost,
        }
    }

    /// The keys held (`series@runtime`).
    pub fn keys(&self) -> Vec<(String, String)> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|(d, _)| (d.series.clone(), d.runtime.clone()))
            .collect()
    }

    pub fn holds(&self, series: &str, runtime: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&lease_key(series, runtime))
    }

    /// Leases a renewal found taken by another runner (our term had passed).
    pub fn lost(&self) -> Vec<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn doc(&self, series: &str, runtime: &str, covers: &[String]) -> LeaseDoc {
        let t = now();
        LeaseDoc {
            series: series.into(),
            runtime: runtime.into(),
            owner: self.owner.clone(),
            host: self.host.clone(),
            pid: std::process::id(),
            acquired: t,
            expires: t + self.term,
            covers: covers.to_vec(),
        }
    }

    /// Take the lease of each `(series, runtime)` (in sorted order, so two
    /// runners never wait on each other in a cycle), covering `covers`.
    /// `wait = false`: [`CacheError::Locked`] at the first one another live
    /// runner holds (and the ones taken so far are kept: drop to release).
    /// Returns what happened on the way (waits, take-overs).
    pub fn acquire(
        &self,
        keys: &[(String, String)],
        covers: &BTreeMap<(String, String), Vec<String>>,
        wait: bool,
        on_event: &dyn Fn(&LeaseEvent),
    ) -> Result<Vec<LeaseEvent>, CacheError> {
        let mut keys = keys.to_vec();
        keys.sort();
        keys.dedup();
        self.create_at_once(&keys, covers);
        let mut events = Vec::new();
        let poll = Duration::from_millis(
            std::env::var("CSIS_LEASE_POLL_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(250),
        );
        for (series, runtime) in keys {
            let key = lease_key(&series, &runtime);
            if self
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&key)
            {
                continue;
            }
            let cov = covers
                .get(&(series.clone(), runtime.clone()))
                .cloned()
                .unwrap_or_default();
            let mut told_wait = false;
            loop {
                let doc = self.doc(&series, &runtime, &cov);
                let bytes = serde_json::to_vec(&doc).expect("lease serializes");
                match self.store.put(&key, bytes.clone(), Cond::Create) {
                    Ok(v) => {
                        self.held
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key.clone(), (doc, v));
                        break;
                    }
                    Err(StoreError::Conflict) => {}
                    Err(e) => return Err(err(&self.store, e)),
                }
                // Held: by whom, until when?
                let Some((b, v, modified)) = self
                    .store
                    .get_modified(&key)
                    .map_err(|e| err(&self.store, e))?
                else {
                    continue; // released meanwhile: try again
                };
                let other: Option<LeaseDoc> = serde_json::from_slice(&b).ok();
                let (holder, expires) = other
                    .as_ref()
                    .map(|o| (o.holder(), expires_at(o.expires, modified, self.term)))
                    .unwrap_or_else(|| ("an unreadable lease".into(), 0.0));
                let dead = other.as_ref().is_some_and(|o| holder_gone(o, &self.host));
                if dead || expires < now() {
                    match self.store.put(&key, bytes, Cond::Match(v)) {
                        Ok(v) => {
                            let name = format!("{series}@{runtime}");
                            let e = if dead {
                                LeaseEvent::TakenFromDead { key: name, holder }
                            } else {
                                LeaseEvent::TakenOver {
                                    key: name,
                                    holder,
                                    expired: expires,
                                }
                            };
                            on_event(&e);
                            events.push(e);
                            self.held
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .insert(key.clone(), (doc, v));
                            break;
                        }
                        Err(StoreError::Conflict) => continue, // another taker won
                        Err(e) => return Err(err(&self.store, e)),
                    }
                }
                if !wait {
                    return Err(CacheError::Locked {
                        path: std::path::PathBuf::from(format!("{}/{key}", self.store.url())),
                        holder: format!("lease of {series}@{runtime} held by {holder}"),
                    });
                }
                if !told_wait {
                    let e = LeaseEvent::Waiting {
                        key: format!("{series}@{runtime}"),
                        holder,
                    };
                    on_event(&e);
                    events.push(e);
                    told_wait = true;
                }
                std::thread::sleep(poll);
            }
        }
        Ok(events)
    }

    /// The first pass of [`Leases::acquire`]: create every lease not held
    /// yet at once ([`crate::remote::in_lanes`]), a create
    /// being unconditional on anything but the key's absence. The leases
    /// up to the first one that is not free are kept; any taken after it
    /// are let go at once, so that this runner, when it waits, waits
    /// holding only a prefix of the sorted keys (two runners never wait on
    /// each other in a cycle). The sorted pass then goes on from there.
    fn create_at_once(
        &self,
        keys: &[(String, String)],
        covers: &BTreeMap<(String, String), Vec<String>>,
    ) {
        let free: Vec<&(String, String)> = {
            let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            (keys.iter())
                .filter(|(s, r)| !held.contains_key(&lease_key(s, r)))
                .collect()
        };
        if free.len() < 2 {
            return; // nothing to overlap: the sorted pass does it
        }
        let made = crate::remote::in_lanes(&free, |(series, runtime)| {
            let cov = (covers.get(&(series.clone(), runtime.clone())).cloned()).unwrap_or_default();
            let doc = self.doc(series, runtime, &cov);
            let bytes = serde_json::to_vec(&doc).expect("lease serializes");
            let v = self
                .store
                .put(&lease_key(series, runtime), bytes, Cond::Create);
            v.ok().map(|v| (doc, v))
        });
        let first_taken = made.iter().position(Option::is_none);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for (i, m) in made.into_iter().enumerate() {
            let Some((doc, v)) = m else { continue };
            let key = lease_key(&doc.series, &doc.runtime);
            if first_taken.is_some_and(|f| i > f) {
                // ours for a moment, out of order: let it go again
                let _ = self.store.delete(&key);
            } else {
                held.insert(key, (doc, v));
            }
        }
    }

    /// Let every lease go (also done on drop).
    pub fn release_all(&self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()));
        for (key, (doc, _)) in held {
            // Delete only our own: a lease taken over after our term passed
            // is the taker's now.
            if let Ok(Some((b, _))) = self.store.get(&key) {
                if serde_json::from_slice::<LeaseDoc>(&b)
                    .is_ok_and(|d| d.owner == doc.owner && d.pid == doc.pid)
                {
                    let _ = self.store.delete(&key);
                }
            }
        }
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.renewer.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.release_all();
    }
}

fn renew_loop(
    store: &Store,
    held: &Mutex<BTreeMap<String, (LeaseDoc, Version)>>,
    stop: &AtomicBool,
    lost: &Mutex<Vec<String>>,
    term: f64,
) {
    let every = Duration::from_secs_f64((term / 3.0).max(0.2));
    loop {
        std::thread::park_timeout(every);
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let snapshot: Vec<(String, LeaseDoc, Version)> = held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, (d, v))| (k.clone(), d.clone(), v.clone()))
            .collect();
        for (key, mut doc, v) in snapshot {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            doc.expires = now() + term;
            let bytes = serde_json::to_vec(&doc).expect("lease serializes");
            match store.put(&key, bytes, Cond::Match(v)) {
                Ok(v) => {
                    if let Some(e) = held.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&key) {
                        *e = (doc, v);
                    }
                }
                Err(StoreError::Conflict) => {
                    held.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    lost.lock().unwrap_or_else(|p| p.into_inner()).push(key);
                }
                Err(_) => {} // try again next time
            }
        }
    }
}

/// Every lease on the store (key -> lease), expired ones included; each
/// one's `expires` bounded by its term from the store's `Last-Modified`
/// ([`expires_at`]).
pub fn list(store: &Store) -> Result<BTreeMap<String, LeaseDoc>, CacheError> {
    let mut out = BTreeMap::new();
    let term = lease_seconds();
    for k in store.list(LEASE_DIR).map_err(|e| err(store, e))? {
        if let Some((b, _, modified)) = store.get_modified(&k).map_err(|e| err(store, e))? {
            if let Ok(mut d) = serde_json::from_slice::<LeaseDoc>(&b) {
                d.expires = expires_at(d.expires, modified, term);
                out.insert(k, d);
            }
        }
    }
    Ok(out)
}

/// Run `owner` of this process: a lease is its own with its run id and this
/// process's host and pid (what [`Leases`] writes). A run id is a start time to the
/// microsecond: two runners that start in the same one hold leases of the
/// same run id, and each must still see the other's as another's.
struct Own {
    run: String,
    host: String,
    pid: u32,
}

impl Own {
    /// Run `run` of this process (its host read once).
    fn of(run: &str) -> Own {
        Own {
            run: run.to_string(),
            host: host_name(),
            pid: std::process::id(),
        }
    }
    fn holds(&self, d: &LeaseDoc) -> bool {
        d.owner == self.run && d.pid == self.pid && d.host == self.host
    }
}

/// Builds that a live lease of another runner (not run `owner` of this
/// process) covers: build id -> holder. Retention keeps them.
pub fn covered_by_others(
    store: &Store,
    owner: &str,
) -> Result<BTreeMap<String, String>, CacheError> {
    let (t, own) = (now(), Own::of(owner));
    let mut out = BTreeMap::new();
    for d in list(store)?.into_values() {
        if own.holds(&d) || d.expires < t {
            continue;
        }
        for b in &d.covers {
            out.insert(b.clone(), d.holder());
        }
    }
    Ok(out)
}

/// [`covered_by_others`], and every build of a (series, runtime) another
/// live runner holds the lease of (it may be baking, releasing or
/// disposing there): what `csis dispose` must not touch.
pub fn protected_from(
    store: &Store,
    owner: &str,
    lineage: &crate::Lineage,
) -> Result<BTreeMap<String, String>, CacheError> {
    let (t, own) = (now(), Own::of(owner));
    let mut out = BTreeMap::new();
    for d in list(store)?.into_values() {
        if own.holds(&d) || d.expires < t {
            continue;
        }
        for b in &d.covers {
            out.insert(b.clone(), d.holder());
        }
        for b in &lineage.builds {
            if b.series == d.series && b.runtime.as_deref() == Some(d.runtime.as_str()) {
                out.insert(b.build_id.clone(), d.holder());
            }
        }
    }
    Ok(out)
}
