//! packer-ebs emission against the original's, attribute by attribute
//! (read from ../shared/reference when it exists; skipped otherwise).

use std::path::{Path, PathBuf};

use csis_runtime::{BakeParent, Runtime, TestCommand};
use csis_runtime_aws::{AwsRuntime, AwsSettings, NetworkSettings, SubnetSettings};
use hcl::structure::Block;

use crate::emission::{attrs, blocks, request, source_file, standard_aws, tags, vendor};

fn reference() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference");
    if p.is_dir() {
        Some(p)
    } else {
        crate::common::loud("*** SKIPPED golden comparison: ../shared/reference is not there ***");
        None
    }
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

/// `variable "base_image_version"` (from BASE_IMAGE_VERSION) and the
/// ansible setup's locals (`snapshot`, `image_version`) against the
/// original's `-vars.pkr.hcl` and `-ebs-ansible-setup.pkr.hcl`, attribute
/// by attribute; and every ansible step is given `image_version` (csis's
/// addition: the original declares it and no step reads it).
#[tokio::test]
async fn base_image_version_matches_the_original() {
    let Some(r) = reference() else { return };
    let dir = r.join("cs-image-system-0.1.1-emission/standard-aws-on-moto/generated/instance-image/packer-ebs/image-generation/block-000");
    let read = |name: &str| hcl::parse(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
    let gvars = read("packer-ebs-image-generation-block-000-vars.pkr.hcl");
    let gsetup = read("packer-ebs-image-generation-block-000-ebs-ansible-setup.pkr.hcl");
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "team-node",
        "aws-main",
        "team-node-1",
        BakeParent::Deferred {
            series: "el10".into(),
            name_prefix: "el10-aws-main".into(),
        },
        tags(&[]),
        d.path(),
    );
    let pb = d.path().join("site.yml");
    std::fs::write(&pb, "- hosts: all\n  tasks: []\n").unwrap();
    req.steps = vec![csis_runtime::BakeStep::Ansible {
        name: "site".into(),
        playbooks: vec![pb],
        extra_arguments: vec![],
        binary: "ansible-playbook".into(),
        extra_vars: Default::default(),
    }];
    rt.emit(&req).await.unwrap();
    let mine =
        |name: &str| hcl::parse(&std::fs::read_to_string(d.path().join(name)).unwrap()).unwrap();
    let by_label = |b: &hcl::Body, label: &str| -> Block {
        blocks(b)
            .into_iter()
            .find(|x| x.labels().iter().any(|l| l.as_str() == label))
            .unwrap_or_else(|| panic!("no block {label}"))
    };
    let vars = mine("variables.pkr.hcl");
    for v in ["release", "base_image_version"] {
        assert_eq!(
            attrs(&by_label(&vars, v)),
            attrs(&by_label(&gvars, v)),
            "variable {v}"
        );
    }
    let setup = mine("ansible-setup.pkr.hcl");
    assert_eq!(
        attrs(&blocks(&setup)[0]),
        attrs(&blocks(&gsetup)[0]),
        "locals"
    );
    let build = std::fs::read_to_string(d.path().join("build-team-node.pkr.hcl")).unwrap();
    assert!(
        build.contains(r#""image_version=${local.image_version}""#),
        "{build}"
    );
}
