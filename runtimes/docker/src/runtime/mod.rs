//! `DockerRuntime`: one daemon, one repository; every hook answered against
//! the daemon through the Engine API. This file holds the runtime, its
//! client and the trait impl, one line per hook; the hooks' work lives in
//! its modules: `errors` (the daemon's answers as `RuntimeError`s),
//! `containers` (bake containers, their labels, the left-behind ones),
//! `exec` (exec and staging), `images` (tags, movable tags, builds listed,
//! retag, release), `disk` (disk sizes), `resolve`, `bake` (the native
//! bake), `packer` (a `packer-docker` root emitted and baked with what the
//! daemon says), `mod_test` (a mod applied twice in a throwaway container),
//! `checks` (online checks, preflight), `dispose`, `instances`
//! (containers as instances, verification, test machines, inventory) and
//! `fleet` (the fleet's instances as containers, its storages as volumes).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bollard::Docker;
use csis_runtime::{
    BakeOutcome, BakeRequest, DisposeOutcome, ImageFacts, InstanceFacts, Inventory, LaunchRequest,
    LaunchedInstance, ModTestOutcome, OnlineFinding, PowerState, PreflightLine, ResolveRequest,
    ResolvedImage, Result, Runtime, RuntimeError, SessionResult, StorageFacts, StorageRequest,
    TestMachine, TestMachineRequest, VerifyCheck,
};
use tokio::sync::OnceCell;

use crate::connect::{self, Endpoint};
use crate::settings::{ssh_port_problem, DockerSettings};

mod bake;
mod checks;
mod containers;
mod disk;
mod dispose;
mod errors;
mod exec;
mod fleet;
mod images;
mod instances;
mod mod_test;
mod resolve;

mod packer;

pub use disk::driver_disk_problem;
use errors::cause_chain;
pub use exec::ExecOutput;
pub use fleet::volume_name;
pub use images::rfc3339;

/// A docker runtime: one daemon, one repository.
pub struct DockerRuntime {
    settings: DockerSettings,
    repository: String,
    endpoint: std::result::Result<Endpoint, String>,
    docker: OnceCell<Docker>,
    /// Per disk size (GB): does the daemon apply `--storage-opt size=` to a
    /// container (`Err`: why not, in the daemon's words), found once.
    disk_limits: tokio::sync::Mutex<HashMap<u32, std::result::Result<(), String>>>,
}

impl DockerRuntime {
    /// A runtime from its settings. Refuses an invalid repository or an entry
    /// declaring both `host` and `context`; does not touch the daemon.
    pub fn new(settings: DockerSettings) -> Result<Self> {
        let repository = settings
            .repository()
            .map_err(|e| RuntimeError::Refused(format!("docker runtime {}: {e}", settings.name)))?;
        if settings.host.is_some() && settings.context.is_some() {
            return Err(RuntimeError::Refused(format!(
                "docker runtime {}: declare `host` or `context`, not both",
                settings.name
            )));
        }
        let endpoint = connect::endpoint(&settings);
        Ok(DockerRuntime {
            settings,
            repository,
            endpoint,
            docker: OnceCell::new(),
            disk_limits: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    pub fn settings(&self) -> &DockerSettings {
        &self.settings
    }

    /// The repository builds are tagged in (`csis/<runtime>` by default).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The daemon's address as configured (for messages; a secret in it is
    /// redacted).
    pub fn address(&self) -> String {
        csis_schema::secret::redact(&self.address_clear()).into_owned()
    }

    fn address_clear(&self) -> String {
        match &self.endpoint {
            Ok(e) => e.host.clone(),
            Err(_) => self
                .settings
                .host
                .clone()
                .or_else(|| {
                    self.settings
                        .context
                        .clone()
                        .map(|c| format!("context '{c}'"))
                })
                .unwrap_or_else(|| "the default socket".into()),
        }
    }

    /// The client, connected and with the API version negotiated (once).
    pub async fn docker(&self) -> Result<&Docker> {
        self.docker
            .get_or_try_init(|| async {
                let e = self.endpoint.as_ref().map_err(|e| self.unreachable(e))?;
                if let Some(p) = ssh_port_problem(&e.host) {
                    // not a daemon that did not answer: an address this client cannot use
                    return Err(RuntimeError::Refused(format!(
                        "docker runtime {}: {p}",
                        self.settings.name
                    )));
                }
                let client = connect::client(e).map_err(|m| self.unreachable(&m))?;
                client
                    .negotiate_version()
                    .await
                    .map_err(|err| self.unreachable(&cause_chain(&err)))
            })
            .await
    }
}

#[async_trait]
impl Runtime for DockerRuntime {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn kind(&self) -> &str {
        "docker"
    }

    async fn check_online(&self) -> Result<Vec<OnlineFinding>> {
        self.online_findings().await
    }

    async fn preflight(&self) -> Result<Vec<PreflightLine>> {
        self.preflight_lines().await
    }

    async fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        self.resolve_image(req).await
    }

    async fn vendor_now(&self, req: &ResolveRequest) -> Result<Option<ResolvedImage>> {
        self.vendor_tag_now(req).await
    }

    async fn emit(&self, req: &BakeRequest) -> Result<Vec<std::path::PathBuf>> {
        self.emit_root(req).await
    }

    async fn bake(&self, req: &BakeRequest) -> Result<BakeOutcome> {
        self.bake_image(req).await
    }

    async fn adopt(&self, build_id: &str, head: bool) -> Result<Vec<String>> {
        self.adopt_build(build_id, head).await
    }

    async fn test_mod(&self, req: &BakeRequest) -> Result<ModTestOutcome> {
        self.test_mod_in_container(req).await
    }

    async fn clean_stale_bakes(&self) -> Result<Vec<String>> {
        self.clean_stale().await
    }

    fn keeps_failed_bakes(&self, image_builder: &str) -> bool {
        !self.settings.packer_builders.contains_key(image_builder)
    }

    async fn remove_kept_bake(&self, name: &str) -> Result<bool> {
        self.remove_kept(name).await
    }

    async fn launch_test_machine(&self, req: &TestMachineRequest) -> Result<TestMachine> {
        self.launch_test(req).await
    }

    async fn remove_test_machine(&self, id: &str) -> Result<bool> {
        self.remove_test(id).await
    }

    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        self.retag(build_id, tags).await
    }

    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        self.builds().await
    }

    async fn inventory(&self) -> Result<Inventory> {
        self.containers_and_volumes().await
    }

    async fn image_users(&self, build_id: &str) -> Result<Vec<String>> {
        self.users_of(build_id).await
    }

    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        self.dispose_image_outcome(build_id)
            .await
            .map(|o| o.existed)
    }

    async fn dispose_image_outcome(&self, build_id: &str) -> Result<DisposeOutcome> {
        self.dispose(build_id).await
    }

    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        self.release_command_lines(build_id, series, model)
    }

    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        self.tag_release(build_id, series, model).await
    }

    async fn query_instance_power_state(&self, instance: &str) -> Result<PowerState> {
        self.power_state(instance).await
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

    async fn verify_instance(
        &self,
        instance: &str,
        expected_build: &str,
        expect_mounts: usize,
        timeout_s: u64,
    ) -> Result<Vec<VerifyCheck>> {
        self.verify(instance, expected_build, expect_mounts, timeout_s)
            .await
    }

    async fn run_session_command(
        &self,
        instance: &str,
        command: &str,
        timeout_s: u64,
    ) -> Result<SessionResult> {
        self.session_command(instance, command, timeout_s).await
    }

    async fn launch_instance(&self, req: &LaunchRequest) -> Result<LaunchedInstance> {
        self.launch(req).await
    }

    async fn remove_instance(&self, id: &str) -> Result<bool> {
        self.remove_fleet_instance(id).await
    }

    async fn create_storage(&self, req: &StorageRequest) -> Result<StorageFacts> {
        self.create_volume(req).await
    }

    async fn destroy_storage(&self, id: &str) -> Result<bool> {
        self.destroy_volume(id).await
    }

    async fn query_storages(&self) -> Result<Vec<StorageFacts>> {
        self.storages().await
    }

    async fn query_instances(&self) -> Result<Vec<InstanceFacts>> {
        self.fleet_instances().await
    }
}

/// Shared-pointer constructor for the `csis` binary.
pub fn docker_runtime(settings: DockerSettings) -> Result<Arc<DockerRuntime>> {
    DockerRuntime::new(settings).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn invalid_entries_refused_at_construction() {
        let mut s = DockerSettings::new("d");
        s.repository = Some("a//b".into());
        assert!(matches!(
            DockerRuntime::new(s),
            Err(RuntimeError::Refused(_))
        ));
    }

    #[tokio::test]
    async fn unreachable_tcp_and_ssh_daemons_name_the_address() {
        for host in ["tcp://127.0.0.1:1", "ssh://nobody@127.0.0.1"] {
            let mut s = DockerSettings::new("far");
            s.host = Some(host.into());
            let r = DockerRuntime::new(s).unwrap();
            let e = tokio::time::timeout(Duration::from_secs(60), r.docker())
                .await
                .expect("answers within a minute")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!(
                    "docker runtime far: the daemon at {host} cannot be reached"
                )),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
            eprintln!("{e}");
            let f = r.check_online().await.unwrap();
            assert!(f.iter().any(|f| f.error && f.path == "host"), "{f:?}");
        }
    }

    #[tokio::test]
    async fn an_ssh_port_is_refused_not_unreachable() {
        let mut s = DockerSettings::new("far");
        s.host = Some("ssh://nobody@127.0.0.1:2222".into());
        // validate refuses it offline, on the `host` field
        let common: csis_schema::model::RuntimeCommon = serde_json::from_value(
            serde_json::json!({"name": "far", "type": "docker", "default_machine_type": "m"}),
        )
        .unwrap();
        let fields: csis_schema::model::DockerFields =
            serde_json::from_value(serde_json::json!({"host": s.host})).unwrap();
        let p = crate::settings::entry_problems(&common, &fields);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path, "host");
        // the runtime names itself where the loader names file and line
        let msg = format!("docker runtime far: {}", p[0].message);
        assert!(
            msg.starts_with(
                "docker runtime far: daemon address ssh://nobody@127.0.0.1:2222: port 2222 in an ssh:// address is not supported"
            ),
            "{p:?}"
        );
        assert!(
            msg.ends_with("`Host 127.0.0.1-2222` with `HostName 127.0.0.1, Port 2222` in ~/.ssh/config and use host: ssh://nobody@127.0.0.1-2222"),
            "{p:?}"
        );
        // the hooks say the same, as a refusal (no ssh is started, no "cannot be reached")
        let r = DockerRuntime::new(s).unwrap();
        let e = r.docker().await.unwrap_err();
        assert!(matches!(e, RuntimeError::Refused(_)), "{e:?}");
        assert_eq!(e.to_string(), msg);
        let f = r.check_online().await.unwrap();
        assert!(
            f.iter()
                .any(|f| f.error && f.path == "host" && f.message == msg),
            "{f:?}"
        );
        let pf = r.preflight().await.unwrap();
        assert!(!pf[0].ok && pf[0].detail == msg, "{pf:?}");
    }

    #[tokio::test]
    async fn tls_material_missing_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DockerSettings::new("tls");
        s.host = Some("tcp://127.0.0.1:1".into());
        s.tls = crate::settings::TlsSettings {
            cert_path: Some(dir.path().to_path_buf()),
            verify: true,
        };
        assert_eq!(
            s.tool_environment()
                .iter()
                .find(|(k, _)| k == "DOCKER_TLS_VERIFY")
                .map(|(_, v)| v.as_str()),
            Some("1")
        );
        let r = DockerRuntime::new(s).unwrap();
        let e = r.docker().await.unwrap_err().to_string();
        assert!(
            e.starts_with("docker runtime tls: the daemon at tcp://127.0.0.1:1 cannot be reached"),
            "{e}"
        );
        assert!(
            e.contains("ca.pem") || e.contains(&dir.path().display().to_string()),
            "{e}"
        );
    }

    #[tokio::test]
    async fn unreachable_daemon_is_one_line() {
        let mut s = DockerSettings::new("far");
        s.host = Some("unix:///nonexistent/docker.sock".into());
        let r = DockerRuntime::new(s).unwrap();
        let e = r.docker().await.unwrap_err().to_string();
        assert!(
            e.starts_with("docker runtime far: the daemon at unix:///nonexistent/docker.sock cannot be reached"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let p = r.preflight().await.unwrap();
        assert!(!p[0].ok);
    }
}
