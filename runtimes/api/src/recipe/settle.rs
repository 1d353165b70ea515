//! The settle step: the build machine's first boot is over, the runtime's
//! own settle lines, the step runner; docker's `sudo`/`python3` install.

use super::types::Target;

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
