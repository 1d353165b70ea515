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
