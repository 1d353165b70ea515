//! Shared test helpers: reaching moto, seeding it through the SDK, a tiny
//! HTTP/1.1 server (for the SSM double and the request-counting proxy).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use csis_runtime_aws::{AwsRuntime, AwsSettings, NetworkSettings, SubnetSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

// ---------------- a tiny HTTP/1.1 server ----------------

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<HttpRequest> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let first = lines.next()?;
            let mut parts = first.split(' ');
            let method = parts.next()?.to_string();
            let path = parts.next()?.to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 8192];
                let n = s.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(HttpRequest {
                method,
                path,
                headers,
                body,
            });
        }
        let mut chunk = [0u8; 8192];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub type Handler = Arc<dyn Fn(HttpRequest) -> futures_like::BoxFut + Send + Sync>;

pub mod futures_like {
    pub type BoxFut =
        std::pin::Pin<Box<dyn std::future::Future<Output = super::HttpResponse> + Send>>;
}

/// Serve `handler` on 127.0.0.1:<random>; returns the base URL.
pub async fn serve(handler: Handler) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let h = handler.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some(req) = read_request(&mut s, &mut buf).await {
                    let resp = h(req).await;
                    let mut out = format!(
                        "HTTP/1.1 {} X\r\ncontent-length: {}\r\n",
                        resp.status,
                        resp.body.len()
                    );
                    for (k, v) in &resp.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    let mut bytes = out.into_bytes();
                    bytes.extend_from_slice(&resp.body);
                    if s.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// The action of a request: `Action` (EC2's query protocol) or
/// `X-Amz-Target` (JSON protocols).
pub fn action_of(req: &HttpRequest) -> String {
    let body = String::from_utf8_lossy(&req.body).to_string();
    req.header("x-amz-target")
        .map(str::to_string)
        .or_else(|| {
            body.split('&')
                .find_map(|kv| kv.strip_prefix("Action=").map(str::to_string))
        })
        .unwrap_or_else(|| format!("{} {}", req.method, req.path))
}

/// Forward one request to `up` (`host:port`), one connection per request.
pub async fn forward(up: &str, req: &HttpRequest) -> HttpResponse {
    let mut s = TcpStream::connect(up).await.unwrap();
    let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.path);
    for (k, v) in &req.headers {
        if k.eq_ignore_ascii_case("connection") {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&req.body);
    s.write_all(&bytes).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| {
            !k.eq_ignore_ascii_case("content-length")
                && !k.eq_ignore_ascii_case("connection")
                && !k.eq_ignore_ascii_case("transfer-encoding")
        })
        .collect();
    HttpResponse {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// A proxy in front of moto that counts requests by `Action` (EC2's query
/// protocol) or `X-Amz-Target` (JSON protocols): the benchmark's counter.
pub async fn counting_proxy(upstream: &str) -> (String, Arc<Mutex<BTreeMap<String, usize>>>) {
    let counts: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let c = counts.clone();
    let up = upstream.trim_start_matches("http://").to_string();
    let h: Handler = Arc::new(move |req: HttpRequest| {
        let c = c.clone();
        let up = up.clone();
        Box::pin(async move {
            *c.lock().unwrap().entry(action_of(&req)).or_default() += 1;
            forward(&up, &req).await
        })
    });
    (serve(h).await, counts)
}

/// Rewrites a response body of one action (action, body) -> body.
pub type Rewrite = Arc<dyn Fn(&str, String) -> String + Send + Sync>;

/// A proxy in front of moto that rewrites what moto answers (a state moto
/// never holds, such as an instance that stays `pending`).
pub async fn rewriting_proxy(upstream: &str, rewrite: Rewrite) -> String {
    let up = upstream.trim_start_matches("http://").to_string();
    let h: Handler = Arc::new(move |req: HttpRequest| {
        let up = up.clone();
        let rewrite = rewrite.clone();
        Box::pin(async move {
            let action = action_of(&req);
            let mut resp = forward(&up, &req).await;
            let body = String::from_utf8_lossy(&resp.body).to_string();
            resp.body = rewrite(&action, body).into_bytes();
            resp
        })
    });
    serve(h).await
}
