//! Shared test helpers: reaching moto, seeding it through the SDK, the
//! request-counting and rewriting proxies in front of it (on
//! `csis_testkit::http`, the one loopback HTTP server of the tests).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use csis_runtime_aws::{AwsRuntime, AwsSettings, NetworkSettings, SubnetSettings};

pub const REGION: &str = "us-east-2";

pub fn moto_url() -> String {
    std::env::var("CSIS_MOTO_URL").unwrap_or_else(|_| "http://127.0.0.1:5000".into())
}

fn moto_answers(url: &str) -> bool {
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    match std::net::TcpStream::connect_timeout(
        &hostport
            .parse()
            .unwrap_or_else(|_| "127.0.0.1:5000".parse().unwrap()),
        std::time::Duration::from_secs(2),
    ) {
        Ok(mut s) => {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let req =
                format!("GET /moto-api/ HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n");
            if s.write_all(req.as_bytes()).is_err() {
                return false;
            }
            let mut buf = [0u8; 12];
            matches!(s.read(&mut buf), Ok(n) if n >= 12 && buf.starts_with(b"HTTP/1."))
        }
        Err(_) => false,
    }
}

/// moto's URL, or `None` (with a loud reason) when it does not answer and
/// `CSIS_REQUIRE_MOTO` is unset; with it set, a missing moto fails the test.
pub fn moto() -> Option<String> {
    let url = moto_url();
    if moto_answers(&url) {
        return Some(url);
    }
    if std::env::var_os("CSIS_REQUIRE_MOTO").is_some() {
        panic!("moto is not answering on {url} and CSIS_REQUIRE_MOTO is set: run runtimes/aws/tests/moto.sh");
    }
    loud(&format!(
        "*** SKIPPED: moto is not answering on {url}; start it with runtimes/aws/tests/moto.sh \
         (set CSIS_REQUIRE_MOTO=1 to make this a failure) ***"
    ));
    None
}

#[allow(unused_macros)]
macro_rules! need_moto {
    () => {
        match common::moto() {
            Some(u) => u,
            None => return,
        }
    };
}
#[allow(unused_imports)]
pub(crate) use need_moto;

/// The AMIs of tests/fixtures/amis.json are there only when moto was
/// started by moto.sh (MOTO_AMIS_PATH): skip loudly, or fail under CSIS_REQUIRE_MOTO.
pub async fn fixture_amis(url: &str) -> bool {
    let ec2 = ec2(url).await;
    let ok = matches!(
        ec2.describe_images().image_ids("ami-0deb12000000000d2").send().await,
        Ok(o) if !o.images().is_empty()
    );
    if !ok {
        if std::env::var_os("CSIS_REQUIRE_MOTO").is_some() {
            panic!("moto runs without tests/fixtures/amis.json (start it with runtimes/aws/tests/moto.sh)");
        }
        loud("*** SKIPPED: moto runs without MOTO_AMIS_PATH=tests/fixtures/amis.json (restart it with moto.sh) ***");
    }
    ok
}

/// Print past the test harness's capture (a skip must be seen).
pub fn loud(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "\n{msg}\n");
}

static N: AtomicU64 = AtomicU64::new(0);

/// A name unique in this moto (tests share one server, in parallel).
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub async fn sdk(url: &str) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(url)
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await
}

pub async fn ec2(url: &str) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&sdk(url).await)
}

/// Runtime settings pointing at an endpoint with static dummy keys.
pub fn settings(url: &str, name: &str) -> AwsSettings {
    let mut s = AwsSettings::new(name, REGION, "t3.medium");
    s.endpoint_url = Some(url.to_string());
    s.credentials.aws_access_key_id = Some("testing".into());
    s.credentials.aws_secret_access_key = Some("testing".into());
    s
}

pub fn runtime(url: &str, name: &str) -> AwsRuntime {
    AwsRuntime::new(settings(url, name))
}

/// A VPC with `n` subnets; returns (vpc, subnets).
pub async fn vpc_with_subnets(
    ec2: &aws_sdk_ec2::Client,
    second_octet: u8,
    n: u8,
) -> (String, Vec<String>) {
    let vpc = ec2
        .create_vpc()
        .cidr_block(format!("10.{second_octet}.0.0/16"))
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let mut subnets = Vec::new();
    for i in 0..n {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.{second_octet}.{i}.0/24"))
            .availability_zone(format!("{REGION}a"))
            .send()
            .await
            .unwrap()
            .subnet
            .unwrap()
            .subnet_id
            .unwrap();
        subnets.push(s);
    }
    (vpc, subnets)
}

pub fn octet() -> u8 {
    // 10.<x>.0.0/16 blocks; moto does not refuse overlapping VPCs
    (N.fetch_add(1, Ordering::SeqCst) % 250) as u8 + 1
}

pub async fn security_group(ec2: &aws_sdk_ec2::Client, vpc: &str) -> String {
    ec2.create_security_group()
        .group_name(unique("csis-sg"))
        .description("csis test group")
        .vpc_id(vpc)
        .send()
        .await
        .unwrap()
        .group_id
        .unwrap()
}

pub fn networking(vpc: &str, subnets: &[String]) -> NetworkSettings {
    NetworkSettings {
        name: None,
        network: vpc.to_string(),
        subnets: subnets
            .iter()
            .enumerate()
            .map(|(i, s)| SubnetSettings {
                name: format!("net-{i}"),
                subnet_id: s.clone(),
                is_default: i == 0,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Register an image (owned by the moto account, no owner alias) and tag it
/// (moto's RegisterImage ignores TagSpecifications, RootDeviceName and
/// Architecture: its images get /dev/sda1 and no architecture).
pub async fn register_image(
    ec2: &aws_sdk_ec2::Client,
    name: &str,
    tags: &[(&str, &str)],
) -> String {
    let id = ec2
        .register_image()
        .name(name)
        .root_device_name("/dev/xvda")
        .virtualization_type("hvm")
        .send()
        .await
        .unwrap()
        .image_id
        .unwrap();
    if !tags.is_empty() {
        ec2.create_tags()
            .resources(&id)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                    .collect(),
            ))
            .send()
            .await
            .unwrap();
    }
    id
}

/// Launch one instance tagged `Name=<name>`; returns its id.
pub async fn run_instance(ec2: &aws_sdk_ec2::Client, name: &str, image: &str) -> String {
    ec2.run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("Name").value(name).build())
                .build(),
        )
        .send()
        .await
        .unwrap()
        .instances
        .unwrap()[0]
        .instance_id
        .clone()
        .unwrap()
}

pub async fn image_tags(ec2: &aws_sdk_ec2::Client, id: &str) -> BTreeMap<String, String> {
    let out = ec2.describe_images().image_ids(id).send().await.unwrap();
    out.images()[0]
        .tags()
        .iter()
        .map(|t| (t.key.clone().unwrap(), t.value.clone().unwrap_or_default()))
        .collect()
}

pub fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

// ---------------- proxies in front of moto (csis_testkit::http) ----------------

#[allow(unused_imports)] // the SSM double of sessions.rs answers with it
pub use csis_testkit::http::{Handler, Request as HttpRequest, Response as HttpResponse};

/// The action of a request: `Action` (EC2's query protocol) or
/// `X-Amz-Target` (JSON protocols).
pub fn action_of(req: &HttpRequest) -> String {
    let body = req.text();
    req.header("x-amz-target")
        .map(str::to_string)
        .or_else(|| {
            body.split('&')
                .find_map(|kv| kv.strip_prefix("Action=").map(str::to_string))
        })
        .unwrap_or_else(|| format!("{} {}", req.method, req.path))
}

/// A proxy in front of moto that counts requests by `Action` (EC2's query
/// protocol) or `X-Amz-Target` (JSON protocols): the benchmark's counter.
pub fn counting_proxy(upstream: &str) -> (String, Arc<Mutex<BTreeMap<String, usize>>>) {
    let counts: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let c = counts.clone();
    let up = upstream.trim_start_matches("http://").to_string();
    let h: Handler = Arc::new(move |req: HttpRequest| {
        *c.lock().unwrap().entry(action_of(&req)).or_default() += 1;
        csis_testkit::http::forward(&up, &req)
    });
    (csis_testkit::http::serve(h), counts)
}

/// Rewrites a response body of one action (action, body) -> body.
pub type Rewrite = Arc<dyn Fn(&str, String) -> String + Send + Sync>;

/// A proxy in front of moto that rewrites what moto answers (a state moto
/// never holds, such as an instance that stays `pending`).
pub fn rewriting_proxy(upstream: &str, rewrite: Rewrite) -> String {
    let up = upstream.trim_start_matches("http://").to_string();
    let h: Handler = Arc::new(move |req: HttpRequest| {
        let action = action_of(&req);
        let mut resp = csis_testkit::http::forward(&up, &req);
        resp.body = rewrite(&action, resp.text()).into_bytes();
        resp
    });
    csis_testkit::http::serve(h)
}
