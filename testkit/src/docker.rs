//! The local Docker daemon in tests: asking it ([`docker`], [`daemon`],
//! [`skip`]), listing what a test made ([`containers`], [`images_of`],
//! [`label`], [`image_exists`], [`tagged_in`]) and removing it whatever
//! happens ([`Cleanup`]), and making a base image without a registry
//! ([`import_busybox_base`]: a busybox root filesystem through `docker
//! import`; [`debian_image`]: a Debian minbase with python3 and sudo, made
//! once with debootstrap and kept, for ansible).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `docker ARGS`: its trimmed stdout when it succeeds.
pub fn docker(args: &[&str]) -> Option<String> {
    let out = Command::new("docker").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether a Docker daemon answers.
pub fn daemon() -> bool {
    docker(&["version", "--format", "{{.Server.Version}}"]).is_some()
}

/// The host's (static) busybox binary, if there is one.
pub fn busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Import a busybox root filesystem as the image `reference`, built under
/// `work`. It has what the debian base recipe's admin-user step uses there
/// (busybox-static has no adduser): a `useradd [-m] [-s SHELL] NAME` that
/// adds an account with a home, and `/etc/sudoers.d`.
///
/// The applet list is asked of the host's busybox, never of the copy just
/// written: executing a file this process has just written fails with
/// "Text file busy" when another test thread forks meanwhile.
pub fn import_busybox_base(reference: &str, work: &Path) {
    let bb = busybox().expect("a busybox binary");
    let root = work.join("rootfs");
    for d in [
        "bin",
        "tmp",
        "etc/sudoers.d",
        "root",
        "run",
        "usr/sbin",
        "home",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(&bb, root.join("bin/busybox")).unwrap();
    let list = Command::new(&bb).arg("--list").output().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let l = root.join("bin").join(applet);
        if !l.exists() {
            std::os::unix::fs::symlink("busybox", l).unwrap();
        }
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let useradd = root.join("usr/sbin/useradd");
    std::fs::write(
        &useradd,
        "#!/bin/sh\n# useradd [-m] [-s SHELL] NAME: an account with a home\nfor a; do n=$a; done\necho \"$n:x:1000:1000::/home/$n:/bin/sh\" >>/etc/passwd\necho \"$n:x:1000:\" >>/etc/group\nmkdir -p \"/home/$n\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &useradd,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let tar = work.join("rootfs.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success(), "tar of the busybox root filesystem");
    let out = Command::new("docker")
        .arg("import")
        .arg(&tar)
        .arg(reference)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docker import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tag of the cached Debian bookworm minbase + python3 + sudo image:
/// the same as the docker runtime's own tests make
/// (`runtimes/docker/tests/common`), so either makes it for both.
pub const DEBIAN_TAG: &str = "csis-test-base/debian-python:bookworm";

/// The Debian image ansible mods run against ([`DEBIAN_TAG`]), made once
/// with debootstrap from a Debian mirror (`CSIS_TEST_DEBIAN_MIRROR`, else
/// deb.debian.org) and kept on the daemon. `None`, with the reason on
/// stderr (`SKIP ...`), when debootstrap or the mirror is not available.
pub fn debian_image() -> Option<String> {
    if let Some(id) = docker(&["image", "inspect", "--format", "{{.Id}}", DEBIAN_TAG]) {
        return Some(id);
    }
    if Command::new("debootstrap")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "SKIP debian image: debootstrap is not installed (apt-get install -y debootstrap)"
        );
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
            String::from_utf8_lossy(&st.stderr)
                .lines()
                .last()
                .unwrap_or("")
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
    docker(&["image", "inspect", "--format", "{{.Id}}", DEBIAN_TAG])
}

/// Whether a docker test must be skipped: no daemon answers or the host has
/// no busybox. It says so on stderr; under `CSIS_REQUIRE_DOCKER` (CI) that
/// is a failure, not a skip.
pub fn skip() -> bool {
    if daemon() && busybox().is_some() {
        return false;
    }
    assert!(
        std::env::var_os("CSIS_REQUIRE_DOCKER").is_none(),
        "no Docker daemon or no busybox binary here, and CSIS_REQUIRE_DOCKER is set"
    );
    eprintln!("SKIPPED: no Docker daemon or no busybox binary here");
    true
}

/// The lines of `docker ARGS`' stdout, without empty ones and repeats
/// (empty when the command fails).
fn lines(args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in docker(args).unwrap_or_default().lines() {
        if !l.is_empty() && !v.iter().any(|x| x == l) {
            v.push(l.to_string());
        }
    }
    v
}

/// The names of the containers `docker ps` lists with these `--filter`s
/// (`all`: stopped ones too), e.g. `label=csis_test_machine=rt` or
/// `name=csis-bake-rt-`.
pub fn containers(all: bool, filters: &[&str]) -> Vec<String> {
    let mut args = vec!["ps", "--format", "{{.Names}}"];
    if all {
        args.push("-a");
    }
    for f in filters {
        args.extend(["--filter", f]);
    }
    lines(&args)
}

/// The ids of the images of `repo`: tagged in it, or labelled
/// `csis.repository=<repo>` (an untagged build, a disposed build kept for
/// its child's layers).
pub fn images_of(repo: &str) -> Vec<String> {
    let mut v = lines(&["images", "-q", repo]);
    let label = format!("label=csis.repository={repo}");
    for id in lines(&["images", "-aq", "--filter", &label]) {
        if !v.contains(&id) {
            v.push(id);
        }
    }
    v
}

/// The value of label `key` on a container or image (empty when it has none).
pub fn label(object: &str, key: &str) -> String {
    let format = format!("{{{{index .Config.Labels \"{key}\"}}}}");
    docker(&["inspect", "--format", &format, object]).unwrap_or_default()
}

/// Whether the daemon has the image `id`.
pub fn image_exists(id: &str) -> bool {
    docker(&["image", "inspect", "--format", "{{.Id}}", id]).is_some()
}

/// Whether any tag of `repo` still points at the image `id`.
pub fn tagged_in(repo: &str, id: &str) -> bool {
    docker(&["image", "inspect", "--format", "{{json .RepoTags}}", id])
        .is_some_and(|tags| tags.contains(&format!("{repo}:")))
}

/// What a docker test made, removed when dropped (also when the test
/// panics): the named containers, the containers any of `container_filters`
/// lists (`docker ps -a --filter`) that carry one of `configs` as
/// `csis_config` (every one when `configs` is empty), every image of
/// `repos` ([`images_of`]), and the base image.
pub struct Cleanup {
    pub containers: Vec<String>,
    pub container_filters: Vec<String>,
    pub configs: Vec<String>,
    pub repos: Vec<String>,
    pub base: String,
}

impl Cleanup {
    /// The clean-up of one repository and its base image.
    pub fn new(repo: &str, base: &str) -> Cleanup {
        Cleanup {
            containers: Vec::new(),
            container_filters: Vec::new(),
            configs: Vec::new(),
            repos: vec![repo.to_string()],
            base: base.to_string(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = docker(&["rm", "-f", c]);
        }
        for f in &self.container_filters {
            for c in containers(true, &[f]) {
                if self.configs.is_empty() || self.configs.contains(&label(&c, "csis_config")) {
                    let _ = docker(&["rm", "-f", &c]);
                }
            }
        }
        // A parent with dependent children cannot go first: repeat.
        for repo in &self.repos {
            for _ in 0..12 {
                let ids = images_of(repo);
                if ids.is_empty() {
                    break;
                }
                for id in ids {
                    let _ = docker(&["rmi", "-f", &id]);
                }
            }
        }
        if !self.base.is_empty() {
            let _ = docker(&["rmi", "-f", &self.base]);
        }
    }
}
