//! Object stores for shared meta-state: the few operations the
//! records and the leases need, each conditional where it writes.
//!
//! - `s3://bucket/prefix` and `gs://bucket/prefix` go through the
//!   `object_store` crate (its own light HTTP clients; the AWS SDK stays in
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
use std::sync::Arc;
use std::time::SystemTime;

use csis_schema::model::MetaStateSpec;

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
    Object {
        store: Arc<dyn object_store::ObjectStore>,
        rt: tokio::runtime::Runtime,
    },
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
            MetaStateSpec::S3 { bucket, prefix } => {
                tls_provider();
                let mut b = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
                let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
                    .iter()
                    .find_map(|k| env(k).filter(|v| !v.is_empty()));
                if let Some(ep) = endpoint {
                    if ep.starts_with("http://") {
                        b = b.with_allow_http(true);
                    }
                    b = b.with_endpoint(ep);
                }
                if let Some(r) = env("AWS_REGION") {
                    b = b.with_region(r);
                } else if env("AWS_DEFAULT_REGION").is_none() {
                    b = b.with_region("us-east-1");
                }
                if let (Some(id), Some(secret)) =
                    (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
                {
                    b = b.with_access_key_id(id).with_secret_access_key(secret);
                } else if env("AWS_ACCESS_KEY_ID").is_none() {
                    if let Some((id, secret, token)) = profile_credentials() {
                        b = b.with_access_key_id(id).with_secret_access_key(secret);
                        if let Some(t) = token {
                            b = b.with_token(t);
                        }
                    }
                }
                let s3 = b.build().map_err(other)?;
                (object(Arc::new(s3))?, prefix.clone())
            }
            MetaStateSpec::Gs { bucket, prefix } => {
                tls_provider();
                let gs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(bucket)
                    .build()
                    .map_err(other)?;
                (object(Arc::new(gs))?, prefix.clone())
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
            Backend::Object { store, rt } => {
                let store = store.clone();
                run(rt, async move {
                    let p = object_store::path::Path::from(full);
                    use object_store::ObjectStoreExt;
                    match store.get(&p).await {
                        Ok(r) => {
                            let v = Version {
                                e_tag: r.meta.e_tag.clone(),
                                version: r.meta.version.clone(),
                            };
                            let modified = SystemTime::from(r.meta.last_modified);
                            let bytes = r.bytes().await.map_err(other)?;
                            Ok(Some((bytes.to_vec(), v, Some(modified))))
                        }
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(other(e)),
                    }
                })
            }
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
                    if attempt < RETRIES && matches!(self.backend, Backend::Object { .. }) =>
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
            Backend::Object { store, rt } => {
                let store = store.clone();
                run(rt, async move {
                    use object_store::{PutMode, PutOptions, UpdateVersion};
                    let p = object_store::path::Path::from(full);
                    let mode = match cond {
                        Cond::Create => PutMode::Create,
                        Cond::Match(v) => PutMode::Update(UpdateVersion {
                            e_tag: v.e_tag,
                            version: v.version,
                        }),
                    };
                    let opts = PutOptions {
                        mode,
                        ..Default::default()
                    };
                    match store.put_opts(&p, bytes.into(), opts).await {
                        Ok(r) => Ok(Version {
                            e_tag: r.e_tag,
                            version: r.version,
                        }),
                        Err(object_store::Error::AlreadyExists { .. })
                        | Err(object_store::Error::Precondition { .. }) => {
                            Err(StoreError::Conflict)
                        }
                        Err(e) => Err(other(e)),
                    }
                })
            }
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
            Backend::Object { store, rt } => {
                let store = store.clone();
                run(rt, async move {
                    let p = object_store::path::Path::from(full);
                    use object_store::ObjectStoreExt;
                    match store.delete(&p).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(other(e)),
                    }
                })
            }
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
            Backend::Object { store, rt } => {
                let store = store.clone();
                run(rt, async move {
                    use futures_util::TryStreamExt;
                    let p = object_store::path::Path::from(full);
                    let metas: Vec<object_store::ObjectMeta> =
                        store.list(Some(&p)).try_collect().await.map_err(other)?;
                    Ok(metas.into_iter().map(|m| m.location.to_string()).collect())
                })?
            }
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

fn object(store: Arc<dyn object_store::ObjectStore>) -> Result<Backend, StoreError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("csis-store")
        .enable_all()
        .build()
        .map_err(other)?;
    Ok(Backend::Object { store, rt })
}

/// Run `fut` on the store's own runtime and wait for it: callable from
/// plain threads and from inside another tokio runtime alike.
fn run<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    fut: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| StoreError::Other("the store's runtime stopped".into()))?
}

/// `AWS_PROFILE` (default `default`) from `~/.aws/credentials` (or
/// `AWS_SHARED_CREDENTIALS_FILE`): access key, secret, session token.
fn profile_credentials() -> Option<(String, String, Option<String>)> {
    let file = std::env::var("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .ok()
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| Path::new(&h).join(".aws/credentials"))
        })?;
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let text = std::fs::read_to_string(file).ok()?;
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().to_string();
            match k.trim() {
                "aws_access_key_id" => id = Some(v),
                "aws_secret_access_key" => secret = Some(v),
                "aws_session_token" => token = Some(v),
                _ => {}
            }
        }
    }
    Some((id?, secret?, token))
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

/// The TLS of the S3 and GCS clients: rustls on ring, installed as the
/// process's provider unless one is already (reqwest is built without
/// one of its own: its default, aws-lc-rs, is a long C build).
fn tls_provider() {
    // a provider already installed (by this or another crate) is kept
    let _ = rustls::crypto::ring::default_provider().install_default();
}
