//! packer-ebs emission: every rule of the seed's "Emission" section (the
//! source block, the build block with its steps, tests and manifest, the
//! step runner), and the settings, requests and HCL readers the emission
//! modules share.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use csis_runtime::{
    BakeParent, BakeRequest, BakeStep, CancellationToken, Ensure, NullLog, ResolvedImage, Runtime,
    TestCommand,
};
use csis_runtime_aws::{AwsRuntime, AwsSettings, NetworkSettings, SubnetSettings};
use hcl::structure::{Block, Body};

/// The runtime of the original's `standard-aws-on-moto` emission (its runtime-builders.yml).
pub fn standard_aws() -> AwsSettings {
    let mut s = AwsSettings::new("aws-main", "us-east-2", "t3.medium");
    s.credentials.profile_name = Some("REPLACE-ME-profile".into());
    s.session_mechanism = Some("ssm".into());
    s.session_instance_profile = Some("peer-ssm-profile".into());
    s.networking = Some(NetworkSettings {
        network: "vpc-8e30b427eabe68436".into(),
        subnets: vec![SubnetSettings {
            name: "private-a".into(),
            subnet_id: "subnet-e05b3d8c529c5f05e".into(),
            is_default: true,
            ..Default::default()
        }],
        addl_security_groups: vec!["sg-48db8563565c8f570".into()],
        ssh_ingress_security_group_ids: vec!["sg-48db8563565c8f570".into()],
        ..Default::default()
    });
    // never reached: the VPC is an id, so emission asks the cloud nothing
    s.endpoint_url = Some("http://127.0.0.1:9".into());
    s
}

pub fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn request(
    series: &str,
    runtime: &str,
    final_name: &str,
    parent: BakeParent,
    tags: BTreeMap<String, String>,
    dir: &Path,
) -> BakeRequest {
    BakeRequest {
        label: format!("//images/{series}@{runtime}"),
        series: series.into(),
        runtime: runtime.into(),
        image_builder: "packer-ebs".into(),
        final_name: final_name.into(),
        prefix: String::new(),
        parent,
        machine_type: None,
        disk_size_gb: Some(200),
        bake_user: None,
        package_manager: Some("dnf".into()),
        family: None,
        architecture: None,
        steps: Vec::new(),
        tests: Vec::new(),
        recipe: Default::default(),
        required_plugins: Vec::new(),
        tags,
        tree_root: dir.to_path_buf(),
        emit_dir: dir.to_path_buf(),
        log: Arc::new(NullLog),
        cancel: CancellationToken::new(),
        keep_failed: false,
    }
}

pub fn vendor(id: &str, owner: &str, family: &str, root: Option<&str>) -> BakeParent {
    let mut facts = BTreeMap::from([("family".to_string(), family.to_string())]);
    if let Some(r) = root {
        facts.insert("root_device_name".into(), r.into());
    }
    BakeParent::Vendor(ResolvedImage {
        id: id.into(),
        name: None,
        owner: Some(owner.into()),
        creation_date: None,
        facts,
    })
}

pub fn blocks(body: &Body) -> Vec<Block> {
    body.blocks().cloned().collect()
}

pub fn attrs(b: &Block) -> BTreeMap<String, hcl::Expression> {
    b.body
        .attributes()
        .map(|a| (a.key.to_string(), a.expr.clone()))
        .collect()
}

fn render_expr(e: &hcl::Expression) -> String {
    hcl::format::to_string(e).unwrap()
}

pub fn source_file(dir: &Path, series: &str) -> String {
    std::fs::read_to_string(dir.join(format!("source-{series}.pkr.hcl"))).unwrap()
}

#[tokio::test]
async fn the_rules_of_the_source() {
    let d = tempfile::tempdir().unwrap();
    let mut s = standard_aws();
    // no mechanism: SSH communicator, public IP, no user_data; the build profile
    s.session_mechanism = None;
    s.iam_instance_profile = Some("build-profile".into());
    s.ena_support = Some(true);
    s.sriov_support = Some(false);
    s.networking.as_mut().unwrap().availability_zones =
        vec![csis_runtime_aws::AvailabilityZoneSettings {
            name: "us-east-2b".into(),
            is_default: true,
        }];
    s.ssh_username = Some("runtime-user".into());
    let rt = AwsRuntime::new(s.clone());
    let req = request(
        "x",
        "aws-main",
        "x name/with:odd*chars",
        BakeParent::Deferred {
            series: "p".into(),
            name_prefix: "p-packer-ebs".into(),
        },
        tags(&[]),
        d.path(),
    );
    let p = rt.source_plan(&req).await.unwrap();
    let body = hcl::parse(
        &csis_runtime_aws::emit::render(&csis_runtime_aws::emit::source_body(&p), "", &[]).unwrap(),
    )
    .unwrap();
    let src = attrs(&blocks(&body)[1]);
    assert_eq!(
        src["associate_public_ip_address"],
        hcl::Expression::Bool(true)
    );
    // the bake's mark (clean_stale_bakes): this runtime, and the owner from
    // the packer variable csis sets; the same on the volumes
    let run = render_expr(&src["run_tags"]);
    assert_eq!(
        run, "{\n  csis_bake = \"aws-main\"\n  csis_bake_owner = var.csis_bake_owner\n}",
        "{run}"
    );
    assert_eq!(src["run_volume_tags"], src["run_tags"]);
    assert_eq!(
        src["iam_instance_profile"],
        hcl::Expression::String("build-profile".into())
    );
    assert!(
        !src.contains_key("ssh_interface")
            && !src.contains_key("user_data")
            && !src.contains_key("ssh_timeout")
    );
    assert_eq!(src["ena_support"], hcl::Expression::Bool(true));
    assert_eq!(src["sriov_support"], hcl::Expression::Bool(false));
    assert_eq!(
        src["availability_zone"],
        hcl::Expression::String("us-east-2b".into())
    );
    assert_eq!(
        src["ssh_username"],
        hcl::Expression::String("runtime-user".into()),
        "runtime ssh_username: step 4"
    );
    assert_eq!(
        src["ami_name"],
        hcl::Expression::String("x name/with-odd-chars".into())
    );

    // ssm with both profiles: the SSM profile wins
    let mut s2 = s.clone();
    s2.session_mechanism = Some(" SSM ".into());
    s2.session_instance_profile = Some("ssm-profile".into());
    s2.ena_support = None;
    s2.sriov_support = None;
    let p = AwsRuntime::new(s2.clone()).source_plan(&req).await.unwrap();
    let body = hcl::parse(
        &csis_runtime_aws::emit::render(&csis_runtime_aws::emit::source_body(&p), "", &[]).unwrap(),
    )
    .unwrap();
    let src = attrs(&blocks(&body)[1]);
    assert_eq!(
        src["iam_instance_profile"],
        hcl::Expression::String("ssm-profile".into())
    );
    assert_eq!(
        src["associate_public_ip_address"],
        hcl::Expression::Bool(false)
    );
    assert!(!src.contains_key("ena_support") && !src.contains_key("sriov_support"));
    // ssm with only iam_instance_profile: it is the SSM fallback
    s2.session_instance_profile = None;
    let p = AwsRuntime::new(s2.clone()).source_plan(&req).await.unwrap();
    assert_eq!(p.ssm_profile.as_deref(), Some("build-profile"));
    // ssm without any profile: agent baked, SSH communicator kept
    s2.iam_instance_profile = None;
    let p = AwsRuntime::new(s2.clone()).source_plan(&req).await.unwrap();
    let body = hcl::parse(
        &csis_runtime_aws::emit::render(&csis_runtime_aws::emit::source_body(&p), "", &[]).unwrap(),
    )
    .unwrap();
    let src = attrs(&blocks(&body)[1]);
    assert!(!src.contains_key("ssh_interface"));
    assert_eq!(
        src["associate_public_ip_address"],
        hcl::Expression::Bool(true)
    );

    // an unknown mechanism is refused at generation
    s2.session_mechanism = Some("ssh".into());
    let e = AwsRuntime::new(s2).source_plan(&req).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "AWS runtime aws-main: unknown session mechanism 'ssh' (supported: ssm)"
    );

    // no networking: generation fails
    let mut s3 = s.clone();
    s3.networking = None;
    assert!(AwsRuntime::new(s3).source_plan(&req).await.is_err());

    // machine type and bake user of the request win; disk size; root device fallback by family
    let mut req2 = request(
        "y",
        "aws-main",
        "y-1",
        vendor("ami-1", "amazon", "debian", Some("/dev/nvme0n1")),
        tags(&[]),
        d.path(),
    );
    req2.machine_type = Some("r5.4xlarge".into());
    req2.bake_user = Some("entry-user".into());
    req2.disk_size_gb = Some(42);
    let p = rt.source_plan(&req2).await.unwrap();
    assert_eq!(
        (
            p.instance_type.as_str(),
            p.ssh_username.as_str(),
            p.volume_size,
            p.device_name.as_str()
        ),
        ("r5.4xlarge", "entry-user", Some(42), "/dev/nvme0n1")
    );
    let req3 = request(
        "y",
        "aws-main",
        "y-1",
        vendor("ami-1", "amazon", "debian", None),
        tags(&[]),
        d.path(),
    );
    let mut s4 = s.clone();
    s4.ssh_username = None;
    let p = AwsRuntime::new(s4.clone())
        .source_plan(&req3)
        .await
        .unwrap();
    assert_eq!(
        (p.device_name.as_str(), p.ssh_username.as_str()),
        ("/dev/xvda", "admin")
    );
    let req4 = request(
        "y",
        "aws-main",
        "y-1",
        vendor("ami-1", "amazon", "ubuntu", None),
        tags(&[]),
        d.path(),
    );
    let p = AwsRuntime::new(s4.clone())
        .source_plan(&req4)
        .await
        .unwrap();
    assert_eq!(
        (p.device_name.as_str(), p.ssh_username.as_str()),
        ("/dev/sda1", "ubuntu")
    );
    s4.default_config_username = Some("cfg-user".into());
    let p = AwsRuntime::new(s4).source_plan(&req4).await.unwrap();
    assert_eq!(
        p.ssh_username, "cfg-user",
        "default_config_username: step 5"
    );
}

#[tokio::test]
async fn the_build_block_steps_tests_and_manifest() {
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        BakeParent::Build {
            series: "base".into(),
            build_id: "ami-0base00000000000a".into(),
        },
        tags(&[("csis_series", "web")]),
        d.path(),
    );
    req.bake_user = Some("ec2-user".into());
    // an image bake (its parent a csis build): the modifications, the
    // local bundle, the verification
    req.recipe = csis_runtime::recipe::Recipe {
        base: None,
        image: Some(csis_runtime::recipe::ImageRecipe {
            group: None,
            bundle: Vec::new(),
        }),
    };
    let tree = d.path().join("tree");
    std::fs::create_dir_all(tree.join("scripts")).unwrap();
    std::fs::create_dir_all(tree.join("playbooks")).unwrap();
    std::fs::write(tree.join("scripts/a.sh"), "echo a\n").unwrap();
    std::fs::write(tree.join("playbooks/site.yml"), "- hosts: all\n").unwrap();
    req.tree_root = tree.clone();
    req.steps = vec![
        BakeStep::Shell {
            name: "base-tools".into(),
            inline: vec!["echo ${HOME} %{x}".into()],
            scripts: vec![tree.join("scripts/a.sh")],
            ensure: Some(Ensure {
                packages: vec!["git".into()],
                services: vec!["chronyd".into()],
                ..Default::default()
            }),
            env: vec!["A=1".into()],
            execute_command: None,
        },
        BakeStep::Ansible {
            name: "site".into(),
            playbooks: vec![tree.join("playbooks/site.yml")],
            extra_arguments: vec!["-e".into(), "x=1".into()],
            binary: "ansible-playbook".into(),
            extra_vars: Default::default(),
        },
    ];
    req.tests = vec![
        TestCommand {
            description: "git present".into(),
            run: "git --version".into(),
            expect_rc: 0,
            contains: Some("git version".into()),
        },
        TestCommand {
            description: "no telnet".into(),
            run: "command -v telnet".into(),
            expect_rc: 1,
            contains: None,
        },
    ];
    let files = rt.emit(&req).await.unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "plugins.pkr.hcl",
            "variables.pkr.hcl",
            "ansible-setup.pkr.hcl",
            "source-web.pkr.hcl",
            "build-web.pkr.hcl"
        ]
    );
    let vars = std::fs::read_to_string(d.path().join("variables.pkr.hcl")).unwrap();
    assert!(vars.contains("variable \"csis_bake_owner\" {"), "{vars}");
    let text = std::fs::read_to_string(d.path().join("build-web.pkr.hcl")).unwrap();
    assert!(
        text.contains("echo $${HOME} %%{x}"),
        "interpolation escaped:\n{text}"
    );
    assert!(
        !text.contains("# debug session mechanism (ssm)"),
        "the session agent is baked into base images only"
    );
    assert!(text.contains("# before anything else: the build machine settles (aws-main)"));
    assert!(
        text.contains("# in-bake verification for instance image web: 2 assertion(s)"),
        "{text}"
    );
    let body = hcl::parse(&text).unwrap();
    let build = blocks(&body).remove(0);
    let provs: Vec<(String, String)> = build
        .body
        .blocks()
        .map(|b| {
            (
                b.identifier().to_string(),
                b.labels()[0].as_str().to_string(),
            )
        })
        .collect();
    assert_eq!(
        provs,
        [
            ("provisioner".into(), "shell".into()), // settle
            ("provisioner".into(), "shell".into()), // base-tools: scripts
            ("provisioner".into(), "shell".into()), // base-tools: inline and ensure
            ("provisioner".into(), "shell".into()), // site: the ansible interpreter
            ("provisioner".into(), "ansible".into()),
            ("provisioner".into(), "shell".into()), // the local bundle: prepare
            ("provisioner".into(), "file".into()),  // the local bundle: upload
            ("provisioner".into(), "shell".into()), // the local bundle: install
            ("provisioner".into(), "shell".into()), // verification
            ("post-processor".into(), "manifest".into()),
        ]
    );
    let ansible = build
        .body
        .blocks()
        .find(|b| b.labels()[0].as_str() == "ansible")
        .unwrap();
    assert_eq!(
        attrs(ansible)["playbook_file"],
        hcl::Expression::String("playbooks/site.yml".into()),
        "relative to the tree, as the original emits it"
    );
    assert!(
        !attrs(ansible).contains_key("user"),
        "on AWS the ansible provisioner keeps its own user"
    );
    let manifest = build.body.blocks().next_back().unwrap();
    assert_eq!(
        attrs(manifest)["output"],
        hcl::Expression::String("manifest.json".into())
    );
    assert_eq!(attrs(manifest)["strip_path"], hcl::Expression::Bool(true));
    let plugins = std::fs::read_to_string(d.path().join("plugins.pkr.hcl")).unwrap();
    assert!(
        plugins.contains("github.com/hashicorp/ansible")
            && plugins.contains("github.com/hashicorp/amazon")
    );

    // the in-bake assertions really assert, under `set -e`
    let run = |t: TestCommand| {
        let script = format!(
            "set -e\n{}\necho reached",
            csis_runtime_aws::emit::test_line(&t)
        );
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("reached")
    };
    let t = |run: &str, rc: i32, contains: Option<&str>| TestCommand {
        description: "t".into(),
        run: run.into(),
        expect_rc: rc,
        contains: contains.map(str::to_string),
    };
    assert!(run(t("false", 1, None)));
    assert!(!run(t("true", 1, None)));
    assert!(run(t("echo git version 2.43", 0, Some("git version"))));
    assert!(!run(t("echo nope", 0, Some("git version"))));
    assert!(!run(t("echo git version; exit 2", 0, Some("git version"))));
    assert!(run(t("echo git version; exit 2", 2, Some("git version"))));
}

#[test]
fn the_step_runner_retries_only_on_a_held_package_database() {
    let lines = csis_runtime_aws::emit::settle_commands("rt", false);
    let start = lines
        .iter()
        .position(|l| l.starts_with("sudo tee /run/csis-step"))
        .unwrap();
    let end = lines.iter().position(|l| l == "CSIS_STEP").unwrap();
    let d = tempfile::tempdir().unwrap();
    let runner = d.path().join("csis-step");
    std::fs::write(&runner, lines[start + 1..end].join("\n")).unwrap();
    let count = d.path().join("n");
    let step = d.path().join("step.sh");
    // fails twice on a held lock, then succeeds
    std::fs::write(&step, format!("n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; if [ $n -lt 3 ]; then echo 'Could not get lock /var/lib/dpkg/lock'; exit 100; fi; echo done", c = count.display())).unwrap();
    let o = std::process::Command::new("sh")
        .arg(&runner)
        .arg("sh")
        .arg(&step)
        .env("CSIS_STEP_WAIT", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3");
    // any other failure is returned at once
    std::fs::write(&count, "0").unwrap();
    std::fs::write(
        &step,
        format!("echo 1 > {c}; echo broken; exit 7", c = count.display()),
    )
    .unwrap();
    let o = std::process::Command::new("sh")
        .arg(&runner)
        .arg("sh")
        .arg(&step)
        .env("CSIS_STEP_WAIT", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
}
