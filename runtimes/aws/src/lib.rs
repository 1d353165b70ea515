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
//!
//! This file holds the runtime and the trait impl, one line per hook; the
//! hooks' work lives in one module per idea: `lookup` (resolve, with the
//! run's image cache), `images` (AMIs: tags, users, deregistration),
//! `instances` (power state, start, stop, EC2's waiter), `preflight`,
//! `power` ([`AwsPowerState`]), `errors` (SDK errors), and the public
//! modules below (emission, bakes, sessions, stale clean-up, test machines).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use csis_runtime::{
    BakeOutcome, BakeRequest, ImageFacts, Inventory, OnlineFinding, PowerState, PreflightLine,
    ResolveRequest, ResolvedImage, Result, Runtime, RuntimeError, SessionResult,
};
use tokio::sync::OnceCell;

mod archive;
pub mod bake;
pub mod cli_version;
pub mod client;
pub mod emit;
mod errors;
mod fleet;
pub mod from_schema;
mod images;
mod instances;
pub mod inventory;
mod lookup;
pub mod network;
pub mod offline;
mod power;
mod preflight;
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

pub(crate) use instances::not_terminated;
use lookup::{CachedLookup, Lookup};
pub use power::{AwsPowerState, POWER_UNAVAILABLE};

/// The runtime type key.
pub const KIND: &str = "aws";

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
        log::warn!("{w}");
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
                network::discover(
                    self.clients.ec2().await,
                    &self.clients.endpoint(client::Service::Ec2),
                )
                .await
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
        self.preflight_lines().await
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

    fn keeps_failed_bakes(&self, image_builder: &str) -> bool {
        let _ = image_builder;
        true
    }

    async fn remove_kept_bake(&self, name: &str) -> Result<bool> {
        self.remove_kept(name).await
    }

    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        self.create_tags(build_id, tags).await
    }

    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        self.builds().await
    }

    async fn inventory(&self) -> Result<Inventory> {
        Ok(self.aws_inventory().await?.to_api())
    }

    async fn image_users(&self, build_id: &str) -> Result<Vec<String>> {
        self.users_of(build_id).await
    }

    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        self.deregister(build_id).await
    }

    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        self.release_command_lines(build_id, series, model)
    }

    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        self.tag_release(build_id, series, model).await
    }

    async fn query_instance_power_state(&self, instance: &str) -> Result<PowerState> {
        self.api_power_state(instance).await
    }

    async fn start_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        self.start(instance, timeout_s).await
    }

    async fn stop_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
        self.stop(instance, timeout_s).await
    }

    async fn query_instance_identity(&self, instance: &str) -> Result<(String, Option<String>)> {
        self.identity(instance).await
    }

    async fn query_instance_boot_image(&self, instance: &str) -> Result<Option<String>> {
        self.boot_image(instance).await
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

    async fn query_instances(&self) -> Result<Vec<csis_runtime::InstanceFacts>> {
        self.fleet_instances().await
    }

    async fn query_storages(&self) -> Result<Vec<csis_runtime::StorageFacts>> {
        self.fleet_storages().await
    }

    async fn archive_storage(&self, req: &csis_runtime::ArchiveRequest) -> Result<String> {
        self.archive(req).await
    }

    async fn delete_archive(&self, req: &csis_runtime::ArchiveRequest) -> Result<Vec<String>> {
        self.delete_archives(req).await
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
