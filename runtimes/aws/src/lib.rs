//! csis-runtime-aws: the `aws` runtime type (the seed
//! `aws-runtime-plugin-0.1.1`) on aws-sdk-ec2 and aws-sdk-ssm.
//!
//! Build one [`AwsRuntime`] per `type: aws` runtime entry per run:
//!
//! ```ignore
//! let settings = AwsSettings::from_tree(&tree_runtime).unwrap(); // or AwsSettings::from_model(common, aws)
//! let rt = AwsRuntime::new(settings);                          // implements csis_runtime::Runtime
//! ```
//!
//! It shares one SDK config (the one conversion point, [`client::sdk_config`]:
//! profile or static keys, region, `AWS_ENDPOINT_URL`) and one EC2/SSM/STS
//! client, runs the network discovery once ([`AwsRuntime::discovery`]), and
//! asks identical image queries once. Hooks beyond the trait:
//! [`AwsRuntime::session_mechanism`], [`AwsRuntime::session_instance_profile`],
//! [`AwsRuntime::power_state`] (EC2's raw state kept for messages),
//! [`AwsRuntime::aws_inventory`] (everything csis owns here, with tags),
//! [`AwsRuntime::source_plan`], and the tool check [`check_aws_cli`]
//! (`AwsCLIVersionChecker`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, Image, Instance, InstanceStateName, Tag};
use csis_runtime::{
    BakeOutcome, BakeRequest, ImageFacts, Inventory, OnlineFinding, PowerState, PreflightLine,
    ResolveRequest, ResolvedImage, Result, Runtime, RuntimeError, SessionResult,
};
use tokio::sync::OnceCell;

pub mod bake;
pub mod cli_version;
pub mod client;
pub mod emit;
pub mod from_schema;
pub mod inventory;
pub mod network;
pub mod offline;
pub mod resolve;
pub mod settings;
pub mod ssm;
pub mod stale;
pub mod test_machine;

pub use cli_version::{aws_cli_version, check_aws_cli, AWS_CLI_VERSION_RE};
pub use client::{sdk_config, Clients};
pub use csis_runtime::VerifyCheck;
pub use inventory::{AwsInventory, AwsResource};
pub use network::{DiscoveredSubnet, Discovery};
pub use resolve::{merge_owners, ImageQuery};
pub use settings::{
    AvailabilityZoneSettings, AwsCredentialSettings, AwsSettings, NetworkSettings, SubnetSettings,
};
pub use ssm::LAUNCH_MARKER;

use client::{cause, code};

/// The runtime type key.
pub const KIND: &str = "aws";

/// EC2's `State.Name` in the system's vocabulary (stage 57).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsPowerState {
    Starting,
    Running,
    Stopping,
    Stopped,
    Absent,
    Unknown,
}

impl AwsPowerState {
    /// `pending` -> starting, `running`, `stopping`/`shutting-down` ->
    /// stopping, `stopped`, `terminated` -> absent, anything else -> unknown.
    pub fn from_ec2(raw: &str) -> AwsPowerState {
        match raw {
            "pending" => AwsPowerState::Starting,
            "running" => AwsPowerState::Running,
            "stopping" | "shutting-down" => AwsPowerState::Stopping,
            "stopped" => AwsPowerState::Stopped,
            "terminated" => AwsPowerState::Absent,
            _ => AwsPowerState::Unknown,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            AwsPowerState::Starting => "starting",
            AwsPowerState::Running => "running",
            AwsPowerState::Stopping => "stopping",
            AwsPowerState::Stopped => "stopped",
            AwsPowerState::Absent => "absent",
            AwsPowerState::Unknown => "unknown",
        }
    }
    /// Onto the hook surface's vocabulary (one to one).
    pub fn to_api(self) -> PowerState {
        match self {
            AwsPowerState::Starting => PowerState::Starting,
            AwsPowerState::Running => PowerState::Running,
            AwsPowerState::Stopping => PowerState::Stopping,
            AwsPowerState::Stopped => PowerState::Stopped,
            AwsPowerState::Absent => PowerState::Absent,
            AwsPowerState::Unknown => PowerState::Unknown,
        }
    }
    /// How a session refusal names the state.
    pub fn describe(self) -> String {
        match self {
            AwsPowerState::Stopped => "STOPPED (switched off; not drift)".into(),
            AwsPowerState::Absent => "absent (no such machine)".into(),
            other => other.as_str().to_string(),
        }
    }
}

/// The text a session refusal uses when the cloud could not be asked.
pub const POWER_UNAVAILABLE: &str = "power state unavailable (no runtime could answer)";

type CachedLookup = std::result::Result<Option<Image>, (u8, String)>;

/// The question a resolve asks EC2 (the cache key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Lookup {
    ById(String),
    Query(ImageQuery),
}

/// One `type: aws` runtime for one run.
pub struct AwsRuntime {
    settings: Arc<AwsSettings>,
    clients: Clients,
    discovery: OnceCell<std::result::Result<Discovery, String>>,
    resolves: Mutex<HashMap<Lookup, Arc<OnceCell<CachedLookup>>>>,
    warnings: Mutex<Vec<String>>,
    /// Poll interval of `run_session_command` (2 s).
    pub ssm_poll: Duration,
    /// Poll interval of the launch marker in `verify_instance` (15 s).
    pub verify_poll: Duration,
    /// Delay between EC2 waiter attempts (5 s; `timeout / 5` attempts).
    pub waiter_delay: Duration,
    /// A marked bake resource of another host is stale after this (24 h).
    pub stale_bake_after: Duration,
    /// How long `clean_stale_bakes` waits for a builder instance to terminate.
    pub stale_terminate_timeout_s: u64,
}

fn err_to_cache(e: RuntimeError) -> (u8, String) {
    match e {
        RuntimeError::Unavailable(m) => (0, m),
        RuntimeError::Refused(m) => (1, m),
        other => (2, other.to_string()),
    }
}
fn cache_to_err(k: u8, m: String) -> RuntimeError {
    match k {
        0 => RuntimeError::Unavailable(m),
        1 => RuntimeError::Refused(m),
        _ => RuntimeError::Failed(m),
    }
}

fn sdk_err<E, R>(prefix: &str, e: &aws_sdk_ec2::error::SdkError<E, R>) -> RuntimeError
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let msg = format!("{prefix}{}", cause(e));
    match e {
        aws_sdk_ec2::error::SdkError::ServiceError(_) => RuntimeError::Refused(msg),
        _ => RuntimeError::Unavailable(msg),
    }
}

fn tag_value(tags: &[Tag], key: &str) -> Option<String> {
    tags.iter()
        .find(|t| t.key.as_deref() == Some(key))
        .and_then(|t| t.value.clone())
}

fn is_not_found_ami(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("InvalidAMIID.NotFound")
            | Some("InvalidAMIID.Malformed")
            | Some("InvalidImageID.NotFound")
            | Some("InvalidImageID.Malformed")
            | Some("InvalidAMIID.Unavailable")
    )
}

/// Quote a word for a POSIX shell when it needs it (the one quoting function).
pub use csis_runtime::recipe::sq as shell_quote;

impl AwsRuntime {
    /// The constructor: one runtime per entry per run.
    pub fn new(settings: AwsSettings) -> AwsRuntime {
        let settings = Arc::new(settings);
        AwsRuntime {
            clients: Clients::new(settings.clone()),
            settings,
            discovery: OnceCell::new(),
            resolves: Mutex::new(HashMap::new()),
            warnings: Mutex::new(Vec::new()),
            ssm_poll: Duration::from_secs(2),
            verify_poll: Duration::from_secs(15),
            waiter_delay: Duration::from_secs(5),
            stale_bake_after: Duration::from_secs(24 * 3600),
            stale_terminate_timeout_s: 300,
        }
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }
    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// Warnings the hooks logged (`AMI <id> not found; nothing to deregister`, ...), drained.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap())
    }
    pub(crate) fn warn(&self, w: String) {
        eprintln!("warning: {w}");
        self.warnings.lock().unwrap().push(w);
    }

    /// `session_mechanism()`: `Some("ssm")`, `None`, or the seed's refusal.
    pub fn session_mechanism(&self) -> Result<Option<&'static str>> {
        match self.settings.session_mechanism.as_deref() {
            None => Ok(None),
            Some(v) if v.trim().eq_ignore_ascii_case("ssm") => Ok(Some("ssm")),
            Some(v) => Err(RuntimeError::Refused(offline::unknown_session_mechanism(
                &self.settings.name,
                v,
            ))),
        }
    }

    /// `session_instance_profile()`: the profile launched instances wear when the mechanism is `ssm`.
    pub fn session_instance_profile(&self) -> Option<String> {
        match self.session_mechanism() {
            Ok(Some(_)) => self.settings.session_instance_profile.clone(),
            _ => None,
        }
    }

    /// The network discovery, once per runtime per run.
    pub async fn discovery(&self) -> std::result::Result<&Discovery, String> {
        let d = self
            .discovery
            .get_or_init(|| async {
                client::check_profile(&self.settings)?;
                network::discover(self.clients.ec2().await).await
            })
            .await;
        d.as_ref().map_err(|e| e.clone())
    }

    /// The VPC the declaration resolves to (`default` -> the account's default VPC).
    pub async fn vpc_id(&self) -> Result<String> {
        let net =
            self.settings.networking.as_ref().ok_or_else(|| {
                RuntimeError::Refused(offline::no_networking(&self.settings.name))
            })?;
        let n = net.network.trim();
        if !n.is_empty() && n != "default" {
            return Ok(n.to_string());
        }
        let d = self
            .discovery()
            .await
            .map_err(|e| RuntimeError::Unavailable(format!("AWS Error: {e}")))?;
        network::effective_vpc(&self.settings, d).ok_or_else(|| {
            RuntimeError::Refused(format!(
                "No VPC ID specified in networking configuration for AWS cloud builder {}, and no default VPC found in AWS account. Declare `networking.network` with a VPC id of the account.",
                self.settings.name
            ))
        })
    }

    // ---------- resolve ----------

    /// One `DescribeImages` question (by id, or the query with its post
    /// filter and newest pick), asked once per run whoever asks it.
    async fn lookup(&self, key: &Lookup) -> Result<Option<Image>> {
        let cell = {
            let mut m = self.resolves.lock().unwrap();
            m.entry(key.clone()).or_default().clone()
        };
        cell.get_or_init(|| async { self.lookup_uncached(key).await.map_err(err_to_cache) })
            .await
            .clone()
            .map_err(|(k, m)| cache_to_err(k, m))
    }

    /// DescribeImages by id through the run's cache (emission of a pinned parent).
    pub async fn image_by_id_cached(&self, id: &str) -> Result<Option<Image>> {
        self.lookup(&Lookup::ById(id.to_string())).await
    }

    async fn lookup_uncached(&self, key: &Lookup) -> Result<Option<Image>> {
        let ec2 = self.clients.ec2().await;
        match key {
            Lookup::ById(id) => {
                let out = ec2.describe_images().image_ids(id).send().await;
                match out {
                    Ok(o) => Ok(o
                        .images
                        .unwrap_or_default()
                        .into_iter()
                        .find(|i| i.image_id.as_deref() == Some(id.as_str()))),
                    Err(e) if is_not_found_ami(code(&e).as_deref()) => Ok(None),
                    Err(e) => Err(sdk_err("Failed to query AMI by ID: ", &e)),
                }
            }
            Lookup::Query(q) => {
                let mut found: Vec<Image> = Vec::new();
                let mut call = ec2.describe_images().set_filters(Some(q.ec2_filters()));
                if !q.owners.is_empty() {
                    call = call.set_owners(Some(q.owners.clone()));
                }
                let mut pages = call.into_paginator().send();
                while let Some(page) = pages.next().await {
                    let page =
                        page.map_err(|e| sdk_err("Failed to query AMI with filters: ", &e))?;
                    found.extend(
                        page.images
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|i| q.post_match(i)),
                    );
                }
                Ok(resolve::newest(found))
            }
        }
    }

    async fn resolve_request(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        if self.settings.region.trim().is_empty() {
            return Err(RuntimeError::Refused(
                "Region must be specified in builder config to resolve image identifier, but got None"
                    .into(),
            ));
        }
        let region = &self.settings.region;
        if let Some(id) = req.image_id.as_deref() {
            let Some(img) = self.lookup(&Lookup::ById(id.to_string())).await? else {
                return Err(RuntimeError::Refused(format!(
                    "OS builder {}: image_id '{id}' on runtime {} is not known to the provider",
                    req.series, self.settings.name
                )));
            };
            let owner = resolve::owner_of(&img).unwrap_or_else(|| "self".into());
            return Ok(self.resolved(img, owner, req));
        }
        let q = ImageQuery::from_declaration(&req.owners, &req.query);
        let Some(img) = self.lookup(&Lookup::Query(q.clone())).await? else {
            return Err(RuntimeError::Refused(format!(
                "No resolved Image identifiers for OS {} in predefined_resolve (runtime {}: owners {:?}, filters {:?}{})",
                req.series,
                self.settings.name,
                q.owners,
                q.filters,
                if q.post_filters.is_empty() {
                    String::new()
                } else {
                    format!(", post-query filters {:?}", q.post_filters)
                }
            )));
        };
        let Some(owner) = resolve::owner_of(&img) else {
            return Err(RuntimeError::Refused(format!(
                "Could not get owner alias or owner id for image {} in region {region}, got {}",
                img.image_id.clone().unwrap_or_default(),
                resolve::describe(&img)
            )));
        };
        Ok(self.resolved(img, owner, req))
    }

    fn resolved(&self, img: Image, owner: String, req: &ResolveRequest) -> ResolvedImage {
        let mut facts = BTreeMap::new();
        for (k, v) in resolve::image_fields(&img) {
            if matches!(
                k.as_str(),
                "root_device_name"
                    | "root_device_type"
                    | "architecture"
                    | "virtualization_type"
                    | "owner_id"
                    | "image_owner_alias"
            ) {
                facts.insert(k, v);
            }
        }
        if !req.family.is_empty() {
            facts.insert("family".into(), req.family.clone());
        }
        ResolvedImage {
            id: img.image_id.clone().unwrap_or_default(),
            name: img.name.clone(),
            owner: Some(owner),
            creation_date: img.creation_date.clone(),
            facts,
        }
    }

    // ---------- instances ----------

    /// Every instance `describe_instances` answers for `filters`, all pages
    /// (an error is prefixed with `what`).
    pub(crate) async fn instances_where(
        &self,
        filters: Vec<Filter>,
        what: &str,
    ) -> Result<Vec<Instance>> {
        let ec2 = self.clients.ec2().await;
        let mut out = Vec::new();
        let mut pages = ec2
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_err(what, &e))?;
            for r in page.reservations.unwrap_or_default() {
                out.extend(r.instances.unwrap_or_default());
            }
        }
        Ok(out)
    }

    async fn describe_named(&self, name: &str, states: &[&str]) -> Result<Vec<Instance>> {
        let mut filters = vec![Filter::builder().name("tag:Name").values(name).build()];
        if !states.is_empty() {
            filters.push(state_filter(states));
        }
        self.instances_where(filters, "").await
    }

    /// `_running_instance`: the pending or running instance whose `Name` tag matches.
    pub async fn running_instance(&self, name: &str) -> Result<Option<Instance>> {
        Ok(self
            .describe_named(name, &["pending", "running"])
            .await?
            .into_iter()
            .next())
    }

    /// `_named_instance`: any state, preferring a record that is not `terminated`.
    pub async fn named_instance(&self, name: &str) -> Result<Option<Instance>> {
        let all = self.describe_named(name, &[]).await?;
        let terminated = |i: &Instance| {
            i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated)
        };
        let live = all.iter().find(|i| !terminated(i)).cloned();
        Ok(live.or_else(|| all.into_iter().next()))
    }

    /// The fine-grained power state (`None`: the cloud could not be asked).
    pub async fn power_state(&self, name: &str) -> Option<AwsPowerState> {
        match self.named_instance(name).await {
            Ok(None) => Some(AwsPowerState::Absent),
            Ok(Some(i)) => {
                let raw = i
                    .state
                    .as_ref()
                    .and_then(|s| s.name.as_ref())
                    .map(|n| n.as_str().to_string())
                    .unwrap_or_default();
                let p = AwsPowerState::from_ec2(&raw);
                if p == AwsPowerState::Unknown {
                    self.warn(format!(
                        "AWS runtime {}: instance '{name}' reports unrecognised state '{raw}'; treating it as unknown",
                        self.settings.name
                    ));
                }
                Some(p)
            }
            Err(_) => None,
        }
    }

    /// Poll `describe_instances` like the EC2 waiter: every `waiter_delay`,
    /// `timeout / 5` attempts (at least one); success when every state is
    /// `want`, failure on a state the waiter treats as terminal.
    pub(crate) async fn wait_for(
        &self,
        id: &str,
        want: &str,
        fail_on: &[&str],
        timeout_s: u64,
    ) -> Result<()> {
        let ec2 = self.clients.ec2().await;
        let attempts = (timeout_s / 5).max(1);
        let waiter = format!("instance_{want}");
        for n in 0..attempts {
            let out = ec2.describe_instances().instance_ids(id).send().await;
            match out {
                Ok(o) => {
                    let states: Vec<String> = o
                        .reservations()
                        .iter()
                        .flat_map(|r| r.instances())
                        .filter_map(|i| {
                            i.state
                                .as_ref()?
                                .name
                                .as_ref()
                                .map(|s| s.as_str().to_string())
                        })
                        .collect();
                    if !states.is_empty() && states.iter().all(|s| s == want) {
                        return Ok(());
                    }
                    if let Some(bad) = states.iter().find(|s| fail_on.contains(&s.as_str())) {
                        return Err(RuntimeError::Failed(format!(
                            "AWS runtime {}: waiter {waiter} failed for {id}: it reached '{bad}'",
                            self.settings.name
                        )));
                    }
                }
                Err(e) if code(&e).as_deref() == Some("InvalidInstanceID.NotFound") => {}
                Err(e) => return Err(sdk_err("", &e)),
            }
            if n + 1 < attempts {
                tokio::time::sleep(self.waiter_delay).await;
            }
        }
        Err(RuntimeError::Failed(format!(
            "AWS runtime {}: waiter {waiter} for {id}: max attempts exceeded ({attempts} x {}s, timeout {timeout_s}s)",
            self.settings.name,
            self.waiter_delay.as_secs()
        )))
    }

    // ---------- images ----------

    /// The block-device snapshots of an AMI record.
    fn snapshots_of(img: &Image) -> Vec<String> {
        img.block_device_mappings()
            .iter()
            .filter_map(|b| b.ebs.as_ref()?.snapshot_id.clone())
            .collect()
    }

    /// DescribeImages by id: `None` when AWS does not know it.
    pub async fn describe_image(&self, id: &str) -> Result<Option<Image>> {
        let ec2 = self.clients.ec2().await;
        match ec2.describe_images().image_ids(id).send().await {
            Ok(o) => Ok(o
                .images
                .unwrap_or_default()
                .into_iter()
                .find(|i| i.image_id.as_deref() == Some(id))),
            Err(e) if is_not_found_ami(code(&e).as_deref()) => Ok(None),
            Err(e) => Err(sdk_err("", &e)),
        }
    }

    /// `create-tags` on one AMI.
    async fn create_tags(&self, id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        let ec2 = self.clients.ec2().await;
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        ec2.create_tags()
            .resources(id)
            .set_tags(Some(tags))
            .send()
            .await
            .map_err(|e| sdk_err(&format!("could not retag {id}: "), &e))?;
        Ok(())
    }

    /// `preflight`'s identity: (account, ARN) from STS GetCallerIdentity.
    pub async fn caller_identity(&self) -> std::result::Result<(String, String), String> {
        client::check_profile(&self.settings)?;
        let sts = self.clients.sts().await;
        let out = sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| cause(&e))?;
        Ok((out.account.unwrap_or_default(), out.arn.unwrap_or_default()))
    }

    /// The directory the packer root of a bake goes to.
    pub fn root_dir(req: &BakeRequest) -> PathBuf {
        req.emit_dir.clone()
    }
}

#[async_trait]
impl Runtime for AwsRuntime {
    fn name(&self) -> &str {
        &self.settings.name
    }
    fn kind(&self) -> &str {
        KIND
    }

    async fn check_online(&self) -> Result<Vec<OnlineFinding>> {
        match self.discovery().await {
            Ok(d) => Ok(network::verdicts(&self.settings, d)),
            Err(e) => Ok(vec![network::aws_error(&self.settings, &e)]),
        }
    }

    async fn preflight(&self) -> Result<Vec<PreflightLine>> {
        let name = &self.settings.name;
        Ok(match self.caller_identity().await {
            Ok((account, arn)) => {
                let mut lines = vec![
                    PreflightLine {
                        ok: true,
                        what: format!("aws {name}: account"),
                        detail: account.clone(),
                    },
                    PreflightLine {
                        ok: true,
                        what: format!("aws {name}: identity"),
                        detail: arn,
                    },
                ];
                if let Some(decl) = self.settings.account_id.as_deref() {
                    if decl != account {
                        lines.push(PreflightLine {
                            ok: true,
                            what: format!("aws {name}: account_id"),
                            detail: format!(
                                "declared {decl}, the credentials act in {account} (account_id is not a check)"
                            ),
                        });
                    }
                }
                lines
            }
            Err(e) => vec![PreflightLine {
                ok: false,
                what: format!("aws {name}: identity"),
                detail: format!("AWS Error: {e}"),
            }],
        })
    }

    async fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        self.resolve_request(req).await
    }

    async fn emit(&self, req: &BakeRequest) -> Result<Vec<PathBuf>> {
        emit::emit_root(self, req).await
    }

    async fn bake(&self, req: &BakeRequest) -> Result<BakeOutcome> {
        bake::bake(self, req).await
    }

    async fn clean_stale_bakes(&self) -> Result<Vec<String>> {
        self.clean_stale().await
    }

    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        self.create_tags(build_id, tags).await
    }

    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        let ec2 = self.clients.ec2().await;
        let mut out = Vec::new();
        let mut pages = ec2
            .describe_images()
            .owners("self")
            .filters(
                Filter::builder()
                    .name("tag-key")
                    .values("csis_series")
                    .build(),
            )
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_err("", &e))?;
            for i in page.images.unwrap_or_default() {
                out.push(ImageFacts {
                    build_id: i.image_id.clone().unwrap_or_default(),
                    name: i.name.clone(),
                    created: i.creation_date.clone(),
                    tags: i
                        .tags()
                        .iter()
                        .filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default())))
                        .collect(),
                });
            }
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.build_id.cmp(&b.build_id)));
        Ok(out)
    }

    async fn inventory(&self) -> Result<Inventory> {
        Ok(self.aws_inventory().await?.to_api())
    }

    async fn image_users(&self, build_id: &str) -> Result<Vec<String>> {
        let mut users = Vec::new();
        let filters = vec![
            Filter::builder().name("image-id").values(build_id).build(),
            not_terminated(),
        ];
        for i in self.instances_where(filters, "").await? {
            let id = i.instance_id.clone().unwrap_or_default();
            match tag_value(i.tags(), "Name") {
                Some(n) => users.push(format!("instance {id} ({n})")),
                None => users.push(format!("instance {id}")),
            }
        }
        let ec2 = self.clients.ec2().await;
        // launch templates: every version that names the AMI
        let mut templates = Vec::new();
        let mut pages = ec2.describe_launch_templates().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_err("", &e))?;
            templates.extend(page.launch_templates.unwrap_or_default());
        }
        for t in templates {
            let Some(tid) = t.launch_template_id.clone() else {
                continue;
            };
            let mut vpages = ec2
                .describe_launch_template_versions()
                .launch_template_id(&tid)
                .into_paginator()
                .send();
            while let Some(page) = vpages.next().await {
                let page = page.map_err(|e| sdk_err("", &e))?;
                for v in page.launch_template_versions.unwrap_or_default() {
                    let uses = v
                        .launch_template_data
                        .as_ref()
                        .and_then(|d| d.image_id.as_deref())
                        == Some(build_id);
                    if uses {
                        users.push(format!(
                            "launch template {tid} ({}) version {}",
                            t.launch_template_name.clone().unwrap_or_default(),
                            v.version_number.unwrap_or_default()
                        ));
                    }
                }
            }
        }
        Ok(users)
    }

    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        let Some(img) = self.describe_image(build_id).await? else {
            self.warn(format!("AMI {build_id} not found; nothing to deregister"));
            return Ok(false);
        };
        let snapshots = Self::snapshots_of(&img);
        let ec2 = self.clients.ec2().await;
        ec2.deregister_image()
            .image_id(build_id)
            .send()
            .await
            .map_err(|e| sdk_err(&format!("could not deregister {build_id}: "), &e))?;
        for s in snapshots {
            ec2.delete_snapshot()
                .snapshot_id(&s)
                .send()
                .await
                .map_err(|e| {
                    sdk_err(
                        &format!("could not delete snapshot {s} of {build_id}: "),
                        &e,
                    )
                })?;
        }
        Ok(true)
    }

    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        let mut cmd = format!(
            "aws ec2 create-tags --region {} --resources {} --tags {} {}",
            shell_quote(&self.settings.region),
            shell_quote(build_id),
            shell_quote(&format!("Key=csis_release,Value={model}")),
            shell_quote(&format!("Key=csis_series,Value={series}")),
        );
        if let Some(p) = self
            .settings
            .credentials
            .profile_name
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            cmd.push_str(&format!(" --profile {}", shell_quote(p)));
        }
        vec![cmd]
    }

    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        let tags = BTreeMap::from([
            ("csis_release".to_string(), model.to_string()),
            ("csis_series".to_string(), series.to_string()),
        ]);
        self.create_tags(build_id, &tags).await
    }

    async fn query_instance_power_state(&self, instance: &str) -> Result<PowerState> {
        match self.power_state(instance).await {
            Some(p) => Ok(p.to_api()),
            None => Err(RuntimeError::Unavailable(format!(
                "AWS runtime {}: {POWER_UNAVAILABLE}",
                self.settings.name
            ))),
        }
    }

    async fn start_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let Some(i) = self.named_instance(instance).await? else {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to start",
                self.settings.name
            )));
        };
        if i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated) {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to start",
                self.settings.name
            )));
        }
        let id = i.instance_id.clone().unwrap_or_default();
        let ec2 = self.clients.ec2().await;
        ec2.start_instances()
            .instance_ids(&id)
            .send()
            .await
            .map_err(|e| sdk_err("", &e))?;
        self.wait_for(
            &id,
            "running",
            &["shutting-down", "terminated", "stopping"],
            timeout_s,
        )
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!(
                "{e}; '{instance}' was started but is not reachable"
            ))
        })
    }

    async fn stop_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let Some(i) = self.named_instance(instance).await? else {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to stop",
                self.settings.name
            )));
        };
        if i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated) {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to stop",
                self.settings.name
            )));
        }
        let id = i.instance_id.clone().unwrap_or_default();
        let ec2 = self.clients.ec2().await;
        ec2.stop_instances()
            .instance_ids(&id)
            .send()
            .await
            .map_err(|e| sdk_err("", &e))?;
        self.wait_for(&id, "stopped", &["pending", "terminated"], timeout_s)
            .await
            .map_err(|e| RuntimeError::Failed(format!("{e}; stop '{instance}' ({id}) by hand")))
    }

    async fn query_instance_identity(&self, instance: &str) -> Result<(String, Option<String>)> {
        match self.named_instance(instance).await? {
            Some(i) => Ok((
                i.instance_id.clone().unwrap_or_default(),
                i.private_dns_name.clone().filter(|s| !s.is_empty()),
            )),
            None => Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}'",
                self.settings.name
            ))),
        }
    }

    async fn query_instance_boot_image(&self, instance: &str) -> Result<Option<String>> {
        Ok(self
            .running_instance(instance)
            .await?
            .and_then(|i| i.image_id.clone()))
    }

    async fn run_session_command(
        &self,
        instance: &str,
        command: &str,
        timeout_s: u64,
    ) -> Result<SessionResult> {
        // A test machine is named by its instance id.
        if instance.starts_with("i-") {
            return ssm::send_and_poll(self, instance, command, timeout_s).await;
        }
        ssm::run_session_command(self, instance, command, timeout_s).await
    }

    async fn launch_test_machine(
        &self,
        req: &csis_runtime::TestMachineRequest,
    ) -> Result<csis_runtime::TestMachine> {
        self.launch_test(req).await
    }

    async fn remove_test_machine(&self, id: &str) -> Result<bool> {
        self.remove_test(id).await
    }

    async fn verify_instance(
        &self,
        instance: &str,
        expected_build: &str,
        expect_mounts: usize,
        timeout_s: u64,
    ) -> Result<Vec<VerifyCheck>> {
        ssm::verify_instance(self, instance, expected_build, expect_mounts, timeout_s).await
    }
}

/// The `describe_instances` filter for machines that are not terminated
/// (pending, running, stopping, stopped, shutting-down).
pub(crate) fn not_terminated() -> Filter {
    state_filter(&["pending", "running", "stopping", "stopped", "shutting-down"])
}

/// The `describe_instances` filter for machines in one of `states`.
fn state_filter(states: &[&str]) -> Filter {
    Filter::builder()
        .name("instance-state-name")
        .set_values(Some(states.iter().map(|s| s.to_string()).collect()))
        .build()
}
