//! The local Docker daemon in tests: asking it ([`docker`], [`daemon`]) and
//! making a base image without a registry ([`import_busybox_base`]: a
//! busybox root filesystem through `docker import`).

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
