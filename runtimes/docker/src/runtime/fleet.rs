//! The fleet on a daemon (docs/fleet.md §3): an instance is a container
//! named by its canonical hostname, made from the build's image id,
//! labelled, on the runtime's network with its machine type's limits,
//! restarted unless stopped, whose command runs the launch script and then
//! the image's own command (else waits); a storage is a named volume
//! `<config>-<storage>-<generation>`, labelled (the storage's tags beside
//! csis's labels; a local volume has no size). What carries another tree's
//! `csis_config`, or no csis mark, is refused and never touched.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{
    ContainerCreateBody, ContainerSummary, HostConfig, Mount, MountType, RestartPolicy,
    RestartPolicyNameEnum, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListVolumesOptionsBuilder, RemoveVolumeOptions,
};
use csis_runtime::{
    InstanceFacts, LaunchRequest, LaunchedInstance, Result, RuntimeError, StorageFacts,
    StorageRequest,
};
use csis_schema::tags;

use super::containers::{instance_facts, remove_container_forced, ContainerGuard};
use super::errors::{is_conflict, is_not_found};
use super::exec::tar_of_file;
use super::DockerRuntime;
use crate::settings::parse_memory;

/// What a fleet container runs, its arguments the image's own command:
/// the launch script, copied into the container before its first start
/// ([`LAUNCH_SCRIPT`]: not in its configuration, which anyone who can
/// reach the daemon reads), its output logged (`launch.log`, and the
/// container's log). A failed script leaves the container running without
/// the marker, for verification to say so.
const WRAPPER: &str = r#"mkdir -p /var/lib/csis
if sh /var/lib/csis/launch.sh > /var/lib/csis/launch.log 2>&1; then
  echo "csis-launch: done"
else
  echo "csis-launch: the launch script failed (exit $?), see /var/lib/csis/launch.log" >&2
fi
cat /var/lib/csis/launch.log
[ $# -gt 0 ] || set -- tail -f /dev/null
exec "$@""#;

/// Where a fleet container keeps its launch script.
const LAUNCH_SCRIPT: &str = "/var/lib/csis/launch.sh";
/// The log of the launch script in a fleet container.
pub(super) const LAUNCH_LOG: &str = "/var/lib/csis/launch.log";

/// The volume name of a storage's generation: `<config>-<storage>-<gen>`
/// with the config id in the original's form, every character a volume
/// name cannot carry made `-`, starting with a letter or digit.
pub fn volume_name(config_id: &str, storage: &str, generation: u32) -> String {
    let raw = format!("{}-{storage}-{generation}", tags::config_value(config_id));
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.insert(0, 'v');
    }
    name
}

/// Why `hostname` cannot name a fleet container (a hostname label: 1 to
/// 63 letters, digits and `-`, not at either end), if it cannot.
pub(super) fn hostname_problem(hostname: &str) -> Option<String> {
    let ok = (1..=63).contains(&hostname.len())
        && hostname
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !hostname.starts_with('-')
        && !hostname.ends_with('-');
    (!ok).then(|| {
        format!(
            "hostname '{}' is not a hostname label (1 to 63 letters, digits and '-', not at either end)",
            hostname.chars().take(80).collect::<String>().escape_debug()
        )
    })
}

/// The name of a container as listed (`/name` -> `name`).
fn container_name(c: &ContainerSummary) -> String {
    c.names
        .as_ref()
        .and_then(|n| n.first())
        .map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_default()
}

/// The labels of a container or volume, sorted.
fn sorted(labels: Option<&HashMap<String, String>>) -> BTreeMap<String, String> {
    labels
        .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// `csis_storage=..., csis_config=...` (the csis labels), for messages.
fn csis_marks(labels: &BTreeMap<String, String>) -> String {
    let marks: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.starts_with(tags::PREFIX) && !crate::labels::is_bake_mark(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if marks.is_empty() {
        "no csis labels".into()
    } else {
        marks.join(", ")
    }
}

impl DockerRuntime {
    /// This tree's id, which the fleet queries need.
    fn tree_config(&self) -> Result<&str> {
        self.settings.config.as_deref().ok_or_else(|| {
            RuntimeError::Refused(format!(
                "docker runtime {}: it was made without its tree's config id: which containers and volumes are this tree's is unknown",
                self.settings.name
            ))
        })
    }

    /// Whether labels carrying `csis_config` = `value` are this tree's
    /// (a runtime made without the tree's id takes `fallback`'s, the
    /// request's, as this tree's).
    fn is_ours(&self, labels: &BTreeMap<String, String>, fallback: Option<&str>) -> bool {
        let Some(id) = self.settings.config.as_deref().or(fallback) else {
            return false;
        };
        labels
            .get(tags::CONFIG)
            .is_some_and(|v| tags::is_config_of(v, id))
    }

    /// Apply the machine type's `--cpus` / `--memory` (the request's, else
    /// the runtime's default) to `host`.
    pub(super) fn apply_machine_type(
        &self,
        host: &mut HostConfig,
        requested: Option<&str>,
    ) -> Result<()> {
        let mt = self
            .settings
            .machine_type(requested)
            .map_err(RuntimeError::Refused)?;
        if let Some(m) = mt {
            host.nano_cpus = m.cpus.map(|c| (c * 1e9) as i64);
            if let Some(mem) = &m.memory {
                host.memory = Some(parse_memory(mem).map_err(RuntimeError::Refused)?);
            }
        }
        Ok(())
    }

    /// The tree a request's labels name (`csis_config`): required, and
    /// this runtime's tree when it knows its own.
    fn request_config<'r>(
        &self,
        labels: &'r BTreeMap<String, String>,
        what: &str,
    ) -> Result<&'r str> {
        let Some(config) = labels.get(tags::CONFIG) else {
            return Err(RuntimeError::Refused(format!(
                "{what}: the request carries no {} label",
                tags::CONFIG
            )));
        };
        match self.settings.config.as_deref() {
            Some(id) if !tags::is_config_of(config, id) => Err(RuntimeError::Refused(format!(
                "{what}: the request is for tree {config}, docker runtime {} serves tree {id}",
                self.settings.name
            ))),
            _ => Ok(config),
        }
    }

    pub(super) async fn launch(&self, req: &LaunchRequest) -> Result<LaunchedInstance> {
        let config = self.request_config(&req.labels, &format!("instance {}", req.instance))?;
        if let Some(p) = hostname_problem(&req.hostname) {
            return Err(RuntimeError::Refused(format!(
                "docker runtime {}: instance {}: {p}",
                self.settings.name, req.instance
            )));
        }
        if let Some(done) = self.launched_already(req, config).await? {
            return Ok(done);
        }
        let body = self.instance_body(req, config).await?;
        let d = self.docker().await?;
        let name = &req.hostname;
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        let created = d.create_container(Some(opts), body).await.map_err(|e| {
            self.map_err(
                &format!("create container {name} of instance {}", req.instance),
                e,
            )
        })?;
        let guard = ContainerGuard::new(d.clone(), name.clone());
        let started = match self.put_launch_script(name, &req.launch_script).await {
            Ok(()) => d
                .start_container(
                    name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await
                .map_err(|e| self.map_err(&format!("start container {name}"), e)),
            Err(e) => Err(e),
        };
        if let Err(e) = started {
            let _ = guard.remove().await;
            return Err(e);
        }
        guard.disarm();
        Ok(LaunchedInstance {
            id: created.id,
            hostname: name.clone(),
        })
    }

    /// Copy the launch script into a created container ([`LAUNCH_SCRIPT`]).
    async fn put_launch_script(&self, container: &str, script: &str) -> Result<()> {
        let tar = tar_of_file(LAUNCH_SCRIPT, script.as_bytes(), 0o700)
            .map_err(|e| RuntimeError::Failed(format!("the launch script of {container}: {e}")))?;
        let d = self.docker().await?;
        d.upload_to_container(
            container,
            Some(bollard::query_parameters::UploadToContainerOptions {
                path: "/".into(),
                ..Default::default()
            }),
            bollard::body_full(tar.into()),
        )
        .await
        .map_err(|e| self.map_err(&format!("copy the launch script into {container}"), e))
    }

    /// A container of the hostname that is this very launch (a launch
    /// repeated after a kill): started if stopped and answered. Any other
    /// container of that name is refused, untouched.
    async fn launched_already(
        &self,
        req: &LaunchRequest,
        config: &str,
    ) -> Result<Option<LaunchedInstance>> {
        let Some(c) = self.inspect_container_opt(&req.hostname).await? else {
            return Ok(None);
        };
        let labels = sorted(c.config.as_ref().and_then(|c| c.labels.as_ref()));
        let same = [tags::INSTANCE, tags::BUILD, tags::GENERATION]
            .iter()
            .all(|k| labels.get(*k) == req.labels.get(*k));
        if !(same && self.is_ours(&labels, Some(config))) {
            return Err(RuntimeError::Refused(format!(
                "docker runtime {}: a container named {} exists and is not generation {} of instance {} of this tree on build {} ({}): it is not touched",
                self.settings.name,
                req.hostname,
                req.generation,
                req.instance,
                req.build_id,
                csis_marks(&labels)
            )));
        }
        if c.state.as_ref().and_then(|s| s.running) != Some(true) {
            self.start(&req.hostname, 30).await?;
        }
        Ok(Some(LaunchedInstance {
            id: c.id.unwrap_or_default(),
            hostname: req.hostname.clone(),
        }))
    }

    /// The container of a launch: the build's image with its command
    /// behind the launch script, the volumes (each one this tree's
    /// storage), the network, the limits, the restart policy.
    async fn instance_body(
        &self,
        req: &LaunchRequest,
        config: &str,
    ) -> Result<ContainerCreateBody> {
        let image = self
            .inspect_image_opt(&req.build_id)
            .await?
            .ok_or_else(|| {
                RuntimeError::Refused(format!(
                    "docker runtime {}: build {} of instance {} is not on the daemon",
                    self.settings.name, req.build_id, req.instance
                ))
            })?;
        let own = image.config.unwrap_or_default();
        let mut entrypoint = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            WRAPPER.into(),
            "csis-launch".into(),
        ];
        entrypoint.extend(own.entrypoint.unwrap_or_default());
        entrypoint.extend(own.cmd.unwrap_or_default());
        let mut host = HostConfig {
            init: Some(true),
            network_mode: Some(self.settings.network.clone()),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
                maximum_retry_count: None,
            }),
            mounts: Some(self.instance_mounts(req, config).await?),
            ..Default::default()
        };
        self.apply_machine_type(&mut host, req.machine_type.as_deref())?;
        Ok(ContainerCreateBody {
            image: Some(image.id.unwrap_or_else(|| req.build_id.clone())),
            hostname: Some(req.hostname.clone()),
            // the launch script makes accounts: it runs as root
            user: Some("0".into()),
            labels: Some(req.labels.clone().into_iter().collect()),
            entrypoint: Some(entrypoint),
            cmd: Some(vec![]),
            host_config: Some(host),
            ..Default::default()
        })
    }

    /// The mounts of a launch; each volume must exist and be this tree's
    /// storage (the daemon would otherwise make an unlabelled one).
    async fn instance_mounts(&self, req: &LaunchRequest, config: &str) -> Result<Vec<Mount>> {
        let mut out = Vec::new();
        for m in &req.mounts {
            let Some(v) = self.inspect_volume_opt(&m.volume).await? else {
                return Err(RuntimeError::Refused(format!(
                    "docker runtime {}: volume {} of storage {} (instance {}) does not exist: create the storage first",
                    self.settings.name, m.volume, m.storage, req.instance
                )));
            };
            let labels = sorted(Some(&v.labels));
            if labels.get(tags::STORAGE) != Some(&m.storage) || !self.is_ours(&labels, Some(config))
            {
                return Err(RuntimeError::Refused(format!(
                    "docker runtime {}: volume {} is not storage {} of this tree ({}): not mounted",
                    self.settings.name,
                    m.volume,
                    m.storage,
                    csis_marks(&labels)
                )));
            }
            out.push(Mount {
                target: Some(m.mount_point.clone()),
                source: Some(m.volume.clone()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            });
        }
        Ok(out)
    }

    pub(super) async fn inspect_container_opt(
        &self,
        name: &str,
    ) -> Result<Option<bollard::models::ContainerInspectResponse>> {
        let d = self.docker().await?;
        match d
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(c) => Ok(Some(c)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.map_err(&format!("inspect container {name}"), e)),
        }
    }

    async fn inspect_volume_opt(&self, name: &str) -> Result<Option<bollard::models::Volume>> {
        let d = self.docker().await?;
        match d.inspect_volume(name).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.map_err(&format!("inspect volume {name}"), e)),
        }
    }

    /// Remove a fleet container (`false`: there was none). A container
    /// that is not a csis instance of this tree is refused, untouched.
    pub(super) async fn remove_fleet_instance(&self, id: &str) -> Result<bool> {
        let Some(c) = self.inspect_container_opt(id).await? else {
            return Ok(false);
        };
        let labels = sorted(c.config.as_ref().and_then(|c| c.labels.as_ref()));
        if !labels.contains_key(tags::INSTANCE) || !self.is_ours(&labels, None) {
            return Err(RuntimeError::Refused(format!(
                "docker runtime {}: container {id} is not an instance of this tree ({}): it is not removed",
                self.settings.name,
                csis_marks(&labels)
            )));
        }
        let d = self.docker().await?;
        remove_container_forced(d, id)
            .await
            .map_err(|e| RuntimeError::Failed(format!("removing container {id}: {e}")))
    }

    pub(super) async fn create_volume(&self, req: &StorageRequest) -> Result<StorageFacts> {
        let config = self.request_config(&req.labels, &format!("storage {}", req.storage))?;
        let name = volume_name(config, &req.storage, req.generation);
        if let Some(v) = self.inspect_volume_opt(&name).await? {
            let labels = sorted(Some(&v.labels));
            let same = [tags::STORAGE, tags::GENERATION]
                .iter()
                .all(|k| labels.get(*k) == req.labels.get(*k));
            if !(same && self.is_ours(&labels, Some(config))) {
                return Err(RuntimeError::Refused(format!(
                    "docker runtime {}: a volume named {name} exists and is not generation {} of storage {} of this tree ({}): it is not touched",
                    self.settings.name, req.generation, req.storage, csis_marks(&labels)
                )));
            }
            return self.storage_facts(&req.storage, v.name, labels).await;
        }
        let d = self.docker().await?;
        let v = d
            .create_volume(VolumeCreateRequest {
                name: Some(name.clone()),
                labels: Some(req.labels.clone().into_iter().collect()),
                ..Default::default()
            })
            .await
            .map_err(|e| self.map_err(&format!("create volume {name}"), e))?;
        self.storage_facts(&req.storage, v.name, sorted(Some(&v.labels)))
            .await
    }

    async fn storage_facts(
        &self,
        storage: &str,
        id: String,
        labels: BTreeMap<String, String>,
    ) -> Result<StorageFacts> {
        let users = self.volume_users(&id).await?;
        Ok(StorageFacts {
            storage: storage.to_string(),
            id,
            labels,
            users,
        })
    }

    /// The containers (running or not) that mount the volume, by name.
    async fn volume_users(&self, volume: &str) -> Result<Vec<String>> {
        let list = self
            .containers(HashMap::from([(
                "volume".to_string(),
                vec![volume.to_string()],
            )]))
            .await?;
        let mut users: Vec<String> = list
            .iter()
            .filter(|c| {
                c.mounts
                    .iter()
                    .flatten()
                    .any(|m| m.name.as_deref() == Some(volume))
            })
            .map(container_name)
            .collect();
        users.sort();
        Ok(users)
    }

    /// Remove a storage's volume (`false`: there was none); refused while
    /// a container mounts it, or when it is not this tree's storage.
    pub(super) async fn destroy_volume(&self, id: &str) -> Result<bool> {
        let Some(v) = self.inspect_volume_opt(id).await? else {
            return Ok(false);
        };
        let labels = sorted(Some(&v.labels));
        if !labels.contains_key(tags::STORAGE) || !self.is_ours(&labels, None) {
            return Err(RuntimeError::Refused(format!(
                "docker runtime {}: volume {id} is not a storage of this tree ({}): it is not removed",
                self.settings.name,
                csis_marks(&labels)
            )));
        }
        let in_use = |users: Vec<String>| {
            RuntimeError::Refused(format!(
                "docker runtime {}: volume {id} is in use by container(s) {}: remove them first; a volume is never destroyed under a container",
                self.settings.name,
                users.join(", ")
            ))
        };
        let users = self.volume_users(id).await?;
        if !users.is_empty() {
            return Err(in_use(users));
        }
        let d = self.docker().await?;
        match d.remove_volume(id, None::<RemoveVolumeOptions>).await {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) if is_conflict(&e) => Err(in_use(self.volume_users(id).await?)),
            Err(e) => Err(self.map_err(&format!("remove volume {id}"), e)),
        }
    }

    /// This tree's storages: volumes labelled `csis_storage` and this
    /// tree's `csis_config`, with the containers that mount each.
    pub(super) async fn storages(&self) -> Result<Vec<StorageFacts>> {
        let config = self.tree_config()?.to_string();
        let d = self.docker().await?;
        let filters = HashMap::from([("label".to_string(), vec![tags::STORAGE.to_string()])]);
        let opts = ListVolumesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let list = d
            .list_volumes(Some(opts))
            .await
            .map_err(|e| self.map_err("list volumes", e))?;
        let mut users: HashMap<String, Vec<String>> = HashMap::new();
        for c in self.containers(HashMap::new()).await? {
            for m in c.mounts.iter().flatten() {
                if let Some(n) = &m.name {
                    users.entry(n.clone()).or_default().push(container_name(&c));
                }
            }
        }
        let mut out: Vec<StorageFacts> = list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| (v.name, sorted(Some(&v.labels))))
            .filter(|(_, l)| self.is_ours(l, Some(&config)))
            .map(|(id, labels)| {
                let mut u = users.remove(&id).unwrap_or_default();
                u.sort();
                StorageFacts {
                    storage: labels.get(tags::STORAGE).cloned().unwrap_or_default(),
                    id,
                    labels,
                    users: u,
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.storage, &a.id).cmp(&(&b.storage, &b.id)));
        Ok(out)
    }

    /// This tree's instances: containers labelled `csis_instance` and this
    /// tree's `csis_config`, by name.
    pub(super) async fn fleet_instances(&self) -> Result<Vec<InstanceFacts>> {
        let config = self.tree_config()?.to_string();
        let list = self
            .containers(HashMap::from([(
                "label".to_string(),
                vec![tags::INSTANCE.to_string()],
            )]))
            .await?;
        let mut out: Vec<InstanceFacts> = list
            .into_iter()
            .map(instance_facts)
            .filter(|i| self.is_ours(&i.labels, Some(&config)))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names_follow_the_daemons_rules() {
        assert_eq!(
            volume_name("My-Team-REPLACE-ME", "data", 1),
            "my-team-replace-me-data-1"
        );
        assert_eq!(volume_name("a b/c", "x:y", 12), "a-b-c-x-y-12");
        assert_eq!(volume_name("_t", "s", 2), "v_t-s-2");
    }

    #[test]
    fn a_hostname_must_be_a_label() {
        assert_eq!(hostname_problem("web-001"), None);
        assert_eq!(hostname_problem(&"a".repeat(63)), None);
        for bad in ["", "-web", "web-", "we_b", "web.001", "web 1", "web/1"] {
            assert!(hostname_problem(bad).is_some(), "{bad}");
        }
        let long = format!("{}-001", "a".repeat(60));
        assert!(hostname_problem(&long).unwrap().contains("1 to 63"));
    }
}
