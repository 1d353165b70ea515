//! The native bake: a bake container from the parent, the lowered recipe's
//! steps run in it (shell, scripts, ansible, uploads, assertions), then
//! committed with the build's labels and tagged; `packer-docker` builders
//! go to `runtime::packer`.

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{ContainerConfig, ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CommitContainerOptionsBuilder, CreateContainerOptionsBuilder};
use csis_runtime::recipe::{self, StepKind};
use csis_runtime::{BakeOutcome, BakeParent, BakeRequest, LogSink, Result, RuntimeError};

use super::containers::{ContainerGuard, Held};

/// The extra var every ansible step of a native bake gets: the original's
/// `image_version`, from `BASE_IMAGE_VERSION` (empty when it is not set).
pub const IMAGE_VERSION_VAR: &str = "image_version={{ lookup('env', 'BASE_IMAGE_VERSION') }}";
use super::exec::{stage_command, STAGE_DIR};
use super::DockerRuntime;
use crate::labels::{self, blanked_keys, BLANKED_LABEL, NAME_LABEL, REPOSITORY_LABEL};
use crate::names;
use csis_schema::tags;

impl DockerRuntime {
    /// What the lowering needs to know of a docker bake container: steps
    /// run as root unless a bake user is asked (then with `sudo`), no
    /// systemd, no session agent; the settle step installs `sudo` and
    /// `python3` where a package manager allows.
    pub fn target(&self, as_root: bool) -> recipe::Target {
        recipe::Target {
            runtime: self.settings.name.clone(),
            sudo: !as_root,
            systemd: false,
            settle: recipe::install_sudo_python_lines(),
            session_agent: None,
        }
    }

    pub(crate) async fn run_steps(&self, container: &str, req: &BakeRequest) -> Result<usize> {
        let log: &dyn LogSink = req.log.as_ref();
        // The bake user: root unless one is asked and exists in the image.
        let user: String = match req.bake_user.as_deref() {
            None | Some("root") => "0".into(),
            Some(u) => {
                let r = self
                    .exec(
                        container,
                        vec!["id".into(), "-u".into(), u.into()],
                        Some("0"),
                        vec![],
                        None,
                        &csis_runtime::NullLog,
                        true,
                    )
                    .await?;
                if r.exit_code == 0 {
                    u.to_string()
                } else {
                    log.line(&format!(
                        "bake user '{u}' does not exist in the image: steps run as root"
                    ));
                    "0".into()
                }
            }
        };
        let lowered = recipe::lower(req, &self.target(user == "0"))
            .map_err(|e| RuntimeError::Failed(format!("bake {}: {e}", req.label)))?;
        lowered.write_files(&req.emit_dir).map_err(|e| {
            RuntimeError::Failed(format!(
                "bake {}: writing under {}: {e}",
                req.label,
                req.emit_dir.display()
            ))
        })?;
        self.exec_steps(container, req, &user, &lowered.steps, 0)
            .await?;
        Ok(lowered.assertions)
    }

    /// Run lowered steps in a container as `user` (the settle step, the
    /// first of a lowering, always as root); `first` is the index of
    /// `steps[0]` in its lowering (step numbers in the log and messages).
    pub(crate) async fn exec_steps(
        &self,
        container: &str,
        req: &BakeRequest,
        user: &str,
        steps: &[recipe::Step],
        first: usize,
    ) -> Result<()> {
        let log: &dyn LogSink = req.log.as_ref();
        for (j, step) in steps.iter().enumerate() {
            let i = first + j;
            let n = i + 1;
            if !step.comment.is_empty() {
                log.line(&format!("==> step {n}: {}", step.comment));
            }
            let fail = |what: String| {
                RuntimeError::Failed(format!(
                    "bake {}: step {n} ({}) {what}",
                    req.label,
                    if step.comment.is_empty() {
                        "bundle"
                    } else {
                        step.comment.as_str()
                    }
                ))
            };
            match &step.kind {
                StepKind::Note => {}
                StepKind::Shell {
                    lines,
                    runner,
                    env,
                    execute_command,
                    ..
                } => {
                    // the settle step (the first) always runs as root
                    let who = if i == 0 { "0" } else { user };
                    let ec = execute_command
                        .as_deref()
                        .or(runner.then_some(recipe::STEP_EXECUTE_COMMAND));
                    let code = self
                        .run_script(
                            container,
                            &format!("step-{n}.sh"),
                            recipe::script_of(lines).as_bytes(),
                            Some(who),
                            ec,
                            env,
                            log,
                        )
                        .await?;
                    if code != 0 {
                        return Err(fail(format!("exited {code}")));
                    }
                }
                StepKind::Scripts {
                    scripts,
                    runner,
                    env,
                    execute_command,
                } => {
                    let ec = execute_command
                        .as_deref()
                        .or(runner.then_some(recipe::STEP_EXECUTE_COMMAND));
                    for (j, (rel, abs)) in scripts.iter().enumerate() {
                        let content = tokio::fs::read(abs)
                            .await
                            .map_err(|e| fail(format!("script {}: {e}", abs.display())))?;
                        let code = self
                            .run_script(
                                container,
                                &format!("step-{n}-script-{}.sh", j + 1),
                                &content,
                                Some(user),
                                ec,
                                env,
                                log,
                            )
                            .await?;
                        if code != 0 {
                            return Err(fail(format!("script {rel} exited {code}")));
                        }
                    }
                }
                StepKind::Ansible {
                    playbook,
                    extra_arguments,
                    binary,
                } => {
                    self.run_ansible(container, binary, &playbook.1, extra_arguments, req)
                        .await?;
                }
                StepKind::Upload { rel, destination } => {
                    self.upload_dir(container, &req.emit_dir.join(rel), destination)
                        .await
                        .map_err(|e| fail(format!("upload of {rel}: {e}")))?;
                }
                StepKind::Verify { lines, .. } => {
                    let mut script = String::from("#!/bin/sh\n");
                    for l in lines {
                        script.push_str(l);
                        script.push('\n');
                    }
                    let path = format!("{STAGE_DIR}/verify-{n}.sh");
                    let r = self
                        .exec(
                            container,
                            vec![
                                "/bin/sh".into(),
                                "-c".into(),
                                format!("{} || exit 201\nsh {path}", stage_command(&path)),
                            ],
                            Some("0"),
                            vec![],
                            Some(script.into_bytes()),
                            log,
                            true,
                        )
                        .await?;
                    if r.exit_code != 0 {
                        let why = r
                            .stderr
                            .lines()
                            .rev()
                            .find(|l| !l.trim().is_empty())
                            .unwrap_or("an assertion failed")
                            .to_string();
                        return Err(RuntimeError::Failed(format!(
                            "bake {}: {why} (exit {})",
                            req.label, r.exit_code
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The `ansible-playbook` command line for a bake container.
    pub fn ansible_command(
        &self,
        container: &str,
        binary: &str,
        playbook: &Path,
        extra: &[String],
    ) -> (Vec<String>, Vec<(String, String)>) {
        let mut args = vec![
            binary.to_string(),
            "-i".to_string(),
            format!("{container},"),
            "-c".to_string(),
            "docker".to_string(),
            "--extra-vars".to_string(),
            format!("ansible_connection=docker ansible_host={container}"),
            // the original's `image_version` (BASE_IMAGE_VERSION, as packer's
            // `local.image_version`): read by ansible from this process's
            // environment, so the value is never on a command line or in a log
            "-e".to_string(),
            IMAGE_VERSION_VAR.to_string(),
        ];
        args.extend(extra.iter().cloned());
        args.push(playbook.display().to_string());
        let mut env = self.settings.tool_environment();
        env.push(("ANSIBLE_NOCOLOR".into(), "1".into()));
        env.push(("ANSIBLE_FORCE_COLOR".into(), "0".into()));
        env.push(("ANSIBLE_HOST_KEY_CHECKING".into(), "False".into()));
        env.push(("ANSIBLE_RETRY_FILES_ENABLED".into(), "False".into()));
        env.push(("PYTHONUNBUFFERED".into(), "1".into()));
        // ansible's docker connection runs `docker` from PATH: put the runtime's binary first.
        let bin = Path::new(&self.settings.docker_binary);
        if let Some(dir) = bin.parent().filter(|d| !d.as_os_str().is_empty()) {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".into(), format!("{}:{path}", dir.display())));
        }
        (args, env)
    }

    pub(crate) async fn run_ansible(
        &self,
        container: &str,
        binary: &str,
        playbook: &Path,
        extra: &[String],
        req: &BakeRequest,
    ) -> Result<()> {
        let (args, env) = self.ansible_command(container, binary, playbook, extra);
        // a mod's `config:` (extra vars as JSON) is not logged: it may hold decrypted values
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.starts_with('{') {
                    "<config>".to_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        req.log.line(&format!("$ {}", shown.join(" ")));
        let mut cmd = tokio::process::Command::new(&args[0]);
        cmd.args(&args[1..])
            .envs(env)
            .current_dir(&req.tree_root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            RuntimeError::Failed(format!(
                "bake {}: `{}` cannot run: {e} (install ansible: Debian `apt-get install ansible`, or PyPI `ansible-core` plus the community.docker collection)",
                req.label, args[0]
            ))
        })?;
        let output = csis_runtime::stream_output(&mut child, req.log.clone(), 0);
        let status = child.wait().await.map_err(|e| {
            RuntimeError::Failed(format!("bake {}: ansible-playbook: {e}", req.label))
        })?;
        output.finish().await;
        if !status.success() {
            return Err(RuntimeError::Failed(format!(
                "bake {}: ansible-playbook {} exited {}",
                req.label,
                playbook.display(),
                status.code().unwrap_or(-1)
            )));
        }
        Ok(())
    }

    /// Create and start the bake container `name`, and answer the name it
    /// has: `name`, or `name-<pid>` when another csis holds `name` (two
    /// processes can start one series' bake in the same microsecond, the
    /// run id's grain: two trees or two checkouts on one daemon). A
    /// container that does not start is removed.
    pub(crate) async fn create_bake_container(
        &self,
        name: &str,
        parent: &str,
        req: &BakeRequest,
        storage_size: Option<&str>,
    ) -> Result<String> {
        let d = self.docker().await?;
        let mut host = HostConfig {
            init: Some(true),
            network_mode: Some(self.settings.network.clone()),
            tmpfs: Some(HashMap::from([(
                "/run".to_string(),
                "rw,exec,nosuid,nodev,mode=755".to_string(),
            )])),
            ..Default::default()
        };
        if let Some(size) = storage_size {
            host.storage_opt = Some(HashMap::from([("size".to_string(), size.to_string())]));
        }
        self.apply_machine_type(&mut host, req.machine_type.as_deref())?;
        let body = ContainerCreateBody {
            image: Some(parent.to_string()),
            labels: Some(self.bake_labels(Some(req))),
            // a vendor ENTRYPOINT would wrap the keepalive: reset it (an empty list, not none)
            entrypoint: Some(vec![]),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            host_config: Some(host),
            ..Default::default()
        };
        let create = |name: &str| {
            let opts = CreateContainerOptionsBuilder::default().name(name).build();
            d.create_container(Some(opts), body.clone())
        };
        let name = match create(name).await {
            Ok(_) => name.to_string(),
            Err(e) if crate::daemon::is_conflict(&e) => {
                let own = format!("{name}-{}", std::process::id());
                req.log.line(&format!(
                    "==> bake container {name} is another csis's (the same run id): {own}"
                ));
                create(&own).await.map_err(|e| {
                    self.map_err(&format!("create bake container {own} from {parent}"), e)
                })?;
                own
            }
            Err(e) => {
                return Err(self.map_err(&format!("create bake container {name} from {parent}"), e))
            }
        };
        if let Err(e) = d
            .start_container(
                &name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
        {
            let _ = crate::daemon::remove_container_forced(d, &name).await;
            return Err(self.map_err(&format!("start bake container {name}"), e));
        }
        Ok(name)
    }

    pub(crate) async fn commit_and_tag(
        &self,
        container: &str,
        parent_id: &str,
        req: &BakeRequest,
        made: &str,
    ) -> Result<String> {
        let d = self.docker().await?;
        let mut labels: HashMap<String, String> = req.tags.clone().into_iter().collect();
        // Labels are inherited from the parent: blank the parent's lineage labels this bake does not set.
        // (a label cannot be removed: the blanked keys are listed in BLANKED_LABEL)
        let parent_labels = self
            .inspect_image_opt(parent_id)
            .await?
            .and_then(|p| p.config)
            .and_then(|c| c.labels)
            .unwrap_or_default();
        let blanked = blanked_keys(&parent_labels, &req.tags);
        for k in &blanked {
            labels.insert(k.clone(), String::new());
        }
        labels.insert(BLANKED_LABEL.to_string(), blanked.join(","));
        labels.insert(NAME_LABEL.to_string(), made.to_string());
        labels.insert(REPOSITORY_LABEL.to_string(), self.repository.clone());
        // the container's own marks are not the image's (a commit merges them in)
        for (k, v) in labels::blanked_bake_marks() {
            labels.insert(k.to_string(), v.to_string());
        }
        // nor is a bake's `--keep-failed` mark (it was set for a failure)
        labels.insert(tags::KEPT_FAILED.to_string(), String::new());
        let opts = CommitContainerOptionsBuilder::default()
            .container(container)
            .pause(true)
            .comment(&format!("csis bake {}", req.label))
            .build();
        let cfg = ContainerConfig {
            labels: Some(labels),
            entrypoint: Some(vec![]),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            ..Default::default()
        };
        let id = d
            .commit_container(opts, cfg)
            .await
            .map_err(|e| self.map_err(&format!("commit {container}"), e))?
            .id;
        for line in self
            .name_build(&id, made, Some(&req.prefix), req.tags.get(tags::CONFIG))
            .await?
            .1
        {
            req.log.line(&line);
        }
        Ok(id)
    }

    /// Tag a committed build as a bake does: its name as made, then (with a
    /// series) its series' movable tag `<repository>:<series>`, moved onto it unless
    /// the tag names a build of another tree (another `csis_config`: two
    /// trees on one repository), which keeps it. Returns the tags given and
    /// a line for each movable tag not moved.
    pub(crate) async fn name_build(
        &self,
        id: &str,
        made: &str,
        series: Option<&str>,
        config: Option<&String>,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let mut given = Vec::new();
        let mut notes = Vec::new();
        self.tag(id, made).await?;
        given.push(self.tag_ref(made));
        let Some(series) = series else {
            return Ok((given, notes));
        };
        let prefix = names::image_name_as_made(series);
        if prefix != made {
            let holder = self.inspect_image_opt(&self.tag_ref(&prefix)).await?;
            let held_by = holder.and_then(|h| {
                let other = h
                    .config
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(tags::CONFIG).cloned())
                    .filter(|c| !c.is_empty())
                    .filter(|c| config.is_some_and(|ours| !tags::is_config_of(c, ours)))?;
                Some((h.id.unwrap_or_default(), other))
            });
            match held_by {
                Some((other_id, other)) if other_id != id => notes.push(format!(
                    "movable tag {} not moved: it names {other_id}, a build of another tree (csis_config {other}) on this repository",
                    self.tag_ref(&prefix)
                )),
                _ => {
                    self.tag(id, &prefix).await?;
                    given.push(self.tag_ref(&prefix));
                }
            }
        }
        Ok((given, notes))
    }

    /// [`Runtime::adopt`]: tag a build an interrupted bake committed and
    /// did not tag, from its own labels (its name as made, its series,
    /// its tree); the movable tag only when it becomes the `head`.
    pub(crate) async fn adopt_build(&self, build_id: &str, head: bool) -> Result<Vec<String>> {
        let img = self.inspect_image_opt(build_id).await?.ok_or_else(|| {
            RuntimeError::Refused(format!("image {build_id} is not on the daemon"))
        })?;
        let id = img.id.clone().unwrap_or_else(|| build_id.to_string());
        let labels = img.config.and_then(|c| c.labels).unwrap_or_default();
        let series = labels
            .get(tags::SERIES)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                RuntimeError::Refused(format!("image {build_id} carries no {}", tags::SERIES))
            })?;
        let made = labels
            .get(NAME_LABEL)
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| names::image_name_as_made(series));
        let (given, notes) = self
            .name_build(
                &id,
                &made,
                head.then_some(series.as_str()),
                labels.get(tags::CONFIG),
            )
            .await?;
        Ok(given
            .into_iter()
            .map(|t| format!("tagged {t}"))
            .chain(notes)
            .collect())
    }

    /// What a bake starts from on the daemon: the resolved vendor image, the
    /// parent build's id, or, for a parent baking earlier in this run, its
    /// movable tag `<repository>:<series>` (what every bake of a series
    /// tags its build with, [`BakeRequest::prefix`]).
    pub fn parent_ref(&self, req: &BakeRequest) -> String {
        match &req.parent {
            BakeParent::Vendor(r) => r.id.clone(),
            BakeParent::Build { build_id, .. } => build_id.clone(),
            BakeParent::Deferred { series, .. } => self.tag_ref(&names::image_name_as_made(series)),
        }
    }

    pub(super) async fn emit_root(&self, req: &BakeRequest) -> Result<Vec<std::path::PathBuf>> {
        if self
            .settings
            .packer_builders
            .contains_key(&req.image_builder)
        {
            self.emit_packer_root(req).await
        } else {
            Ok(Vec::new())
        }
    }

    /// A failed bake under `--keep-failed`: its container kept
    /// ([`Self::keep_failed`]) and the error naming it, with the commands
    /// to inspect and to remove it; a container that cannot be kept is
    /// removed, and the error says so.
    async fn kept_failed_error(
        &self,
        container: &str,
        why: String,
        req: &BakeRequest,
    ) -> RuntimeError {
        match self.keep_failed(container).await {
            Ok(kept) => {
                let line = format!(
                    "bake container kept as {kept} (csis_kept_failed={}): inspect with `{}`; remove with `csis empty --runtime {} --remove`",
                    req.tags.get(tags::RUN).map(String::as_str).unwrap_or(""),
                    self.inspect_command(&kept),
                    self.settings.name
                );
                req.log.line(&format!("==> {line}"));
                RuntimeError::Failed(format!("{why}; {line}"))
            }
            Err(e) => {
                let d = self.docker().await;
                if let Ok(d) = d {
                    let _ = super::containers::remove_container_forced(d, container).await;
                }
                RuntimeError::Failed(format!(
                    "{why}; the bake container could not be kept ({e}) and was removed"
                ))
            }
        }
    }

    pub(super) async fn bake_image(&self, req: &BakeRequest) -> Result<BakeOutcome> {
        if let Some(p) = names::image_name_problem(&req.final_name) {
            return Err(RuntimeError::Refused(format!("{}: {p}", req.label)));
        }
        for k in req.tags.keys() {
            if let Some(p) = names::label_key_problem(k) {
                return Err(RuntimeError::Refused(format!("{}: {p}", req.label)));
            }
        }
        if req.cancel.is_cancelled() {
            return Err(RuntimeError::Cancelled);
        }
        if let Some(packer) = self.settings.packer_builders.get(&req.image_builder) {
            return self.packer_bake(req, packer).await;
        }
        let d = self.docker().await?.clone();
        let made = names::image_name_as_made(&req.final_name);
        let container = names::bake_container_name(
            &self.settings.name,
            &req.series,
            req.tags.get(tags::RUN).map(String::as_str),
        );
        let parent = self.parent_ref(req);
        let parent_img = match self.inspect_image_opt(&parent).await? {
            Some(i) => i,
            None => match &req.parent {
                BakeParent::Vendor(_) => {
                    self.pull(&parent, None).await?;
                    self.inspect_image_opt(&parent).await?.ok_or_else(|| {
                        RuntimeError::Refused(format!(
                            "{}: parent image '{parent}' is not on the daemon",
                            req.label
                        ))
                    })?
                }
                BakeParent::Build { series, .. } | BakeParent::Deferred { series, .. } => {
                    return Err(RuntimeError::Refused(format!(
                        "{}: the parent build {parent} of series {series} is not on the daemon",
                        req.label
                    )))
                }
            },
        };
        let parent_id = parent_img.id.clone().unwrap_or(parent.clone());
        // A container of this run's name is a leftover only when its owner is gone.
        match self.clear_bake_name(&container).await {
            Ok(Held::Removed) => req.log.line(&format!(
                "==> removing stale bake container {container} (left by an interrupted csis)"
            )),
            // another csis's run of the same run id: this bake takes
            // another name when it creates its container
            Ok(Held::Free | Held::Live(_)) => {}
            Err(e) => return Err(RuntimeError::Failed(format!("{}: {e}", req.label))),
        }
        req.log
            .line(&format!("==> bake container {container} from {parent}"));
        let storage_size = self
            .bake_disk_limit(req.disk_size_gb, &parent_id, req.log.as_ref())
            .await?;
        let container = self
            .create_bake_container(&container, &parent_id, req, storage_size.as_deref())
            .await?;
        let guard = ContainerGuard::bake(d.clone(), container.clone());
        let work = self.run_steps(&container, req);
        let result = tokio::select! {
            r = work => r,
            _ = req.cancel.cancelled() => Err(RuntimeError::Cancelled),
        };
        let result = match result {
            Ok(assertions) if !req.cancel.is_cancelled() => {
                req.log
                    .line(&format!("==> commit {}:{made}", self.repository));
                self.commit_and_tag(&container, &parent_id, req, &made)
                    .await
                    .map(|id| (id, assertions))
            }
            Ok(_) => Err(RuntimeError::Cancelled),
            Err(e) => Err(e),
        };
        let result = match result {
            Err(RuntimeError::Failed(why)) if req.keep_failed && !req.cancel.is_cancelled() => {
                guard.disarm();
                return Err(self.kept_failed_error(&container, why, req).await);
            }
            r => r,
        };
        let removed = guard.remove().await;
        req.log
            .line(&format!("==> removed bake container {container}"));
        let (build_id, assertions) = result?;
        if let Err(e) = removed {
            req.log.line(&format!(
                "warning: bake container {container} not removed: {e}"
            ));
        }
        Ok(BakeOutcome {
            build_id,
            name: made,
            assertions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::DockerSettings;

    #[test]
    fn ansible_command_line() {
        let mut s = DockerSettings::new("d");
        s.host = Some("ssh://u@h".into());
        let r = DockerRuntime::new(s).unwrap();
        let (args, env) = r.ansible_command(
            "csis-bake-d-web",
            "ansible-playbook",
            Path::new("/t/site.yml"),
            &["-v".into()],
        );
        assert_eq!(
            args,
            vec![
                "ansible-playbook",
                "-i",
                "csis-bake-d-web,",
                "-c",
                "docker",
                "--extra-vars",
                "ansible_connection=docker ansible_host=csis-bake-d-web",
                "-e",
                IMAGE_VERSION_VAR,
                "-v",
                "/t/site.yml"
            ]
        );
        assert!(env.contains(&("DOCKER_HOST".into(), "ssh://u@h".into())));
    }
}
