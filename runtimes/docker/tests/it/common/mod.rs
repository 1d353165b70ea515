//! Test helpers: base images made with an import of a root filesystem (no
//! registry here), test-only repositories, cleanup that runs even on panic.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use bollard::query_parameters::CreateImageOptionsBuilder;
use csis_runtime::{
    BakeParent, BakeRequest, BakeStep, CancellationToken, LogSink, ResolvedImage, TestCommand,
};
use csis_runtime_docker::{DockerRuntime, DockerSettings};
use futures_util::StreamExt;

/// Tag of the cached busybox base image (made from Debian's busybox-static).
pub const BUSYBOX_TAG: &str = "csis-test-base/busybox:1";
/// Tag of the cached Debian bookworm minbase + python3 + sudo (debootstrap).
pub const DEBIAN_TAG: &str = "csis-test-base/debian-python:bookworm";

static BUSYBOX: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
static DEBIAN: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();

pub fn rand_suffix() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// Is a daemon reachable? Tests skip loudly without one (CI has one).
pub async fn daemon() -> Option<bollard::Docker> {
    let d = bollard::Docker::connect_with_local_defaults().ok()?;
    let d = d.negotiate_version().await.ok()?;
    d.ping().await.ok()?;
    Some(d)
}

fn busybox_binary() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A root filesystem tar: /bin/busybox, its applets as symlinks, the usual dirs.
fn busybox_rootfs_tar(busybox: &Path) -> Vec<u8> {
    let out = Command::new(busybox)
        .arg("--list")
        .output()
        .expect("busybox --list");
    let applets = String::from_utf8_lossy(&out.stdout).to_string();
    let mut b = tar::Builder::new(Vec::new());
    let dir = |b: &mut tar::Builder<Vec<u8>>, p: &str, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode);
        h.set_size(0);
        h.set_mtime(0);
        h.set_cksum();
        b.append_data(&mut h, p, &[][..]).unwrap();
    };
    for d in [
        "bin", "etc", "root", "run", "proc", "sys", "dev", "var", "usr", "usr/bin", "sbin", "home",
    ] {
        dir(&mut b, d, 0o755);
    }
    dir(&mut b, "tmp", 0o1777);
    let file = |b: &mut tar::Builder<Vec<u8>>, p: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(0);
        h.set_cksum();
        b.append_data(&mut h, p, data).unwrap();
    };
    let bin = std::fs::read(busybox).unwrap();
    file(&mut b, "bin/busybox", &bin, 0o755);
    file(
        &mut b,
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\n",
        0o644,
    );
    file(&mut b, "etc/group", b"root:x:0:\n", 0o644);
    for a in applets
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox")
    {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        h.set_mtime(0);
        b.append_link(&mut h, format!("bin/{a}"), "busybox")
            .unwrap();
    }
    b.into_inner().unwrap()
}

/// Import a root filesystem tar as `repo:tag` through the Engine API.
pub async fn import_rootfs(d: &bollard::Docker, tar: Vec<u8>, tag_ref: &str) -> String {
    let (repo, tag) = tag_ref.rsplit_once(':').unwrap();
    let opts = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .build();
    let mut s = d.create_image(Some(opts), Some(bollard::body_full(tar.into())), None);
    while let Some(r) = s.next().await {
        r.expect("import");
    }
    d.inspect_image(tag_ref).await.unwrap().id.unwrap()
}

/// The busybox base image id: imported once (cached by [`BUSYBOX_TAG`]).
/// Needs Debian's `busybox-static`.
pub async fn busybox_image(d: &bollard::Docker) -> String {
    BUSYBOX
        .get_or_init(|| async {
            if let Ok(i) = d.inspect_image(BUSYBOX_TAG).await {
                return i.id.unwrap();
            }
            let bb = busybox_binary()
                .expect("busybox is not installed: apt-get install -y busybox-static");
            import_rootfs(d, busybox_rootfs_tar(&bb), BUSYBOX_TAG).await
        })
        .await
        .clone()
}

/// The Debian minbase + python3 + sudo image, made once with debootstrap from
/// a Debian mirror and cached by [`DEBIAN_TAG`]. `None` (with the reason
/// printed) when debootstrap or the mirror is not available.
pub async fn debian_image(d: &bollard::Docker) -> Option<String> {
    DEBIAN
        .get_or_init(|| async {
            if let Ok(i) = d.inspect_image(DEBIAN_TAG).await {
                return i.id;
            }
            if Command::new("debootstrap").arg("--version").output().is_err() {
                eprintln!("SKIP debian image: debootstrap is not installed (apt-get install -y debootstrap)");
                return None;
            }
            let mirror = std::env::var("CSIS_TEST_DEBIAN_MIRROR")
                .unwrap_or_else(|_| "http://deb.debian.org/debian".to_string());
            let dir = tempfile::Builder::new()
                .prefix("csis-debootstrap-")
                .tempdir_in("/var/tmp")
                .ok()?;
            let root = dir.path().join("root");
            eprintln!("making {DEBIAN_TAG} with debootstrap from {mirror} (once)...");
            let st = Command::new("debootstrap")
                .args(["--variant=minbase", "--include=python3,sudo", "bookworm"])
                .arg(&root)
                .arg(&mirror)
                .output()
                .ok()?;
            if !st.status.success() {
                eprintln!(
                    "SKIP debian image: debootstrap failed: {}",
                    String::from_utf8_lossy(&st.stderr).lines().last().unwrap_or("")
                );
                return None;
            }
            let st = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "tar -C '{}' -c . | docker import - '{DEBIAN_TAG}'",
                    root.display()
                ))
                .status()
                .ok()?;
            if !st.success() {
                eprintln!("SKIP debian image: docker import failed");
                return None;
            }
            d.inspect_image(DEBIAN_TAG).await.ok()?.id
        })
        .await
        .clone()
}

/// A runtime on the local daemon with a test-only repository.
pub fn runtime(tag: &str) -> (DockerRuntime, Cleanup) {
    runtime_with(tag, |_| {})
}

/// [`runtime`] with the settings adjusted by `f`.
pub fn runtime_with(tag: &str, f: impl FnOnce(&mut DockerSettings)) -> (DockerRuntime, Cleanup) {
    let suffix = rand_suffix();
    let mut s = DockerSettings::new(format!("t{tag}{suffix}"));
    s.repository = Some(format!("csis-test/{tag}-{suffix}"));
    s.machine_types.insert(
        "small".into(),
        csis_runtime_docker::MachineType {
            cpus: Some(1.0),
            memory: Some("256m".into()),
        },
    );
    s.default_machine_type = Some("small".into());
    f(&mut s);
    let rt = DockerRuntime::new(s).unwrap();
    let c = Cleanup {
        repository: rt.repository().to_string(),
        container_prefix: csis_runtime_docker::names::bake_container_prefix(
            csis_runtime::Runtime::name(&rt),
        ),
        extra_containers: Mutex::new(Vec::new()),
    };
    (rt, c)
}

/// Removes the test repository's images and the runtime's containers, even on panic.
pub struct Cleanup {
    pub repository: String,
    pub container_prefix: String,
    pub extra_containers: Mutex<Vec<String>>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let sh = |s: String| {
            let _ = Command::new("sh").arg("-c").arg(s).output();
        };
        for c in self.extra_containers.lock().unwrap().iter() {
            sh(format!("docker rm -f '{c}'"));
        }
        sh(format!(
            "docker ps -aq --filter name='^{}' | xargs -r docker rm -f",
            self.container_prefix
        ));
        // children first: repeat until nothing of the repository is left
        for _ in 0..4 {
            sh(format!(
                "docker images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' '{}' | xargs -r docker rmi",
                self.repository
            ));
        }
    }
}

/// A log sink that keeps the lines.
#[derive(Default)]
pub struct Lines(pub Mutex<Vec<String>>);
impl LogSink for Lines {
    fn line(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_string());
    }
}
impl Lines {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

pub fn shell(name: &str, inline: &[&str]) -> BakeStep {
    BakeStep::Shell {
        name: name.into(),
        inline: inline.iter().map(|s| s.to_string()).collect(),
        scripts: vec![],
        ensure: None,
        env: vec![],
        execute_command: None,
    }
}

pub fn test_cmd(run: &str, contains: Option<&str>) -> TestCommand {
    TestCommand {
        description: run.into(),
        run: run.into(),
        expect_rc: 0,
        contains: contains.map(str::to_string),
    }
}

pub fn lineage(series: &str, parent: &str, run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("csis_series".to_string(), series.to_string()),
        ("csis_parent".to_string(), parent.to_string()),
        ("csis_run".to_string(), run.to_string()),
        ("csis_fingerprint".to_string(), format!("fp-{series}-{run}")),
        ("csis_identity_types".to_string(), "posix".to_string()),
        ("csis_storage_types".to_string(), "none".to_string()),
    ])
}

pub fn vendor(id: &str) -> BakeParent {
    BakeParent::Vendor(ResolvedImage {
        id: id.into(),
        name: None,
        owner: None,
        creation_date: None,
        facts: BTreeMap::new(),
    })
}

pub fn request(
    rt: &DockerRuntime,
    series: &str,
    parent: BakeParent,
    steps: Vec<BakeStep>,
    tests: Vec<TestCommand>,
    log: Arc<dyn LogSink>,
) -> BakeRequest {
    let parent_tag = match &parent {
        BakeParent::Vendor(v) => v.id.clone(),
        BakeParent::Build { series, .. } | BakeParent::Deferred { series, .. } => series.clone(),
    };
    let run = rand_suffix();
    BakeRequest {
        label: format!("//images/{series}@{}", csis_runtime::Runtime::name(rt)),
        series: series.into(),
        runtime: csis_runtime::Runtime::name(rt).into(),
        image_builder: "native".into(),
        final_name: format!("{series}-native-20260101T000000-{run}"),
        prefix: format!("{series}-native"),
        parent,
        machine_type: None,
        disk_size_gb: None,
        bake_user: None,
        package_manager: None,
        family: None,
        architecture: None,
        steps,
        tests,
        recipe: Default::default(),
        required_plugins: Vec::new(),
        tags: lineage(series, &parent_tag, &run),
        tree_root: std::env::temp_dir(),
        emit_dir: std::env::temp_dir(),
        log,
        cancel: CancellationToken::new(),
        keep_failed: false,
    }
}

/// Names of containers whose name starts with `prefix`.
pub async fn containers_named(d: &bollard::Docker, prefix: &str) -> Vec<String> {
    let f = std::collections::HashMap::from([("name".to_string(), vec![prefix.to_string()])]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&f)
        .build();
    d.list_containers(Some(opts))
        .await
        .unwrap()
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .map(|n| n.trim_start_matches('/').to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[macro_export]
macro_rules! need_daemon {
    () => {
        match common::daemon().await {
            Some(d) => d,
            None => {
                if std::env::var_os("CSIS_REQUIRE_DOCKER").is_some() {
                    panic!("CSIS_REQUIRE_DOCKER is set and no Docker daemon answers");
                }
                eprintln!("SKIP: no Docker daemon answers on this machine");
                return;
            }
        }
    };
}
