//! The one conversion point: credentials + region (+ endpoint) -> the SDK's
//! config, and the clients built from it, once per runtime per run. Every
//! call has a deadline ([`call_timeout`]) and every transport error names
//! the endpoint it went to ([`Clients::endpoint`], [`cause_at`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::config::Credentials;
use tokio::sync::OnceCell;

use crate::settings::AwsSettings;

/// The endpoint an explicit setting or the environment names, if any.
pub fn endpoint_for(settings: &AwsSettings) -> Option<String> {
    settings
        .endpoint_url
        .clone()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            std::env::var("AWS_ENDPOINT_URL")
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
}

/// How long one AWS call may take, retries included, unless
/// `CSIS_AWS_TIMEOUT` (seconds) says otherwise: an endpoint that accepts
/// and never answers fails the call after this, naming the endpoint.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection may take to open (at most the call's timeout).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The call timeout: `CSIS_AWS_TIMEOUT` (seconds, > 0) or [`CALL_TIMEOUT`].
pub fn call_timeout() -> Duration {
    std::env::var("CSIS_AWS_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(CALL_TIMEOUT)
}

/// The SDK's timeouts: the whole call (all attempts) within
/// [`call_timeout`], one attempt within half of it (so a retry fits), a
/// connection within [`CONNECT_TIMEOUT`].
pub fn timeout_config() -> TimeoutConfig {
    let call = call_timeout();
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT.min(call))
        .operation_attempt_timeout(call / 2)
        .operation_timeout(call)
        .build()
}

/// The AWS services csis calls (each has its own default endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ec2,
    Ssm,
    Sts,
}

impl Service {
    fn host_label(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Ssm => "ssm",
            Service::Sts => "sts",
        }
    }
}

/// SSM's own endpoint, when one is set: the runtime's `ssm_endpoint_url`,
/// else `AWS_ENDPOINT_URL_SSM` (the SDKs' service-specific variable).
pub fn ssm_endpoint(settings: &AwsSettings) -> Option<String> {
    settings
        .ssm_endpoint_url
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_SSM").ok())
        .filter(|s| !s.trim().is_empty())
}

/// The endpoint a service's calls go to: SSM's own ([`ssm_endpoint`]) for
/// SSM, else the explicit `endpoint_url`, else `AWS_ENDPOINT_URL`, else the
/// service's regional endpoint.
pub fn endpoint_of(settings: &AwsSettings, service: Service) -> String {
    let ssm = (service == Service::Ssm)
        .then(|| ssm_endpoint(settings))
        .flatten();
    ssm.or_else(|| endpoint_for(settings)).unwrap_or_else(|| {
        let suffix = if settings.region.starts_with("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        format!(
            "https://{}.{}.{suffix}",
            service.host_label(),
            settings.region
        )
    })
}

/// `self_to_aws_client_config()`: the profile (when named), the static keys
/// (when all of id and secret are given), the region, and the endpoint.
/// Nothing unset reaches the SDK; with no credentials the default chain runs.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(settings.region.clone()));
    let c = &settings.credentials;
    if let Some(p) = c.profile_name.as_deref().filter(|p| !p.is_empty()) {
        loader = loader.profile_name(p);
    }
    if let (Some(id), Some(secret)) = (
        c.aws_access_key_id.as_deref().filter(|s| !s.is_empty()),
        c.aws_secret_access_key.as_deref().filter(|s| !s.is_empty()),
    ) {
        loader = loader.credentials_provider(Credentials::new(
            id,
            secret,
            c.aws_session_token.clone().filter(|s| !s.is_empty()),
            None,
            "csis-runtime-credentials",
        ));
    }
    if let Some(ep) = endpoint_for(settings) {
        loader = loader.endpoint_url(ep);
    }
    loader.timeout_config(timeout_config()).load().await
}

/// One SdkConfig, one EC2, one SSM and one STS client per runtime per run,
/// built on first use and shared.
pub struct Clients {
    settings: Arc<AwsSettings>,
    config: OnceCell<SdkConfig>,
    ec2: OnceCell<aws_sdk_ec2::Client>,
    ssm: OnceCell<aws_sdk_ssm::Client>,
    sts: OnceCell<aws_sdk_sts::Client>,
    /// How many times the SDK config was built (1 per run at most).
    pub(crate) builds: AtomicUsize,
}

impl Clients {
    pub fn new(settings: Arc<AwsSettings>) -> Self {
        Clients {
            settings,
            config: OnceCell::new(),
            ec2: OnceCell::new(),
            ssm: OnceCell::new(),
            sts: OnceCell::new(),
            builds: AtomicUsize::new(0),
        }
    }

    pub async fn config(&self) -> &SdkConfig {
        self.config
            .get_or_init(|| async {
                self.builds.fetch_add(1, Ordering::SeqCst);
                sdk_config(&self.settings).await
            })
            .await
    }

    pub async fn ec2(&self) -> &aws_sdk_ec2::Client {
        self.ec2
            .get_or_init(|| async { aws_sdk_ec2::Client::new(self.config().await) })
            .await
    }

    pub async fn ssm(&self) -> &aws_sdk_ssm::Client {
        self.ssm
            .get_or_init(|| async {
                let conf = self.config().await;
                match ssm_endpoint(&self.settings) {
                    Some(ep) => aws_sdk_ssm::Client::from_conf(
                        aws_sdk_ssm::config::Builder::from(conf)
                            .endpoint_url(ep)
                            .build(),
                    ),
                    None => aws_sdk_ssm::Client::new(conf),
                }
            })
            .await
    }

    pub async fn sts(&self) -> &aws_sdk_sts::Client {
        self.sts
            .get_or_init(|| async { aws_sdk_sts::Client::new(self.config().await) })
            .await
    }

    /// How many SDK configs were built so far.
    pub fn config_builds(&self) -> usize {
        self.builds.load(Ordering::SeqCst)
    }

    /// The endpoint a service's calls go to ([`endpoint_of`]).
    pub fn endpoint(&self, service: Service) -> String {
        endpoint_of(&self.settings, service)
    }

    /// [`cause_at`] this runtime's endpoint of `service`.
    pub fn cause<E, R>(&self, service: Service, err: &aws_sdk_ec2::error::SdkError<E, R>) -> String
    where
        E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        cause_at(err, &self.endpoint(service))
    }
}

/// [`cause`], and when the service did not answer, the endpoint the call
/// went to: `no answer from ENDPOINT within 60s (...)` when the call timed
/// out, `ENDPOINT: ...` for any other transport failure.
pub fn cause_at<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>, endpoint: &str) -> String
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_ec2::error::SdkError;
    let timed_out = match err {
        SdkError::ServiceError(_) => return cause(err),
        SdkError::TimeoutError(_) => true,
        SdkError::DispatchFailure(d) => d.is_timeout(),
        _ => false,
    };
    if timed_out {
        format!(
            "no answer from {endpoint} within {}s ({}; CSIS_AWS_TIMEOUT sets the call timeout in seconds)",
            call_timeout().as_secs_f64(),
            cause(err)
        )
    } else {
        format!("{endpoint}: {}", cause(err))
    }
}

/// The cause of an SDK error, as a human line: the service's code and
/// message when it answered, else the transport's own chain.
pub fn cause<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_ec2::error::SdkError;
    match err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            match (e.code(), e.message()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (Some(c), None) => c.to_string(),
                (None, Some(m)) => m.to_string(),
                (None, None) => format!("{e}"),
            }
        }
        other => {
            let mut s = other.to_string();
            let mut src = std::error::Error::source(other);
            while let Some(e) = src {
                s.push_str(": ");
                s.push_str(&e.to_string());
                src = e.source();
            }
            s
        }
    }
}

/// EC2 tags as a map (a tag without a key is dropped).
pub(crate) fn tag_map(
    tags: &[aws_sdk_ec2::types::Tag],
) -> std::collections::BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default())))
        .collect()
}

/// The service error code of an SDK error, when the service answered.
pub fn code<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> Option<String>
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata,
{
    use aws_sdk_ec2::error::SdkError;
    match err {
        SdkError::ServiceError(se) => se.err().code().map(str::to_string),
        _ => None,
    }
}

fn home_file(env: &str, rel: &str) -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(std::path::PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".aws").join(rel))
}

/// Is a named profile declared in the shared config or credentials file
/// (`AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/...`)?
pub fn profile_known(name: &str) -> bool {
    let sections = |path: Option<std::path::PathBuf>| -> Vec<String> {
        let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| {
                let l = l.trim();
                l.strip_prefix('[')?
                    .strip_suffix(']')
                    .map(|s| s.trim().to_string())
            })
            .collect()
    };
    let config = sections(home_file("AWS_CONFIG_FILE", "config"));
    let creds = sections(home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
    config.iter().any(|s| {
        s.strip_prefix("profile")
            .map(|r| r.trim() == name && r.starts_with(char::is_whitespace))
            .unwrap_or(false)
            || (s == name && name == "default")
    }) || creds.iter().any(|s| s == name)
}

/// boto3's refusal of an unknown profile, before any call is tried.
pub fn check_profile(settings: &AwsSettings) -> Result<(), String> {
    match settings.credentials.profile_name.as_deref() {
        Some(p) if !p.is_empty() && !profile_known(p) => {
            Err(format!("The config profile ({p}) could not be found"))
        }
        _ => Ok(()),
    }
}
