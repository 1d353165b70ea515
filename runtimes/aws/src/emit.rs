//! Emission for `packer-ebs` image builders: one packer root per image x
//! runtime under the bake node's `emit_dir` (csis orders bakes through its
//! graph, so there are no depth blocks). Written with hcl-rs and laid out the
//! way `packer fmt` lays out HCL (2-space indent, `=` aligned in runs of
//! single-line attributes).

use std::collections::BTreeMap;
use std::path::PathBuf;

use csis_runtime::recipe::{Lowered, SessionAgent, Target};
use csis_runtime::{BakeParent, BakeRequest, Result, RuntimeError};
use hcl::expr::{Expression, UnaryOp, UnaryOperator};
use hcl::structure::{Block, Body};
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
    tags::CONFIG,
    tags::SERIES,
    tags::PARENT,
    tags::RUN,
    tags::FINGERPRINT,
    tags::IDENTITY_TYPES,
    tags::STORAGE_TYPES,
];

/// Order merged tags as the golden does: own tags (sorted), then the lineage ones.
pub fn order_tags(tags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = tags
        .iter()
        .filter(|(k, _)| !k.starts_with(tags::PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in LINEAGE_ORDER {
        if let Some(v) = tags.get(*k) {
            out.push((k.to_string(), v.clone()));
        }
    }
    for (k, v) in tags {
        if k.starts_with(tags::PREFIX) && !LINEAGE_ORDER.contains(&k.as_str()) {
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

pub use csis_runtime::recipe::{test_line, STEP_EXECUTE_COMMAND};

/// The Systems Manager settle lines: wait until it has been quiet.
pub fn ssm_settle_lines(runtime: &str) -> Vec<String> {
    [
        r#"# session mechanism 'ssm' ({runtime}): Systems Manager may act on every new machine (agent updates, patch scans, inventory); wait until it has been quiet for 30s, 600s at most"#,
        r#"quiet=0; waited=0"#,
        r#"while [ "$quiet" -lt 3 ] && [ "$waited" -lt 600 ]; do if [ "$(cut -d. -f1 /proc/uptime)" -lt 90 ] || sudo grep -Eaqs 'ssm-document-work[e]r|amazon-ssm-agent-updat[e]r' /proc/[0-9]*/cmdline; then quiet=0; else quiet=$((quiet + 1)); fi; sleep 10; waited=$((waited + 10)); done"#,
        r#"if [ "$quiet" -lt 3 ]; then echo "csis: Systems Manager was still acting on this machine after $waited seconds; going on (a package step waits out a held database)"; else echo "csis: Systems Manager is quiet on this machine (waited $waited seconds)"; fi"#,
    ]
    .iter()
    .map(|s| s.replace("{runtime}", runtime))
    .collect()
}

/// What the lowering needs of this runtime's build machines: an
/// unprivileged user with `sudo`, systemd, the Systems Manager settle lines
/// and agent when `session_mechanism: ssm`.
pub fn target(p: &SourcePlan) -> Target {
    Target {
        runtime: p.runtime.clone(),
        sudo: true,
        systemd: true,
        settle: if p.ssm_declared {
            ssm_settle_lines(&p.runtime)
        } else {
            Vec::new()
        },
        session_agent: p.ssm_declared.then(|| SessionAgent {
            mechanism: "ssm".into(),
            install: session_agent_commands(&p.runtime, &p.region, &p.family, &p.architecture),
            verify: session_verify_commands(),
        }),
    }
}

/// The first provisioner's lines: the build machine settles, the step runner.
pub fn settle_commands(runtime: &str, ssm: bool) -> Vec<String> {
    csis_runtime::recipe::settle_lines(&Target {
        runtime: runtime.into(),
        sudo: true,
        systemd: true,
        settle: if ssm {
            ssm_settle_lines(runtime)
        } else {
            Vec::new()
        },
        session_agent: None,
    })
}

pub use csis_packer::{
    attr, is_ident, key, obj, packer_fmt, render, s, strs, traversal, write_if_changed,
};
use csis_schema::tags;

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
            tags::BAKE_OWNER.to_string(),
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

/// The build block (the bake's lowered steps as provisioners, then the
/// manifest post-processor) and the comment before each provisioner.
pub fn build_body(p: &SourcePlan, req: &BakeRequest) -> Result<(Body, Vec<String>, Lowered)> {
    let lowered = csis_runtime::recipe::lower(req, &target(p))
        .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
    let (provs, comments) = csis_packer::provisioners(
        &lowered.steps,
        &csis_packer::ProvisionerOptions {
            only: Some(format!("amazon-ebs.{}", p.image)),
            ansible_arguments: csis_packer::image_version_arguments(),
            ..Default::default()
        },
    );
    let mut b = Block::builder("build")
        .add_attribute(attr("name", s(&p.image)))
        .add_attribute(attr(
            "sources",
            strs(&[format!("source.amazon-ebs.{}", p.image)]),
        ));
    for pr in provs {
        b = b.add_block(pr);
    }
    b = b.add_block(
        Block::builder("post-processor")
            .add_label("manifest")
            .add_attribute(attr("output", s("manifest.json")))
            .add_attribute(attr("strip_path", Expression::Bool(true)))
            .build(),
    );
    Ok((
        Body::builder().add_block(b.build()).build(),
        comments,
        lowered,
    ))
}

/// `packer { required_plugins { ... } }`: as the image builder declares
/// them; `amazon` (and `ansible` when a step runs it) when it declares none.
pub fn plugins_body(req: &BakeRequest) -> Body {
    if !req.required_plugins.is_empty() {
        return csis_packer::plugins_body(&req.required_plugins);
    }
    let plugin = |name: &str| csis_packer::Plugin {
        name: name.into(),
        version: ">= 1.0.0".into(),
        source: format!("github.com/hashicorp/{name}"),
    };
    let mut v = vec![plugin("amazon")];
    // each plugin a step kind of the bake needs, once, in the kinds' order
    for row in csis_schema::model::MOD_KINDS {
        let used = req.steps.iter().any(|s| s.kind() == row.kind);
        if let Some(p) = row.packer_plugin.filter(|_| used) {
            v.push(plugin(p));
        }
    }
    csis_packer::plugins_body(&v)
}

/// `variable "release"` (read by `force_deregister = !var.release`),
/// `variable "base_image_version"` (as the original emits it, from
/// `BASE_IMAGE_VERSION`; every ansible step gets it as `image_version`) and
/// `variable "csis_bake_owner"` (the owner mark in `run_tags`, set by csis
/// through `PKR_VAR_csis_bake_owner`).
pub fn variables_body() -> Body {
    Body::builder()
        .add_block(csis_packer::release_variable())
        .add_block(csis_packer::base_image_version_variable())
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
            BakeParent::Build { build_id, .. } => {
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
            BakeParent::Deferred { name_prefix, .. } => (
                AmiLookup::Deferred {
                    name_prefix: name_prefix.clone(),
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

/// The files of one packer root, and the lowered bake.
pub fn root_files(p: &SourcePlan, req: &BakeRequest) -> Result<(Vec<(String, String)>, Lowered)> {
    let by = format!(
        "csis ({} on {}, {})",
        req.image_builder, p.runtime, req.label
    );
    let (build, comments, lowered) = build_body(p, req)?;
    Ok((
        vec![
            (
                "plugins.pkr.hcl".into(),
                render(
                    &plugins_body(req),
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
                "ansible-setup.pkr.hcl".into(),
                render(
                    &Body::builder()
                        .add_block(csis_packer::image_version_locals())
                        .build(),
                    &format!("Additional setup for the ansible steps generated by {by}"),
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
        ],
        lowered,
    ))
}

/// `emit`: write the root; files that did not change are not rewritten.
pub async fn emit_root(rt: &AwsRuntime, req: &BakeRequest) -> Result<Vec<PathBuf>> {
    let plan = rt.source_plan(req).await?;
    let (files, lowered) = root_files(&plan, req)?;
    lowered.write_files(&req.emit_dir).map_err(|e| {
        RuntimeError::Failed(format!("{}: {}: {e}", req.label, req.emit_dir.display()))
    })?;
    let mut out = Vec::new();
    for (name, content) in files {
        let path = req.emit_dir.join(name);
        write_if_changed(&path, &content)?;
        out.push(path);
    }
    Ok(out)
}
