//! `bake` with a stand-in packer (tests/fake-packer.sh) and moto.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use csis_runtime::{BakeParent, LogSink, Runtime, RuntimeError};
use csis_runtime_aws::{AwsRuntime, NetworkSettings, SubnetSettings};

use crate::common::{self, need_moto};
use crate::emission::request;

#[derive(Default)]
struct Lines(Mutex<Vec<String>>);
impl LogSink for Lines {
    fn line(&self, l: &str) {
        self.0.lock().unwrap().push(l.to_string());
    }
}

fn settings(url: &str, ami: &str, log: &std::path::Path) -> csis_runtime_aws::AwsSettings {
    let mut s = common::settings(url, "aws-bake");
    s.session_mechanism = Some("ssm".into());
    s.session_instance_profile = Some("ssm-profile".into());
    s.networking = Some(NetworkSettings {
        network: "vpc-0123456789abcdef0".into(),
        subnets: vec![SubnetSettings {
            name: "a".into(),
            subnet_id: "subnet-0123456789abcdef0".into(),
            is_default: true,
            ..Default::default()
        }],
        ..Default::default()
    });
    s.packer_binary = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake-packer.sh").into());
    s.packer_env = BTreeMap::from([
        ("CSIS_FAKE_AMI".to_string(), ami.to_string()),
        (
            "CSIS_FAKE_PACKER_LOG".to_string(),
            log.display().to_string(),
        ),
    ]);
    s
}

#[tokio::test]
async fn bake_runs_init_validate_build_reads_the_manifest_and_retags() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let parent = common::register_image(&ec2, &common::unique("parent"), &[]).await;
    let ami = common::register_image(
        &ec2,
        &common::unique("baked"),
        &[("csis_parent", "series-placeholder")],
    )
    .await;
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("packer.log");
    let rt = AwsRuntime::new(settings(&url, &ami, &log));
    let root = d.path().join("root");
    let tags = BTreeMap::from([
        ("csis_series".to_string(), "web".to_string()),
        ("csis_parent".to_string(), "series:base".to_string()),
        (
            "csis_fingerprint".to_string(),
            "00112233aabbccdd".to_string(),
        ),
    ]);
    let mut req = request(
        "web",
        "aws-bake",
        "web-packer-ebs-1",
        BakeParent::Build {
            series: "base".into(),
            build_id: parent.clone(),
        },
        tags,
        &root,
    );
    // the family fallback would say /dev/xvda (debian): the AMI's own root device wins
    req.package_manager = Some("apt".into());
    let parent_root = ec2
        .describe_images()
        .image_ids(&parent)
        .send()
        .await
        .unwrap()
        .images()[0]
        .root_device_name
        .clone()
        .unwrap();
    assert_eq!(parent_root, "/dev/sda1", "moto's registered images");
    let lines = Arc::new(Lines::default());
    req.log = lines.clone();
    let out = rt.bake(&req).await.unwrap();
    assert_eq!(out.build_id, ami, "the last run's <region>:<ami>");
    assert_eq!(out.name, "web-packer-ebs-1");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "init .\nvalidate .\nbuild .\n"
    );
    let got = common::image_tags(&ec2, &ami).await;
    assert_eq!(got["csis_parent"], "series:base", "post-bake retag");
    assert_eq!(got["csis_fingerprint"], "00112233aabbccdd");
    assert!(lines
        .0
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains(&format!("AMI: {ami}"))));
    // a pinned parent: looked up by id, owned by self, its real root device
    let src = std::fs::read_to_string(root.join("source-web.pkr.hcl")).unwrap();
    assert!(src.contains(&format!("image-id = \"{parent}\"")), "{src}");
    assert!(src.contains("\"self\""));
    assert!(
        src.contains("device_name           = \"/dev/sda1\""),
        "{src}"
    );
}

#[tokio::test]
async fn a_failed_build_is_a_failure_with_packers_output() {
    let url = need_moto!();
    let d = tempfile::tempdir().unwrap();
    let mut s = settings(&url, "ami-0123456789abcdef0", &d.path().join("log"));
    s.packer_env.insert("CSIS_FAKE_FAIL".into(), "1".into());
    let rt = AwsRuntime::new(s);
    let req = request(
        "web",
        "aws-bake",
        "web-1",
        BakeParent::Deferred {
            series: "b".into(),
            name_prefix: "b-aws-bake".into(),
        },
        BTreeMap::new(),
        d.path(),
    );
    let e = rt.bake(&req).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Failed(_)));
    assert!(e.to_string().contains("build failed on purpose"), "{e}");
}

#[tokio::test]
async fn a_cancelled_bake_interrupts_packer() {
    let url = need_moto!();
    let d = tempfile::tempdir().unwrap();
    let mut s = settings(&url, "ami-0123456789abcdef0", &d.path().join("log"));
    s.packer_env.insert("CSIS_FAKE_SLEEP".into(), "60".into());
    let rt = AwsRuntime::new(s);
    let req = request(
        "web",
        "aws-bake",
        "web-1",
        BakeParent::Deferred {
            series: "b".into(),
            name_prefix: "b-aws-bake".into(),
        },
        BTreeMap::new(),
        d.path(),
    );
    let cancel = req.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        cancel.cancel();
    });
    let t = std::time::Instant::now();
    let e = rt.bake(&req).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Cancelled), "{e}");
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
}

/// `csis build --keep-failed` on AWS: packer runs with `-on-error=abort`,
/// the builder instance it leaves is marked `csis_kept_failed=<run>` and
/// named in the error; the stale-bake clean-up spares it once its owner is
/// gone (and removes an unmarked one), `inventory` lists it as a kept
/// failed bake, and `remove_kept_bake` terminates it (refusing anything
/// else).
#[tokio::test]
async fn a_failed_bake_that_keeps_its_machine_leaves_a_marked_builder_instance() {
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
    use csis_schema::tags;
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("packer.log");
    let mut s = settings(&url, "ami-0123456789abcdef0", &log);
    let name = common::unique("aws-keep");
    s.name = name.clone();
    s.packer_env.insert("CSIS_FAKE_FAIL".into(), "1".into());
    let rt = AwsRuntime::new(s);
    let run = "2026_12_02t06_00_00_000001";
    let lineage = BTreeMap::from([
        (tags::SERIES.to_string(), "web".to_string()),
        (tags::RUN.to_string(), run.to_string()),
        (tags::CONFIG.to_string(), "keep-tree".to_string()),
    ]);
    // what packer's run_tags put on the builder instance of this bake
    let launch = |owner: String| {
        let ec2 = ec2.clone();
        let mut marks = csis_runtime_aws::stale::run_tags(&name, &lineage);
        marks.push((tags::BAKE_OWNER.to_string(), owner));
        async move {
            let spec = TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(
                    marks
                        .iter()
                        .map(|(k, v)| Tag::builder().key(k).value(v).build())
                        .collect(),
                ))
                .build();
            ec2.run_instances()
                .image_id("ami-0deb12000000000d2")
                .min_count(1)
                .max_count(1)
                .tag_specifications(spec)
                .send()
                .await
                .unwrap()
                .instances()[0]
                .instance_id
                .clone()
                .unwrap()
        }
    };
    let builder = launch(csis_runtime_aws::stale::bake_owner()).await;
    let mut req = request(
        "web",
        &name,
        "web-1",
        BakeParent::Deferred {
            series: "b".into(),
            name_prefix: "b-aws-bake".into(),
        },
        lineage.clone(),
        d.path(),
    );
    req.keep_failed = true;
    assert!(rt.keeps_failed_bakes("packer-ebs"));
    let e = rt.bake(&req).await.unwrap_err().to_string();
    assert!(e.contains("build failed on purpose"), "{e}");
    assert!(
        e.contains(&format!("builder instance {builder} kept")),
        "{e}"
    );
    assert!(
        e.contains(&format!("csis empty --runtime {name} --remove")),
        "{e}"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("build -on-error=abort .\n"),
        "packer was told to leave its machine"
    );
    let tags_of = |id: String| {
        let ec2 = ec2.clone();
        async move {
            let out = ec2
                .describe_instances()
                .instance_ids(id)
                .send()
                .await
                .unwrap();
            let i = &out.reservations()[0].instances()[0];
            let t: BTreeMap<String, String> = i
                .tags()
                .iter()
                .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
                .collect();
            (t, i.state().unwrap().name().unwrap().as_str().to_string())
        }
    };
    assert_eq!(tags_of(builder.clone()).await.0[tags::KEPT_FAILED], run);

    // csis exits: the owner mark names a process that is gone
    let dead = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        format!("{}:{pid}", csis_runtime_aws::stale::host_name())
    };
    ec2.create_tags()
        .resources(&builder)
        .tags(Tag::builder().key(tags::BAKE_OWNER).value(&dead).build())
        .send()
        .await
        .unwrap();
    let unmarked = launch(dead.clone()).await;
    let removed = rt.clean_stale_bakes().await.unwrap();
    assert!(removed.iter().any(|r| r.contains(&unmarked)), "{removed:?}");
    assert!(!removed.iter().any(|r| r.contains(&builder)), "{removed:?}");
    assert_eq!(tags_of(builder.clone()).await.1, "running");

    let inv = rt.inventory().await.unwrap();
    let kept: Vec<_> = inv
        .kept_failed
        .iter()
        .filter(|k| k.name == builder)
        .collect();
    assert_eq!(kept.len(), 1, "{inv:?}");
    assert_eq!(kept[0].run.as_deref(), Some(run));
    assert_eq!(kept[0].series.as_deref(), Some("web"));
    assert_eq!(kept[0].config.as_deref(), Some("keep-tree"));
    assert!(!inv.instances.iter().any(|i| i.id == builder));

    assert!(matches!(
        rt.remove_kept_bake(&unmarked).await,
        Err(RuntimeError::Refused(_)) | Ok(false)
    ));
    assert!(rt.remove_kept_bake(&builder).await.unwrap());
    let state = tags_of(builder.clone()).await.1;
    assert!(state == "shutting-down" || state == "terminated", "{state}");
    assert!(
        !rt.remove_kept_bake(&builder).await.unwrap(),
        "gone already"
    );
}
