//! run_session_command and verify_instance: instance lookups in moto, SSM
//! in the test double of csis_testkit::ssm (which runs the scripts).

use std::time::Duration;

use csis_runtime::{Runtime, RuntimeError};
use csis_runtime_aws::AwsRuntime;

use crate::common::{self, need_moto};
use csis_testkit::ssm::{Behaviour, SsmDouble};

async fn setup(
    url: &str,
    b: Behaviour,
) -> (AwsRuntime, SsmDouble, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let double = SsmDouble::start(dir.path(), b);
    let ec2 = common::ec2(url).await;
    let name = common::unique("ssm-box");
    let id = common::run_instance(&ec2, &name, "ami-0a1a10000000000a1").await;
    let mut s = common::settings(url, "aws-ssm");
    s.ssm_endpoint_url = Some(double.url.clone());
    let mut rt = AwsRuntime::new(s);
    rt.ssm_poll = Duration::from_millis(50);
    rt.verify_poll = Duration::from_millis(100);
    (rt, double, name, id, dir)
}

#[tokio::test]
async fn polls_through_pending_and_in_progress_to_the_output() {
    let url = need_moto!();
    let (rt, double, name, _, _d) = setup(
        &url,
        Behaviour {
            pending_polls: 2,
            ..Default::default()
        },
    )
    .await;
    let r = rt
        .run_session_command(&name, "sleep 0.3; echo hello; echo oops >&2", 20)
        .await
        .unwrap();
    assert_eq!(r.exit_code, 0);
    assert_eq!(r.stdout, "hello\n");
    assert_eq!(r.stderr, "oops\n");
    let st = double.statuses();
    assert_eq!(&st[..2], ["Pending", "Pending"]);
    assert!(st.contains(&"InProgress".to_string()), "{st:?}");
    assert_eq!(st.last().unwrap(), "Success");
    assert_eq!(double.calls()[0], "AmazonSSM.SendCommand");
}

#[tokio::test]
async fn a_failure_keeps_its_exit_code_and_output() {
    let url = need_moto!();
    let (rt, _double, name, _, _d) = setup(&url, Behaviour::default()).await;
    let r = rt
        .run_session_command(&name, "echo partial; echo broke >&2; exit 3", 20)
        .await
        .unwrap();
    assert_eq!(r.exit_code, 3);
    assert_eq!(r.stdout, "partial\n");
    assert_eq!(r.stderr, "broke\n");
}

#[tokio::test]
async fn invocation_does_not_exist_is_tolerated_until_the_deadline() {
    let url = need_moto!();
    let (rt, double, name, _, _d) = setup(
        &url,
        Behaviour {
            invisible_polls: 3,
            ..Default::default()
        },
    )
    .await;
    let r = rt
        .run_session_command(&name, "echo late", 20)
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "late\n"));
    assert_eq!(
        double
            .statuses()
            .iter()
            .filter(|s| *s == "InvocationDoesNotExist")
            .count(),
        3
    );

    // never visible: exit 1 with the seed's text, not an error
    let (rt, _double, name, _, _d) = setup(
        &url,
        Behaviour {
            never_visible: true,
            ..Default::default()
        },
    )
    .await;
    let r = rt.run_session_command(&name, "true", 1).await.unwrap();
    assert_eq!(r.exit_code, 1);
    assert!(
        r.stderr.starts_with("ssm command ") && r.stderr.ends_with(" still Pending after 1s"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn a_command_still_running_at_the_deadline_is_exit_1() {
    let url = need_moto!();
    let (rt, _double, name, _, _d) = setup(
        &url,
        Behaviour {
            hang: true,
            ..Default::default()
        },
    )
    .await;
    let r = rt.run_session_command(&name, "true", 1).await.unwrap();
    assert_eq!(r.exit_code, 1);
    assert!(
        r.stderr.ends_with(" still InProgress after 1s"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn other_ssm_errors_are_raised() {
    let url = need_moto!();
    // an endpoint that answers every SSM call with a refusal
    let h: common::Handler = std::sync::Arc::new(|_req| {
        common::HttpResponse::json(
            "400 Bad Request",
            "application/x-amz-json-1.1",
            r#"{"__type":"InvalidInstanceId","message":"Instances not in a valid state for account"}"#.into(),
        )
    });
    let ssm_url = csis_testkit::http::serve(h);
    let ec2 = common::ec2(&url).await;
    let name = common::unique("ssm-bad");
    common::run_instance(&ec2, &name, "ami-0a1a10000000000a1").await;
    let mut s = common::settings(&url, "aws-ssm");
    s.ssm_endpoint_url = Some(ssm_url);
    let rt = AwsRuntime::new(s);
    let e = rt.run_session_command(&name, "true", 5).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Failed(_)));
    assert!(e.to_string().contains("InvalidInstanceId"), "{e}");
}

#[tokio::test]
async fn verify_instance_reads_marker_image_and_mounts() {
    let url = need_moto!();
    let (rt, _double, name, _id, dir) = setup(&url, Behaviour::default()).await;
    // nothing there yet: no marker, no mounts
    let checks = rt
        .verify_instance(&name, "ami-0a1a10000000000a2", 2, 1)
        .await
        .unwrap();
    let by = |n: &str| checks.iter().find(|c| c.name == n).unwrap().clone();
    assert!(!by("startup scripts").ok);
    assert_eq!(
        by("startup scripts").detail,
        "no completion marker within 1s"
    );
    assert!(!by("booted image").ok);
    assert_eq!(
        by("booted image").detail,
        "booted ami-0a1a10000000000a1, expected ami-0a1a10000000000a2"
    );
    assert!(!by("data disks mounted").ok);
    assert_eq!(
        by("data disks mounted").detail,
        "0 mount(s) under /mnt, 2 declared"
    );

    // the launch finished: marker and two data mounts
    std::fs::create_dir_all(dir.path().join("var/lib/csis")).unwrap();
    std::fs::write(dir.path().join("var/lib/csis/launch-applied"), "").unwrap();
    std::fs::write(
        dir.path().join("mounts"),
        "/\n/boot\n/mnt/data\n/mnt/scratch\n",
    )
    .unwrap();
    let checks = rt
        .verify_instance(&name, "ami-0a1a10000000000a1", 2, 5)
        .await
        .unwrap();
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
    assert_eq!(checks.len(), 3);
    assert_eq!(checks[2].detail, "2 mount(s) under /mnt, 2 declared");
    assert!(checks[2].evidence.contains(&"/mnt/data".to_string()));

    // no storages declared: no mount check
    let checks = rt
        .verify_instance(&name, "ami-0a1a10000000000a1", 0, 5)
        .await
        .unwrap();
    assert_eq!(checks.len(), 2);
}

#[tokio::test]
async fn verify_waits_for_a_marker_that_comes_late() {
    let url = need_moto!();
    let (rt, _double, name, _id, dir) = setup(&url, Behaviour::default()).await;
    let marker = dir.path().join("var/lib/csis/launch-applied");
    let m2 = marker.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        std::fs::create_dir_all(m2.parent().unwrap()).unwrap();
        std::fs::write(&m2, "").unwrap();
    });
    let checks = rt
        .verify_instance(&name, "ami-0a1a10000000000a1", 0, 10)
        .await
        .unwrap();
    assert!(checks[0].ok, "{checks:?}");
    assert!(marker.exists());
}

/// `verify_instance` is a hook of the trait: the CLI reaches it through a
/// `DynRuntime`, and a runtime that has none answers Unsupported.
#[tokio::test]
async fn verify_instance_is_a_hook_of_the_trait() {
    struct Bare;
    #[async_trait::async_trait]
    impl Runtime for Bare {
        fn name(&self) -> &str {
            "bare"
        }
        fn kind(&self) -> &str {
            "bare"
        }
    }
    let e = Bare.verify_instance("vm", "b1", 0, 1).await.unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Unsupported {
                hook: "verify_instance",
                ..
            }
        ),
        "{e}"
    );

    let url = need_moto!();
    let (rt, _double, name, _id, dir) = setup(&url, Behaviour::default()).await;
    std::fs::create_dir_all(dir.path().join("var/lib/csis")).unwrap();
    std::fs::write(dir.path().join("var/lib/csis/launch-applied"), "").unwrap();
    let dynrt: csis_runtime::DynRuntime = std::sync::Arc::new(rt);
    let checks = dynrt
        .verify_instance(&name, "ami-0a1a10000000000a1", 0, 5)
        .await
        .unwrap();
    assert_eq!(
        checks
            .iter()
            .map(|c| (c.name.as_str(), c.ok))
            .collect::<Vec<_>>(),
        vec![("startup scripts", true), ("booted image", true)]
    );
    // a machine that is not there is refused by name, not verified
    let e = dynrt
        .verify_instance("nobody-here", "ami-0a1a10000000000a1", 0, 1)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "AWS runtime aws-ssm: cannot run a command on 'nobody-here': it is absent (no such machine)"
    );
}

/// A post-bake test machine: launched from the AMI in the default subnet
/// with the session instance profile, tagged as a test machine and as a
/// bake leftover of this process, answering over SSM (the double), its
/// commands run, then terminated; one whose owner is gone is terminated by
/// `clean_stale_bakes`.
#[tokio::test]
async fn a_test_machine_is_launched_tagged_answers_and_is_terminated() {
    let url = need_moto!();
    let dir = tempfile::tempdir().unwrap();
    let double = SsmDouble::start(dir.path(), Behaviour::default());
    let ec2 = common::ec2(&url).await;
    let (_vpc, subnets) = common::vpc_with_subnets(&ec2, common::octet(), 1).await;
    let mut s = common::settings(&url, "aws-test-machine");
    s.ssm_endpoint_url = Some(double.url.clone());
    s.session_mechanism = Some("ssm".into());
    // moto's EC2 wants the profile to exist in its IAM
    let profile = common::unique("csis-session");
    let made = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import boto3, sys; boto3.client('iam', endpoint_url=sys.argv[1], region_name='us-east-1', \
             aws_access_key_id='testing', aws_secret_access_key='testing')\
             .create_instance_profile(InstanceProfileName=sys.argv[2])",
        )
        .arg(&url)
        .arg(&profile)
        .status()
        .unwrap();
    assert!(
        made.success(),
        "could not make the instance profile in moto"
    );
    s.session_instance_profile = Some(profile.clone());
    s.networking = Some(csis_runtime_aws::settings::NetworkSettings {
        subnets: vec![csis_runtime_aws::settings::SubnetSettings {
            name: "main".into(),
            subnet_id: subnets[0].clone(),
            is_default: true,
            ..Default::default()
        }],
        ..Default::default()
    });
    let mut rt = AwsRuntime::new(s);
    rt.ssm_poll = Duration::from_millis(50);
    rt.waiter_delay = Duration::from_millis(100);
    let name = common::unique("csis-test-aws-web");
    let req = csis_runtime::TestMachineRequest {
        build_id: "ami-0a1a10000000000a1".into(),
        series: "web".into(),
        name: name.clone(),
        owner: csis_runtime::owner_here(),
        lifetime_s: 600,
        ready_timeout_s: 60,
    };
    let m = rt.launch_test_machine(&req).await.unwrap();
    assert!(m.id.starts_with("i-"), "{m:?}");
    assert_eq!(m.booted.as_deref(), Some("ami-0a1a10000000000a1"));
    let d = ec2
        .describe_instances()
        .instance_ids(&m.id)
        .send()
        .await
        .unwrap();
    let i = d.reservations()[0].instances()[0].clone();
    assert_eq!(i.subnet_id(), Some(subnets[0].as_str()));
    assert_eq!(i.instance_type().map(|t| t.as_str()), Some("t3.medium"));
    assert!(i
        .iam_instance_profile()
        .and_then(|p| p.arn())
        .is_some_and(|a| a.ends_with(profile.as_str())));
    let tags: std::collections::BTreeMap<String, String> = i
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect();
    assert_eq!(tags["Name"], name);
    assert_eq!(tags["csis_test_machine"], "aws-test-machine");
    assert_eq!(tags["csis_bake"], "aws-test-machine");
    assert_eq!(tags["csis_bake_owner"], csis_runtime::owner_here());
    // the machine answered `true` over SSM; a test command runs by its id
    assert!(double
        .calls()
        .contains(&"AmazonSSM.SendCommand".to_string()));
    let r = rt
        .run_session_command(&m.id, "echo checking; exit 2", 20)
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (2, "checking\n"));
    assert!(rt.remove_test_machine(&m.id).await.unwrap());
    let d = ec2
        .describe_instances()
        .instance_ids(&m.id)
        .send()
        .await
        .unwrap();
    let state = d.reservations()[0].instances()[0]
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_string());
    assert!(
        matches!(state.as_deref(), Some("shutting-down" | "terminated")),
        "{state:?}"
    );

    // a leftover whose owner is gone: terminated by the next build's clean-up
    let dead = (4_000_000u32..4_194_303)
        .rev()
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let req = csis_runtime::TestMachineRequest {
        owner: format!("{}:{dead}", csis_runtime::host_name()),
        name: common::unique("csis-test-aws-left"),
        ..req
    };
    let m = rt.launch_test_machine(&req).await.unwrap();
    let removed = rt.clean_stale_bakes().await.unwrap();
    assert!(removed.iter().any(|r| r.contains(&m.id)), "{removed:?}");
}
