//! Instance image steps: `ensure:` as idempotent lines, the ansible
//! interpreter, the owning group's activation and its login hook.

use super::shell::{base64, sq, sq_always};
use super::types::{GroupActivation, Target};
use crate::Ensure;

/// Where the ansible interpreter is provisioned.
pub const ANSIBLE_PYTHON: &str = "/usr/local/bin/csis-ansible-python";

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
        let install = format!(
            "{{ {} && {}; }}",
            t.su(&format!("mkdir -p \"$(dirname {path})\"")),
            t.su(&format!("cp /tmp/.csis-ensure {path}"))
        );
        v.push(format!(
            "printf '%s' {} | base64 -d > /tmp/.csis-ensure && ( {} || {install} ) && rm -f /tmp/.csis-ensure",
            sq_always(&base64(f.content.as_bytes())),
            t.su(&format!("cmp -s /tmp/.csis-ensure {path}")),
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

pub(super) fn activation_verify_lines(g: &GroupActivation) -> Vec<String> {
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
