//! Pure functions: no cloud.

use csis_runtime::PowerState;
use csis_runtime_aws::bake::ami_from_manifest;
use csis_runtime_aws::emit::{order_tags, packer_fmt};
use csis_runtime_aws::resolve::{ec2_filter_name, merge_owners, ImageQuery};
use csis_runtime_aws::{aws_cli_version, check_aws_cli, AwsPowerState, AwsRuntime, AwsSettings};
use serde_json::json;

#[test]
fn power_state_mapping() {
    let m = |s: &str| AwsPowerState::from_ec2(s);
    assert_eq!(m("pending").as_str(), "starting");
    assert_eq!(m("running").as_str(), "running");
    assert_eq!(m("stopping").as_str(), "stopping");
    assert_eq!(m("shutting-down").as_str(), "stopping");
    assert_eq!(m("stopped").as_str(), "stopped");
    assert_eq!(m("terminated").as_str(), "absent");
    assert_eq!(m("rebooting").as_str(), "unknown");
    assert_eq!(m("stopped").to_api(), PowerState::Stopped);
    assert_eq!(m("pending").to_api(), PowerState::Starting);
    assert_eq!(m("stopping").to_api(), PowerState::Stopping);
    assert_eq!(m("shutting-down").to_api(), PowerState::Stopping);
    assert_eq!(m("running").to_api(), PowerState::Running);
    assert_eq!(m("terminated").to_api(), PowerState::Absent);
    assert_eq!(m("rebooting").to_api(), PowerState::Unknown);
    assert_eq!(m("stopped").describe(), "STOPPED (switched off; not drift)");
    assert_eq!(m("terminated").describe(), "absent (no such machine)");
}

#[test]
fn owners_merge_in_the_seeds_order() {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        merge_owners(
            &v(&["self", "764336703387"]),
            &v(&["amazon", "self"]),
            &v(&["136693071363", "amazon"])
        ),
        v(&["self", "764336703387", "amazon", "136693071363"])
    );
}

#[test]
fn the_filter_map_on_a_copy() {
    assert_eq!(
        ec2_filter_name("root_device_type").as_deref(),
        Some("root-device-type")
    );
    assert_eq!(
        ec2_filter_name("virtualization_type").as_deref(),
        Some("virtualization-type")
    );
    assert_eq!(
        ec2_filter_name("block_device_mapping_volume_type").as_deref(),
        Some("block-device-mapping.volume-type")
    );
    assert_eq!(
        ec2_filter_name("owner-alias").as_deref(),
        Some("owner-alias")
    );
    assert_eq!(ec2_filter_name("tag:Team").as_deref(), Some("tag:Team"));
    assert_eq!(ec2_filter_name("description_contains"), None);
    let decl = json!({"filters": {"name": "RHEL*", "state": "pending", "ena_support": true,
        "is_public": "False", "tag:team": "a", "colour": "blue"}});
    let copy = decl.clone();
    let q = ImageQuery::from_declaration(&["self".into(), "self".into()], &decl);
    assert_eq!(decl, copy, "the declaration is left exactly as declared");
    assert_eq!(q.owners, ["self"]);
    assert_eq!(q.filters["state"], ["available"], "state: available forced");
    assert_eq!(q.filters["ena-support"], ["true"]);
    assert_eq!(q.filters["is-public"], ["false"], "booleans lower-cased");
    assert_eq!(q.filters["tag:team"], ["a"]);
    assert_eq!(q.post_filters["colour"], ["blue"]);
    assert!(!q.filters.contains_key("colour"));
    // no filters at all still asks for available images
    let q = ImageQuery::from_declaration(&[], &json!({}));
    assert_eq!(q.filters.len(), 1);
}

#[test]
fn aws_cli_version_checker() {
    assert_eq!(
        aws_cli_version("aws-cli/2.32.0 Python/3.13.7 Linux/6.1 exe/x86_64.debian.12\n").as_deref(),
        Some("2.32.0")
    );
    assert_eq!(
        aws_cli_version("aws-cli/1.18.69").as_deref(),
        Some("1.18.69")
    );
    assert_eq!(
        aws_cli_version("something else\naws-cli/2.0.0 x"),
        None,
        "first line only"
    );
    let d = tempfile::tempdir().unwrap();
    let bin = |name: &str, body: &str| {
        let p = d.path().join(name);
        csis_testkit::write_executable(&p, &format!("#!/bin/sh\n{body}\n")).unwrap();
        p.display().to_string()
    };
    assert_eq!(
        check_aws_cli(&bin("aws2", "echo 'aws-cli/2.32.1 Python/3.13'")).unwrap(),
        "2.32.1"
    );
    assert_eq!(
        check_aws_cli(&bin("aws1", "echo 'aws-cli/1.16.0 Python/2.7' >&2")).unwrap(),
        "1.16.0"
    );
    let garbled = bin("awsg", "echo 'hello'");
    assert_eq!(
        check_aws_cli(&garbled).unwrap_err(),
        format!(
            "aws-cli: AwsCLIVersionChecker could not parse a version from `{garbled} --version`"
        )
    );
    assert_eq!(
        check_aws_cli("/nonexistent/aws").unwrap_err(),
        "aws-cli: binary '/nonexistent/aws' not found (declared in cfg/executables.yml; an absolute path, or a name on PATH)"
    );
    let unreadable = d.path().join("noexec");
    std::fs::write(&unreadable, "x").unwrap();
    assert!(check_aws_cli(&unreadable.display().to_string())
        .unwrap_err()
        .starts_with("aws-cli: could not read its version"));
}

#[test]
fn session_mechanism_values() {
    let mut s = AwsSettings::new("rt", "us-east-2", "t3.micro");
    assert_eq!(
        AwsRuntime::new(s.clone()).session_mechanism().unwrap(),
        None
    );
    s.session_mechanism = Some("  Ssm ".into());
    s.session_instance_profile = Some("p".into());
    let rt = AwsRuntime::new(s.clone());
    assert_eq!(rt.session_mechanism().unwrap(), Some("ssm"));
    assert_eq!(rt.session_instance_profile().as_deref(), Some("p"));
    s.session_mechanism = Some("iap".into());
    let rt = AwsRuntime::new(s);
    assert_eq!(
        rt.session_mechanism().unwrap_err().to_string(),
        "AWS runtime rt: unknown session mechanism 'iap' (supported: ssm)"
    );
    assert_eq!(rt.session_instance_profile(), None);
}

#[test]
fn manifest_artifacts() {
    let m = r#"{"builds":[{"artifact_id":"us-east-2:ami-old","packer_run_uuid":"a"},
        {"artifact_id":"us-west-1:ami-w,us-east-2:ami-new","packer_run_uuid":"b"}],"last_run_uuid":"b"}"#;
    assert_eq!(ami_from_manifest(m, "us-east-2").unwrap(), "ami-new");
    assert_eq!(ami_from_manifest(m, "us-west-1").unwrap(), "ami-w");
    assert!(ami_from_manifest("{}", "us-east-2").is_err());
    assert!(ami_from_manifest(r#"{"builds":[{"artifact_id":"nonsense"}]}"#, "us-east-2").is_err());
}

#[test]
fn tags_in_the_goldens_order() {
    let t = [
        ("csis_run", "r"),
        ("Project", "p"),
        ("csis_series", "s"),
        ("csis_config", "c"),
        ("Env", "e"),
        ("csis_parent", "vendor"),
        ("csis_zzz", "z"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let keys: Vec<String> = order_tags(&t).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "Env",
            "Project",
            "csis_config",
            "csis_series",
            "csis_parent",
            "csis_run",
            "csis_zzz"
        ]
    );
}

#[test]
fn packer_fmt_aligns_runs_of_single_line_attributes() {
    let input = "a {\n    x = 1\n    longer = \"a = b\"\n    tags = {\n        k = \"v\"\n        kk = \"w\"\n    }\n    y = [\n        \"z\",\n    ]\n    z = !var.release\n}\n";
    let want = "a {\n  x      = 1\n  longer = \"a = b\"\n  tags = {\n    k  = \"v\"\n    kk = \"w\"\n  }\n  y = [\n    \"z\",\n  ]\n  z = !var.release\n}\n";
    assert_eq!(packer_fmt(input), want);
}

#[test]
fn a_blank_networking_name_is_refused() {
    let mut s = AwsSettings::new("rt", "us-east-2", "t3.micro");
    let mut net = csis_runtime_aws::NetworkSettings {
        network: "vpc-1".into(),
        ..Default::default()
    };
    net.name = Some("   ".into());
    s.networking = Some(net);
    let f = csis_runtime_aws::network::verdicts(&s, &Default::default());
    assert!(
        f.iter()
            .any(|x| x.message == "Networking configuration name cannot be empty for rt."),
        "{f:?}"
    );
}

#[test]
fn an_odd_image_name_still_reads_its_own_data_block() {
    use csis_runtime_aws::emit::{render, source_body, AmiLookup, SourcePlan};
    let p = SourcePlan {
        image: "web.v2".into(),
        runtime: "aws-main".into(),
        lookup: AmiLookup::Resolved {
            id: "ami-1".into(),
            owner: None,
        },
        profile: None,
        ami_name: "web".into(),
        instance_type: "t3.micro".into(),
        region: "us-east-2".into(),
        vpc_id: "vpc-1".into(),
        subnet_id: "subnet-1".into(),
        availability_zone: None,
        tags: vec![],
        run_tags: vec![],
        ena_support: None,
        sriov_support: None,
        ssm_declared: false,
        ssm_profile: None,
        build_profile: None,
        ssh_username: "ec2-user".into(),
        device_name: "/dev/sda1".into(),
        volume_size: None,
        family: "rhel".into(),
        architecture: "x86_64".into(),
        base_image: true,
    };
    let text = render(&source_body(&p), "", &[]).unwrap();
    let body = hcl::parse(&text).unwrap();
    let data = body.blocks().next().unwrap();
    let label = data.labels()[1].as_str().to_string();
    assert!(
        text.contains(&format!("data.amazon-ami.{label}.id")),
        "{text}"
    );
    assert!(!text.contains("owners"), "no owner known: no owners line");
}
