//! packer-ebs emission: every rule of the seed's "Emission" section, and an
//! attribute-by-attribute comparison with the original's emission (read from
//! ../shared/reference when it exists; skipped otherwise).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use csis_runtime::{
    BakeParent, BakeRequest, BakeStep, CancellationToken, Ensure, NullLog, ResolvedImage, Runtime,
    TestCommand,
};
use csis_runtime_aws::{AwsRuntime, AwsSettings, NetworkSettings, SubnetSettings};
use hcl::structure::{Block, Body};

fn reference() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference");
    if p.is_dir() {
        Some(p)
    } else {
        crate::common::loud("*** SKIPPED golden comparison: ../shared/reference is not there ***");
        None
    }
}

/// The runtime of the original's `standard-aws-on-moto` emission (its runtime-builders.yml).
fn standard_aws() -> AwsSettings {
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

/// The fixture's `aws-east2-runtime` (the v2 golden).
fn east2() -> AwsSettings {
    let mut s = AwsSettings::new("aws-east2-runtime", "us-east-2", "t2.micro");
    s.credentials.profile_name = Some("noaa".into());
    s.session_mechanism = Some("ssm".into());
    s.session_instance_profile = Some("AmazonSSMRoleForInstancesQuickSetup".into());
    s.networking = Some(NetworkSettings {
        network: "vpc-0c78d0d63b7a100df".into(),
        subnets: vec![
            SubnetSettings {
                name: "east2-az1-private".into(),
                subnet_id: "subnet-09f79018af845358a".into(),
                is_default: true,
                ..Default::default()
            },
            SubnetSettings {
                name: "east2-az2-private".into(),
                subnet_id: "subnet-00075cfbfcbc8f2cf".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    s.endpoint_url = Some("http://127.0.0.1:9".into());
    s
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
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
    }
}

/// The base recipe of a vendor-parented bake of `family` (what `csis build`
/// sends for an OS builder): the admin user, the session agent, no update.
fn base_recipe(family: &str) -> csis_runtime::recipe::Recipe {
    csis_runtime::recipe::Recipe {
        base: Some(csis_runtime::recipe::BaseRecipe {
            os_type: family.into(),
            family: family.into(),
            architecture: "x86_64".into(),
            admin_user: "csisadmin".into(),
            ..Default::default()
        }),
        image: None,
    }
}

fn vendor(id: &str, owner: &str, family: &str, root: Option<&str>) -> BakeParent {
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

/// Copy a directory the emitter wrote (the local modification bundle).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

fn blocks(body: &Body) -> Vec<Block> {
    body.blocks().cloned().collect()
}

fn attrs(b: &Block) -> BTreeMap<String, hcl::Expression> {
    b.body
        .attributes()
        .map(|a| (a.key.to_string(), a.expr.clone()))
        .collect()
}

/// Compare the `data` and `source` blocks of two files attribute by attribute.
fn assert_same_source(mine: &str, golden: &str) {
    let m = hcl::parse(mine).expect("mine parses");
    let g = hcl::parse(golden).expect("golden parses");
    let (mb, gb) = (blocks(&m), blocks(&g));
    assert_eq!(mb.len(), gb.len());
    for (x, y) in mb.iter().zip(&gb) {
        assert_eq!(x.identifier(), y.identifier());
        assert_eq!(x.labels(), y.labels(), "labels of {}", x.identifier());
        let (mut ax, ay) = (attrs(x), attrs(y));
        // csis's addition to the original's source: the bake's mark on the
        // builder instance (clean_stale_bakes finds a killed bake by it)
        for k in ["run_tags", "run_volume_tags"] {
            if !ay.contains_key(k) {
                ax.remove(k);
            }
        }
        for k in ax.keys().chain(ay.keys()) {
            assert_eq!(
                ax.get(k),
                ay.get(k),
                "attribute {k} of {} {:?}",
                x.identifier(),
                x.labels()
            );
        }
        // the tag order is part of the emission
        if let (Some(hcl::Expression::Object(tx)), Some(hcl::Expression::Object(ty))) =
            (ax.get("tags"), ay.get("tags"))
        {
            assert_eq!(tx.keys().collect::<Vec<_>>(), ty.keys().collect::<Vec<_>>());
        }
        let (nx, ny): (Vec<_>, Vec<_>) = (x.body.blocks().collect(), y.body.blocks().collect());
        assert_eq!(nx.len(), ny.len());
        for (bx, by) in nx.iter().zip(&ny) {
            assert_eq!(bx.identifier(), by.identifier());
            assert_eq!(attrs(bx), attrs(by), "block {}", bx.identifier());
        }
    }
}

fn render_expr(e: &hcl::Expression) -> String {
    hcl::format::to_string(e).unwrap()
}

fn source_file(dir: &Path, series: &str) -> String {
    std::fs::read_to_string(dir.join(format!("source-{series}.pkr.hcl"))).unwrap()
}

#[tokio::test]
async fn standard_aws_base_and_child_match_the_original() {
    let Some(r) = reference() else { return };
    let golden = r.join("cs-image-system-0.1.1-emission/standard-aws-on-moto/generated");
    let rt = AwsRuntime::new(standard_aws());
    let lineage = |series: &str, parent: &str, fp: &str| {
        let mut t = tags(&[
            ("csis_config", "my-team-images-replace-me"),
            ("csis_series", series),
            ("csis_parent", parent),
            ("csis_run", "2026_11_30t06_26_25_779098"),
            ("csis_fingerprint", fp),
            ("csis_identity_types", "okta"),
            ("csis_storage_types", "ebs"),
        ]);
        if series == "team-node" {
            t.insert("role".into(), "node".into());
        }
        t
    };
    let d = tempfile::tempdir().unwrap();
    let req = request(
        "el10",
        "aws-main",
        "el10-aws-main-20261130_062625",
        vendor("ami-0a1ma10peer00001", "amazon", "rhel", None),
        lineage("el10", "vendor", "d2be1a6e5380da5f"),
        d.path(),
    );
    rt.emit(&req).await.unwrap();
    let g = std::fs::read_to_string(golden.join("base-image/packer-ebs/image-generation/block-000/packer-ebs-image-generation-source-el10-block-000.pkr.hcl")).unwrap();
    assert_same_source(&source_file(d.path(), "el10"), &g);

    let d = tempfile::tempdir().unwrap();
    let req = request(
        "team-node",
        "aws-main",
        "team-node-packer-ebs-20261130_062625",
        BakeParent::Deferred {
            series: "el10".into(),
            name_prefix: "el10-aws-main".into(),
        },
        lineage("team-node", "series:el10", "c2e4778d1f39f2db"),
        d.path(),
    );
    rt.emit(&req).await.unwrap();
    let g = std::fs::read_to_string(golden.join("instance-image/packer-ebs/image-generation/block-000/packer-ebs-image-generation-source-team-node-block-000.pkr.hcl")).unwrap();
    assert_same_source(&source_file(d.path(), "team-node"), &g);
}

#[tokio::test]
async fn v2_golden_debian_base_and_deferred_instance_image() {
    let Some(r) = reference() else { return };
    let golden = r.join("cs-image-system-3/tests/fixtures/v2_golden/generated");
    let rt = AwsRuntime::new(east2());
    let d = tempfile::tempdir().unwrap();
    let mut req = request(
        "my-deb-11",
        "aws-east2-runtime",
        "my-deb-11-aws-east2-runtime-20260826_120000",
        vendor("ami-0feedfacecafebeef", "amazon", "debian", None),
        tags(&[
            ("Environment", "Development"),
            ("OS", "debian"),
            ("Project", "MyDebianProject"),
            ("Version", "11"),
            ("csis_series", "my-deb-11"),
            ("csis_parent", "vendor"),
            ("csis_run", "2026_08_26t12_00_00"),
            ("csis_fingerprint", "1fb359377531bb27"),
            ("csis_identity_types", "okta"),
            ("csis_storage_types", "ebs"),
        ]),
        d.path(),
    );
    req.machine_type = Some("t3.medium".into());
    req.package_manager = Some("apt".into());
    req.recipe = base_recipe("debian");
    rt.emit(&req).await.unwrap();
    let g = std::fs::read_to_string(golden.join("base-image/pckr-ebs-ans/image-generation/block-000/pckr-ebs-ans-image-generation-source-my-deb-11-block-000.pkr.hcl")).unwrap();
    assert_same_source(&source_file(d.path(), "my-deb-11"), &g);
    // the agent provisioner takes the dpkg path, as in the golden build file
    let build = std::fs::read_to_string(d.path().join("build-my-deb-11.pkr.hcl")).unwrap();
    let gb = std::fs::read_to_string(golden.join("base-image/pckr-ebs-ans/image-generation/block-000/pckr-ebs-ans-image-generation-block-000-build.pkr.hcl")).unwrap();
    for line in [
        "sudo curl -fsSL https://s3.us-east-2.amazonaws.com/amazon-ssm-us-east-2/latest/debian_amd64/amazon-ssm-agent.deb -o /tmp/ssm-agent-bake.deb",
        "systemctl is-enabled amazon-ssm-agent >/dev/null 2>&1 || systemctl is-enabled snap.amazon-ssm-agent.amazon-ssm-agent.service >/dev/null 2>&1",
        "# verify: SSM agent baked",
    ] {
        assert!(build.contains(line), "{line}");
        assert!(gb.contains(line), "golden has {line}");
    }

    let d = tempfile::tempdir().unwrap();
    let req = request(
        "imgfile-basic-cloudflow",
        "aws-east2-runtime",
        "imgfile-basic-cloudflow-some-other-builder-20260826_120000",
        BakeParent::Deferred {
            series: "imgfile-basic-dask".into(),
            name_prefix: "imgfile-basic-dask-pckr-ebs-ans".into(),
        },
        tags(&[
            ("cloudflow", "true"),
            ("csis_config", "cs-image-action-test"),
            ("csis_series", "imgfile-basic-cloudflow"),
            ("csis_parent", "series:imgfile-basic-dask"),
            ("csis_run", "2026_08_26t12_00_00"),
            ("csis_fingerprint", "efb699e86c2a7fed"),
            ("csis_identity_types", "okta"),
            ("csis_storage_types", "ebs,efs,gcs,pd,s3"),
        ]),
        d.path(),
    );
    rt.emit(&req).await.unwrap();
    let mine = source_file(d.path(), "imgfile-basic-cloudflow");
    let g = std::fs::read_to_string(golden.join("instance-image/pckr-ebs-ans/image-generation/block-001/pckr-ebs-ans-image-generation-source-imgfile-basic-cloudflow-block-001.pkr.hcl")).unwrap();
    // this golden file predates the agent-installing user_data on every SSM source
    // (the 0.1.1 emission above carries it on its instance image): compare without it
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.trim_start().starts_with("user_data"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(mine.contains("user_data"));
    assert_same_source(&strip(&mine), &strip(&g));
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

#[tokio::test]
async fn unchanged_files_are_not_rewritten_and_the_layout_is_packer_fmt() {
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let req = request(
        "web",
        "aws-main",
        "web-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[("csis_series", "web"), ("Project", "x")]),
        d.path(),
    );
    let files = rt.emit(&req).await.unwrap();
    let before: Vec<_> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let files2 = rt.emit(&req).await.unwrap();
    let after: Vec<_> = files2
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    assert_eq!(before, after);
    let src = source_file(d.path(), "web");
    // hclwrite's runs: `tags = {` ends the first run and starts none
    assert!(
        src.contains("\n  source_ami    = data.amazon-ami.web_aws-main.id\n"),
        "{src}"
    );
    assert!(
        src.contains("\n  associate_public_ip_address = false\n"),
        "{src}"
    );
    assert!(src.contains("    Project     = \"x\"\n"), "{src}");
    // Debian's packer (1.6.6) formats HCL2 when installed: our layout is already its layout
    if let Ok(o) = std::process::Command::new("packer").arg("version").output() {
        if o.status.success() {
            // packer 1.6.6's hclwrite writes a unary `!` with a space (`! var.release`);
            // newer packer writes `!var.release`, as we do: compare on that spelling
            let tmp = tempfile::tempdir().unwrap();
            for f in &files {
                let copy = tmp.path().join(f.file_name().unwrap());
                let text = std::fs::read_to_string(f)
                    .unwrap()
                    .replace("= !var.release", "= ! var.release");
                std::fs::write(&copy, text).unwrap();
                let out = std::process::Command::new("packer")
                    .args(["fmt", "-check", "-diff"])
                    .arg(&copy)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "packer fmt -check {}: {}",
                    f.display(),
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        } else {
            crate::common::loud("*** packer not usable here: fmt check skipped ***");
        }
    } else {
        crate::common::loud("*** packer not installed: fmt check skipped ***");
    }
}

/// Debian's packer 1.6.6 validates a root once the parts it predates are
/// taken out of a copy: the `packer { required_plugins }` file and the
/// `data "amazon-ami"` block (both arrived in packer 1.7; the copy gets a
/// literal `source_ami`), and its gp3 check wants an explicit throughput.
#[tokio::test]
async fn debian_packer_validates_the_root() {
    let ok = std::process::Command::new("packer")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::common::loud("*** SKIPPED: no packer here (apt-get install packer) ***");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    std::fs::create_dir_all(tree.join("scripts")).unwrap();
    std::fs::create_dir_all(tree.join("playbooks")).unwrap();
    std::fs::write(tree.join("scripts/a.sh"), "#!/bin/sh\necho a\n").unwrap();
    std::fs::write(
        tree.join("playbooks/site.yml"),
        "- hosts: all\n  tasks: []\n",
    )
    .unwrap();
    let root = d.path().join("root");
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[("csis_series", "web")]),
        &root,
    );
    req.steps = vec![
        BakeStep::Shell {
            name: "s".into(),
            inline: vec!["echo ${HOME}".into()],
            scripts: vec![tree.join("scripts/a.sh")],
            ensure: Some(Ensure {
                packages: vec!["git".into()],
                ..Default::default()
            }),
            env: vec!["A=1".into()],
            execute_command: Some("sudo -E sh '{{ .Path }}'".into()),
        },
        BakeStep::Ansible {
            name: "site".into(),
            playbooks: vec![tree.join("playbooks/site.yml")],
            extra_arguments: vec!["-e".into(), "x=1".into()],
            binary: "ansible-playbook".into(),
            extra_vars: Default::default(),
        },
    ];
    req.tests = vec![TestCommand {
        description: "git".into(),
        run: "git --version".into(),
        expect_rc: 0,
        contains: Some("git version".into()),
    }];
    rt.emit(&req).await.unwrap();
    let check = d.path().join("check");
    std::fs::create_dir_all(&check).unwrap();
    for f in std::fs::read_dir(&root).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name == "plugins.pkr.hcl" {
            continue;
        }
        if f.is_dir() {
            copy_tree(&f, &check.join(&name));
            continue;
        }
        let mut text = std::fs::read_to_string(&f).unwrap();
        if let Some(start) = text.find("data \"amazon-ami\"") {
            let end = start + text[start..].find("\n}\n").unwrap() + 3;
            text.replace_range(start..end, "");
            text = text.replace(
                "data.amazon-ami.web_aws-main.id",
                "\"ami-0123456789abcdef0\"",
            );
            text = text.replace(
                "volume_type           = \"gp3\"",
                "volume_type = \"gp3\"\n    throughput = 125\n    iops = 3000",
            );
        }
        std::fs::write(check.join(&name), text).unwrap();
    }
    let out = std::process::Command::new("packer")
        .arg("validate")
        .arg(".")
        .current_dir(&check)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "packer validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn inline_of(b: &Block) -> hcl::Expression {
    attrs(b)["inline"].clone()
}

/// The settle provisioner and the SSM agent provisioner, against the
/// original's base-image build file, parsed.
#[tokio::test]
async fn settle_and_agent_provisioners_match_the_original() {
    let Some(r) = reference() else { return };
    let g = std::fs::read_to_string(r.join("cs-image-system-0.1.1-emission/standard-aws-on-moto/generated/base-image/packer-ebs/image-generation/block-000/packer-ebs-image-generation-block-000-build.pkr.hcl")).unwrap();
    let g = hcl::parse(&g).unwrap();
    let gbuild = blocks(&g).remove(0);
    let gprovs: Vec<&Block> = gbuild.body.blocks().collect();
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "el10",
        "aws-main",
        "el10-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[]),
        d.path(),
    );
    req.recipe = base_recipe("rhel");
    rt.emit(&req).await.unwrap();
    let m =
        hcl::parse(&std::fs::read_to_string(d.path().join("build-el10.pkr.hcl")).unwrap()).unwrap();
    let mbuild = blocks(&m).remove(0);
    let mprovs: Vec<&Block> = mbuild.body.blocks().collect();
    assert_eq!(inline_of(mprovs[0]), inline_of(gprovs[0]), "settle");
    assert_eq!(attrs(mprovs[0]).get("execute_command"), None);
    // the golden's agent provisioner is the 6th (after OS update, admin, identity, storage)
    let gagent = gprovs
        .iter()
        .find(|b| format!("{:?}", inline_of(b)).contains("SSM agent for debug sessions"))
        .unwrap();
    let magent = mprovs
        .iter()
        .find(|b| format!("{:?}", inline_of(b)).contains("SSM agent for debug sessions"))
        .unwrap();
    assert_eq!(inline_of(magent), inline_of(gagent));
    assert_eq!(
        attrs(magent)["execute_command"],
        attrs(gagent)["execute_command"]
    );
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

/// The whole base-image build block of the standard-aws starter against the
/// original's, provisioner by provisioner and attribute by attribute; the
/// only difference is the test lines (deliberate: `expect_rc` honoured
/// under `set -e`, see ARCHITECTURE.md "The bake recipe").
#[tokio::test]
async fn standard_aws_base_build_block_matches_the_original() {
    use csis_runtime::recipe::Recipe;
    let Some(r) = reference() else { return };
    let g = std::fs::read_to_string(r.join("cs-image-system-0.1.1-emission/standard-aws-on-moto/generated/base-image/packer-ebs/image-generation/block-000/packer-ebs-image-generation-block-000-build.pkr.hcl")).unwrap();
    let g = hcl::parse(&g).unwrap();
    let gprovs: Vec<Block> = blocks(&g).remove(0).body.blocks().cloned().collect();
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "el10",
        "aws-main",
        "el10-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[]),
        d.path(),
    );
    req.family = Some("rhel".into());
    req.tests = vec![TestCommand {
        description: "package scaleft-server-tools is installed".into(),
        run: "rpm -q scaleft-server-tools".into(),
        expect_rc: 0,
        contains: None,
    }];
    req.recipe = Recipe {
        base: Some(csis_runtime::testing::rhel10_base("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholderKeyReplaceMeReplaceMeReplaceMe csis-admin-REPLACE-ME")),
        image: None,
    };
    rt.emit(&req).await.unwrap();
    let text = std::fs::read_to_string(d.path().join("build-el10.pkr.hcl")).unwrap();
    let m = hcl::parse(&text).unwrap();
    let mprovs: Vec<Block> = blocks(&m).remove(0).body.blocks().cloned().collect();
    assert_eq!(mprovs.len(), gprovs.len(), "{text}");
    for (i, (mine, gold)) in mprovs.iter().zip(gprovs.iter()).enumerate() {
        assert_eq!(mine.identifier(), gold.identifier(), "block {i}");
        assert_eq!(mine.labels(), gold.labels(), "block {i}");
        let (ma, ga) = (attrs(mine), attrs(gold));
        // `only` names the source: `amazon-ebs.el10` in both
        assert_eq!(
            ma.keys().collect::<Vec<_>>(),
            ga.keys().collect::<Vec<_>>(),
            "attributes of block {i}"
        );
        for (k, gv) in &ga {
            if i == 6 && k == "inline" {
                continue;
            }
            assert_eq!(&ma[k], gv, "block {i}, attribute {k}");
        }
    }
    // the verification: every assertion of the original but the test lines
    let lines = |b: &Block| -> Vec<String> {
        match &attrs(b)["inline"] {
            hcl::Expression::Array(a) => a
                .iter()
                .map(|e| match e {
                    hcl::Expression::String(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .collect(),
            _ => vec![],
        }
    };
    let (mv, gv) = (lines(&mprovs[6]), lines(&gprovs[6]));
    assert_eq!(mv[..mv.len() - 1], gv[..gv.len() - 2], "{mv:#?}");
    for c in [
        "# OS update for base image el10 (policy=security, packages=[], exclude=['kernel*'], pin={}, rhel)",
        "# admin user csisadmin (1 public key(s))",
        "# identity type 'okta' prerequisites, dormant",
        "# storage type 'ebs' prerequisites",
        "# debug session mechanism (ssm)",
        "# in-bake verification for base image el10: 9 assertion(s)",
    ] {
        assert!(text.contains(c), "{c}\n{text}");
    }
}
