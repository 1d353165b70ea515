//! The launch script: the original's user data (its 0.1.1 emission's
//! `user-data-<instance>.sh.tftpl`) in its order, for every runtime and for
//! a POSIX `sh` (busybox's included): the hostname, the posix group with
//! its gid, the group's admins, per storage its mount point and a
//! `<mount_point>/<group>/` subtree with the storage's share mode, the
//! instance's userdata, and last the completion marker
//! ([`LAUNCH_MARKER`]). It is idempotent: a restart (a container's) runs it
//! again and changes nothing that the first run made.
//!
//! Accounts are read and written through `/etc/passwd` and `/etc/group`
//! (ids by number, never by a name lookup a static busybox may not do),
//! with the distribution's tools when it has them (`groupadd`, `useradd`,
//! `usermod`; busybox's `addgroup`, `adduser`).

use std::fmt::Write;

use super::{LaunchScript, LaunchUser, MountRequest, LAUNCH_MARKER};

/// The functions the steps call.
const HELPERS: &str = r#"csis_has() { command -v "$1" >/dev/null 2>&1; }
# csis_entry FILE NAME: /etc/passwd or /etc/group has NAME
csis_entry() { awk -F: -v n="$2" '$1 == n { f = 1 } END { exit !f }' "$1"; }
# csis_id FILE NAME: its uid or gid
csis_id() { awk -F: -v n="$2" '$1 == n { print $3; exit }' "$1"; }
# csis_next_id FILE: the first free id from 1000
csis_next_id() { awk -F: 'BEGIN { m = 999 } $3 > m && $3 < 60000 { m = $3 } END { print m + 1 }' "$1"; }
# csis_group NAME GID: the group, made once (GID empty: the machine chooses)
csis_group() {
  if csis_entry /etc/group "$1"; then
    if [ -n "$2" ] && [ "$(csis_id /etc/group "$1")" != "$2" ]; then
      echo "csis-launch: group $1 exists with gid $(csis_id /etc/group "$1"), declared $2" >&2
    fi
    return 0
  fi
  if csis_has groupadd; then groupadd ${2:+-g "$2"} "$1"
  elif csis_has addgroup; then addgroup ${2:+-g "$2"} "$1"
  else echo "$1:x:${2:-$(csis_next_id /etc/group)}:" >> /etc/group
  fi
}
# csis_member USER GROUP: USER listed in GROUP, once
csis_member() {
  awk -F: -v g="$2" -v u="$1" '$1 == g { n = split($4, m, ","); for (i = 1; i <= n; i++) if (m[i] == u) f = 1 } END { exit !f }' /etc/group && return 0
  if csis_has usermod; then usermod -a -G "$2" "$1"; return; fi
  awk -F: -v OFS=: -v g="$2" -v u="$1" '$1 == g { $4 = ($4 == "" ? u : $4 "," u) } { print }' /etc/group > /etc/group.csis-launch
  cat /etc/group.csis-launch > /etc/group
  rm -f /etc/group.csis-launch
}
# csis_user NAME UID GROUP: the account, made once, a member of GROUP
csis_user() {
  if ! csis_entry /etc/passwd "$1"; then
    if csis_has useradd; then useradd -m ${2:+-u "$2"} "$1"
    elif csis_has adduser; then adduser -D ${2:+-u "$2"} "$1"
    else
      u=${2:-$(csis_next_id /etc/passwd)}
      g=$(csis_id /etc/group "$3")
      echo "$1:x:$u:$g::/home/$1:/bin/sh" >> /etc/passwd
      mkdir -p "/home/$1"
      chown "$u:$g" "/home/$1"
    fi
  fi
  csis_member "$1" "$3"
}
# csis_key USER KEY: KEY in USER's authorized_keys, once
csis_key() {
  h=$(awk -F: -v n="$1" '$1 == n { print $6; exit }' /etc/passwd)
  [ -n "$h" ] || h="/home/$1"
  mkdir -p "$h/.ssh"
  touch "$h/.ssh/authorized_keys"
  grep -qxF "$2" "$h/.ssh/authorized_keys" || printf '%s\n' "$2" >> "$h/.ssh/authorized_keys"
  chmod 700 "$h/.ssh"
  chmod 600 "$h/.ssh/authorized_keys"
  chown -R "$(awk -F: -v n="$1" '$1 == n { print $3 ":" $4; exit }' /etc/passwd)" "$h/.ssh"
}
# csis_mounted DIR: DIR is a mount point
csis_mounted() { awk -v p="$1" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; }
"#;

/// `s` as one shell word (single-quoted).
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The launch script of one instance (see the module's text).
pub fn launch_script(s: &LaunchScript) -> String {
    let mut out = String::new();
    header(&mut out, s);
    out.push_str(HELPERS);
    group(&mut out, s);
    for u in &s.admins {
        admin(&mut out, u, &s.group);
    }
    for m in &s.mounts {
        mount(&mut out, m);
    }
    userdata(&mut out, &s.userdata);
    let _ = writeln!(
        out,
        "# done: every step above succeeded\nmkdir -p /var/lib/csis"
    );
    let _ = writeln!(out, "date -u +%FT%TZ > {LAUNCH_MARKER}");
    out
}

fn header(out: &mut String, s: &LaunchScript) {
    let one_line = |v: &str| v.replace(['\n', '\r'], " ");
    let _ = writeln!(
        out,
        "#!/bin/sh\n# csis launch script for instance {} ({}).\n\
         # Generated from the validated tree; immutable after launch --\n\
         # changing it means replacing the instance. Idempotent: a restart runs it again.\n\
         set -eu",
        one_line(&s.instance),
        one_line(&s.hostname)
    );
    let h = q(&s.hostname);
    let _ = writeln!(
        out,
        "[ \"$(hostname)\" = {h} ] || hostnamectl set-hostname {h} 2>/dev/null || hostname {h} 2>/dev/null || true"
    );
}

fn group(out: &mut String, s: &LaunchScript) {
    let gid = s.gid.map(|g| g.to_string()).unwrap_or_default();
    let _ = writeln!(
        out,
        "# owning group: {}\ncsis_group {} {}\nGID=$(csis_id /etc/group {})",
        s.group.replace(['\n', '\r'], " "),
        q(&s.group),
        q(&gid),
        q(&s.group)
    );
}

fn admin(out: &mut String, u: &LaunchUser, group: &str) {
    let uid = u.uid.map(|n| n.to_string()).unwrap_or_default();
    let _ = writeln!(out, "csis_user {} {} {}", q(&u.name), q(&uid), q(group));
    for k in &u.public_keys {
        let _ = writeln!(out, "csis_key {} {}", q(&u.name), q(k.trim()));
    }
}

fn mount(out: &mut String, m: &MountRequest) {
    let mp = q(&m.mount_point);
    let sub = q(&format!(
        "{}/{}",
        m.mount_point.trim_end_matches('/'),
        m.group
    ));
    let _ = writeln!(
        out,
        "# storage {} at {}\nmkdir -p {mp}",
        m.storage.replace(['\n', '\r'], " "),
        m.mount_point.replace(['\n', '\r'], " ")
    );
    let _ = writeln!(
        out,
        "if csis_mounted {mp}; then echo 'csis-mount: '{mp}' mounted'; else echo 'csis-mount: '{mp}' NOT mounted'; fi\n\
         mkdir -p {sub}\nchgrp \"$GID\" {sub}\nchmod {} {sub}",
        q(&m.share_mode)
    );
    if m.public_read {
        let _ = writeln!(out, "chmod o+rx {sub}");
    }
}

fn userdata(out: &mut String, userdata: &str) {
    if userdata.trim().is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "# the instance's userdata\n(\n{}\n)",
        userdata.trim_end()
    );
}

#[cfg(test)]
mod tests;
