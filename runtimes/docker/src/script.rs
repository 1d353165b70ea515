//! Scripts the bake runs in the container: the settle step and `ensure:`
//! rendered to an idempotent POSIX sh script (busybox sh is enough).

use csis_runtime::Ensure;

/// Quote for POSIX sh (single quotes).
pub fn sq(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Shell function detecting the package manager: sets `PM` to apt, dnf, yum,
/// apk, zypper or empty.
const DETECT_PM: &str = r#"PM=
if command -v apt-get >/dev/null 2>&1; then PM=apt
elif command -v dnf >/dev/null 2>&1; then PM=dnf
elif command -v yum >/dev/null 2>&1; then PM=yum
elif command -v apk >/dev/null 2>&1; then PM=apk
elif command -v zypper >/dev/null 2>&1; then PM=zypper
fi
"#;

const PM_INSTALL: &str = r#"csis_pm_install() {
  case "$PM" in
    apt) DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" ;;
    dnf) dnf install -y -q "$@" ;;
    yum) yum install -y -q "$@" ;;
    apk) apk add --no-cache -q "$@" ;;
    zypper) zypper --non-interactive install -y "$@" ;;
    *) echo "csis: no package manager to install $*" >&2; return 1 ;;
  esac
}
csis_pkg_present() {
  case "$PM" in
    apt) dpkg -s "$1" >/dev/null 2>&1 ;;
    dnf|yum|zypper) rpm -q "$1" >/dev/null 2>&1 ;;
    apk) apk info -e "$1" >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}
"#;

/// The settle step: install `sudo` and `python3` when missing and a package
/// manager allows; say so and go on quietly when there is none (busybox).
/// `hint` is the chain root's package manager family, when declared.
pub fn settle_script(hint: Option<&str>) -> String {
    let mut s = String::from("set -e\n");
    s.push_str(DETECT_PM);
    if let Some(h) = hint {
        s.push_str(&format!(
            "[ -n \"$PM\" ] || true # declared package manager: {}\n",
            sq(h)
        ));
    }
    s.push_str(PM_INSTALL);
    s.push_str(
        r#"missing=
command -v sudo >/dev/null 2>&1 || missing="$missing sudo"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
if [ -z "$missing" ]; then
  echo "settle: sudo and python3 present"
elif [ -z "$PM" ]; then
  echo "settle: no package manager in the image; not installing:$missing"
else
  echo "settle: installing with $PM:$missing"
  csis_pm_install $missing || echo "settle: could not install$missing with $PM (exit $?); steps that need them will fail"
fi
"#,
    );
    s
}

/// `ensure:` as an idempotent script: packages installed when absent, files
/// written only when different (then their mode set), services skipped with a
/// line saying why (no systemd in a container), commands run unless their
/// `unless` check succeeds.
pub fn ensure_script(e: &Ensure) -> String {
    let mut s = String::from("set -e\n");
    if !e.packages.is_empty() {
        s.push_str(DETECT_PM);
        s.push_str(PM_INSTALL);
        s.push_str("need=\n");
        for p in &e.packages {
            let q = sq(p);
            s.push_str(&format!("csis_pkg_present {q} || need=\"$need {q}\"\n"));
        }
        s.push_str(
            "if [ -n \"$need\" ]; then echo \"ensure: installing$need\"; csis_pm_install $need; else echo 'ensure: packages present'; fi\n",
        );
    }
    for (i, f) in e.files.iter().enumerate() {
        let path = sq(&f.path);
        let _ = i;
        // printf keeps the content byte for byte (no newline added or lost)
        s.push_str(&format!(
            "csis_tmp=$(mktemp)\nprintf '%s' {} > \"$csis_tmp\"\n",
            sq(&f.content)
        ));
        s.push_str(&format!(
            "mkdir -p \"$(dirname {path})\"\nif [ -f {path} ] && cmp -s \"$csis_tmp\" {path}; then echo \"ensure: {p} unchanged\"; rm -f \"$csis_tmp\"; else cat \"$csis_tmp\" > {path}; rm -f \"$csis_tmp\"; echo \"ensure: {p} written\"; fi\n",
            p = f.path.replace('"', "")
        ));
        if !f.mode.is_empty() {
            s.push_str(&format!("chmod {} {path}\n", sq(&f.mode)));
        }
    }
    for svc in &e.services {
        s.push_str(&format!(
            "echo {}\n",
            sq(&format!(
                "ensure: service {svc} skipped: services need systemd, which a docker runtime does not run (no init system)"
            ))
        ));
    }
    for c in &e.commands {
        match &c.unless {
            Some(u) => s.push_str(&format!(
                "if ( {u}\n) >/dev/null 2>&1; then echo {skip}; else\n{run}\nfi\n",
                u = u,
                run = c.run,
                skip = sq(&format!("ensure: skipped (unless holds): {}", c.run))
            )),
            None => s.push_str(&format!("{}\n", c.run)),
        }
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
mod tests {
    use super::*;
    use csis_runtime::{EnsureCommand, EnsureFile};

    #[test]
    fn quoting() {
        assert_eq!(sq("abc"), "abc");
        assert_eq!(sq("a b"), "'a b'");
        assert_eq!(sq("it's"), r"'it'\''s'");
        assert_eq!(sq(""), "''");
    }

    #[test]
    fn ensure_renders_every_part() {
        let e = Ensure {
            packages: vec!["curl".into()],
            files: vec![EnsureFile {
                path: "/etc/motd".into(),
                content: "hello\n".into(),
                mode: "0644".into(),
            }],
            services: vec!["nginx".into()],
            commands: vec![EnsureCommand {
                run: "touch /x".into(),
                unless: Some("test -f /x".into()),
            }],
        };
        let s = ensure_script(&e);
        assert!(s.contains("csis_pkg_present curl"));
        assert!(s.contains("printf '%s' 'hello\n' > "), "{s}");
        assert!(s.contains("chmod 0644 /etc/motd"));
        assert!(s.contains("service nginx skipped"));
        assert!(s.contains("if ( test -f /x\n) >/dev/null 2>&1; then"));
    }

    #[test]
    fn execute_command_templates() {
        assert_eq!(
            execute_command(None, "/tmp/s.sh", &["A=1".into(), "B=x y".into()]),
            "chmod +x /tmp/s.sh; A=1 B='x y' /tmp/s.sh"
        );
        assert_eq!(
            execute_command(Some("sudo -E sh -eux '{{.Path}}'"), "/tmp/s", &[]),
            "sudo -E sh -eux '/tmp/s'"
        );
    }
}
