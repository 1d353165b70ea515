//! Base image steps: the OS update per family and policy, the local admin
//! user, identity and storage prerequisites, and their in-bake checks.

use super::shell::{sq, sq_always};
use super::types::{BaseRecipe, IdentityPrereq, Step, StepKind, StoragePrereq, Target};

/// The package manager of a family/type: `dnf`, `apt` or `apk`.
pub fn package_manager_of(os_type: &str, family: &str) -> &'static str {
    csis_schema::model::package_manager(os_type, family)
}

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

pub(super) fn admin_verify_lines(t: &Target, b: &BaseRecipe) -> Vec<String> {
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

pub(super) fn identity_verify_lines(p: &IdentityPrereq) -> Vec<String> {
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
            private: None,
        },
    }
}
