//! The image query and the pinned image id, against moto (the AMIs of
//! tests/fixtures/amis.json, loaded through MOTO_AMIS_PATH by moto.sh, and
//! images registered here).

use csis_runtime::{ResolveRequest, Runtime, RuntimeError};
use serde_json::json;

use crate::common::{self, need_moto};

fn req(series: &str, owners: &[&str], query: serde_json::Value) -> ResolveRequest {
    ResolveRequest {
        label: format!("//os/{series}@aws"),
        series: series.into(),
        family: "rhel".into(),
        family_version: "10".into(),
        architecture: "x86_64".into(),
        owners: owners.iter().map(|s| s.to_string()).collect(),
        query,
        image_id: None,
    }
}

#[tokio::test]
async fn the_newest_match_wins_and_the_owner_is_the_alias() {
    let url = need_moto!();
    if !common::fixture_amis(&url).await {
        return;
    }
    let rt = common::runtime(&url, "aws-res");
    let q = json!({"filters": {"name": "AlmaLinux OS 10*", "state": "available",
        "root_device_type": "ebs", "architecture": "x86_64", "virtualization_type": "hvm"}});
    let r = rt
        .resolve(&req("el10", &["self", "764336703387"], q.clone()))
        .await
        .unwrap();
    assert_eq!(
        r.id, "ami-0a1a10000000000a2",
        "November's x86_64 image, not June's nor the newer arm64 one"
    );
    assert_eq!(
        r.owner.as_deref(),
        Some("amazon"),
        "moto sets ImageOwnerAlias=amazon on loaded AMIs"
    );
    assert_eq!(
        r.facts.get("root_device_name").map(String::as_str),
        Some("/dev/sda1")
    );
    assert_eq!(r.creation_date.as_deref(), Some("2025-11-01T12:00:00.000Z"));

    let deb = rt
        .resolve(&req(
            "deb12",
            &["136693071363"],
            json!({"filters": {"name": "debian-12-amd64-*"}}),
        ))
        .await
        .unwrap();
    assert_eq!(deb.id, "ami-0deb12000000000d2");
    assert_eq!(
        deb.facts.get("root_device_name").map(String::as_str),
        Some("/dev/xvda")
    );
}

#[tokio::test]
async fn unknown_keys_are_an_exact_post_filter() {
    let url = need_moto!();
    if !common::fixture_amis(&url).await {
        return;
    }
    let rt = common::runtime(&url, "aws-post");
    let q = json!({"filters": {"name": "debian-12-amd64-*", "description": "Debian 12 (July, the special one)"}});
    let r = rt
        .resolve(&req("deb12", &["136693071363"], q))
        .await
        .unwrap();
    assert_eq!(
        r.id, "ami-0deb12000000000d3",
        "the post filter keeps only July's"
    );
    let q = json!({"filters": {"name": "debian-12-amd64-*", "description": "Debian 12"}});
    let e = rt
        .resolve(&req("deb12x", &["136693071363"], q))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("No resolved Image identifiers for OS deb12x"),
        "{e}"
    );
}

#[tokio::test]
async fn tags_and_booleans_and_own_images() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let team = common::unique("team");
    let name = common::unique("own-image");
    let id = common::register_image(&ec2, &name, &[("team", &team)]).await;
    let rt = common::runtime(&url, "aws-tags");
    let r = rt
        .resolve(&req(
            "own",
            &["self"],
            json!({"filters": {"tag:team": team, "is_public": false}}),
        ))
        .await
        .unwrap();
    assert_eq!(r.id, id);
    assert_eq!(
        r.owner.as_deref(),
        Some("123456789012"),
        "no alias: the OwnerId"
    );
    let e = rt
        .resolve(&req(
            "own2",
            &["self"],
            json!({"filters": {"tag:team": team, "is_public": true}}),
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, RuntimeError::Refused(_)));
}

#[tokio::test]
async fn a_pinned_image_id_is_looked_up_by_id() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("pinned");
    let id = common::register_image(&ec2, &name, &[]).await;
    let rt = common::runtime(&url, "aws-pin");
    let mut r = req(
        "el10",
        &["764336703387"],
        json!({"filters": {"name": "nothing-matches-*"}}),
    );
    r.image_id = Some(id.clone());
    let got = rt.resolve(&r).await.unwrap();
    assert_eq!(got.id, id, "the query and owners are not consulted");
    assert_eq!(got.name.as_deref(), Some(name.as_str()));

    for bad in ["ami-0123456789abcdef0", "not-an-ami"] {
        r.image_id = Some(bad.into());
        let e = rt.resolve(&r).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "OS builder el10: image_id '{bad}' on runtime aws-pin is not known to the provider"
            )
        );
    }
}

#[tokio::test]
async fn identical_queries_are_asked_once_per_run() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("cached");
    let id = common::register_image(&ec2, &name, &[]).await;
    let (proxy, counts) = common::counting_proxy(&url);
    let rt = common::runtime(&proxy, "aws-cache");
    let r = req("c", &["self"], json!({"filters": {"name": name}}));
    let (a, b) = tokio::join!(rt.resolve(&r), rt.resolve(&r));
    assert_eq!(a.unwrap().id, id);
    assert_eq!(b.unwrap().id, id);
    rt.resolve(&r).await.unwrap();
    assert_eq!(counts.lock().unwrap().get("DescribeImages"), Some(&1));
    // a different query is asked
    let r2 = req(
        "c",
        &["self", "123456789012"],
        json!({"filters": {"name": name}}),
    );
    rt.resolve(&r2).await.unwrap();
    assert_eq!(counts.lock().unwrap().get("DescribeImages"), Some(&2));
    // the next run (a new runtime) asks again and sees the AMI gone
    ec2.deregister_image().image_id(&id).send().await.unwrap();
    assert_eq!(
        rt.resolve(&r).await.unwrap().id,
        id,
        "this run keeps its answer"
    );
    let e = common::runtime(&url, "aws-cache")
        .resolve(&r)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("No resolved Image identifiers for OS c"),
        "{e}"
    );
}

#[tokio::test]
async fn no_region_is_refused_before_any_call() {
    let mut s = common::settings("http://127.0.0.1:9", "aws-noregion");
    s.region = String::new();
    let rt = csis_runtime_aws::AwsRuntime::new(s);
    let e = rt
        .resolve(&req("x", &["self"], json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Region must be specified in builder config to resolve image identifier, but got None"
    );
}

#[tokio::test]
async fn two_os_builders_with_one_query_ask_once() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("shared");
    let id = common::register_image(&ec2, &name, &[]).await;
    let (proxy, counts) = common::counting_proxy(&url);
    let rt = common::runtime(&proxy, "aws-shared");
    let q = json!({"filters": {"name": name}});
    let a = rt
        .resolve(&req("os-a", &["self"], q.clone()))
        .await
        .unwrap();
    let mut rb = req("os-b", &["self", "self"], q.clone());
    rb.family = "debian".into();
    let b = rt.resolve(&rb).await.unwrap();
    assert_eq!((a.id.as_str(), b.id.as_str()), (id.as_str(), id.as_str()));
    assert_eq!(
        b.facts.get("family").map(String::as_str),
        Some("debian"),
        "per-request facts"
    );
    assert_eq!(counts.lock().unwrap().get("DescribeImages"), Some(&1));
    // a miss is asked once too, and each asker gets its own text
    let miss = json!({"filters": {"name": "no-such-image-*"}});
    let e1 = rt
        .resolve(&req("os-c", &["self"], miss.clone()))
        .await
        .unwrap_err();
    let e2 = rt.resolve(&req("os-d", &["self"], miss)).await.unwrap_err();
    assert!(e1
        .to_string()
        .starts_with("No resolved Image identifiers for OS os-c"));
    assert!(e2
        .to_string()
        .starts_with("No resolved Image identifiers for OS os-d"));
    assert_eq!(counts.lock().unwrap().get("DescribeImages"), Some(&2));
}
