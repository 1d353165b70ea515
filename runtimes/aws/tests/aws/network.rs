//! Network discovery and every load-time verdict, against moto.

use std::collections::BTreeMap;

use csis_runtime::Runtime;
use csis_runtime_aws::network::{self, DiscoveredSubnet, Discovery};
use csis_runtime_aws::AwsRuntime;

use crate::common::{self, need_moto};

#[tokio::test]
async fn discovery_maps_vpcs_subnets_public_routes_and_groups() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let (vpc, subnets) = common::vpc_with_subnets(&ec2, common::octet(), 3).await;
    // subnet 0: own table with 0.0.0.0/0 -> igw (public)
    let igw = ec2
        .create_internet_gateway()
        .send()
        .await
        .unwrap()
        .internet_gateway
        .unwrap()
        .internet_gateway_id
        .unwrap();
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap();
    let rt_pub = ec2
        .create_route_table()
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap()
        .route_table
        .unwrap()
        .route_table_id
        .unwrap();
    ec2.create_route()
        .route_table_id(&rt_pub)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await
        .unwrap();
    ec2.associate_route_table()
        .route_table_id(&rt_pub)
        .subnet_id(&subnets[0])
        .send()
        .await
        .unwrap();
    // subnet 1: own table with only a local route (private, although the main table is public below)
    let rt_priv = ec2
        .create_route_table()
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap()
        .route_table
        .unwrap()
        .route_table_id
        .unwrap();
    ec2.associate_route_table()
        .route_table_id(&rt_priv)
        .subnet_id(&subnets[1])
        .send()
        .await
        .unwrap();
    // subnet 2: no association -> the main table, which gets ::/0 -> igw (public)
    let main = ec2
        .describe_route_tables()
        .filters(common::filter("vpc-id", &vpc))
        .filters(common::filter("association.main", "true"))
        .send()
        .await
        .unwrap()
        .route_tables()[0]
        .route_table_id
        .clone()
        .unwrap();
    ec2.create_route()
        .route_table_id(&main)
        .destination_ipv6_cidr_block("::/0")
        .gateway_id(&igw)
        .send()
        .await
        .unwrap();
    let sg = common::security_group(&ec2, &vpc).await;

    let rt = common::runtime(&url, "aws-disc");
    let d = rt.discovery().await.unwrap();
    let listed = &d.vpc_map[&vpc];
    let public = |id: &str| listed.iter().find(|s| s.subnet_id == id).unwrap().is_public;
    assert!(public(&subnets[0]), "own table with an igw route is public");
    assert!(
        !public(&subnets[1]),
        "own table without a default route is private"
    );
    assert!(
        public(&subnets[2]),
        "no association: the main table's ::/0 route decides"
    );
    assert!(d.all_security_groups.contains_key(&sg));
    assert!(d.default_vpc_id.is_some(), "moto has a default VPC");
    assert_eq!(
        listed
            .iter()
            .find(|s| s.subnet_id == subnets[0])
            .unwrap()
            .cidr
            .as_deref(),
        Some(format!("10.{}.0.0/24", vpc_octet(listed, &subnets[0])).as_str())
    );
}

fn vpc_octet(listed: &[DiscoveredSubnet], id: &str) -> String {
    listed
        .iter()
        .find(|s| s.subnet_id == id)
        .unwrap()
        .cidr
        .clone()
        .unwrap()
        .split('.')
        .nth(1)
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn discovery_runs_once_per_runtime_with_one_sdk_config() {
    let url = need_moto!();
    let (proxy, counts) = common::counting_proxy(&url);
    let rt = common::runtime(&proxy, "aws-once");
    for _ in 0..3 {
        rt.check_online().await.unwrap();
    }
    rt.discovery().await.unwrap();
    let c = counts.lock().unwrap().clone();
    for op in [
        "DescribeVpcs",
        "DescribeSubnets",
        "DescribeRouteTables",
        "DescribeSecurityGroups",
    ] {
        assert_eq!(c.get(op), Some(&1), "{op} asked once: {c:?}");
    }
    assert_eq!(c.values().sum::<usize>(), 4, "nothing else: {c:?}");
    assert_eq!(rt.clients().config_builds(), 1);
}

#[tokio::test]
async fn a_correct_declaration_has_no_findings() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let (vpc, subnets) = common::vpc_with_subnets(&ec2, common::octet(), 2).await;
    let sg = common::security_group(&ec2, &vpc).await;
    let mut s = common::settings(&url, "aws-ok");
    let mut net = common::networking(&vpc, &subnets);
    net.addl_security_groups = vec![sg];
    s.networking = Some(net);
    let f = AwsRuntime::new(s).check_online().await.unwrap();
    assert!(f.is_empty(), "{f:?}");
}

#[tokio::test]
async fn network_default_resolves_to_the_default_vpc_and_checks_its_subnets() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let def = ec2
        .describe_vpcs()
        .filters(common::filter("isDefault", "true"))
        .send()
        .await
        .unwrap()
        .vpcs()[0]
        .vpc_id
        .clone()
        .unwrap();
    let def_subnet = ec2
        .describe_subnets()
        .filters(common::filter("vpc-id", &def))
        .send()
        .await
        .unwrap()
        .subnets()[0]
        .subnet_id
        .clone()
        .unwrap();
    let (_other_vpc, other_subnets) = common::vpc_with_subnets(&ec2, common::octet(), 1).await;

    let mut s = common::settings(&url, "aws-def");
    let mut net = common::networking("default", std::slice::from_ref(&def_subnet));
    net.network = "default".into();
    s.networking = Some(net.clone());
    let rt = AwsRuntime::new(s.clone());
    assert!(rt.check_online().await.unwrap().is_empty());
    assert_eq!(rt.vpc_id().await.unwrap(), def);

    net.subnets[0].subnet_id = other_subnets[0].clone();
    net.subnets[0].name = "east-a".into();
    s.networking = Some(net);
    let f = AwsRuntime::new(s).check_online().await.unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].message,
        format!("Subnet {} (east-a) in networking configuration for AWS cloud builder aws-def is not in VPC {def}.", other_subnets[0])
    );
    assert_eq!(f[0].path, "networking.subnets[0].subnet_id");
    assert!(f[0].error);
}

#[tokio::test]
async fn unknown_vpc_unknown_group_and_too_many_groups() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let (vpc, subnets) = common::vpc_with_subnets(&ec2, common::octet(), 1).await;
    let mut groups = Vec::new();
    for _ in 0..6 {
        groups.push(common::security_group(&ec2, &vpc).await);
    }
    // unknown VPC
    let mut s = common::settings(&url, "aws-bad");
    s.networking = Some(common::networking("vpc-0000000000000dead", &subnets));
    let f = AwsRuntime::new(s.clone()).check_online().await.unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].message, "VPC ID vpc-0000000000000dead specified in networking configuration for AWS cloud builder aws-bad not found in AWS account.");
    assert_eq!(f[0].path, "networking.network");

    // an unknown group, and six groups
    let mut net = common::networking(&vpc, &subnets);
    net.addl_security_groups = groups.clone();
    net.addl_security_groups[2] = "sg-0000000000000beef".into();
    s.networking = Some(net);
    let f = AwsRuntime::new(s.clone()).check_online().await.unwrap();
    let msgs: Vec<&str> = f.iter().map(|x| x.message.as_str()).collect();
    assert_eq!(f.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0], "Security group ID sg-0000000000000beef specified in networking configuration for AWS cloud builder aws-bad not found in AWS account.");
    assert_eq!(f[0].path, "networking.addl_security_groups[2]");
    assert!(msgs[1].starts_with("Total number of security groups specified in networking configuration for AWS cloud builder aws-bad is 6, which may exceed limits for certain instance types."), "{}", msgs[1]);

    // five is fine
    let mut net = common::networking(&vpc, &subnets);
    net.addl_security_groups = groups[..5].to_vec();
    s.networking = Some(net);
    assert!(AwsRuntime::new(s).check_online().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_vpc_listed_without_subnets_makes_no_claim() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let (empty_vpc, _) = common::vpc_with_subnets(&ec2, common::octet(), 0).await;
    let mut s = common::settings(&url, "aws-empty");
    s.networking = Some(common::networking(
        &empty_vpc,
        &["subnet-0123456789abcdef0".to_string()],
    ));
    assert!(AwsRuntime::new(s).check_online().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unreachable_cloud_is_one_aws_error() {
    // no moto needed: nothing listens on port 9
    let mut s = common::settings("http://127.0.0.1:9", "aws-down");
    s.networking = Some(common::networking("default", &["subnet-1".to_string()]));
    let f = AwsRuntime::new(s).check_online().await.unwrap();
    assert_eq!(f.len(), 1);
    // The endpoint and the runtime are named; the credentials are not blamed.
    assert!(
        f[0].message
            .starts_with("AWS runtime aws-down: the endpoint http://127.0.0.1:9 cannot be reached"),
        "{}",
        f[0].message
    );
    assert_ne!(f[0].path, "credentials");
    assert!(f[0].error);
}

#[tokio::test]
async fn an_unknown_profile_is_an_aws_error_naming_it() {
    let url = need_moto!();
    let mut s = common::settings(&url, "aws-prof");
    s.credentials = Default::default();
    s.credentials.profile_name = Some("csis-no-such-profile".into());
    s.networking = Some(common::networking("default", &["subnet-1".to_string()]));
    let f = AwsRuntime::new(s).check_online().await.unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].message,
        "AWS Error: The config profile (csis-no-such-profile) could not be found"
    );
}

#[test]
fn network_default_without_a_default_vpc_is_refused() {
    let mut s = csis_runtime_aws::AwsSettings::new("aws-nodef", "us-east-2", "t3.micro");
    s.networking = Some(common::networking("default", &["subnet-1".to_string()]));
    let d = Discovery::default();
    let f = network::verdicts(&s, &d);
    assert_eq!(f.len(), 1);
    assert!(f[0].message.starts_with("No VPC ID specified in networking configuration for AWS cloud builder aws-nodef, and no default VPC found in AWS account."), "{}", f[0].message);
}

#[test]
fn missing_networking_is_a_warning() {
    let s = csis_runtime_aws::AwsSettings::new("aws-nonet", "us-east-2", "t3.micro");
    let f = network::verdicts(
        &s,
        &Discovery {
            vpc_map: BTreeMap::new(),
            ..Default::default()
        },
    );
    assert_eq!(f.len(), 1);
    assert!(!f[0].error);
    assert_eq!(
        f[0].message,
        "No networking configuration provided for AWS cloud builder aws-nonet"
    );
}
