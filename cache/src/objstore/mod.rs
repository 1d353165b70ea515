//! Object stores for shared meta-state: the few operations the
//! records and the leases need, each conditional where it writes.
//!
//! - `s3://bucket/prefix` and `gs://bucket/prefix` (the `store` feature,
//!   default on; a build without it refuses them: [`not_built_in`]) go
//!   through the `object_store` crate (its own light HTTP clients; the AWS SDK stays in
//!   `csis-runtime-aws`). S3 reads the usual environment (`AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` /
//!   `AWS_DEFAULT_REGION`, web identity, container and instance credentials)
//!   and `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT`);
//!   `AWS_PROFILE` is read from `~/.aws/credentials` when no key is in the
//!   environment.
//! - `file:///path` is a directory: a create is a hard link of a complete
//!   temp file (fails when the name exists), an update holds an exclusive
//!   `flock` on `<dir>/.csis-store.lock` while it compares the version (the
//!   blake3 of the content) and renames.
//!
//! Every write is [`Cond::Create`] (If-None-Match: *) or [`Cond::Match`]
//! (If-Match: etag); a lost race is [`StoreError::Conflict`], which callers
//! answer by reading again and retrying. A request to an object store that
//! fails on the way is sent again with backoff, writes included (a retried
//! conditional write that finds its own bytes there succeeded the first
//! time). Every request is counted
//! ([`Store::requests`]) for `BENCHMARKS.md`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use csis_schema::model::MetaStateSpec;

#[cfg(feature = "store")]
mod object;

/// The stores this build opens, for `csis --version`: `local` and
/// `file://` always, `s3://` and `gs://` with the `store` feature.
pub const BUILT_IN: &[&str] = if cfg!(feature = "store") {
    &["local", "file", "s3", "gs"]
} else {
    &["local", "file"]
};

/// What a build without the `store` feature says of a store it cannot
/// open (`None` when it can): the load refuses the tree's `meta_state:`
/// with it, and [`Store::open`] a `--meta-state` URL.
pub fn not_built_in(spec: &MetaStateSpec) -> Option<String> {
    let scheme = match spec {
        MetaStateSpec::S3 { .. } => "s3",
        MetaStateSpec::Gs { .. } => "gs",
        MetaStateSpec::Local | MetaStateSpec::File { .. } => return None,
    };
    (!BUILT_IN.contains(&scheme)).then(|| {
        format!(
            "this csis was built without the `store` feature, which {scheme}:// stores need \
             (install it with `cargo install --path . --features store`, or the default features)"
        )
    })
}

/// What a conditional write must find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// No object under the key (If-None-Match: *).
    Create,
    /// The object at this version (If-Match).
    Match(Version),
}

/// The version of an object as its store names it (an ETag, and the
/// store's version id where it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The condition did not hold: someone else wrote first.
    #[error("conditional write lost a race")]
    Conflict,
    #[error("{0}")]
    Other(String),
}

enum Backend {
    /// `s3://`, `gs://`: the `object_store` crate's clients (the `store`
    /// feature).
    #[cfg(feature = "store")]
    Object(object::Object),
    Dir(PathBuf),
}

/// One meta-state store: a backend and the key prefix under it.
pub struct Store {
    backend: Backend,
    prefix: String,
    url: String,
    requests: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.url)
    }
}

fn other(e: impl std::fmt::Display) -> StoreError {
    StoreError::Other(e.to_string())
}

impl Store {
    /// Open the store a spec names (`None` for `local`), with the
    /// process's environment (endpoint, region, credentials).
    pub fn open(spec: &MetaStateSpec) -> Result<Option<Store>, StoreError> {
        Store::open_with(spec, &|k| std::env::var(k).ok())
    }

    /// [`Store::open`] reading the endpoint, the region and the keys from
    /// `env` instead (a test process talks to its moto without setting
    /// its own environment, which every other test would inherit).
    pub fn open_with(
        spec: &MetaStateSpec,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Store>, StoreError> {
        let url = spec.to_string();
        let (backend, prefix) = match spec {
            MetaStateSpec::Local => return Ok(None),
            MetaStateSpec::File { path } => {
                std::fs::create_dir_all(path).map_err(|e| other(format!("{path}: {e}")))?;
                (Backend::Dir(PathBuf::from(path)), String::new())
            }
            #[cfg(feature = "store")]
            MetaStateSpec::S3 { bucket, prefix } => (
                Backend::Object(object::Object::s3(bucket, env)?),
                prefix.clone(),
            ),
            #[cfg(feature = "store")]
            MetaStateSpec::Gs { bucket, prefix } => {
                (Backend::Object(object::Object::gs(bucket)?), prefix.clone())
            }
            #[cfg(not(feature = "store"))]
            MetaStateSpec::S3 { .. } | MetaStateSpec::Gs { .. } => {
                let _ = env;
                return Err(other(not_built_in(spec).expect("an object store")));
            }
        };
        Ok(Some(Store {
            backend,
            prefix: prefix.trim_matches('/').to_string(),
            url,
            requests: AtomicU64::new(0),
        }))
    }

    /// The URL it was opened from (`s3://bucket/prefix`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests made so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn full(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The object under `key` and its version, `None` when absent.
    pub fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Version)>, StoreError> {
        Ok(self.get_modified(key)?.map(|(b, v, _)| (b, v)))
    }

    /// [`Store::get`], with when the store itself last wrote the object
    /// (its `Last-Modified`; a `file://` store's mtime): the store's clock,
    /// not the writer's.
    #[allow(clippy::type_complexity)]
    pub fn get_modified(
        &self,
        key: &str,
    ) -> Result<Option<(Vec<u8>, Version, Option<SystemTime>)>, StoreError> {
        self.retried(|| self.get_once(key))
    }

    #[allow(clippy::type_complexity)]
    fn get_once(
        &self,
        key: &str,
    ) -> Result<Option<(Vec<u8>, Version, Option<SystemTime>)>, StoreError> {
        self.count();
        let full = self.full(key);
        match &self.backend {
            Backend::Dir(d) => {
                let modified = std::fs::metadata(d.join(&full))
                    .and_then(|m| m.modified())
                    .ok();
                Ok(dir_get(d, &full)?.map(|(b, v)| (b, v, modified)))
            }
            #[cfg(feature = "store")]
            Backend::Object(o) => o.get(full),
        }
    }

    /// Write `bytes` under `key` if `cond` holds; the new version. On an
    /// object store a request that failed on the way (a dropped
    /// connection, a timeout) is sent again with backoff ([`RETRIES`]); a
    /// retry that finds the condition broken reads the object back, and
    /// when it holds exactly these bytes the earlier attempt did succeed
    /// (its answer was lost): the write is ours, not a conflict.
    pub fn put(&self, key: &str, bytes: Vec<u8>, cond: Cond) -> Result<Version, StoreError> {
        if matches!(self.backend, Backend::Dir(_)) {
            return self.put_once(key, bytes, cond);
        }
        let mut attempt = 0;
        loop {
            match self.put_once(key, bytes.clone(), cond.clone()) {
                Err(StoreError::Other(_)) if attempt < RETRIES => {
                    backoff(attempt);
                    attempt += 1;
                }
                Err(StoreError::Conflict) if attempt > 0 => {
                    return match self.get(key)? {
                        Some((b, v)) if b == bytes => Ok(v),
                        _ => Err(StoreError::Conflict),
                    };
                }
                r => return r,
            }
        }
    }

    /// A request retried on an object store: `f` again with backoff while
    /// it fails on the way (idempotent requests only: reads, delete).
    fn retried<T>(&self, f: impl Fn() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut attempt = 0;
        loop {
            match f() {
                Err(StoreError::Other(_))
                    if attempt < RETRIES && !matches!(self.backend, Backend::Dir(_)) =>
                {
                    backoff(attempt);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    fn put_once(&self, key: &str, bytes: Vec<u8>, cond: Cond) -> Result<Version, StoreError> {
        self.count();
        let full = self.full(key);
        match &self.backend {
            Backend::Dir(d) => dir_put(d, &full, &bytes, &cond),
            #[cfg(feature = "store")]
            Backend::Object(o) => o.put(full, bytes, cond),
        }
    }

    /// Remove `key` (absent is fine; retried on an object store).
    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.retried(|| self.delete_once(key))
    }

    fn delete_once(&self, key: &str) -> Result<(), StoreError> {
        self.count();
        let full = self.full(key);
        match &self.backend {
            Backend::Dir(d) => match std::fs::remove_file(d.join(&full)) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(other(e)),
            },
            #[cfg(feature = "store")]
            Backend::Object(o) => o.delete(full),
        }
    }

    /// The keys under `dir/` (relative to the prefix, `dir/name`), sorted
    /// (retried on an object store).
    pub fn list(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        self.retried(|| self.list_once(dir))
    }

    fn list_once(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        self.count();
        let full = self.full(dir);
        let strip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        let mut keys = match &self.backend {
            Backend::Dir(d) => {
                let mut out = Vec::new();
                match std::fs::read_dir(d.join(&full)) {
                    Ok(rd) => {
                        for e in rd.flatten() {
                            let name = e.file_name().to_string_lossy().into_owned();
                            if name.starts_with('.') || !e.file_type().is_ok_and(|t| t.is_file()) {
                                continue;
                            }
                            out.push(format!("{full}/{name}"));
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(other(e)),
                }
                out
            }
            #[cfg(feature = "store")]
            Backend::Object(o) => o.list(full)?,
        };
        for k in keys.iter_mut() {
            *k = k[strip.min(k.len())..].to_string();
        }
        keys.sort();
        Ok(keys)
    }
}

/// How many times a request to an object store that failed on the way is
/// sent again (after 100 ms, 200 ms, 400 ms, ...).
pub const RETRIES: u32 = 6;

fn backoff(attempt: u32) {
    std::thread::sleep(std::time::Duration::from_millis(100 << attempt.min(6)));
}

// ---- file:// -----------------------------------------------------------------

fn dir_version(bytes: &[u8]) -> Version {
    Version {
        e_tag: Some(blake3::hash(bytes).to_hex().to_string()),
        version: None,
    }
}

fn dir_get(d: &Path, key: &str) -> Result<Option<(Vec<u8>, Version)>, StoreError> {
    match std::fs::read(d.join(key)) {
        Ok(b) => {
            let v = dir_version(&b);
            Ok(Some((b, v)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(other(format!("{}: {e}", d.join(key).display()))),
    }
}

fn dir_put(d: &Path, key: &str, bytes: &[u8], cond: &Cond) -> Result<Version, StoreError> {
    use std::io::Write;
    let path = d.join(key);
    let dir = path.parent().unwrap_or(d).to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| other(format!("{}: {e}", dir.display())))?;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".tmp.{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |e: std::io::Error| other(format!("{}: {e}", path.display()));
    {
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    let out = match cond {
        Cond::Create => match std::fs::hard_link(&tmp, &path) {
            Ok(()) => Ok(dir_version(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(StoreError::Conflict),
            Err(e) => Err(io(e)),
        },
        Cond::Match(v) => {
            let lock_path = d.join(".csis-store.lock");
            let lock = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(io)?;
            fs4::FileExt::lock(&lock).map_err(io)?;
            let now = std::fs::read(&path).ok().map(|b| dir_version(&b));
            let r = if now.as_ref() != Some(v) {
                Err(StoreError::Conflict)
            } else {
                std::fs::rename(&tmp, &path)
                    .map(|()| dir_version(bytes))
                    .map_err(io)
            };
            let _ = fs4::FileExt::unlock(&lock);
            r
        }
    };
    let _ = std::fs::remove_file(&tmp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_refused_exactly_when_this_build_lacks_its_scheme() {
        for (url, scheme) in [
            ("local", "local"),
            ("file:///var/tmp/records", "file"),
            ("s3://team-bucket/records", "s3"),
            ("gs://team-bucket", "gs"),
        ] {
            let spec = MetaStateSpec::parse(url).unwrap();
            let refused = not_built_in(&spec);
            assert_eq!(refused.is_some(), !BUILT_IN.contains(&scheme), "{url}");
            if let Some(m) = refused {
                assert!(m.contains("`store` feature") && m.contains(scheme), "{m}");
            }
        }
        assert_eq!(BUILT_IN.contains(&"s3"), cfg!(feature = "store"));
    }
}
