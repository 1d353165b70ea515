//! Containers as instances: power state, start and stop, identity and boot
//! image, verification against a build, session commands (an exec), test
//! machines, and the inventory of containers and volumes.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListVolumesOptions, RemoveContainerOptionsBuilder,
    StopContainerOptionsBuilder,
};
use csis_runtime::{
    InstanceFacts, Inventory, PowerState, Result, Runtime, RuntimeError, SessionResult,
    TestMachine, TestMachineRequest, VerifyCheck, VolumeFacts,
};

use super::containers::{instance_facts, ContainerGuard};
use super::errors::{is_conflict, is_not_found};
use super::DockerRuntime;
use csis_schema::tags;

impl DockerRuntime {
    pub(super) async fn power_state(&self, instance: &str) -> Result<PowerState> {
        let d = self.docker().await?;
        match d
            .inspect_container(
                instance,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(c) => Ok(match c.state {
                Some(s) if s.running == Some(true) => PowerState::Running,
                Some(s) => match s.status {
                    Some(bollard::models::ContainerStateStatusEnum::CREATED)
                    | Some(bollard::models::ContainerStateStatusEnum::EXITED)
                    | Some(bollard::models::ContainerStateStatusEnum::DEAD) => PowerState::Stopped,
                    Some(bollard::models::ContainerStateStatusEnum::PAUSED)
                    | Some(bollard::models::ContainerStateStatusEnum::RESTARTING) => {
                        PowerState::Running
                    }
                    _ => PowerState::Unknown,
                },
                None => PowerState::Unknown,
            }),
            Err(e) if is_not_found(&e) => Ok(PowerState::Absent),
            Err(e) => Err(self.map_err(&format!("inspect container {instance}"), e)),
        }
    }

    pub(super) async fn start(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let d = self.docker().await?;
        d.start_container(
            instance,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .or_else(|e| match &e {
            bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            } => Ok(()),
            _ => Err(self.map_err(&format!("start container {instance}"), e)),
        })?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout_s.max(1));
        loop {
            if self.query_instance_power_state(instance).await? == PowerState::Running {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(RuntimeError::Failed(format!(
                    "container {instance} is not running {timeout_s}s after start"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) async fn stop(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let d = self.docker().await?;
        let opts = StopContainerOptionsBuilder::default()
            .t(timeout_s.min(i32::MAX as u64) as i32)
            .build();
        match d.stop_container(instance, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) => Err(self.map_err(&format!("stop container {instance}"), e)),
        }
    }

    pub(super) async fn identity(&self, instance: &str) -> Result<(String, Option<String>)> {
        let d = self.docker().await?;
        let c = d
            .inspect_container(
                instance,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(|e| {
                if is_not_found(&e) {
                    RuntimeError::Refused(format!("container {instance} does not exist"))
                } else {
                    self.map_err(&format!("inspect container {instance}"), e)
                }
            })?;
        Ok((c.id.unwrap_or_default(), c.config.and_then(|c| c.hostname)))
    }

    pub(super) async fn boot_image(&self, instance: &str) -> Result<Option<String>> {
        let d = self.docker().await?;
        match d
            .inspect_container(
                instance,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(c) => Ok(c.image),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.map_err(&format!("inspect container {instance}"), e)),
        }
    }

    /// A container against a build: it runs, its launch script is done
    /// (a fleet instance, labelled `csis_instance`: the marker within
    /// `timeout_s`; a container csis did not launch has no launch script
    /// to check), it was created from the build (`expected` as an image
    /// id, a tag or a short id the daemon knows), and, when asked, at
    /// least `expect_mounts` of its volumes are mounted inside it.
    pub(super) async fn verify(
        &self,
        instance: &str,
        expected_build: &str,
        expect_mounts: usize,
        timeout_s: u64,
    ) -> Result<Vec<VerifyCheck>> {
        let Some(c) = self.inspect_container_opt(instance).await? else {
            return Err(RuntimeError::Refused(format!(
                "container {instance} does not exist on {}",
                self.settings.name
            )));
        };
        let power = self.query_instance_power_state(instance).await?;
        let running = power == PowerState::Running;
        let mut checks = vec![VerifyCheck {
            name: "running".into(),
            ok: running,
            detail: format!("{power:?}").to_lowercase(),
            evidence: Vec::new(),
        }];
        let launched = c
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .is_some_and(|l| l.contains_key(tags::INSTANCE));
        if launched {
            checks.push(self.marker_check(instance, running, timeout_s).await);
        }
        checks.push(
            self.booted_check(c.image.as_deref(), expected_build)
                .await?,
        );
        if expect_mounts > 0 {
            let mounts = c.mounts.unwrap_or_default();
            checks.push(
                self.mounts_check(instance, &mounts, expect_mounts, timeout_s)
                    .await,
            );
        }
        Ok(checks)
    }

    /// `startup scripts`: the launch marker, polled until `timeout_s`;
    /// when it is not there, the launch log's last lines as evidence.
    async fn marker_check(&self, instance: &str, running: bool, timeout_s: u64) -> VerifyCheck {
        let found = if running {
            self.poll_marker(instance, timeout_s).await
        } else {
            Err("the container is not running".to_string())
        };
        let marker = csis_runtime::fleet::LAUNCH_MARKER;
        let (ok, detail, evidence) = match found {
            Ok(at) => (true, format!("{marker} present ({at})"), Vec::new()),
            Err(why) => {
                let log = self
                    .run_session_command(
                        instance,
                        &format!("tail -n 20 {}", super::fleet::LAUNCH_LOG),
                        10,
                    )
                    .await
                    .map(|r| r.stdout.lines().map(str::to_string).collect())
                    .unwrap_or_default();
                (false, why, log)
            }
        };
        VerifyCheck {
            name: "startup scripts".into(),
            ok,
            detail,
            evidence,
        }
    }

    /// The launch marker's content once it is there (`Err`: why not,
    /// when `timeout_s` has passed).
    async fn poll_marker(
        &self,
        instance: &str,
        timeout_s: u64,
    ) -> std::result::Result<String, String> {
        let cmd = format!("cat {}", csis_runtime::fleet::LAUNCH_MARKER);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout_s);
        loop {
            let why = match self
                .run_session_command(instance, &cmd, timeout_s.max(10))
                .await
            {
                Ok(r) if r.exit_code == 0 => return Ok(r.stdout.trim().to_string()),
                Ok(_) => format!("no completion marker within {timeout_s}s"),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(why);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `booted image`: the image the container was created from against
    /// the expected build.
    async fn booted_check(
        &self,
        booted: Option<&str>,
        expected_build: &str,
    ) -> Result<VerifyCheck> {
        let expected_id = match self.inspect_image_opt(expected_build).await? {
            Some(i) => i.id.unwrap_or_else(|| expected_build.to_string()),
            None => expected_build.to_string(),
        };
        let booted_s = booted.unwrap_or("?");
        let ok = booted == Some(expected_id.as_str());
        Ok(VerifyCheck {
            name: "booted image".into(),
            ok,
            detail: if ok {
                format!("booted {booted_s}")
            } else {
                format!("booted {booted_s}, expected {expected_build}")
            },
            evidence: Vec::new(),
        })
    }

    /// `data disks mounted`: the container's volumes and binds that are
    /// mount points inside it (`/proc/mounts`), against the declared count.
    async fn mounts_check(
        &self,
        instance: &str,
        mounts: &[bollard::models::MountPoint],
        expect: usize,
        timeout_s: u64,
    ) -> VerifyCheck {
        let name = "data disks mounted".to_string();
        let r = match self
            .run_session_command(instance, "cat /proc/mounts", timeout_s.max(10))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return VerifyCheck {
                    name,
                    ok: false,
                    detail: e.to_string(),
                    evidence: Vec::new(),
                }
            }
        };
        let targets: Vec<&str> = r
            .stdout
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        let mut evidence = Vec::new();
        let mut n = 0;
        for m in mounts.iter().filter(|m| m.typ.as_deref() != Some("tmpfs")) {
            let what = m.name.as_deref().or(m.source.as_deref()).unwrap_or("?");
            let dest = m.destination.as_deref().unwrap_or("?");
            let here = targets.contains(&dest);
            n += usize::from(here);
            let state = if here { "mounted" } else { "NOT mounted" };
            evidence.push(format!("{what} at {dest}: {state}"));
        }
        VerifyCheck {
            name,
            ok: n >= expect,
            detail: format!("{n} volume(s) mounted, {expect} declared"),
            evidence: last_lines(&evidence, 20),
        }
    }

    pub(super) async fn session_command(
        &self,
        instance: &str,
        command: &str,
        timeout_s: u64,
    ) -> Result<SessionResult> {
        let fut = self.exec(
            instance,
            vec!["/bin/sh".into(), "-c".into(), command.to_string()],
            None,
            vec![],
            None,
            &csis_runtime::NullLog,
            true,
        );
        match tokio::time::timeout(Duration::from_secs(timeout_s.max(1)), fut).await {
            Ok(r) => {
                let r = r?;
                Ok(SessionResult {
                    exit_code: r.exit_code as i32,
                    stdout: r.stdout,
                    stderr: r.stderr,
                })
            }
            Err(_) => Err(RuntimeError::Failed(format!(
                "command in {instance} did not finish within {timeout_s}s"
            ))),
        }
    }

    pub(super) async fn launch_test(&self, req: &TestMachineRequest) -> Result<TestMachine> {
        let d = self.docker().await?;
        let name = req.name.clone();
        let labels = HashMap::from([
            (tags::TEST_MACHINE.to_string(), self.settings.name.clone()),
            (tags::TEST_MACHINE_OWNER.to_string(), req.owner.clone()),
        ]);
        let body = ContainerCreateBody {
            image: Some(req.build_id.clone()),
            entrypoint: Some(vec![]),
            // Bounded: the container stops (and, auto-removed, goes) by
            // itself after its lifetime, even if csis is killed.
            cmd: Some(vec!["sleep".into(), req.lifetime_s.max(1).to_string()]),
            labels: Some(labels),
            host_config: Some(HostConfig {
                init: Some(true),
                auto_remove: Some(true),
                network_mode: Some(self.settings.network.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let opts = CreateContainerOptionsBuilder::default().name(&name).build();
        d.create_container(Some(opts), body).await.map_err(|e| {
            self.map_err(
                &format!("create test container {name} from {}", req.build_id),
                e,
            )
        })?;
        let guard = ContainerGuard::new(d.clone(), name.clone());
        d.start_container(
            &name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .map_err(|e| self.map_err(&format!("start test container {name}"), e))?;
        // It answers when a session command runs in it.
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(req.ready_timeout_s.max(1));
        loop {
            match self.run_session_command(&name, "true", 10).await {
                Ok(r) if r.exit_code == 0 => break,
                Ok(_) | Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(r) => {
                    let _ = guard.remove().await;
                    return Err(RuntimeError::Failed(format!(
                        "test container {name} does not answer: `true` exited {}",
                        r.exit_code
                    )));
                }
                Err(e) => {
                    let _ = guard.remove().await;
                    return Err(RuntimeError::Failed(format!(
                        "test container {name} does not answer within {}s: {e}",
                        req.ready_timeout_s
                    )));
                }
            }
        }
        let booted = self.query_instance_boot_image(&name).await.ok().flatten();
        guard.disarm();
        Ok(TestMachine { id: name, booted })
    }

    pub(super) async fn remove_test(&self, id: &str) -> Result<bool> {
        let d = self.docker().await?;
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match d.remove_container(id, Some(opts)).await {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            // auto-remove already under way
            Err(e) if is_conflict(&e) => Ok(true),
            Err(e) => Err(self.map_err(&format!("remove test container {id}"), e)),
        }
    }

    pub(super) async fn containers_and_volumes(&self) -> Result<Inventory> {
        let list = self.containers(HashMap::new()).await?;
        let mut instances: Vec<InstanceFacts> = list.into_iter().map(instance_facts).collect();
        instances.sort_by(|a, b| a.name.cmp(&b.name));
        // a kept failed bake is listed as one, not as a machine
        let kept_failed = self.kept_containers().await?;
        instances.retain(|i| !kept_failed.iter().any(|k| i.name.as_ref() == Some(&k.name)));
        let volumes = self.volumes().await?;
        Ok(Inventory {
            instances,
            volumes,
            kept_failed,
        })
    }

    /// Every volume on the daemon with its labels (`csis_config` among them), by name.
    pub async fn volumes(&self) -> Result<Vec<VolumeFacts>> {
        let d = self.docker().await?;
        let v = d
            .list_volumes(None::<ListVolumesOptions>)
            .await
            .map_err(|e| self.map_err("list volumes", e))?;
        let mut out: Vec<VolumeFacts> = v
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| VolumeFacts::new(v.name, v.labels.into_iter().collect()))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

fn last_lines(lines: &[String], n: usize) -> Vec<String> {
    lines[lines.len().saturating_sub(n)..].to_vec()
}
