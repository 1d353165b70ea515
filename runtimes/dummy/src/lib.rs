//! csis-runtime-dummy: the `type: dummy` runtime.
//!
//! **It exists for csis's own tests and benchmarks, never in place of a real
//! runtime.** It "bakes" by waiting a configured time and recording a build
//! in a small JSON store; it talks to no daemon and no cloud and spawns no
//! process. It answers the same hooks as the real runtimes (resolve, bake,
//! retag, query_images, image_users, dispose, release), so the engine, the
//! scheduler, the records and the CLI can be exercised end to end.
//!
//! Knobs:
//! - bake time: `bake_seconds` on the runtime entry (0 by default), and per
//!   series (the image's `config: {dummy_bake_seconds: N}`), see
//!   [`DummyConfig::series_seconds`];
//! - failures: [`DummyConfig::fail_series`], plus the environment variable
//!   `CSIS_DUMMY_FAIL=series1,series2` (a series name, `series@runtime`, or
//!   `*`), read when the runtime is constructed; an entry `release:series`
//!   makes the release mark of that series fail instead, `test:series`
//!   makes every command in its post-bake test machines exit 1;
//! - post-bake tests: a test machine is a name held in memory; a command
//!   "run" in it exits 0 with no output (the dummy runs nothing), unless
//!   `test:series` says otherwise;
//! - the store: `.csis/dummy/<runtime>.json` (counter, images with their
//!   tags, releases), so it behaves like an image store across invocations;
//!   `store: PATH` on the runtime entry puts it elsewhere (relative to the
//!   tree, or absolute), so separate checkouts share one simulated runtime
//!   the way runners share a cloud. Every read and change holds an
//!   exclusive lock of `<runtime>.lock`, so concurrent processes never lose
//!   each other's changes. The store is the module `store`; this file is
//!   the configuration and the hooks.
//!
//! Build ids are `dummy-<first 12 hex of csis_fingerprint>-<counter>`, the
//! counter being per store, so two bakes never share an id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use csis_runtime::{
    BakeOutcome, BakeParent, BakeRequest, ImageFacts, Inventory, PreflightLine, ResolveRequest,
    ResolvedImage, Result, Runtime, RuntimeError,
};

mod store;

use csis_schema::tags;
use store::{on_image, Mem, Op};
pub use store::{read_store, store_path, BakeAttempt, DummyStore, StoredImage};

/// The environment variable listing series whose bakes fail.
pub const FAIL_ENV: &str = "CSIS_DUMMY_FAIL";

/// How a dummy runtime behaves.
#[derive(Debug, Clone, Default)]
pub struct DummyConfig {
    /// The runtime entry's name.
    pub name: String,
    /// Seconds every bake takes unless its series says otherwise.
    pub bake_seconds: f64,
    /// Per-series bake time (from the image's `config.dummy_bake_seconds`).
    pub series_seconds: BTreeMap<String, f64>,
    /// Series (or `series@runtime`, or `*`) whose bakes fail.
    pub fail_series: BTreeSet<String>,
    /// Where the store lives (`<tree>/.csis/dummy`); the file is `<name>.json`.
    pub state_dir: PathBuf,
}

impl DummyConfig {
    pub fn new(name: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        DummyConfig {
            name: name.into(),
            state_dir: state_dir.into(),
            ..Default::default()
        }
    }
}

/// The key of a series' `config:` that sets its own bake time in seconds.
pub const SERIES_SECONDS_KEY: &str = "dummy_bake_seconds";

/// A series' own bake time: its `config:` value of [`SERIES_SECONDS_KEY`],
/// a number or a string holding one (a template renders to a string).
pub fn series_seconds(config: &csis_schema::model::JsonMap) -> Option<f64> {
    match config.get(SERIES_SECONDS_KEY)? {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The scheduler's cost of a bake on a dummy runtime, in milliseconds (at
/// least 1): the series' own seconds, else the runtime entry's
/// `bake_seconds`; the same time [`DummyRuntime`]'s bake waits.
pub fn bake_cost(bake_seconds: f64, series: Option<f64>) -> u64 {
    ((series.unwrap_or(bake_seconds).max(0.0) * 1000.0) as u64).max(1)
}

/// The dummy runtime. See the crate documentation.
pub struct DummyRuntime {
    cfg: DummyConfig,
    state: Mutex<Mem>,
    /// Launched test machines: name -> (series, build).
    test_machines: Mutex<BTreeMap<String, (String, String)>>,
}

impl DummyRuntime {
    /// Construct; reads [`FAIL_ENV`] once.
    pub fn new(mut cfg: DummyConfig) -> Self {
        if let Ok(v) = std::env::var(FAIL_ENV) {
            cfg.fail_series.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
        }
        DummyRuntime {
            cfg,
            test_machines: Mutex::new(BTreeMap::new()),
            state: Mutex::new(Mem {
                store: None,
                seen: None,
                log_lines: 0,
                last_compact: None,
                compact_cost: Duration::ZERO,
            }),
        }
    }

    pub fn config(&self) -> &DummyConfig {
        &self.cfg
    }

    /// The store file of this runtime.
    pub fn store_path(&self) -> PathBuf {
        store_path(&self.cfg.state_dir, &self.cfg.name)
    }

    fn seconds_for(&self, series: &str) -> f64 {
        self.cfg
            .series_seconds
            .get(series)
            .copied()
            .unwrap_or(self.cfg.bake_seconds)
            .max(0.0)
    }

    fn fails(&self, series: &str) -> bool {
        let f = &self.cfg.fail_series;
        f.contains("*") || f.contains(series) || f.contains(&format!("{series}@{}", self.cfg.name))
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[async_trait]
impl Runtime for DummyRuntime {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn kind(&self) -> &str {
        "dummy"
    }

    async fn preflight(&self) -> Result<Vec<PreflightLine>> {
        Ok(vec![PreflightLine {
            ok: true,
            what: format!("dummy runtime {}", self.cfg.name),
            detail: format!("store {}", self.store_path().display()),
        }])
    }

    /// A fake vendor id derived from the query (or the pinned id as is).
    async fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        if let Some(id) = &req.image_id {
            return Ok(ResolvedImage {
                id: id.clone(),
                name: None,
                owner: None,
                creation_date: None,
                facts: BTreeMap::new(),
            });
        }
        let key = serde_json::json!({
            "family": req.family, "family_version": req.family_version,
            "architecture": req.architecture, "owners": req.owners, "query": req.query,
        });
        let h = blake3::hash(key.to_string().as_bytes()).to_hex();
        Ok(ResolvedImage {
            id: format!("dummy-vendor-{}", &h[..12]),
            name: Some(format!(
                "{}-{}-{}",
                req.family, req.family_version, req.architecture
            )),
            owner: req.owners.first().cloned(),
            creation_date: None,
            facts: BTreeMap::new(),
        })
    }

    async fn bake(&self, req: &BakeRequest) -> Result<BakeOutcome> {
        let secs = self.seconds_for(&req.series);
        let from = match &req.parent {
            BakeParent::Vendor(v) => v.id.clone(),
            BakeParent::Build { build_id, .. } => build_id.clone(),
            BakeParent::Deferred { series, .. } => format!("the newest build of {series}"),
        };
        req.log
            .line(&format!("dummy bake of {} from {from}: {secs}s", req.label));
        let total = Duration::from_secs_f64(secs);
        let start = tokio::time::Instant::now();
        // Tick once a second so the progress line moves.
        while start.elapsed() < total {
            let left = total - start.elapsed();
            let step = left.min(Duration::from_secs(1));
            tokio::select! {
                _ = req.cancel.cancelled() => {
                    req.log.line("cancelled; nothing to clean up");
                    return Err(RuntimeError::Cancelled);
                }
                _ = tokio::time::sleep(step) => {}
            }
            if start.elapsed() < total {
                req.log
                    .line(&format!("baking... {}s", start.elapsed().as_secs()));
            }
        }
        for (i, s) in req.steps.iter().enumerate() {
            req.log.line(&format!("step {}: {s:?}", i + 1));
        }
        if self.fails(&req.series) {
            let series = req.series.clone();
            let label = req.label.clone();
            self.update(|_| {
                let attempt = BakeAttempt {
                    label,
                    series,
                    ok: false,
                };
                (Some(Op::Attempt { attempt }), ())
            })?;
            req.log.line("injected failure");
            return Err(RuntimeError::Failed(format!(
                "dummy runtime {}: injected failure for series {}",
                self.cfg.name, req.series
            )));
        }
        let fp = req
            .tags
            .get(tags::FINGERPRINT)
            .map(|f| f.chars().take(12).collect::<String>())
            .unwrap_or_else(|| "nofp".into());
        let name = req.final_name.clone();
        let tags = req.tags.clone();
        let series = req.series.clone();
        let label = req.label.clone();
        let build_id = self.update(|s| {
            let counter = s.counter + 1;
            let id = format!("dummy-{fp}-{counter}");
            let op = Op::Bake {
                id: id.clone(),
                counter,
                image: StoredImage {
                    name: name.clone(),
                    series: series.clone(),
                    created: now_secs(),
                    tags,
                    released: BTreeSet::new(),
                },
                attempt: BakeAttempt {
                    label,
                    series,
                    ok: true,
                },
            };
            (Some(op), id)
        })?;
        req.log.line(&format!("baked {build_id}"));
        Ok(BakeOutcome {
            build_id,
            name,
            assertions: req.tests.len(),
        })
    }

    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        self.update(|s| {
            on_image(
                s,
                build_id,
                Op::Retag {
                    id: build_id.to_string(),
                    tags: tags.clone(),
                },
            )
        })?
    }

    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        Ok(self
            .store()
            .images
            .into_iter()
            .map(|(id, img)| ImageFacts {
                build_id: id,
                name: Some(img.name),
                created: Some(img.created.to_string()),
                tags: img.tags,
                unnamed: false,
                series_tags: Vec::new(),
            })
            .collect())
    }

    async fn inventory(&self) -> Result<Inventory> {
        Ok(Inventory::default())
    }

    async fn image_users(&self, _build_id: &str) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        self.update(|s| {
            if s.images.contains_key(build_id) {
                (
                    Some(Op::Dispose {
                        id: build_id.to_string(),
                    }),
                    true,
                )
            } else {
                (None, false)
            }
        })
    }

    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        vec![format!(
            "# dummy: mark {build_id} ({series}) released for {model}"
        )]
    }

    async fn launch_test_machine(
        &self,
        req: &csis_runtime::TestMachineRequest,
    ) -> Result<csis_runtime::TestMachine> {
        if !self.update(|s| (None, s.images.contains_key(&req.build_id)))? {
            return Err(RuntimeError::Refused(format!(
                "image {} is not in the dummy store",
                req.build_id
            )));
        }
        self.test_machines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(req.name.clone(), (req.series.clone(), req.build_id.clone()));
        Ok(csis_runtime::TestMachine {
            id: req.name.clone(),
            booted: Some(req.build_id.clone()),
        })
    }

    async fn remove_test_machine(&self, id: &str) -> Result<bool> {
        Ok(self
            .test_machines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .is_some())
    }

    async fn run_session_command(
        &self,
        instance: &str,
        command: &str,
        _timeout_s: u64,
    ) -> Result<csis_runtime::SessionResult> {
        let series = match self
            .test_machines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(instance)
        {
            Some((series, _)) => series.clone(),
            None => {
                return Err(RuntimeError::Refused(format!(
                    "no machine {instance} on {}",
                    self.cfg.name
                )))
            }
        };
        let fails = self.cfg.fail_series.contains(&format!("test:{series}"));
        Ok(csis_runtime::SessionResult {
            exit_code: i32::from(fails),
            stdout: String::new(),
            stderr: if fails {
                format!("dummy: `{command}` fails on purpose (test:{series})")
            } else {
                String::new()
            },
        })
    }

    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        if self.cfg.fail_series.contains(&format!("release:{series}")) {
            return Err(RuntimeError::Failed(format!(
                "the release mark of {build_id} ({series}) fails on purpose (release:{series})"
            )));
        }
        self.update(|s| {
            on_image(
                s,
                build_id,
                Op::Release {
                    id: build_id.to_string(),
                    series: series.to_string(),
                    model: model.to_string(),
                },
            )
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::store::log_path;
    use super::*;
    use csis_runtime::{CancellationToken, NullLog};
    use std::sync::Arc;

    fn req(series: &str, fp: &str) -> BakeRequest {
        BakeRequest {
            label: format!("//images/{series}@d:bake"),
            series: series.into(),
            runtime: "d".into(),
            image_builder: "dummy".into(),
            final_name: format!("{series}-x"),
            prefix: series.into(),
            parent: BakeParent::Build {
                series: "base".into(),
                build_id: "p".into(),
            },
            machine_type: None,
            disk_size_gb: None,
            bake_user: None,
            package_manager: None,
            family: None,
            architecture: None,
            steps: vec![],
            tests: vec![],
            recipe: Default::default(),
            required_plugins: Vec::new(),
            tags: [("csis_fingerprint".to_string(), fp.to_string())].into(),
            tree_root: ".".into(),
            emit_dir: ".".into(),
            log: Arc::new(NullLog),
            cancel: CancellationToken::new(),
            keep_failed: false,
        }
    }

    #[tokio::test]
    async fn bakes_fails_and_keeps_a_store() {
        let t = tempfile::tempdir().unwrap();
        let mut cfg = DummyConfig::new("d", t.path());
        cfg.fail_series.insert("bad".into());
        let rt = DummyRuntime::new(cfg);
        let a = rt.bake(&req("good", "0123456789abcdef")).await.unwrap();
        assert_eq!(a.build_id, "dummy-0123456789ab-1");
        let b = rt.bake(&req("good", "0123456789abcdef")).await.unwrap();
        assert_ne!(a.build_id, b.build_id);
        assert!(matches!(
            rt.bake(&req("bad", "ff")).await,
            Err(RuntimeError::Failed(_))
        ));
        // a second instance reads the same store
        let rt2 = DummyRuntime::new(DummyConfig::new("d", t.path()));
        let imgs = rt2.query_images().await.unwrap();
        assert_eq!(imgs.len(), 2);
        rt2.retag_image(&a.build_id, &[("csis_parent".into(), "x".into())].into())
            .await
            .unwrap();
        rt2.release(&a.build_id, "good", "prod").await.unwrap();
        assert!(rt2.store().images[&a.build_id].released.contains("prod"));
        assert!(rt2.dispose_image(&b.build_id).await.unwrap());
        assert!(!rt2.dispose_image(&b.build_id).await.unwrap());
        let s = rt2.store();
        assert_eq!(s.bakes.iter().filter(|b| b.ok).count(), 2);
        assert_eq!(s.bakes.iter().filter(|b| !b.ok).count(), 1);
    }

    #[tokio::test]
    async fn the_log_holds_bursts_and_is_compacted_on_drop() {
        let t = tempfile::tempdir().unwrap();
        let rt = DummyRuntime::new(DummyConfig::new("d", t.path()));
        for i in 0..50 {
            rt.bake(&req(&format!("s{i}"), "abcdef")).await.unwrap();
        }
        // another reader sees every bake (snapshot + log), whatever was compacted
        assert_eq!(read_store(&rt.store_path()).images.len(), 50);
        let path = rt.store_path();
        drop(rt);
        assert!(!log_path(&path).exists(), "compacted on drop");
        let s: DummyStore = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(s.images.len(), 50);
        assert_eq!(s.counter, 50);
        // a torn log line (kill -9 mid-append) is ignored
        std::fs::write(
            log_path(&path),
            "{\"op\":\"dispose\",\"id\":\"dummy-abcdef-1\"}\n{\"op\":\"dis",
        )
        .unwrap();
        let s = read_store(&path);
        assert_eq!(s.images.len(), 49);
    }

    #[tokio::test]
    async fn two_instances_do_not_overwrite_each_other() {
        let t = tempfile::tempdir().unwrap();
        let a = DummyRuntime::new(DummyConfig::new("d", t.path()));
        let x = a.bake(&req("x", "aa")).await.unwrap();
        let y = a.bake(&req("y", "bb")).await.unwrap();
        let b = DummyRuntime::new(DummyConfig::new("d", t.path()));
        assert!(b.dispose_image(&x.build_id).await.unwrap());
        drop(b);
        // a, still holding its old view, bakes again and is dropped
        a.bake(&req("z", "cc")).await.unwrap();
        drop(a);
        let s = read_store(&store_path(t.path(), "d"));
        assert!(!s.images.contains_key(&x.build_id), "the disposal survived");
        assert!(s.images.contains_key(&y.build_id));
        assert_eq!(s.images.len(), 2);
    }

    #[tokio::test]
    async fn bake_waits_and_can_be_cancelled() {
        let t = tempfile::tempdir().unwrap();
        let mut cfg = DummyConfig::new("d", t.path());
        cfg.bake_seconds = 30.0;
        let rt = DummyRuntime::new(cfg);
        let r = req("slow", "aa");
        let cancel = r.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });
        assert!(matches!(rt.bake(&r).await, Err(RuntimeError::Cancelled)));
        assert!(rt.store().images.is_empty());
    }

    #[tokio::test]
    async fn resolve_is_deterministic() {
        let t = tempfile::tempdir().unwrap();
        let rt = DummyRuntime::new(DummyConfig::new("d", t.path()));
        let q = ResolveRequest {
            label: "//os/deb@d".into(),
            series: "deb".into(),
            family: "debian".into(),
            family_version: "12".into(),
            architecture: "x86_64".into(),
            owners: vec![],
            query: serde_json::json!({}),
            image_id: None,
        };
        let a = rt.resolve(&q).await.unwrap();
        assert_eq!(a, rt.resolve(&q).await.unwrap());
        assert!(a.id.starts_with("dummy-vendor-"));
        let pinned = ResolveRequest {
            image_id: Some("img-1".into()),
            ..q
        };
        assert_eq!(rt.resolve(&pinned).await.unwrap().id, "img-1");
    }
}
