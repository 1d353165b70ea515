//! The `s3://` and `gs://` backends: the `object_store` crate's own light
//! HTTP clients on a runtime of the store's (the `store` feature). One
//! request each; [`super::Store`] counts and retries them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use object_store::ObjectStoreExt;

use super::{other, Cond, StoreError, Version};

pub(super) struct Object {
    store: Arc<dyn object_store::ObjectStore>,
    rt: tokio::runtime::Runtime,
}

impl Object {
    /// An S3 bucket, with the endpoint, region and keys from `env` (and
    /// `AWS_PROFILE` from `~/.aws/credentials` when no key is there).
    pub(super) fn s3(
        bucket: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Object, StoreError> {
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
        if let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
        } else if env("AWS_ACCESS_KEY_ID").is_none() {
            if let Some((id, secret, token)) = profile_credentials() {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(t) = token {
                    b = b.with_token(t);
                }
            }
        }
        Object::new(Arc::new(b.build().map_err(other)?))
    }

    /// A GCS bucket, with the credentials of the environment.
    pub(super) fn gs(bucket: &str) -> Result<Object, StoreError> {
        tls_provider();
        let gs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(other)?;
        Object::new(Arc::new(gs))
    }

    fn new(store: Arc<dyn object_store::ObjectStore>) -> Result<Object, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("csis-store")
            .enable_all()
            .build()
            .map_err(other)?;
        Ok(Object { store, rt })
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn get(
        &self,
        full: String,
    ) -> Result<Option<(Vec<u8>, Version, Option<SystemTime>)>, StoreError> {
        let store = self.store.clone();
        self.run(async move {
            let p = object_store::path::Path::from(full);
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

    pub(super) fn put(
        &self,
        full: String,
        bytes: Vec<u8>,
        cond: Cond,
    ) -> Result<Version, StoreError> {
        let store = self.store.clone();
        self.run(async move {
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
                | Err(object_store::Error::Precondition { .. }) => Err(StoreError::Conflict),
                Err(e) => Err(other(e)),
            }
        })
    }

    pub(super) fn delete(&self, full: String) -> Result<(), StoreError> {
        let store = self.store.clone();
        self.run(async move {
            let p = object_store::path::Path::from(full);
            match store.delete(&p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(other(e)),
            }
        })
    }

    /// The keys under `full` as the store names them (with the prefix).
    pub(super) fn list(&self, full: String) -> Result<Vec<String>, StoreError> {
        let store = self.store.clone();
        self.run(async move {
            use futures_util::TryStreamExt;
            let p = object_store::path::Path::from(full);
            let metas: Vec<object_store::ObjectMeta> =
                store.list(Some(&p)).try_collect().await.map_err(other)?;
            Ok(metas.into_iter().map(|m| m.location.to_string()).collect())
        })
    }

    /// Run `fut` on the store's own runtime and wait for it: callable from
    /// plain threads and from inside another tokio runtime alike.
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| StoreError::Other("the store's runtime stopped".into()))?
    }
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

/// The TLS of the S3 and GCS clients: rustls on ring, installed as the
/// process's provider unless one is already (reqwest is built without
/// one of its own: its default, aws-lc-rs, is a long C build).
fn tls_provider() {
    // a provider already installed (by this or another crate) is kept
    let _ = rustls::crypto::ring::default_provider().install_default();
}
