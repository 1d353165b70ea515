//! The recipe of a bake and its one lowering.
//!
//! A bake's recipe is what the tree declares for it: the base image's OS
//! update policy, admin user, identity and storage prerequisites (a base
//! image), or the modifications, group activation and local modification
//! bundle (an instance image), and the in-bake verification of both.
//! [`lower`] turns it into an ordered list of [`Step`]s, each with its POSIX
//! sh text. Every runtime and image builder consumes these steps: the docker
//! runtime executes them in its bake container, the packer builders
//! (`packer-docker`, `packer-ebs`) render them as provisioners. No runtime
//! writes a bake step of its own except what its [`Target`] supplies (the
//! settle lines of its machines, its session agent).
//!
//! Quoting: [`sq`] is the one shell quoting function. Lines land in HCL as
//! string literals written by hcl-rs, whose formatter escapes `${` to `$${`
//! and `%{` to `%%{` (packer's template markers), so the lines here are
//! plain shell and stay so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{BakeRequest, BakeStep, Ensure, TestCommand};

/// Quote for POSIX sh: a word of safe characters as is, else single quotes.
pub fn sq(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Always single-quoted (the original's spelling for paths and contents).
fn sq_always(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The OS update policy in force for a base image (`update:`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct UpdateRecipe {
    /// `none`, `security`, `packages` or `full`.
    pub policy: String,
    pub packages: Vec<String>,
    pub exclude: Vec<String>,
    /// Package -> version, in declared order.
    pub pin: Vec<(String, String)>,
}

/// One declared identity type of a base image and the group builder that
/// supplies its prerequisites.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdentityPrereq {
    /// `okta` or `posix`.
    pub identity_type: String,
    /// The group builder (`opa-groups`).
    pub builder: String,
}

/// One declared storage type of a base image and the storage builder of it
/// on this runtime (None: no plugin for it on this runtime).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StoragePrereq {
    /// `ebs`, `efs`, `s3`, `volume`, ...
    pub storage_type: String,
    pub builder: Option<String>,
}

/// What a base image bake adds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BaseRecipe {
    /// The OS builder's `type` (`rhel`, `debian`, ...) and family.
    pub os_type: String,
    pub family: String,
    pub family_version: String,
    /// `x86_64`, `arm64`, ... (repository names).
    pub architecture: String,
    pub update: UpdateRecipe,
    pub admin_user: String,
    pub admin_public_keys: Vec<String>,
    pub identity: Vec<IdentityPrereq>,
    pub storage: Vec<StoragePrereq>,
}

/// The image's own group, activated on the image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupActivation {
    pub group: String,
    /// `okta` or `posix`.
    pub identity_type: String,
    /// The login hook that makes the group exist on the machine (a posix
    /// group, or an okta group whose builder names a posix builder).
    pub posix: bool,
}

/// One modification in the local bundle (`csis-mods/<image>/MANIFEST.yaml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BundleMod {
    pub name: String,
    /// The mod builder's name (`ansible`, `bash`).
    pub builder: String,
    /// `ansible` or `bash`.
    pub operation: String,
    /// `ansible`, `declared` or `unknown`.
    pub idempotent: String,
    pub content_hash: String,
}

/// What an instance image bake adds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ImageRecipe {
    pub group: Option<GroupActivation>,
    /// One per modification, in the order of the bake's steps.
    pub bundle: Vec<BundleMod>,
}

/// A packer plugin the image builder declares (`required_plugins`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequiredPlugin {
    pub name: String,
    pub version: String,
    pub source: String,
}

/// The recipe of a bake beyond its modifications and tests (which are the
/// request's `steps` and `tests`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Recipe {
    pub base: Option<BaseRecipe>,
    pub image: Option<ImageRecipe>,
}

/// The session agent a runtime bakes into base images (AWS: SSM).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionAgent {
    /// `ssm`.
    pub mechanism: String,
    pub install: Vec<String>,
    pub verify: Vec<String>,
}

/// What a runtime tells the lowering about its bake machines.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub runtime: String,
    /// Steps run as an unprivileged user and need `sudo` (cloud machines);
    /// `false`: they run as root (a docker bake container).
    pub sudo: bool,
    /// The machine runs systemd (services can be enabled).
    pub systemd: bool,
    /// Extra settle lines, after the cloud-init wait (AWS: Systems Manager
    /// quiet; docker: `sudo` and `python3` when a package manager allows).
    pub settle: Vec<String>,
    pub session_agent: Option<SessionAgent>,
}

/// What a lowered step does.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Nothing runs: the comment says why (a storage type without plugin).
    Note,
    /// Shell lines (one script), through the step runner when `runner`.
    Shell {
        lines: Vec<String>,
        runner: bool,
        env: Vec<String>,
        execute_command: Option<String>,
    },
    /// Script files (`rel` under the emission directory, `abs` on disk).
    Scripts {
        scripts: Vec<(String, PathBuf)>,
        runner: bool,
        env: Vec<String>,
        execute_command: Option<String>,
    },
    /// One playbook run with ansible-playbook from the baking machine.
    Ansible {
        playbook: (String, PathBuf),
        /// `-e ansible_python_interpreter=...`, the mod builder's own, then
        /// `-e <config as JSON>`.
        extra_arguments: Vec<String>,
        binary: String,
    },
    /// A directory of the emission (`rel`, ending in `/`) copied to `destination`.
    Upload { rel: String, destination: String },
    /// The in-bake verification: `set -e` and one line per assertion.
    Verify {
        lines: Vec<String>,
        assertions: usize,
    },
}

/// One step of a bake.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The `#` comment before the step (without `# `).
    pub comment: String,
    pub kind: StepKind,
}

/// A file the steps read, written under the emission directory.
#[derive(Debug, Clone, PartialEq)]
pub struct EmittedFile {
    /// Relative to the emission directory.
    pub rel: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// A bake, lowered.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    pub steps: Vec<Step>,
    /// The local modification bundle, the scripts and playbooks the steps read.
    pub files: Vec<EmittedFile>,
    /// The number of in-bake assertions.
    pub assertions: usize,
}

impl Lowered {
    /// Write [`Lowered::files`] under `dir`, each only when it changed.
    pub fn write_files(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for f in &self.files {
            let path = dir.join(&f.rel);
            write_if_changed(&path, &f.content, f.mode)?;
            out.push(path);
        }
        Ok(out)
    }
}

/// A name with everything but `[A-Za-z0-9._-]` replaced by `_`.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// `.csis/bake-vars/<bake>/` of a bake (see [`private_vars`]).
fn private_vars_dir(req: &BakeRequest) -> PathBuf {
    req.tree_root
        .join(".csis")
        .join("bake-vars")
        .join(file_safe(&req.label))
}

/// Remove a bake's private vars once the bake is over (baked, failed or
/// cancelled): the secret stays on disk only while the tool that needs it
/// runs. An emission without a bake (`--dry-run`) keeps them for the
/// packer root that names them.
pub fn remove_private_vars(req: &BakeRequest) {
    let _ = std::fs::remove_dir_all(private_vars_dir(req));
}

/// Where a modification's `config:` holding a secret is handed to
/// ansible (`-e @<file>`): `.csis/bake-vars/<bake>/<mod>.json` under the
/// tree, mode 0600, written (when changed) as the bake is lowered. The
/// emission names the file, never the value.
pub fn private_vars(req: &BakeRequest, module: &str, json: &str) -> std::io::Result<PathBuf> {
    let dir = private_vars_dir(req);
    let path = dir.join(format!("{}.json", file_safe(module)));
    std::fs::create_dir_all(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    write_if_changed(&path, json.as_bytes(), 0o600)?;
    Ok(path)
}

/// Write a file unless it already holds exactly this content (atomic).
pub fn write_if_changed(path: &Path, content: &[u8], mode: u32) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp~"));
    let _ = std::fs::remove_file(&tmp);
    // Created with its mode, so a 0600 file (a secret's vars) is never
    // readable by others, not even between write and chmod.
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, mode);
    {
        use std::io::Write as _;
        let mut f = open.open(&tmp)?;
        f.write_all(content)?;
    }
    #[cfg(unix)]
    {
        // the umask may have taken bits the mode asks for (0755 scripts)
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    }
    let _ = mode;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

/// The step runner's command: a step runs through `/run/csis-step` when the
/// settle step wrote it.
pub const STEP_EXECUTE_COMMAND: &str = "chmod +x {{ .Path }}; if [ -r /run/csis-step ]; then {{ .Vars }} sh /run/csis-step {{ .Path }}; else {{ .Vars }} {{ .Path }}; fi";

/// Where the ansible interpreter is provisioned.
pub const ANSIBLE_PYTHON: &str = "/usr/local/bin/csis-ansible-python";

impl Target {
    /// `cmd` with the privilege the target needs.
    fn su(&self, cmd: &str) -> String {
        if self.sudo {
            format!("sudo {cmd}")
        } else {
            cmd.to_string()
        }
    }
}

/// The package manager of a family/type: `dnf`, `apt` or `apk`.
pub fn package_manager_of(os_type: &str, family: &str) -> &'static str {
    csis_schema::model::package_manager(os_type, family)
}

fn py_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", items.join(", "))
}

fn py_map(v: &[(String, String)]) -> String {
    let items: Vec<String> = v.iter().map(|(k, x)| format!("'{k}': '{x}'")).collect();
    format!("{{{}}}", items.join(", "))
}

// ---------------------------------------------------------------------------
// settle

/// The settle step: the machine's first-boot script has ended, the runtime's
/// own settle lines, then the step runner that retries a step failing on a
/// held package database (in `/run`, a tmpfs: never in the image).
pub fn settle_lines(t: &Target) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "# before any package work: the machine's own first-boot script has ended (bounded)".into(),
        "if command -v cloud-init >/dev/null 2>&1; then timeout 300 cloud-init status --wait >/dev/null 2>&1 || true; fi".into(),
    ];
    v.extend(t.settle.iter().cloned());
    v.push("# the step runner: a step that fails on a held package database is run again (never in the image: /run is a tmpfs)".into());
    v.push(format!(
        "{} >/dev/null <<'CSIS_STEP'",
        t.su("tee /run/csis-step")
    ));
    v.extend(
        [
            r#"#!/bin/sh"#,
            r#"# cs-image-system: runs ONE step of a bake. A step that fails while the package"#,
            r#"# database is held by another process is run again after a wait; any other"#,
            r#"# failure is the step's own and is returned at once."#,
            r#"tries="${CSIS_STEP_TRIES:-10}""#,
            r#"pause="${CSIS_STEP_WAIT:-30}""#,
            r#"out="$(mktemp)" || exit 1"#,
            r#"trap 'rm -f "$out" "$out.rc"' EXIT"#,
            r#"n=1"#,
            r#"while :; do"#,
            r#"  { "$@" 2>&1; echo "$?" > "$out.rc"; } | tee "$out""#,
            r#"  rc="$(cat "$out.rc")""#,
            r#"  [ "$rc" = 0 ] && exit 0"#,
            r#"  [ "$n" -ge "$tries" ] && exit "$rc""#,
            r#"  grep -Eq 'transaction lock|Could not get lock|dpkg frontend lock|Unable to lock the administration directory' "$out" || exit "$rc""#,
            r#"  echo "csis-step: the package database was held by another process (attempt $n of $tries); this step runs again in $pause seconds""#,
            r#"  n=$((n + 1))"#,
            r#"  sleep "$pause""#,
            r#"done"#,
            r#"CSIS_STEP"#,
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v.push(t.su("chmod 0755 /run/csis-step"));
    v
}

/// Docker's settle lines: `sudo` and `python3` installed when missing and a
/// package manager allows (every later step may use them); said and skipped
/// when there is none (busybox).
pub fn install_sudo_python_lines() -> Vec<String> {
    [
        "# sudo and python3 for the steps that follow, when a package manager allows",
        "missing=; command -v sudo >/dev/null 2>&1 || missing=\"$missing sudo\"; command -v python3 >/dev/null 2>&1 || missing=\"$missing python3\"",
        "if [ -z \"$missing\" ]; then echo 'settle: sudo and python3 present';",
        "elif command -v apt-get >/dev/null 2>&1; then echo \"settle: installing with apt:$missing\"; { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing; } || echo \"settle: could not install$missing\";",
        "elif command -v dnf >/dev/null 2>&1; then echo \"settle: installing with dnf:$missing\"; dnf install -y -q $missing || echo \"settle: could not install$missing\";",
        "elif command -v yum >/dev/null 2>&1; then echo \"settle: installing with yum:$missing\"; yum install -y -q $missing || echo \"settle: could not install$missing\";",
        "elif command -v apk >/dev/null 2>&1; then echo \"settle: installing with apk:$missing\"; apk add --no-cache -q $missing || echo \"settle: could not install$missing\";",
        "else echo \"settle: no package manager in the image; not installing:$missing\"; fi",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

// ---------------------------------------------------------------------------
// base image

/// The packages list every update step writes.
fn packages_txt_lines(t: &Target, pm: &str) -> Vec<String> {
    let list = if pm == "apk" {
        "apk info -v 2>/dev/null".to_string()
    } else {
        "( rpm -qa --qf '%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\n' 2>/dev/null || dpkg-query -W -f='${Package}=${Version}\n' )".to_string()
    };
    vec![
        t.su("mkdir -p /var/lib/csis"),
        format!(
            "{list} | sort | {} >/dev/null",
            t.su("tee /var/lib/csis/packages.txt")
        ),
    ]
}

fn retry(cmd: &str, clean: &str) -> String {
    format!("{cmd} || {{ {clean}; {cmd}; }}")
}

/// The OS update lines for one family (None: policy `none`, no step).
pub fn update_lines(t: &Target, b: &BaseRecipe) -> Option<Vec<String>> {
    let u = &b.update;
    if u.policy.is_empty() || u.policy == "none" {
        return None;
    }
    let mut v = Vec::new();
    match package_manager_of(&b.os_type, &b.family) {
        "apt" => {
            let apt = t.su("DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600");
            let update = format!("{apt} update -qq");
            v.push(update.clone());
            if !u.exclude.is_empty() {
                v.push("# excluded packages are held for this update".into());
                let pats: Vec<String> = u.exclude.iter().map(|p| sq_always(p)).collect();
                v.push(format!(
                    "held=$(dpkg-query -W -f='${{Package}}\\n' {} 2>/dev/null | tr '\\n' ' '); [ -z \"$held\" ] || {} $held >/dev/null",
                    pats.join(" "),
                    t.su("apt-mark hold")
                ));
            }
            match u.policy.as_str() {
                "security" => {
                    v.push("up=$(apt list --upgradable 2>/dev/null | grep -e '-security' | cut -d/ -f1 | tr '\\n' ' ')".into());
                    let cmd = format!("{apt} install -y --only-upgrade $up");
                    v.push(format!(
                        "if [ -n \"$up\" ]; then {}; else echo 'csis: no security updates'; fi",
                        retry(&cmd, &update)
                    ));
                }
                "full" => v.push(retry(&format!("{apt} -y upgrade"), &update)),
                _ => {}
            }
            if !u.packages.is_empty() {
                let ps: Vec<String> = u.packages.iter().map(|p| sq(p)).collect();
                let cmd = if u.policy == "packages" {
                    format!("{apt} install -y --only-upgrade {}", ps.join(" "))
                } else {
                    format!("{apt} install -y {}", ps.join(" "))
                };
                v.push(retry(&cmd, &update));
            }
            for (p, ver) in &u.pin {
                v.push(retry(
                    &format!(
                        "{apt} install -y --allow-downgrades {}",
                        sq(&format!("{p}={ver}"))
                    ),
                    &update,
                ));
            }
            if !u.exclude.is_empty() {
                v.push(format!(
                    "[ -z \"$held\" ] || {} $held >/dev/null",
                    t.su("apt-mark unhold")
                ));
            }
        }
        "apk" => {
            let apk = t.su("apk");
            let update = format!("{apk} update -q");
            if u.policy == "full" {
                v.push(retry(&format!("{apk} upgrade --no-cache"), &update));
            }
            if !u.packages.is_empty() {
                let ps: Vec<String> = u.packages.iter().map(|p| sq(p)).collect();
                v.push(retry(
                    &format!("{apk} add --no-cache --upgrade {}", ps.join(" ")),
                    &update,
                ));
            }
            for (p, ver) in &u.pin {
                v.push(retry(
                    &format!("{apk} add --no-cache {}", sq(&format!("{p}={ver}"))),
                    &update,
                ));
            }
        }
        _ => {
            if b.os_type == "rhel" || b.family == "rhel" {
                let major = b.family_version.split('.').next().unwrap_or("");
                let arch = match b.architecture.as_str() {
                    "arm64" | "aarch64" => "aarch64",
                    _ => "x86_64",
                };
                v.push(
                    "# subscription-managed systems get their repos enabled; RHUI/PAYG images skip"
                        .into(),
                );
                v.push(format!(
                    "if {sm} identity >/dev/null 2>&1; then {sm} refresh; {sm} repos --disable='*'; {sm} repos --enable='rhel-{major}-for-{arch}-baseos-rpms' --enable='rhel-{major}-for-{arch}-appstream-rpms' --enable='codeready-builder-for-rhel-{major}-{arch}-rpms'; else echo 'not subscription-registered (RHUI image): using vendor repos as-is'; fi",
                    sm = t.su("subscription-manager")
                ));
            }
            let dnf = t.su("dnf");
            let clean = format!("{dnf} clean all");
            v.push(clean.clone());
            let excl: String = u
                .exclude
                .iter()
                .map(|e| format!(" --exclude={e}"))
                .collect();
            match u.policy.as_str() {
                "security" => v.push(retry(&format!("{dnf} -y update --security{excl}"), &clean)),
                "full" => v.push(retry(&format!("{dnf} -y update{excl}"), &clean)),
                _ => {}
            }
            if !u.packages.is_empty() {
                let ps: Vec<String> = u.packages.iter().map(|p| sq(p)).collect();
                let verb = if u.policy == "packages" {
                    "update"
                } else {
                    "install"
                };
                v.push(retry(
                    &format!("{dnf} -y {verb}{excl} {}", ps.join(" ")),
                    &clean,
                ));
            }
            for (p, ver) in &u.pin {
                v.push(retry(
                    &format!("{dnf} -y install {}", sq(&format!("{p}-{ver}"))),
                    &clean,
                ));
            }
        }
    }
    v.extend(packages_txt_lines(
        t,
        package_manager_of(&b.os_type, &b.family),
    ));
    Some(v)
}

fn home_of(user: &str) -> String {
    if user == "root" {
        "/root".into()
    } else {
        format!("/home/{user}")
    }
}

/// The mandatory local admin user: account, sudoers drop-in, public keys.
pub fn admin_user_lines(t: &Target, b: &BaseRecipe) -> Vec<String> {
    let u = &b.admin_user;
    let h = home_of(u);
    let ssh = format!("{h}/.ssh");
    let ak = format!("{ssh}/authorized_keys");
    let mut v = vec![
        format!("# mandatory local admin user '{u}' (DESIGN Q2/N9): public keys only"),
        format!(
            "id -u {u} >/dev/null 2>&1 || {}",
            t.su(&format!("useradd -m -s /bin/bash {u}"))
        ),
        format!(
            "echo '{u} ALL=(ALL) NOPASSWD:ALL' | {} >/dev/null && {}",
            t.su(&format!("tee /etc/sudoers.d/90-{u}")),
            t.su(&format!("chmod 0440 /etc/sudoers.d/90-{u}"))
        ),
        format!(
            "{} && {}",
            t.su(&format!("mkdir -p {ssh}")),
            t.su(&format!("chmod 0700 {ssh}"))
        ),
        t.su(&format!("rm -f {ak}")),
    ];
    for k in &b.admin_public_keys {
        v.push(format!(
            "echo {} | {} >/dev/null",
            sq_always(k),
            t.su(&format!("tee -a {ak}"))
        ));
    }
    v.push(format!(
        "{} && {}",
        t.su(&format!("touch {ak}")),
        t.su(&format!("chmod 0600 {ak}"))
    ));
    v.push(t.su(&format!("chown -R {u}:{u} {ssh}")));
    v
}

fn admin_verify_lines(t: &Target, b: &BaseRecipe) -> Vec<String> {
    let u = &b.admin_user;
    let ak = format!("{}/.ssh/authorized_keys", home_of(u));
    let mut v = vec![
        format!("# verify: admin user {u}"),
        format!("id -u {u} >/dev/null 2>&1"),
        t.su(&format!("test -f {ak}")),
    ];
    for k in &b.admin_public_keys {
        // the key's body: the field after the key type
        let body = k.split_whitespace().nth(1).unwrap_or(k.as_str());
        v.push(t.su(&format!("grep -q -- {} {ak}", sq(body))));
    }
    v
}

/// The group builder's base-image prerequisites of an identity type.
pub fn identity_lines(t: &Target, b: &BaseRecipe, p: &IdentityPrereq) -> Vec<String> {
    match p.identity_type.as_str() {
        "okta" => {
            let mut v = vec![format!(
                "# identity type 'okta' prerequisites ({}): OPA agent, dormant",
                p.builder
            )];
            if package_manager_of(&b.os_type, &b.family) == "apt" {
                v.push(format!("{} -o DPkg::Lock::Timeout=600 update -qq", t.su("apt-get")));
                v.push(format!("{} -o DPkg::Lock::Timeout=600 install -y curl gnupg", t.su("DEBIAN_FRONTEND=noninteractive apt-get")));
                v.push(format!("curl -fsSL https://dist.scaleft.com/GPG-KEY-OktaPAM-2023 | gpg --dearmor | {} >/dev/null", t.su("tee /usr/share/keyrings/oktapam-2023-archive-keyring.gpg")));
                v.push(format!("echo \"deb [signed-by=/usr/share/keyrings/oktapam-2023-archive-keyring.gpg] https://dist.scaleft.com/repos/deb $(. /etc/os-release; echo $VERSION_CODENAME) okta\" | {}", t.su("tee /etc/apt/sources.list.d/oktapam-stable.list")));
                v.push(format!("{} -o DPkg::Lock::Timeout=600 update -qq", t.su("apt-get")));
                v.push(format!("{} -o DPkg::Lock::Timeout=600 install -y scaleft-server-tools", t.su("DEBIAN_FRONTEND=noninteractive apt-get")));
            } else {
                v.push(t.su("rpm --import https://dist.scaleft.com/GPG-KEY-OktaPAM-2023"));
                v.push(format!("printf '[oktapam-stable]\\nname=Okta PAM Stable - $basearch\\nbaseurl=https://dist.scaleft.com/repos/rpm/stable/rhel/$releasever/$basearch\\ngpgcheck=1\\nrepo_gpgcheck=1\\nenabled=1\\ngpgkey=https://dist.scaleft.com/GPG-KEY-OktaPAM-2023\\n' | {}", t.su("tee /etc/yum.repos.d/oktapam-stable.repo")));
                v.push(t.su("yum install -y scaleft-server-tools"));
            }
            v.push(format!("{} || true", t.su("systemctl disable --now sftd")));
            v.push(t.su("rm -f /var/lib/sftd/enrollment.token"));
            v
        }
        "posix" => vec![
            format!(
                "# identity type 'posix' prerequisites ({}): the account tools the login hook uses",
                p.builder
            ),
            "command -v getent >/dev/null 2>&1 && command -v gpasswd >/dev/null 2>&1 || { echo 'csis: posix identity needs getent and gpasswd (shadow utilities) in the image' >&2; exit 1; }".into(),
        ],
        other => vec![format!("# identity type '{other}': no prerequisites known")],
    }
}

fn identity_verify_lines(p: &IdentityPrereq) -> Vec<String> {
    match p.identity_type.as_str() {
        "okta" => vec![
            "# verify: OPA agent present and dormant".into(),
            "command -v sftd >/dev/null 2>&1 || test -x /usr/sbin/sftd || test -x /usr/bin/sftd"
                .into(),
            "! systemctl is-enabled sftd >/dev/null 2>&1".into(),
            "test ! -e /var/lib/sftd/enrollment.token".into(),
        ],
        "posix" => vec![
            "# verify: posix account tools present".into(),
            "command -v gpasswd >/dev/null 2>&1".into(),
        ],
        _ => Vec::new(),
    }
}

/// The storage builder's prerequisites of a storage type on this runtime.
pub fn storage_step(t: &Target, b: &BaseRecipe, p: &StoragePrereq) -> Step {
    let st = &p.storage_type;
    let Some(builder) = &p.builder else {
        return Step {
            comment: format!(
                "storage type '{st}' declared but has no plugin on runtime {}: nothing to bake here",
                t.runtime
            ),
            kind: StepKind::Note,
        };
    };
    let apt = package_manager_of(&b.os_type, &b.family) == "apt";
    let lines = match st.as_str() {
        "efs" | "filestore" | "nfs" => vec![
            format!("# storage type '{st}' prerequisites ({builder}): the NFS client"),
            if apt {
                format!(
                    "dpkg -s nfs-common >/dev/null 2>&1 || {{ {} update -qq && {} install -y nfs-common; }}",
                    t.su("apt-get"),
                    t.su("DEBIAN_FRONTEND=noninteractive apt-get")
                )
            } else {
                format!(
                    "rpm -q nfs-utils >/dev/null 2>&1 || {}",
                    t.su("dnf -y install nfs-utils")
                )
            },
        ],
        _ => vec![format!(
            "# storage type '{st}' declared: no prerequisites to bake ({builder})"
        )],
    };
    Step {
        comment: format!("storage type '{st}' prerequisites"),
        kind: StepKind::Shell {
            lines,
            runner: true,
            env: Vec::new(),
            execute_command: None,
        },
    }
}

// ---------------------------------------------------------------------------
// instance image

/// `ensure:` as idempotent lines: each checks, then installs or writes; a
/// second run changes nothing (no file rewritten, no mode reset, no package
/// touched, a command skipped when its `unless` holds).
pub fn ensure_lines(t: &Target, e: &Ensure) -> Vec<String> {
    let mut v = Vec::new();
    if !e.packages.is_empty() {
        let ps: Vec<String> = e.packages.iter().map(|p| sq(p)).collect();
        v.push(format!(
            "need=; for p in {}; do rpm -q \"$p\" >/dev/null 2>&1 || dpkg -s \"$p\" >/dev/null 2>&1 || apk info -e \"$p\" >/dev/null 2>&1 || need=\"$need $p\"; done",
            ps.join(" ")
        ));
        v.push(format!(
            "if [ -z \"$need\" ]; then echo 'ensure: packages present'; else echo \"ensure: installing$need\"; for p in $need; do if command -v dnf >/dev/null 2>&1; then {}; elif command -v yum >/dev/null 2>&1; then {}; elif command -v apt-get >/dev/null 2>&1; then {{ ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || {}; }} && {}; elif command -v apk >/dev/null 2>&1; then {}; else echo \"csis ensure: no dnf, yum, apt-get or apk to install $p\" >&2; false; fi || exit 1; done; fi",
            t.su("dnf -y install \"$p\""),
            t.su("yum -y install \"$p\""),
            t.su("apt-get -o DPkg::Lock::Timeout=600 update -qq"),
            t.su("DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y \"$p\""),
            t.su("apk add --no-cache \"$p\""),
        ));
    }
    for f in &e.files {
        let path = sq_always(&f.path);
        let mode = if f.mode.is_empty() {
            "0644"
        } else {
            f.mode.as_str()
        };
        let bare = mode.trim_start_matches('0');
        let bare = if bare.is_empty() { "0" } else { bare };
        v.push(format!(
            "printf '%s' {} | base64 -d > /tmp/.csis-ensure && ( {} || {} ) && rm -f /tmp/.csis-ensure",
            sq_always(&base64(f.content.as_bytes())),
            t.su(&format!("cmp -s /tmp/.csis-ensure {path}")),
            format!(
                "{{ {} && {}; }}",
                t.su(&format!("mkdir -p \"$(dirname {path})\"")),
                t.su(&format!("cp /tmp/.csis-ensure {path}"))
            ),
        ));
        v.push(format!(
            "[ \"$({})\" = {bare} ] || {}",
            t.su(&format!("stat -c %a {path}")),
            t.su(&format!("chmod {mode} {path}"))
        ));
    }
    for s in &e.services {
        if t.systemd {
            let q = sq(s);
            v.push(format!(
                "systemctl is-enabled {q} >/dev/null 2>&1 || {}",
                t.su(&format!("systemctl enable --now {q}"))
            ));
        } else {
            v.push(format!(
                "echo {}",
                sq(&format!(
                    "ensure: service {s} skipped: services need systemd, which runtime {} does not run",
                    t.runtime
                ))
            ));
        }
    }
    for c in &e.commands {
        match &c.unless {
            Some(u) => v.push(format!(
                "if ( {u} ) >/dev/null 2>&1; then echo {}; else {}; fi",
                sq(&format!("ensure: skipped (unless holds): {}", c.run)),
                c.run
            )),
            None => v.push(c.run.clone()),
        }
    }
    v
}

/// The ansible interpreter: a python3 linked at [`ANSIBLE_PYTHON`].
pub fn ansible_python_lines(t: &Target, pm: &str) -> Vec<String> {
    let install = match pm {
        "apt" => format!(
            "command -v python3 >/dev/null 2>&1 || {{ {} update -qq && {} install -y python3; }} >/dev/null 2>&1",
            t.su("apt-get"),
            t.su("DEBIAN_FRONTEND=noninteractive apt-get")
        ),
        "apk" => format!("command -v python3 >/dev/null 2>&1 || {} >/dev/null 2>&1", t.su("apk add --no-cache python3")),
        _ => format!(
            "for v in 3.12 3.11 3.9; do command -v python$v >/dev/null 2>&1 && break; {} >/dev/null 2>&1 && break; done",
            t.su("dnf -y install python$v")
        ),
    };
    vec![format!(
        "test -x {ANSIBLE_PYTHON} || {{ {install}; P=$(ls /usr/bin/python3.[0-9]* 2>/dev/null | grep -v config | sort -V | tail -1); [ -n \"$P\" ] || P=$(command -v python3); {}; }}",
        t.su(&format!("ln -sf \"$P\" {ANSIBLE_PYTHON}"))
    )]
}

/// The posix login hook (members join their groups at each login).
fn posix_login_hook_lines() -> Vec<String> {
    [
        "#!/usr/bin/env bash",
        "# cs-image-system posix accounts (stage 75): idempotent; adopts what is equal, refuses what differs",
        "set -euo pipefail",
        "conflict() { echo \"posix accounts: $*\" >&2; exit 3; }",
        "# the login hook: members join their groups at each login (stage 75)",
        "install -d -m 0755 /etc/csis/groups",
        "install -d -m 0700 /etc/csis/keys",
        "cat > /usr/local/sbin/csis-group-login <<'CSIS_LOGIN_HOOK'",
        "#!/bin/bash",
        "# cs-image-system (stage 75): at each login, join the user to every group whose",
        "# member list (/etc/csis/groups/<group>.members, one name a line) names them, and",
        "# install their keys when /etc/csis/keys/<user> exists. Run by pam_exec; never fails.",
        "[ \"${PAM_TYPE:-}\" = \"open_session\" ] || exit 0",
        "user=\"${PAM_USER:-}\"",
        "[ -n \"$user\" ] && getent passwd \"$user\" >/dev/null || exit 0",
        "for list in /etc/csis/groups/*.members; do",
        "  [ -e \"$list\" ] || continue",
        "  group=$(basename \"$list\" .members)",
        "  grep -qxF -- \"$user\" \"$list\" || continue",
        "  getent group \"$group\" >/dev/null || continue",
        "  id -nG \"$user\" | tr ' ' '\\n' | grep -qxF -- \"$group\" || gpasswd -a \"$user\" \"$group\" >/dev/null 2>&1 || true",
        "done",
        "if [ -f \"/etc/csis/keys/$user\" ]; then",
        "  home=$(getent passwd \"$user\" | cut -d: -f6)",
        "  install -d -m 0700 -o \"$user\" -g \"$(id -g \"$user\")\" \"$home/.ssh\" 2>/dev/null &&",
        "    install -m 0600 -o \"$user\" -g \"$(id -g \"$user\")\" \"/etc/csis/keys/$user\" \"$home/.ssh/authorized_keys\" 2>/dev/null || true",
        "fi",
        "exit 0",
        "CSIS_LOGIN_HOOK",
        "chmod 0755 /usr/local/sbin/csis-group-login",
        "mkdir -p /etc/pam.d",
        "grep -qxF 'session optional pam_exec.so quiet /usr/local/sbin/csis-group-login' /etc/pam.d/sshd 2>/dev/null || echo 'session optional pam_exec.so quiet /usr/local/sbin/csis-group-login' >> /etc/pam.d/sshd",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Group activation for the image's own group (overwrites the parent's).
pub fn activation_lines(t: &Target, image: &str, g: &GroupActivation) -> Vec<String> {
    let mut v = vec![format!(
        "# identity activation for group '{}' ({}) on image {image}",
        g.group, g.identity_type
    )];
    if g.identity_type == "okta" {
        v.push(t.su("mkdir -p /etc/sft"));
        v.push(format!(
            "printf 'Labels:\\n  tx.group: {}\\n' | {}",
            g.group,
            t.su("tee /etc/sft/sftd.yaml")
        ));
        v.push(t.su("systemctl enable sftd"));
    }
    if g.posix || g.identity_type == "posix" {
        v.push(format!("{} <<'CSIS_POSIX_ACCOUNTS'", t.su("bash -s")));
        v.extend(posix_login_hook_lines());
        v.push("CSIS_POSIX_ACCOUNTS".into());
    }
    v
}

fn activation_verify_lines(g: &GroupActivation) -> Vec<String> {
    let mut v = Vec::new();
    if g.identity_type == "okta" {
        v.push(format!("# verify: activated for group '{}'", g.group));
        v.push(format!(
            "grep -q 'tx.group: {}' /etc/sft/sftd.yaml",
            g.group
        ));
        v.push("systemctl is-enabled sftd >/dev/null 2>&1".into());
    }
    if g.posix || g.identity_type == "posix" {
        v.push("# verify: the posix login hook is installed (stage 75)".into());
        v.push("test -x /usr/local/sbin/csis-group-login".into());
        v.push("grep -q csis-group-login /etc/pam.d/sshd".into());
    }
    v
}

/// One in-bake assertion as a `set -e`-safe line that says what failed.
pub fn test_line(t: &TestCommand) -> String {
    let fail = |why: &str| sq(&format!("in-bake test failed: {}: {why}", t.description));
    let rc = format!(
        "[ $rc -eq {n} ] || {{ echo {} \"$rc\" >&2; exit 1; }}",
        fail(&format!("expected exit code {}, got", t.expect_rc)),
        n = t.expect_rc
    );
    match &t.contains {
        None => format!("rc=0; ( {} ) >/dev/null 2>&1 || rc=$?; {rc}", t.run),
        Some(c) => format!(
            "rc=0; out=$( ( {} ) 2>&1 ) || rc=$?; {rc}; printf '%s' \"$out\" | grep -qF -- {} || {{ echo {} >&2; exit 1; }}",
            t.run,
            sq(c),
            fail(&format!("output does not contain '{c}'"))
        ),
    }
}

fn verify_step(kind: &str, image: &str, body: Vec<String>, tests: &[TestCommand]) -> Option<Step> {
    let mut lines = vec!["set -e".to_string()];
    lines.extend(body);
    lines.extend(tests.iter().map(test_line));
    let n = lines
        .iter()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('#'))
        .count();
    if n == 0 {
        return None;
    }
    Some(Step {
        comment: format!("in-bake verification for {kind} {image}: {n} assertion(s)"),
        kind: StepKind::Verify {
            lines,
            assertions: n,
        },
    })
}

/// A path relative to the tree root when it is under it, else its file name.
fn rel_of(tree_root: &Path, p: &Path, dir: &str) -> String {
    match p.strip_prefix(tree_root) {
        Ok(r) => r.display().to_string(),
        Err(_) => format!(
            "{dir}/{}",
            p.file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default()
        ),
    }
}

fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// A YAML scalar: plain when it reads back as the same string, else JSON-quoted.
fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !matches!(
            s,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

const CSIS_MODS_SCRIPT: &str = r#"#!/bin/sh
# csis-mods: re-run the modifications baked into this image (cs-image-system).
# Usage: csis-mods list | csis-mods rerun [name]
set -eu
ROOT="${CSIS_MODS_ROOT:-/opt/csis/mods}"
cmd="${1:-list}"; want="${2:-}"
case "$cmd" in
  list)
    for d in "$ROOT"/[0-9][0-9]-*/; do [ -d "$d" ] || continue; printf '%s\n' "$(basename "$d")"; done ;;
  rerun)
    for d in "$ROOT"/[0-9][0-9]-*/; do
      [ -d "$d" ] || continue
      name="$(basename "$d")"
      case "$name" in *-"$want"|"$want") match=1 ;; *) match=0 ;; esac
      if [ -z "$want" ] || [ "$match" = 1 ]; then
        echo "== csis-mods: $name"
        ( cd "$d" && sh ./run.sh )
      fi
    done ;;
  *) echo "usage: csis-mods list | rerun [name]" >&2; exit 2 ;;
esac
"#;

/// The local modification bundle (`csis-mods/<image>/`, emission.md §2.6):
/// a MANIFEST.yaml, the `csis-mods` re-runner, one `NN-<mod>/` per
/// modification with its files, its own MANIFEST.yaml and `run.sh`.
fn bundle_files(
    t: &Target,
    req: &BakeRequest,
    img: &ImageRecipe,
) -> std::io::Result<Vec<EmittedFile>> {
    let image = &req.series;
    let run = req.tags.get("csis_run").cloned().unwrap_or_default();
    let root = format!("csis-mods/{image}");
    let mut files = Vec::new();
    let mut manifest = format!("image: {}\nmods:\n", yaml_scalar(image));
    for (i, step) in req.steps.iter().enumerate() {
        let (name, sources, inline): (&str, Vec<&PathBuf>, Vec<String>) = match step {
            BakeStep::Ansible {
                name, playbooks, ..
            } => (name, playbooks.iter().collect(), Vec::new()),
            BakeStep::Shell {
                name,
                scripts,
                ensure,
                inline,
                ..
            } => {
                let mut l = Vec::new();
                if let Some(e) = ensure {
                    l.extend(ensure_lines(t, e));
                }
                l.extend(inline.iter().cloned());
                (name, scripts.iter().collect(), l)
            }
        };
        let m = img.bundle.get(i).cloned().unwrap_or(BundleMod {
            name: name.to_string(),
            builder: String::new(),
            operation: match step {
                BakeStep::Ansible { .. } => "ansible".into(),
                BakeStep::Shell { .. } => "bash".into(),
            },
            idempotent: "unknown".into(),
            content_hash: String::new(),
        });
        let dir = format!("{:02}-{}", i + 1, m.name);
        let mut names = Vec::new();
        for p in &sources {
            let f = p
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default();
            files.push(EmittedFile {
                rel: format!("{root}/{dir}/{f}"),
                content: read(p)?,
                mode: 0o644,
            });
            names.push(f);
        }
        let mut run_sh = String::from("#!/bin/sh\nset -eu\ncd \"$(dirname \"$0\")\"\n");
        match step {
            BakeStep::Ansible { .. } => {
                run_sh.push_str("command -v ansible-playbook >/dev/null 2>&1 || { echo 'ansible-playbook not present on this image; cannot re-run' >&2; exit 3; }\n");
                for n in &names {
                    run_sh.push_str(&format!(
                        "ansible-playbook -i localhost, -c local {}\n",
                        sq_always(n)
                    ));
                }
            }
            BakeStep::Shell { .. } => {
                for n in &names {
                    run_sh.push_str(&format!("sh {}\n", sq_always(n)));
                }
                if !inline.is_empty() {
                    let mut s = String::from("#!/bin/sh\nset -eu\n");
                    for l in &inline {
                        s.push_str(l);
                        s.push('\n');
                    }
                    files.push(EmittedFile {
                        rel: format!("{root}/{dir}/inline.sh"),
                        content: s.into_bytes(),
                        mode: 0o644,
                    });
                    names.push("inline.sh".into());
                    run_sh.push_str("sh ./inline.sh\n");
                }
            }
        }
        files.push(EmittedFile {
            rel: format!("{root}/{dir}/run.sh"),
            content: run_sh.into_bytes(),
            mode: 0o755,
        });
        let ty = if m.builder.is_empty() {
            m.operation.clone()
        } else {
            m.builder.clone()
        };
        manifest.push_str(&format!(
            "- content_hash: {}\n  dir: {}\n  idempotent: {}\n  name: {}\n  operation: {}\n  type: {}\n",
            yaml_scalar(&m.content_hash),
            yaml_scalar(&dir),
            yaml_scalar(&m.idempotent),
            yaml_scalar(&m.name),
            yaml_scalar(&m.operation),
            yaml_scalar(&ty),
        ));
        let mut own = format!("content_hash: {}\nfiles:\n", yaml_scalar(&m.content_hash));
        if names.is_empty() {
            own = format!(
                "content_hash: {}\nfiles: []\n",
                yaml_scalar(&m.content_hash)
            );
        }
        for n in &names {
            own.push_str(&format!("- {}\n", yaml_scalar(n)));
        }
        own.push_str(&format!(
            "idempotent: {}\nimage: {}\nname: {}\noperation: {}\nrun: {}\ntype: {}\n",
            yaml_scalar(&m.idempotent),
            yaml_scalar(image),
            yaml_scalar(&m.name),
            yaml_scalar(&m.operation),
            yaml_scalar(&run),
            yaml_scalar(&ty),
        ));
        files.push(EmittedFile {
            rel: format!("{root}/{dir}/MANIFEST.yaml"),
            content: own.into_bytes(),
            mode: 0o644,
        });
    }
    if req.steps.is_empty() {
        manifest = format!("image: {}\nmods: []\n", yaml_scalar(image));
    }
    manifest.push_str(&format!("run: {}\n", yaml_scalar(&run)));
    files.push(EmittedFile {
        rel: format!("{root}/MANIFEST.yaml"),
        content: manifest.into_bytes(),
        mode: 0o644,
    });
    files.push(EmittedFile {
        rel: format!("{root}/csis-mods"),
        content: CSIS_MODS_SCRIPT.as_bytes().to_vec(),
        mode: 0o755,
    });
    Ok(files)
}

/// A file a step reads; the error names it.
fn read(p: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
}

fn shell(lines: Vec<String>) -> StepKind {
    StepKind::Shell {
        lines,
        runner: true,
        env: Vec::new(),
        execute_command: None,
    }
}

/// The ordered steps of a bake (emission.md §2.1), for one runtime.
pub fn lower(req: &BakeRequest, t: &Target) -> std::io::Result<Lowered> {
    let mut steps = vec![Step {
        comment: format!(
            "before anything else: the build machine settles ({})",
            t.runtime
        ),
        kind: StepKind::Shell {
            lines: settle_lines(t),
            runner: false,
            env: Vec::new(),
            execute_command: None,
        },
    }];
    let mut files = Vec::new();
    let image = &req.series;
    if let Some(b) = &req.recipe.base {
        if let Some(lines) = update_lines(t, b) {
            steps.push(Step {
                comment: format!(
                    "OS update for base image {image} (policy={}, packages={}, exclude={}, pin={}, {})",
                    b.update.policy,
                    py_list(&b.update.packages),
                    py_list(&b.update.exclude),
                    py_map(&b.update.pin),
                    b.family
                ),
                kind: shell(lines),
            });
        }
        steps.push(Step {
            comment: format!(
                "admin user {} ({} public key(s))",
                b.admin_user,
                b.admin_public_keys.len()
            ),
            kind: shell(admin_user_lines(t, b)),
        });
        for p in &b.identity {
            steps.push(Step {
                comment: format!("identity type '{}' prerequisites, dormant", p.identity_type),
                kind: shell(identity_lines(t, b, p)),
            });
        }
        for p in &b.storage {
            steps.push(storage_step(t, b, p));
        }
        let mut verify = admin_verify_lines(t, b);
        for p in &b.identity {
            verify.extend(identity_verify_lines(p));
        }
        if let Some(a) = &t.session_agent {
            steps.push(Step {
                comment: format!("debug session mechanism ({})", a.mechanism),
                kind: shell(a.install.clone()),
            });
            verify.extend(a.verify.iter().cloned());
        }
        if let Some(v) = verify_step("base image", image, verify, &req.tests) {
            steps.push(v);
        }
    } else {
        let pm = req.package_manager.as_deref().unwrap_or("dnf");
        for step in &req.steps {
            match step {
                BakeStep::Ansible {
                    name,
                    playbooks,
                    extra_arguments,
                    binary,
                    extra_vars,
                } => {
                    steps.push(Step {
                        comment: format!("Modifications for {name} of type ansible"),
                        kind: shell(ansible_python_lines(t, pm)),
                    });
                    let mut args = vec![
                        "-e".to_string(),
                        format!("ansible_python_interpreter={ANSIBLE_PYTHON}"),
                    ];
                    args.extend(extra_arguments.iter().cloned());
                    if !extra_vars.is_empty() {
                        let json =
                            serde_json::to_string(&serde_json::Value::Object(extra_vars.clone()))
                                .unwrap_or_default();
                        args.push("-e".into());
                        args.push(if csis_schema::secret::contains(&json) {
                            // a secret never lands in the emission: ansible
                            // reads the config from a 0600 file under .csis/
                            format!("@{}", private_vars(req, name, &json)?.display())
                        } else {
                            json
                        });
                    }
                    for pb in playbooks {
                        let rel = rel_of(&req.tree_root, pb, "playbooks");
                        files.push(EmittedFile {
                            rel: rel.clone(),
                            content: read(pb)?,
                            mode: 0o644,
                        });
                        steps.push(Step {
                            comment: format!("modification {name}: ansible {rel}"),
                            kind: StepKind::Ansible {
                                playbook: (rel, pb.clone()),
                                extra_arguments: args.clone(),
                                binary: binary.clone(),
                            },
                        });
                    }
                }
                BakeStep::Shell {
                    name,
                    inline,
                    scripts,
                    ensure,
                    env,
                    execute_command,
                } => {
                    if !scripts.is_empty() {
                        let mut list = Vec::new();
                        for p in scripts {
                            let rel = rel_of(&req.tree_root, p, "scripts");
                            files.push(EmittedFile {
                                rel: rel.clone(),
                                content: read(p)?,
                                mode: 0o755,
                            });
                            list.push((rel, p.clone()));
                        }
                        steps.push(Step {
                            comment: format!("Modifications for {name} of type bash (shell)"),
                            kind: StepKind::Scripts {
                                scripts: list,
                                runner: execute_command.is_none(),
                                env: env.clone(),
                                execute_command: execute_command.clone(),
                            },
                        });
                    }
                    let mut lines = Vec::new();
                    if let Some(e) = ensure {
                        lines.extend(ensure_lines(t, e));
                    }
                    lines.extend(inline.iter().cloned());
                    if !lines.is_empty() {
                        steps.push(Step {
                            comment: format!("modification {name}"),
                            kind: StepKind::Shell {
                                lines,
                                runner: execute_command.is_none(),
                                env: env.clone(),
                                execute_command: execute_command.clone(),
                            },
                        });
                    }
                }
            }
        }
        let img = req.recipe.image.clone().unwrap_or_default();
        let mut verify = Vec::new();
        if let Some(g) = &img.group {
            steps.push(Step {
                comment: format!(
                    "identity activation for owning group '{}' ({})",
                    g.group, g.identity_type
                ),
                kind: shell(activation_lines(t, image, g)),
            });
            verify.extend(activation_verify_lines(g));
        }
        files.extend(bundle_files(t, req, &img)?);
        steps.push(Step {
            comment: format!(
                "local modification bundle for {image} -> /opt/csis/mods (re-run with `csis-mods rerun`)"
            ),
            kind: StepKind::Shell {
                lines: vec!["mkdir -p /tmp/csis-mods".into()],
                runner: false,
                env: Vec::new(),
                execute_command: None,
            },
        });
        steps.push(Step {
            comment: String::new(),
            kind: StepKind::Upload {
                rel: format!("csis-mods/{image}/"),
                destination: "/tmp/csis-mods".into(),
            },
        });
        steps.push(Step {
            comment: String::new(),
            kind: StepKind::Shell {
                lines: vec![
                    format!(
                        "{} && {}",
                        t.su("rm -rf /opt/csis/mods"),
                        t.su("mkdir -p /opt/csis")
                    ),
                    t.su("mv /tmp/csis-mods /opt/csis/mods"),
                    format!(
                        "{} && {} && {}",
                        t.su("mkdir -p /usr/local/bin"),
                        t.su("cp /opt/csis/mods/csis-mods /usr/local/bin/csis-mods"),
                        t.su("chmod 0755 /usr/local/bin/csis-mods")
                    ),
                    t.su("chmod -R go-w /opt/csis/mods"),
                ],
                runner: false,
                env: Vec::new(),
                execute_command: None,
            },
        });
        if let Some(v) = verify_step("instance image", image, verify, &req.tests) {
            steps.push(v);
        }
    }
    let assertions = steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Verify { assertions, .. } => *assertions,
            _ => 0,
        })
        .sum();
    // one copy of each file (two mods may name the same script)
    let mut seen = BTreeMap::new();
    files.retain(|f| seen.insert(f.rel.clone(), ()).is_none());
    Ok(Lowered {
        steps,
        files,
        assertions,
    })
}

/// A script of shell lines, as packer writes an `inline` provisioner.
pub fn script_of(lines: &[String]) -> String {
    let mut s = String::from("#!/bin/sh -e\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// Render a packer-style `execute_command` (`{{ .Vars }}`, `{{ .Path }}`).
pub fn execute_command(template: Option<&str>, path: &str, env: &[String]) -> String {
    let vars = env
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => format!("{k}={}", sq(v)),
            None => sq(kv),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let t = template.unwrap_or("chmod +x {{ .Path }}; {{ .Vars }} {{ .Path }}");
    let mut out = t.to_string();
    for (pat, val) in [
        ("{{ .Path }}", path),
        ("{{.Path}}", path),
        ("{{ .Vars }}", vars.as_str()),
        ("{{.Vars}}", vars.as_str()),
    ] {
        out = out.replace(pat, val);
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests;
