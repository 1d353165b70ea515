//! Image and instance hooks against moto.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{RequestLaunchTemplateData, ResourceType, Tag, TagSpecification};
use csis_runtime::{PowerState, Runtime, RuntimeError};
use csis_runtime_aws::AwsPowerState;

use crate::common::{self, need_moto};

#[tokio::test]
async fn retag_query_images_and_release() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let series = common::unique("web");
    let id = common::register_image(
        &ec2,
        &common::unique("web-img"),
        &[("csis_series", &series), ("csis_parent", "series-x")],
    )
    .await;
    let untagged = common::register_image(&ec2, &common::unique("plain"), &[]).await;
    let rt = common::runtime(&url, "aws-tag");
    let tags = BTreeMap::from([
        ("csis_parent".to_string(), "series:el10".to_string()),
        (
            "csis_fingerprint".to_string(),
            "0123456789abcdef".to_string(),
        ),
    ]);
    rt.retag_image(&id, &tags).await.unwrap();
    let got = common::image_tags(&ec2, &id).await;
    assert_eq!(got["csis_parent"], "series:el10");
    assert_eq!(got["csis_fingerprint"], "0123456789abcdef");
    assert_eq!(got["csis_series"], series);

    let images = rt.query_images().await.unwrap();
    let mine = images
        .iter()
        .find(|i| i.build_id == id)
        .expect("tagged own image listed");
    assert_eq!(mine.tags["csis_series"], series);
    assert!(mine.created.is_some());
    assert!(
        !images.iter().any(|i| i.build_id == untagged),
        "no csis_series, not listed"
    );

    rt.release(&id, &series, "prod").await.unwrap();
    let got = common::image_tags(&ec2, &id).await;
    assert_eq!(got["csis_release"], "prod");

    let e = rt
        .retag_image("ami-0123456789abcdef0", &tags)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("could not retag ami-0123456789abcdef0: InvalidAMIID.NotFound"),
        "{e}"
    );
}

#[test]
fn release_commands_shape() {
    let mut s = csis_runtime_aws::AwsSettings::new("aws-rel", "us-east-2", "t3.micro");
    let rt = csis_runtime_aws::AwsRuntime::new(s.clone());
    assert_eq!(
        rt.release_commands("ami-0abc", "team-node", "default"),
        vec!["aws ec2 create-tags --region us-east-2 --resources ami-0abc --tags Key=csis_release,Value=default Key=csis_series,Value=team-node".to_string()]
    );
    s.credentials.profile_name = Some("noaa".into());
    let rt = csis_runtime_aws::AwsRuntime::new(s);
    assert_eq!(
        rt.release_commands("ami-0abc", "team node", "prod"),
        vec!["aws ec2 create-tags --region us-east-2 --resources ami-0abc --tags Key=csis_release,Value=prod 'Key=csis_series,Value=team node' --profile noaa".to_string()]
    );
}

#[tokio::test]
async fn dispose_deregisters_and_deletes_every_snapshot() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let inst = common::run_instance(&ec2, &common::unique("imgsrc"), "ami-0a1a10000000000a2").await;
    let ami = ec2
        .create_image()
        .instance_id(&inst)
        .name(common::unique("to-dispose"))
        .send()
        .await
        .unwrap()
        .image_id
        .unwrap();
    let snaps: Vec<String> = ec2
        .describe_images()
        .image_ids(&ami)
        .send()
        .await
        .unwrap()
        .images()[0]
        .block_device_mappings()
        .iter()
        .filter_map(|b| b.ebs()?.snapshot_id.clone())
        .collect();
    assert!(!snaps.is_empty(), "moto gives the AMI a snapshot");
    let rt = common::runtime(&url, "aws-disp");
    assert!(rt.dispose_image(&ami).await.unwrap());
    assert!(ec2
        .describe_images()
        .image_ids(&ami)
        .send()
        .await
        .unwrap()
        .images()
        .is_empty());
    for s in &snaps {
        let e = ec2
            .describe_snapshots()
            .snapshot_ids(s)
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            e.into_service_error().meta().code(),
            Some("InvalidSnapshot.NotFound")
        );
    }
    // gone already: a warning and false
    assert!(!rt.dispose_image(&ami).await.unwrap());
    assert_eq!(
        rt.take_warnings(),
        vec![format!("AMI {ami} not found; nothing to deregister")]
    );
    assert!(!rt.dispose_image("ami-0123456789abcdef0").await.unwrap());
}

#[tokio::test]
async fn image_users_are_instances_and_launch_templates() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let ami = common::register_image(&ec2, &common::unique("used"), &[]).await;
    let name = common::unique("user");
    let inst = common::run_instance(&ec2, &name, &ami).await;
    let lt_name = common::unique("lt");
    let lt = ec2
        .create_launch_template()
        .launch_template_name(&lt_name)
        .launch_template_data(RequestLaunchTemplateData::builder().image_id(&ami).build())
        .send()
        .await
        .unwrap()
        .launch_template
        .unwrap()
        .launch_template_id
        .unwrap();
    let rt = common::runtime(&url, "aws-users");
    let users = rt.image_users(&ami).await.unwrap();
    assert!(
        users.contains(&format!("instance {inst} ({name})")),
        "{users:?}"
    );
    assert!(
        users.contains(&format!("launch template {lt} ({lt_name}) version 1")),
        "{users:?}"
    );
    let unused = common::register_image(&ec2, &common::unique("unused"), &[]).await;
    assert!(rt.image_users(&unused).await.unwrap().is_empty());
    // a terminated instance uses nothing
    ec2.terminate_instances()
        .instance_ids(&inst)
        .send()
        .await
        .unwrap();
    let users = rt.image_users(&ami).await.unwrap();
    assert!(
        !users.iter().any(|u| u.starts_with("instance ")),
        "{users:?}"
    );
}

#[tokio::test]
async fn power_identity_boot_image_start_and_stop() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("box");
    let id = common::run_instance(&ec2, &name, "ami-0deb12000000000d2").await;
    let mut rt = common::runtime(&url, "aws-inst");
    rt.waiter_delay = std::time::Duration::from_millis(50);

    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );
    assert_eq!(
        rt.query_instance_boot_image(&name)
            .await
            .unwrap()
            .as_deref(),
        Some("ami-0deb12000000000d2")
    );
    let (iid, host) = rt.query_instance_identity(&name).await.unwrap();
    assert_eq!(iid, id);
    assert!(host.is_some_and(|h| !h.is_empty()));

    rt.stop_instance(&name, 30).await.unwrap();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Stopped
    );
    assert_eq!(rt.power_state(&name).await, Some(AwsPowerState::Stopped));
    assert_eq!(
        rt.query_instance_boot_image(&name).await.unwrap(),
        None,
        "boot image: running/pending only"
    );
    assert_eq!(
        rt.query_instance_identity(&name).await.unwrap().0,
        id,
        "identity whatever the state"
    );
    let e = rt.run_session_command(&name, "true", 30).await.unwrap_err();
    assert_eq!(e.to_string(), format!("AWS runtime aws-inst: cannot run a command on '{name}': it is STOPPED (switched off; not drift)"));
    assert_eq!(
        rt.power_note(&name).await.as_deref(),
        Some("STOPPED (switched off; not drift)")
    );

    rt.start_instance(&name, 30).await.unwrap();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );

    // moto's SSM stub answers Success at once
    let r = rt.run_session_command(&name, "echo hi", 30).await.unwrap();
    assert_eq!(r.exit_code, 0);

    // a terminated record counts as absent, and a live namesake is preferred
    ec2.terminate_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Absent
    );
    let e = rt.run_session_command(&name, "true", 30).await.unwrap_err();
    assert_eq!(e.to_string(), format!("AWS runtime aws-inst: cannot run a command on '{name}': it is absent (no such machine)"));
    let e = rt.start_instance(&name, 30).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("AWS runtime aws-inst: no instance named '{name}' to start")
    );
    let id2 = common::run_instance(&ec2, &name, "ami-0deb12000000000d1").await;
    assert_eq!(
        rt.query_instance_identity(&name).await.unwrap().0,
        id2,
        "the non-terminated record wins"
    );
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );
}

#[tokio::test]
async fn absent_machines() {
    let url = need_moto!();
    let rt = common::runtime(&url, "aws-none");
    let name = common::unique("nobody");
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Absent
    );
    assert_eq!(rt.query_instance_boot_image(&name).await.unwrap(), None);
    assert!(matches!(
        rt.query_instance_identity(&name).await,
        Err(RuntimeError::Refused(_))
    ));
    assert_eq!(
        rt.stop_instance(&name, 10).await.unwrap_err().to_string(),
        format!("AWS runtime aws-none: no instance named '{name}' to stop")
    );
    assert_eq!(
        rt.start_instance(&name, 10).await.unwrap_err().to_string(),
        format!("AWS runtime aws-none: no instance named '{name}' to start")
    );
}

#[tokio::test]
async fn an_unreachable_cloud_makes_no_claim() {
    let rt = common::runtime("http://127.0.0.1:9", "aws-down");
    let e = rt.query_instance_power_state("x").await.unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable(_)));
    assert_eq!(
        e.to_string(),
        "AWS runtime aws-down: power state unavailable (no runtime could answer)"
    );
    let e = rt.run_session_command("x", "true", 5).await.unwrap_err();
    assert_eq!(e.to_string(), "AWS runtime aws-down: cannot run a command on 'x': it is power state unavailable (no runtime could answer)");
    assert!(rt.query_images().await.is_err());
}

#[tokio::test]
async fn preflight_reads_the_caller_identity() {
    let url = need_moto!();
    let mut s = common::settings(&url, "aws-pre");
    s.account_id = Some("999999999999".into());
    let rt = csis_runtime_aws::AwsRuntime::new(s);
    let lines = rt.preflight().await.unwrap();
    assert!(lines.iter().all(|l| l.ok));
    // the endpoint it asked first
    assert_eq!(lines[0].what, "aws aws-pre: endpoint");
    assert_eq!(lines[0].detail, url);
    assert_eq!(lines[1].detail, "123456789012");
    assert!(
        lines[2].detail.starts_with("arn:aws:sts::123456789012:"),
        "{}",
        lines[2].detail
    );
    assert!(lines[3].detail.contains("declared 999999999999"));
    let down = common::runtime("http://127.0.0.1:9", "aws-down");
    let lines = down.preflight().await.unwrap();
    assert_eq!(lines[0].detail, "http://127.0.0.1:9");
    assert!(!lines[1].ok);
    // a transport failure names the endpoint too
    assert!(
        lines[1]
            .detail
            .starts_with("AWS Error: http://127.0.0.1:9: "),
        "{}",
        lines[1].detail
    );
}

#[allow(dead_code)]
fn _tag_spec(k: &str, v: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(ResourceType::Image)
        .tags(Tag::builder().key(k).value(v).build())
        .build()
}
