//! Emission for `packer-ebs` image builders: one packer root per image x
//! runtime under the bake node's `emit_dir` (csis orders bakes through its
//! graph, so there are no depth blocks). Written with hcl-rs and laid out the
//! way `packer fmt` lays out HCL (2-space indent, `=` aligned in runs of
//! single-line attributes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use csis_runtime::{BakeParent, BakeRequest, BakeStep, Result, RuntimeError, TestCommand};
use hcl::expr::{Expression, Object, ObjectKey, Traversal, UnaryOp, UnaryOperator, Variable};
use hcl::structure::{Attribute, Block, Body};
use hcl::Identifier;

use crate::AwsRuntime;

/// How the `data "amazon-ami"` lookup finds the source AMI.
#[derive(Debug, Clone, PartialEq)]
pub enum AmiLookup {
    /// A resolved vendor image: its exact id and owner.
    Resolved { id: String, owner: Option<String> },
    /// A pinned (already built) parent: its id, owned by `self`.
    Pinned { id: String },
    /// A parent built later in this run: the newest own AMI by name prefix.
    Deferred {
        name_prefix: String,
        architecture: String,
    },
}

/// Everything the `amazon-ebs` source needs, computed from the bake request
/// and the runtime (the seed's `amazon_ebs_source()` inputs).
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePlan {
    pub image: String,
    pub runtime: String,
    pub lookup: AmiLookup,
    pub profile: Option<String>,
    pub ami_name: String,
    pub instance_type: String,
    pub region: String,
    pub vpc_id: String,
    pub subnet_id: String,
    pub availability_zone: Option<String>,
    /// Ordered: the image's/builder's own tags, then `csis_config`, then the lineage tags.
    pub tags: Vec<(String, String)>,
    /// The bake's mark on the builder instance, its volumes, key pair and
    /// security group (`run_tags`, `run_volume_tags`; the owner is
    /// `var.csis_bake_owner`): how `clean_stale_bakes` finds a killed bake.
    pub run_tags: Vec<(String, String)>,
    pub ena_support: Option<bool>,
    pub sriov_support: Option<bool>,
    /// `ssm` declared (whatever the profiles).
    pub ssm_declared: bool,
    /// The SSM block's profile: `session_instance_profile`, else `iam_instance_profile`.
    pub ssm_profile: Option<String>,
    /// `iam_instance_profile` for build instances when there is no SSM block.
    pub build_profile: Option<String>,
    pub ssh_username: String,
    pub device_name: String,
    pub volume_size: Option<u32>,
    /// The chain root's family (`rhel`, `debian`, `ubuntu`, `amazon`, ...).
    pub family: String,
    pub architecture: String,
    /// A base image (its parent is a vendor image): gets the agent provisioner.
    pub base_image: bool,
}

/// The lineage tags in their emitted order (after the image's own).
pub const LINEAGE_ORDER: &[&str] = &[
    "csis_config",
    "csis_series",
    "csis_parent",
    "csis_run",
    "csis_fingerprint",
    "csis_identity_types",
    "csis_storage_types",
];

/// Order merged tags as the golden does: own tags (sorted), then the lineage ones.
pub fn order_tags(tags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = tags
        .iter()
        .filter(|(k, _)| !k.starts_with(csis_runtime::LINEAGE_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in LINEAGE_ORDER {
        if let Some(v) = tags.get(*k) {
            out.push((k.to_string(), v.clone()));
        }
    }
    for (k, v) in tags {
        if k.starts_with(csis_runtime::LINEAGE_PREFIX) && !LINEAGE_ORDER.contains(&k.as_str()) {
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

/// The vendor image's user by family: `admin` (debian), `ubuntu`, else `ec2-user`.
pub fn default_bake_user(family: &str) -> &'static str {
    match family.to_ascii_lowercase().as_str() {
        "debian" => "admin",
        "ubuntu" => "ubuntu",
        _ => "ec2-user",
    }
}

/// The root device when the source AMI's is unknown: `/dev/xvda` for debian
/// and amazon roots, `/dev/sda1` otherwise.
pub fn default_root_device(family: &str) -> &'static str {
    match family.to_ascii_lowercase().as_str() {
        "debian" | "amazon" | "amzn" | "amazonlinux" | "al2023" => "/dev/xvda",
        _ => "/dev/sda1",
    }
}

/// An AMI name: 3-128 of letters, digits, `()[] ./-'@_`; anything else becomes `-`.
pub fn valid_ami_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "()[] ./-'@_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(128);
    while s.len() < 3 {
        s.push('_');
    }
    s
}

fn arch_dir(arch: &str) -> &'static str {
    if arch == "arm64" || arch == "aarch64" {
        "arm64"
    } else {
        "amd64"
    }
}

/// The `user_data` bootstrap that installs and enables the SSM agent on a
/// vendor image that lacks it (one line, `\n` escaped in HCL).
pub fn ssm_user_data(region: &str, arch: &str) -> String {
    let a = arch_dir(arch);
    [
        "#!/bin/bash".to_string(),
        "set -x".to_string(),
        "dl() { if command -v curl >/dev/null 2>&1; then curl -fsSL \"$1\" -o \"$2\"; else wget -qO \"$2\" \"$1\"; fi; }".to_string(),
        "if ! command -v amazon-ssm-agent >/dev/null 2>&1 && [ ! -x /snap/bin/amazon-ssm-agent ]; then".to_string(),
        format!("  R={region}"),
        format!("  if command -v curl >/dev/null 2>&1; then R=$(curl -s http://169.254.169.254/latest/meta-data/placement/region || echo {region});"),
        format!("  elif command -v wget >/dev/null 2>&1; then R=$(wget -qO- http://169.254.169.254/latest/meta-data/placement/region || echo {region}); fi"),
        format!("  if command -v dnf >/dev/null 2>&1; then dnf install -y \"https://s3.$R.amazonaws.com/amazon-ssm-$R/latest/linux_{a}/amazon-ssm-agent.rpm\";"),
        format!("  elif command -v yum >/dev/null 2>&1; then yum install -y \"https://s3.$R.amazonaws.com/amazon-ssm-$R/latest/linux_{a}/amazon-ssm-agent.rpm\";"),
        "  elif command -v dpkg >/dev/null 2>&1; then".to_string(),
        "    command -v curl >/dev/null 2>&1 || command -v wget >/dev/null 2>&1 || { apt-get -o DPkg::Lock::Timeout=600 update -qq; apt-get -o DPkg::Lock::Timeout=600 install -y wget; }".to_string(),
        format!("    dl \"https://s3.$R.amazonaws.com/amazon-ssm-$R/latest/debian_{a}/amazon-ssm-agent.deb\" /tmp/ssm.deb && dpkg -i /tmp/ssm.deb; fi"),
        "fi".to_string(),
        "systemctl enable --now amazon-ssm-agent 2>/dev/null || true".to_string(),
    ]
    .join("\n")
}

/// `session_agent_commands(os_family)`: `dpkg` path for debian/ubuntu, `yum` otherwise.
pub fn session_agent_commands(
    runtime: &str,
    region: &str,
    family: &str,
    arch: &str,
) -> Vec<String> {
    let a = arch_dir(arch);
    let mut v = vec![format!(
        "# session mechanism 'ssm' ({runtime}): SSM agent for debug sessions"
    )];
    match family.to_ascii_lowercase().as_str() {
        "debian" | "ubuntu" => v.push(format!(
            "command -v amazon-ssm-agent >/dev/null 2>&1 || snap list amazon-ssm-agent >/dev/null 2>&1 || (sudo curl -fsSL https://s3.{region}.amazonaws.com/amazon-ssm-{region}/latest/debian_{a}/amazon-ssm-agent.deb -o /tmp/ssm-agent-bake.deb && sudo dpkg -i /tmp/ssm-agent-bake.deb)"
        )),
        _ => v.push(format!(
            "sudo yum install -y https://s3.{region}.amazonaws.com/amazon-ssm-{region}/latest/linux_{a}/amazon-ssm-agent.rpm || sudo yum install -y amazon-ssm-agent"
        )),
    }
    v.push("sudo systemctl enable amazon-ssm-agent".into());
    v
}

/// `session_verify_commands(os_family)`: the agent is present and enabled.
pub fn session_verify_commands() -> Vec<String> {
    vec![
        "# verify: SSM agent baked".into(),
        "command -v amazon-ssm-agent >/dev/null 2>&1 || test -x /usr/bin/amazon-ssm-agent || snap list amazon-ssm-agent >/dev/null 2>&1".into(),
        "systemctl is-enabled amazon-ssm-agent >/dev/null 2>&1 || systemctl is-enabled snap.amazon-ssm-agent.amazon-ssm-agent.service >/dev/null 2>&1".into(),
    ]
}

/// Every later shell step runs through `/run/csis-step` when it is there.
pub const STEP_EXECUTE_COMMAND: &str = "chmod +x {{ .Path }}; if [ -r /run/csis-step ]; then {{ .Vars }} sh /run/csis-step {{ .Path }}; else {{ .Vars }} {{ .Path }}; fi";

/// The first provisioner: the build machine settles (cloud-init has ended;
/// with SSM, Systems Manager has gone quiet), and the step runner that
/// retries a step failing on a held package database is installed.
pub fn settle_commands(runtime: &str, ssm: bool) -> Vec<String> {
    let mut v: Vec<String> = [
        r#"# before any package work: the machine's own first-boot script has ended (bounded)"#,
        r#"if command -v cloud-init >/dev/null 2>&1; then timeout 300 cloud-init status --wait >/dev/null 2>&1 || true; fi"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if ssm {
        v.extend(
            [
            r#"# session mechanism 'ssm' ({runtime}): Systems Manager may act on every new machine (agent updates, patch scans, inventory); wait until it has been quiet for 30s, 600s at most"#,
            r#"quiet=0; waited=0"#,
            r#"while [ "$quiet" -lt 3 ] && [ "$waited" -lt 600 ]; do if [ "$(cut -d. -f1 /proc/uptime)" -lt 90 ] || sudo grep -Eaqs 'ssm-document-work[e]r|amazon-ssm-agent-updat[e]r' /proc/[0-9]*/cmdline; then quiet=0; else quiet=$((quiet + 1)); fi; sleep 10; waited=$((waited + 10)); done"#,
            r#"if [ "$quiet" -lt 3 ]; then echo "csis: Systems Manager was still acting on this machine after $waited seconds; going on (a package step waits out a held database)"; else echo "csis: Systems Manager is quiet on this machine (waited $waited seconds)"; fi"#,
            ]
            .iter()
            .map(|s| s.replace("{runtime}", runtime)),
        );
    }
    v.extend(
        [
            r#"# the step runner: a step that fails on a held package database is run again (never in the image: /run is a tmpfs)"#,
            r#"sudo tee /run/csis-step >/dev/null <<'CSIS_STEP'"#,
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
            r#"sudo chmod 0755 /run/csis-step"#,
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn key(s: &str) -> ObjectKey {
    if is_ident(s) {
        ObjectKey::Identifier(Identifier::sanitized(s))
    } else {
        ObjectKey::Expression(Expression::String(s.to_string()))
    }
}

fn obj(pairs: &[(String, Expression)]) -> Expression {
    let mut o = Object::new();
    for (k, v) in pairs {
        o.insert(key(k), v.clone());
    }
    Expression::Object(o)
}

fn s(v: &str) -> Expression {
    Expression::String(v.to_string())
}

fn strs(v: &[String]) -> Expression {
    Expression::Array(v.iter().map(|x| s(x)).collect())
}

fn attr(k: &str, v: Expression) -> Attribute {
    Attribute::new(Identifier::sanitized(k), v)
}

fn traversal(root: &str, attrs: &[&str]) -> Expression {
    let mut b = Traversal::builder(Variable::sanitized(root));
    for a in attrs {
        b = b.attr(Identifier::sanitized(a));
    }
    Expression::from(b.build())
}

/// The data label: `<image>_<runtime>`.
pub fn data_label(image: &str, runtime: &str) -> String {
    format!("{image}_{runtime}")
}

/// `data "amazon-ami"` + `source "amazon-ebs"` for one image.
pub fn source_body(p: &SourcePlan) -> Body {
    // one spelling for the data block label and the traversal that reads it
    let label = Identifier::sanitized(data_label(&p.image, &p.runtime)).to_string();
    let mut data = Block::builder("data")
        .add_label("amazon-ami")
        .add_label(label.as_str());
    match &p.lookup {
        AmiLookup::Resolved { id, owner } => {
            data = data.add_attribute(attr("filters", obj(&[("image-id".into(), s(id))])));
            if let Some(o) = owner {
                data = data.add_attribute(attr("owners", strs(std::slice::from_ref(o))));
            }
        }
        AmiLookup::Pinned { id } => {
            data = data
                .add_attribute(attr("filters", obj(&[("image-id".into(), s(id))])))
                .add_attribute(attr("owners", strs(&["self".into()])));
        }
        AmiLookup::Deferred {
            name_prefix,
            architecture,
        } => {
            data = data
                .add_attribute(attr("owners", strs(&["self".into()])))
                .add_attribute(attr(
                    "filters",
                    obj(&[
                        ("name".into(), s(&format!("{name_prefix}*"))),
                        ("root-device-type".into(), s("ebs")),
                        ("virtualization-type".into(), s("hvm")),
                        ("architecture".into(), s(architecture)),
                    ]),
                ))
                .add_attribute(attr("most_recent", Expression::Bool(true)));
        }
    }
    if let Some(pr) = &p.profile {
        data = data.add_attribute(attr("profile", s(pr)));
    }

    let mut src = Block::builder("source")
        .add_label("amazon-ebs")
        .add_label(p.image.as_str())
        .add_attribute(attr(
            "source_ami",
            traversal("data", &["amazon-ami", &label, "id"]),
        ))
        .add_attribute(attr("ami_name", s(&p.ami_name)))
        .add_attribute(attr("instance_type", s(&p.instance_type)))
        .add_attribute(attr("region", s(&p.region)))
        .add_attribute(attr("vpc_id", s(&p.vpc_id)))
        .add_attribute(attr("subnet_id", s(&p.subnet_id)));
    if let Some(az) = &p.availability_zone {
        src = src.add_attribute(attr("availability_zone", s(az)));
    }
    let tag_pairs: Vec<(String, Expression)> =
        p.tags.iter().map(|(k, v)| (k.clone(), s(v))).collect();
    src = src.add_attribute(attr("tags", obj(&tag_pairs)));
    if !p.run_tags.is_empty() {
        let mut run: Vec<(String, Expression)> =
            p.run_tags.iter().map(|(k, v)| (k.clone(), s(v))).collect();
        run.push((
            crate::stale::BAKE_OWNER_TAG.to_string(),
            traversal("var", &[crate::stale::BAKE_OWNER_VAR]),
        ));
        src = src
            .add_attribute(attr("run_tags", obj(&run)))
            .add_attribute(attr("run_volume_tags", obj(&run)));
    }
    let ssm_block = p.ssm_declared && p.ssm_profile.is_some();
    src = src.add_attribute(attr(
        "associate_public_ip_address",
        Expression::Bool(!ssm_block),
    ));
    if let Some(pr) = &p.profile {
        src = src.add_attribute(attr("profile", s(pr)));
    }
    if let Some(b) = p.ena_support {
        src = src.add_attribute(attr("ena_support", Expression::Bool(b)));
    }
    if let Some(b) = p.sriov_support {
        src = src.add_attribute(attr("sriov_support", Expression::Bool(b)));
    }
    if ssm_block {
        src = src
            .add_attribute(attr("ssh_interface", s("session_manager")))
            .add_attribute(attr(
                "iam_instance_profile",
                s(p.ssm_profile.as_deref().unwrap_or_default()),
            ))
            .add_attribute(attr("ssh_timeout", s("15m")))
            .add_attribute(attr(
                "user_data",
                s(&ssm_user_data(&p.region, &p.architecture)),
            ));
    } else if let Some(bp) = &p.build_profile {
        src = src.add_attribute(attr("iam_instance_profile", s(bp)));
    }
    src = src
        .add_attribute(attr("ssh_username", s(&p.ssh_username)))
        .add_attribute(attr(
            "force_deregister",
            Expression::from(UnaryOp::new(
                UnaryOperator::Not,
                traversal("var", &["release"]),
            )),
        ));
    let mut bdm = Block::builder("launch_block_device_mappings")
        .add_attribute(attr("device_name", s(&p.device_name)))
        .add_attribute(attr("volume_type", s("gp3")))
        .add_attribute(attr("delete_on_termination", Expression::Bool(true)));
    if let Some(sz) = p.volume_size {
        bdm = bdm.add_attribute(attr("volume_size", Expression::from(sz as u64)));
    }
    src = src.add_block(bdm.build());
    Body::builder()
        .add_block(data.build())
        .add_block(src.build())
        .build()
}

/// Lines that bring `ensure:` about, for a package manager.
pub fn ensure_lines(e: &csis_runtime::Ensure, package_manager: Option<&str>) -> Vec<String> {
    let mut v = Vec::new();
    if !e.packages.is_empty() {
        let pk = e.packages.join(" ");
        match package_manager.unwrap_or("dnf") {
            "apt" => {
                v.push("sudo apt-get -o DPkg::Lock::Timeout=600 update -qq".into());
                v.push(format!(
                    "sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y {pk}"
                ));
            }
            "apk" => v.push(format!("sudo apk add --no-cache {pk}")),
            "yum" => v.push(format!("sudo yum install -y {pk}")),
            _ => v.push(format!("sudo dnf install -y {pk}")),
        }
    }
    for f in &e.files {
        let q = crate::shell_quote(&f.path);
        v.push(format!("sudo mkdir -p \"$(dirname {q})\""));
        v.push(format!(
            "printf '%s' {} | sudo tee {q} >/dev/null",
            crate::shell_quote(&f.content)
        ));
        v.push(format!("sudo chmod {} {q}", f.mode));
    }
    for s in &e.services {
        v.push(format!(
            "sudo systemctl enable --now {}",
            crate::shell_quote(s)
        ));
    }
    for c in &e.commands {
        match &c.unless {
            Some(u) => v.push(format!("if ! ( {u} ); then {}; fi", c.run)),
            None => v.push(c.run.clone()),
        }
    }
    v
}

/// One in-bake assertion as a `set -e`-safe shell line.
pub fn test_line(t: &TestCommand) -> String {
    match &t.contains {
        None => format!(
            "rc=0; ( {} ) >/dev/null 2>&1 || rc=$?; test $rc -eq {}",
            t.run, t.expect_rc
        ),
        Some(c) => format!(
            "rc=0; out=$( ( {} ) 2>&1 ) || rc=$?; test $rc -eq {}; printf '%s' \"$out\" | grep -qF -- {}",
            t.run,
            t.expect_rc,
            crate::shell_quote(c)
        ),
    }
}

/// The build block and the comment before each provisioner.
pub fn build_body(p: &SourcePlan, req: &BakeRequest) -> (Body, Vec<String>) {
    let only = strs(&[format!("amazon-ebs.{}", p.image)]);
    let mut comments = Vec::new();
    let mut b = Block::builder("build")
        .add_attribute(attr("name", s(&p.image)))
        .add_attribute(attr(
            "sources",
            strs(&[format!("source.amazon-ebs.{}", p.image)]),
        ));
    comments.push(format!(
        "before anything else: the build machine settles ({})",
        p.runtime
    ));
    b = b.add_block(
        Block::builder("provisioner")
            .add_label("shell")
            .add_attribute(attr("only", only.clone()))
            .add_attribute(attr(
                "inline",
                strs(&settle_commands(&p.runtime, p.ssm_declared)),
            ))
            .build(),
    );
    for step in &req.steps {
        match step {
            BakeStep::Shell {
                name,
                inline,
                scripts,
                ensure,
                env,
                execute_command,
            } => {
                let with_common = |mut pb: hcl::structure::BlockBuilder| {
                    pb = pb.add_attribute(attr("only", only.clone()));
                    if !env.is_empty() {
                        pb = pb.add_attribute(attr("environment_vars", strs(env)));
                    }
                    let ec = execute_command.as_deref().unwrap_or(STEP_EXECUTE_COMMAND);
                    pb = pb.add_attribute(attr("execute_command", s(ec)));
                    pb
                };
                if !scripts.is_empty() {
                    let paths: Vec<String> =
                        scripts.iter().map(|p| p.display().to_string()).collect();
                    comments.push(format!("modification {name}: scripts"));
                    b = b.add_block(
                        with_common(Block::builder("provisioner").add_label("shell"))
                            .add_attribute(attr("scripts", strs(&paths)))
                            .build(),
                    );
                }
                let mut lines = Vec::new();
                if let Some(e) = ensure {
                    lines.extend(ensure_lines(e, req.package_manager.as_deref()));
                }
                lines.extend(inline.iter().cloned());
                if !lines.is_empty() {
                    comments.push(format!("modification {name}"));
                    b = b.add_block(
                        with_common(Block::builder("provisioner").add_label("shell"))
                            .add_attribute(attr("inline", strs(&lines)))
                            .build(),
                    );
                }
            }
            BakeStep::Ansible {
                name,
                playbooks,
                extra_arguments,
                binary,
            } => {
                for pbk in playbooks {
                    comments.push(format!("modification {name}: ansible {}", pbk.display()));
                    let mut pb = Block::builder("provisioner")
                        .add_label("ansible")
                        .add_attribute(attr("only", only.clone()))
                        .add_attribute(attr("playbook_file", s(&pbk.display().to_string())));
                    if !extra_arguments.is_empty() {
                        pb = pb.add_attribute(attr("extra_arguments", strs(extra_arguments)));
                    }
                    if !binary.is_empty() && binary != "ansible-playbook" {
                        pb = pb.add_attribute(attr("command", s(binary)));
                    }
                    // `bake_ssh_username` is None on AWS: the ansible
                    // provisioner keeps its own user (the communicator's)
                    b = b.add_block(pb.build());
                }
            }
        }
    }
    if p.base_image && p.ssm_declared {
        comments.push("debug session mechanism (ssm)".into());
        b = b.add_block(
            Block::builder("provisioner")
                .add_label("shell")
                .add_attribute(attr("only", only.clone()))
                .add_attribute(attr("execute_command", s(STEP_EXECUTE_COMMAND)))
                .add_attribute(attr(
                    "inline",
                    strs(&session_agent_commands(
                        &p.runtime,
                        &p.region,
                        &p.family,
                        &p.architecture,
                    )),
                ))
                .build(),
        );
    }
    let (lines, n) = verification_lines(p, &req.tests);
    if n > 0 {
        let kind = if p.base_image {
            "base image"
        } else {
            "instance image"
        };
        comments.push(format!(
            "in-bake verification for {kind} {}: {n} assertion(s)",
            p.image
        ));
        b = b.add_block(
            Block::builder("provisioner")
                .add_label("shell")
                .add_attribute(attr("only", only.clone()))
                .add_attribute(attr("inline", strs(&lines)))
                .build(),
        );
    }
    b = b.add_block(
        Block::builder("post-processor")
            .add_label("manifest")
            .add_attribute(attr("output", s("manifest.json")))
            .add_attribute(attr("strip_path", Expression::Bool(true)))
            .build(),
    );
    (Body::builder().add_block(b.build()).build(), comments)
}

/// The in-bake verification lines and the number of assertions in them.
pub fn verification_lines(p: &SourcePlan, tests: &[TestCommand]) -> (Vec<String>, usize) {
    let mut lines = vec!["set -e".to_string()];
    let mut n = 0;
    if p.base_image && p.ssm_declared {
        lines.extend(session_verify_commands());
        n += 2;
    }
    for t in tests {
        lines.push(format!("# verify: {}", t.description));
        lines.push(test_line(t));
        n += 1;
    }
    (lines, n)
}

/// `packer { required_plugins { ... } }`.
pub fn plugins_body(ansible: bool) -> Body {
    let plugin = |name: &str| {
        obj(&[
            ("version".into(), s(">= 1.0.0")),
            ("source".into(), s(&format!("github.com/hashicorp/{name}"))),
        ])
    };
    let mut rp = Block::builder("required_plugins").add_attribute(attr("amazon", plugin("amazon")));
    if ansible {
        rp = rp.add_attribute(attr("ansible", plugin("ansible")));
    }
    Body::builder()
        .add_block(Block::builder("packer").add_block(rp.build()).build())
        .build()
}

/// `variable "release"` (read by `force_deregister = !var.release`) and
/// `variable "csis_bake_owner"` (the owner mark in `run_tags`, set by csis
/// through `PKR_VAR_csis_bake_owner`).
pub fn variables_body() -> Body {
    Body::builder()
        .add_block(
            Block::builder("variable")
                .add_label("release")
                .add_attribute(attr("type", traversal("bool", &[])))
                .add_attribute(attr("default", Expression::Bool(true)))
                .add_attribute(attr(
                    "description",
                    s("Determines if the build is meant to be immutable"),
                ))
                .build(),
        )
        .add_block(
            Block::builder("variable")
                .add_label(crate::stale::BAKE_OWNER_VAR)
                .add_attribute(attr("type", traversal("string", &[])))
                .add_attribute(attr("default", s("")))
                .add_attribute(attr(
                    "description",
                    s("host:pid of the csis process running this bake (marks its builder instance)"),
                ))
                .build(),
        )
        .build()
}

/// Serialize a body with hcl-rs, then lay it out like `packer fmt`.
pub fn render(body: &Body, header: &str, comments: &[String]) -> Result<String> {
    let raw =
        hcl::format::to_string(body).map_err(|e| RuntimeError::Failed(format!("hcl: {e}")))?;
    let mut out = String::new();
    if !header.is_empty() {
        out.push_str(&format!("# {header}\n"));
    }
    let mut comments = comments.iter();
    for line in raw.lines() {
        let t = line.trim_start();
        if t.starts_with("provisioner \"") {
            if let Some(c) = comments.next() {
                let indent = &line[..line.len() - t.len()];
                out.push_str(&format!("{indent}# {c}\n"));
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(packer_fmt(&out))
}

/// Bracket balance of a line, outside string literals.
fn net_brackets(line: &str) -> i32 {
    let mut n = 0;
    let mut in_str = false;
    let mut esc = false;
    for c in line.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' | '(' => n += 1,
            '}' | ']' | ')' => n -= 1,
            '#' => break,
            _ => {}
        }
    }
    n
}

/// Position of the first `=` outside strings that is an assignment.
fn assign_pos(line: &str) -> Option<usize> {
    let mut in_str = false;
    let mut esc = false;
    let b = line.as_bytes();
    for (i, c) in line.char_indices() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '#' => return None,
            '=' => {
                let next = b.get(i + 1).copied();
                let prev = if i > 0 { b.get(i - 1).copied() } else { None };
                if next != Some(b'=')
                    && !matches!(prev, Some(b'!') | Some(b'<') | Some(b'>') | Some(b'='))
                {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// hclwrite's layout rules that matter here: two-space indentation by
/// bracket depth, and `=` aligned across consecutive lines that each hold a
/// complete single-line attribute (a line opening a multi-line value, a
/// block line or a closing bracket ends the run).
pub fn packer_fmt(text: &str) -> String {
    // 1. re-indent by bracket depth
    let mut lines: Vec<String> = Vec::new();
    let mut depth: i32 = 0;
    for raw in text.lines() {
        let t = raw.trim();
        if t.is_empty() {
            lines.push(String::new());
            continue;
        }
        let closes_first = t.starts_with('}') || t.starts_with(']') || t.starts_with(')');
        let d = if closes_first { depth - 1 } else { depth };
        lines.push(format!("{}{}", "  ".repeat(d.max(0) as usize), t));
        depth += net_brackets(t);
    }
    // 2. align `=` in runs
    let mut out = lines.clone();
    let mut i = 0;
    while i < lines.len() {
        let single = |l: &str| assign_pos(l).filter(|_| net_brackets(l) == 0);
        if single(&lines[i]).is_none() {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && single(&lines[i]).is_some() {
            i += 1;
        }
        let width = lines[start..i]
            .iter()
            .map(|l| l[..assign_pos(l).unwrap()].trim_end().len())
            .max()
            .unwrap_or(0);
        for (j, l) in lines[start..i].iter().enumerate() {
            let p = assign_pos(l).unwrap();
            let lead = l[..p].trim_end();
            let rest = l[p + 1..].trim_start();
            out[start + j] = format!("{lead}{} = {rest}", " ".repeat(width - lead.len()));
        }
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// Write a file unless it already holds exactly this content.
pub fn write_if_changed(path: &Path, content: &str) -> Result<bool> {
    if let Ok(old) = std::fs::read_to_string(path) {
        if old == content {
            return Ok(false);
        }
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)
            .map_err(|e| RuntimeError::Failed(format!("cannot create {}: {e}", d.display())))?;
    }
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, content)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| RuntimeError::Failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(true)
}

/// The chain root's family for a bake: as the request says, else as the
/// vendor image's facts say, else guessed from the package manager.
pub fn family_of(req: &BakeRequest) -> String {
    if let Some(f) = req.family.as_ref().filter(|f| !f.is_empty()) {
        return f.clone();
    }
    if let BakeParent::Vendor(v) = &req.parent {
        if let Some(f) = v.facts.get("family").filter(|f| !f.is_empty()) {
            return f.clone();
        }
    }
    match req.package_manager.as_deref() {
        Some("apt") => "debian".into(),
        _ => "rhel".into(),
    }
}

impl AwsRuntime {
    /// The source plan of one bake: every rule of the seed's "Emission".
    pub async fn source_plan(&self, req: &BakeRequest) -> Result<SourcePlan> {
        let st = self.settings();
        let rt = &st.name;
        let net = st.networking.as_ref().ok_or_else(|| {
            RuntimeError::Refused(format!(
                "AWS runtime {rt}: no networking configuration, so image {} cannot be generated (the packer source reads the VPC and subnet from it)",
                req.series
            ))
        })?;
        let subnet = net.default_subnet().ok_or_else(|| {
            RuntimeError::Refused(format!(
                "AWS runtime {rt}: networking declares no default subnet (`is_default: true`)"
            ))
        })?;
        let mechanism = self.session_mechanism()?;
        let vpc_id = self.vpc_id().await?;
        let family = family_of(req);
        let mut architecture = req
            .architecture
            .clone()
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "x86_64".to_string());
        let (lookup, root_device) = match &req.parent {
            BakeParent::Vendor(v) => {
                if let Some(a) = v.facts.get("architecture") {
                    architecture = a.clone();
                }
                (
                    AmiLookup::Resolved {
                        id: v.id.clone(),
                        owner: v.owner.clone(),
                    },
                    v.facts.get("root_device_name").cloned(),
                )
            }
            BakeParent::Build { build_id, .. } if !build_id.is_empty() => {
                let img = self.image_by_id_cached(build_id).await.ok().flatten();
                if let Some(a) = img.as_ref().and_then(|i| i.architecture.as_ref()) {
                    architecture = a.as_str().to_string();
                }
                (
                    AmiLookup::Pinned {
                        id: build_id.clone(),
                    },
                    img.and_then(|i| i.root_device_name),
                )
            }
            BakeParent::Build { .. } => (
                AmiLookup::Deferred {
                    name_prefix: req.prefix.clone(),
                    architecture: architecture.clone(),
                },
                None,
            ),
        };
        let ssh_username = req
            .bake_user
            .clone()
            .or_else(|| {
                st.ssh_username
                    .clone()
                    .filter(|u| !u.is_empty() && !u.eq_ignore_ascii_case("default"))
            })
            .or_else(|| st.default_config_username.clone().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| default_bake_user(&family).to_string());
        let ssm_declared = mechanism.is_some();
        let ssm_profile = if ssm_declared {
            st.session_instance_profile
                .clone()
                .or_else(|| st.iam_instance_profile.clone())
        } else {
            None
        };
        Ok(SourcePlan {
            image: req.series.clone(),
            runtime: rt.clone(),
            lookup,
            profile: st
                .credentials
                .profile_name
                .clone()
                .filter(|p| !p.is_empty()),
            ami_name: valid_ami_name(&req.final_name),
            instance_type: req
                .machine_type
                .clone()
                .unwrap_or_else(|| st.default_machine_type.clone()),
            region: st.region.clone(),
            vpc_id,
            subnet_id: subnet.subnet_id.clone(),
            availability_zone: net.default_availability_zone().map(str::to_string),
            tags: order_tags(&req.tags),
            run_tags: crate::stale::run_tags(rt, &req.tags),
            ena_support: st.ena_support,
            sriov_support: st.sriov_support,
            ssm_declared,
            build_profile: if ssm_profile.is_none() {
                st.iam_instance_profile.clone()
            } else {
                None
            },
            ssm_profile,
            ssh_username,
            device_name: root_device
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| default_root_device(&family).to_string()),
            volume_size: req.disk_size_gb,
            family,
            architecture,
            base_image: matches!(req.parent, BakeParent::Vendor(_)),
        })
    }
}

/// The files of one packer root.
pub fn root_files(p: &SourcePlan, req: &BakeRequest) -> Result<Vec<(String, String)>> {
    let by = format!(
        "csis ({} on {}, {})",
        req.image_builder, p.runtime, req.label
    );
    let ansible = req
        .steps
        .iter()
        .any(|s| matches!(s, BakeStep::Ansible { .. }));
    let (build, comments) = build_body(p, req);
    Ok(vec![
        (
            "plugins.pkr.hcl".into(),
            render(
                &plugins_body(ansible),
                &format!("Packer required plugins generated by {by}"),
                &[],
            )?,
        ),
        (
            "variables.pkr.hcl".into(),
            render(
                &variables_body(),
                &format!("Packer variables generated by {by}"),
                &[],
            )?,
        ),
        (
            format!("source-{}.pkr.hcl", p.image),
            render(
                &source_body(p),
                &format!(
                    "Packer configuration for image {} generated by {by}",
                    p.image
                ),
                &[],
            )?,
        ),
        (
            format!("build-{}.pkr.hcl", p.image),
            render(
                &build,
                &format!(
                    "Build configuration for image {} generated by {by}",
                    p.image
                ),
                &comments,
            )?,
        ),
    ])
}

/// `emit`: write the root; files that did not change are not rewritten.
pub async fn emit_root(rt: &AwsRuntime, req: &BakeRequest) -> Result<Vec<PathBuf>> {
    let plan = rt.source_plan(req).await?;
    let files = root_files(&plan, req)?;
    let mut out = Vec::new();
    for (name, content) in files {
        let path = req.emit_dir.join(name);
        write_if_changed(&path, &content)?;
        out.push(path);
    }
    Ok(out)
}
