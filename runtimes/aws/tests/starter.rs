//! The standard-aws starter of the original (../shared/reference), its
//! REPLACE-ME ids swapped for ids created in moto: it loads (csis-rules),
//! validates online, resolves its vendor AMI and writes its packer roots;
//! and the benchmark: EC2 API calls per plan, counted at the endpoint.
//!
//! Its own test binary: it sets AWS_ENDPOINT_URL, AWS_CONFIG_FILE and
//! AWS_SHARED_CREDENTIALS_FILE for the process (the starter names a profile).

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use csis_runtime::{BakeParent, BakeRequest, CancellationToken, NullLog, ResolveRequest, Runtime};
use csis_runtime_aws::{merge_owners, AwsRuntime, AwsSettings};

fn replace_in(path: &Path, pairs: &[(&str, &str)]) {
    let mut s = std::fs::read_to_string(path).unwrap();
    for (a, b) in pairs {
        s = s.replace(a, b);
    }
    std::fs::write(path, s).unwrap();
}

#[tokio::test]
async fn standard_aws_starter_validates_online_resolves_and_emits() {
    let Some(url) = common::moto() else { return };
    if !common::fixture_amis(&url).await {
        return;
    }
    let reference = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/cs-image-system-0.1.1-starters/standard-aws");
    if !reference.is_dir() {
        crate::common::loud(&format!(
            "*** SKIPPED: {} is not there ***",
            reference.display()
        ));
        return;
    }
    // the tree, copied for this test only, with moto's ids
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("standard-aws");
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(&reference)
        .arg(&tree)
        .status()
        .unwrap()
        .success());
    let ec2 = common::ec2(&url).await;
    let (vpc, subnets) = common::vpc_with_subnets(&ec2, 200, 1).await;
    let sg = common::security_group(&ec2, &vpc).await;
    replace_in(
        &tree.join("cfg/runtime-builders.yml"),
        &[
            ("vpc-REPLACE-ME", &vpc),
            ("sg-REPLACE-ME-gateway", &sg),
            ("subnet-REPLACE-ME-a", &subnets[0]),
        ],
    );
    // the starter's profile, as a profile of this test's own
    let aws_dir = work.path().join("aws");
    std::fs::create_dir_all(&aws_dir).unwrap();
    std::fs::write(
        aws_dir.join("config"),
        "[profile REPLACE-ME-profile]\nregion = us-east-2\n",
    )
    .unwrap();
    std::fs::write(
        aws_dir.join("credentials"),
        "[REPLACE-ME-profile]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    )
    .unwrap();
    let (proxy, counts) = common::counting_proxy(&url);
    std::env::set_var("AWS_CONFIG_FILE", aws_dir.join("config"));
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", aws_dir.join("credentials"));
    std::env::set_var("AWS_ENDPOINT_URL", &proxy);

    let loaded = csis_rules::load(&tree, &csis_rules::LoadOptions::default());
    let loaded = match loaded {
        Ok(t) => t,
        Err(diags) => {
            let all: Vec<String> = diags.iter().map(|d| format!("{d:?}")).collect();
            panic!("the starter does not load:\n{}", all.join("\n"));
        }
    };
    let entry = loaded
        .runtimes
        .iter()
        .find(|r| r.type_name() == "aws")
        .expect("an aws runtime");
    let settings = AwsSettings::from_tree(entry).unwrap();
    assert_eq!(settings.name, "aws-main");
    assert_eq!(
        settings.credentials.profile_name.as_deref(),
        Some("REPLACE-ME-profile")
    );
    assert_eq!(settings.session_mechanism.as_deref(), Some("ssm"));
    assert_eq!(
        settings
            .networking
            .as_ref()
            .unwrap()
            .default_subnet()
            .unwrap()
            .subnet_id,
        subnets[0]
    );
    assert_eq!(
        settings.endpoint_url, None,
        "the endpoint comes from AWS_ENDPOINT_URL"
    );

    // one plan = one run: load-time discovery, the vendor resolve, emission of every root
    let mut per_plan = Vec::new();
    for _run in 0..2 {
        counts.lock().unwrap().clear();
        let rt = AwsRuntime::new(settings.clone());
        let findings = rt.check_online().await.unwrap();
        assert!(findings.is_empty(), "{findings:?}");
        let os = loaded
            .os_builders
            .iter()
            .find(|o| o.model.name == "el10")
            .unwrap();
        let e = &os.model.runtimes[0];
        let req = ResolveRequest {
            label: "//os/el10@aws-main".into(),
            series: "el10".into(),
            family: os.model.family.clone(),
            family_version: os.model.family_version.clone(),
            architecture: "x86_64".into(),
            owners: merge_owners(&os.model.owners, &settings.default_owners, &e.owners),
            query: serde_json::to_value(&e.query).unwrap(),
            image_id: e.image_id.clone(),
        };
        let vendor = rt.resolve(&req).await.unwrap();
        assert_eq!(
            vendor.id, "ami-0a1a10000000000a2",
            "the newest AlmaLinux 10 x86_64 of tests/fixtures/amis.json"
        );
        rt.resolve(&req).await.unwrap();
        let roots = work.path().join("generated");
        let mk = |series: &str, parent: BakeParent, prefix: &str| BakeRequest {
            label: format!("//images/{series}@aws-main"),
            series: series.into(),
            runtime: "aws-main".into(),
            image_builder: "packer-ebs".into(),
            final_name: format!("{series}-aws-main-20261130_062625"),
            prefix: prefix.into(),
            parent,
            machine_type: e.default_machine_type.clone(),
            disk_size_gb: Some(200),
            bake_user: None,
            package_manager: Some("dnf".into()),
            family: None,
            architecture: None,
            steps: vec![],
            tests: vec![],
            recipe: Default::default(),
            required_plugins: Vec::new(),
            tags: BTreeMap::from([("csis_series".to_string(), series.to_string())]),
            tree_root: tree.clone(),
            emit_dir: roots.join(series),
            log: Arc::new(NullLog),
            cancel: CancellationToken::new(),
            keep_failed: false,
        };
        let files = rt
            .emit(&mk("el10", BakeParent::Vendor(vendor.clone()), ""))
            .await
            .unwrap();
        // build, source, variables, the plugins and the original's
        // ansible setup (`base_image_version`)
        assert_eq!(files.len(), 5, "{files:?}");
        assert!(
            roots.join("el10/ansible-setup.pkr.hcl").is_file(),
            "{files:?}"
        );
        let src = std::fs::read_to_string(roots.join("el10/source-el10.pkr.hcl")).unwrap();
        assert!(src.contains(&format!("vpc_id        = \"{vpc}\"")), "{src}");
        assert!(
            src.contains("iam_instance_profile        = \"REPLACE-ME-ssm-instance-profile\""),
            "{src}"
        );
        rt.emit(&mk(
            "team-node",
            BakeParent::Deferred {
                series: "el10".into(),
                name_prefix: "el10-aws-main".into(),
            },
            "el10-aws-main",
        ))
        .await
        .unwrap();
        per_plan.push(counts.lock().unwrap().clone());
    }
    let c = &per_plan[0];
    println!("EC2 API calls per plan of standard-aws (one run, counted at the endpoint): {c:?}");
    assert_eq!(per_plan[0], per_plan[1], "each run asks the same");
    for op in [
        "DescribeVpcs",
        "DescribeSubnets",
        "DescribeRouteTables",
        "DescribeSecurityGroups",
        "DescribeImages",
    ] {
        assert_eq!(c.get(op), Some(&1), "{op}: {c:?}");
    }
    assert_eq!(c.values().sum::<usize>(), 5, "{c:?}");
}
