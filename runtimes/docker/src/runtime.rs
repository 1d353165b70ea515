//! `DockerRuntime`: every hook answered against the daemon through the Engine API.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerConfig, ContainerCreateBody, HostConfig, ImageInspect, ImageSummary,
};
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, CreateContainerOptionsBuilder, CreateImageOptionsBuilder,
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, ListVolumesOptions,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder, StopContainerOptionsBuilder,
    TagImageOptionsBuilder,
};
use bollard::Docker;
use csis_runtime::{
    BakeOutcome, BakeParent, BakeRequest, DisposeOutcome, ImageFacts, InstanceFacts, Inventory,
    LogSink, OnlineFinding, PowerState, PreflightLine, ResolveRequest, ResolvedImage, Result,
    Runtime, RuntimeError, SessionResult, TestMachine, TestMachineRequest, VerifyCheck,
    VolumeFacts, LINEAGE_PREFIX, TEST_MACHINE_MARK, TEST_MACHINE_OWNER,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::OnceCell;

use csis_runtime::recipe::{self, StepKind};

use crate::connect::{self, Endpoint};
use crate::names;
use crate::query;
use crate::script;
use crate::settings::{parse_memory, DockerSettings};
use crate::version;

/// Label carrying the final name as made (outside the `csis_` lineage prefix).
pub const NAME_LABEL: &str = "csis.name";
/// A bake container's mark: the runtime whose bake it is.
pub const BAKE_LABEL: &str = "csis.bake";
/// A bake container's owner: `<host>:<pid>` of the csis that runs it.
pub const BAKE_OWNER_LABEL: &str = "csis.bake_owner";
/// The repository a committed build belongs to (found again untagged, when
/// a kill came between `docker commit` and its tag).
pub const REPOSITORY_LABEL: &str = "csis.repository";
/// Label listing the parent's lineage labels a bake blanked (labels are
/// inherited and cannot be removed); `query_images` leaves them out.
pub const BLANKED_LABEL: &str = "csis.blanked";
/// Where bake scripts are written in the bake container (`/run` is a tmpfs: never committed).
const STAGE_DIR: &str = "/run/csis";

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

/// What an exec gave.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

fn is_conflict(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            ..
        }
    )
}

/// An error with its causes (`client error (Connect): Connection refused (os error 111)`).
fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = c.source();
    }
    out.replace('\n', " ")
}

fn api_message(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Why a storage driver cannot limit a container's disk (`--storage-opt
/// size=`), when that is known from `docker info` alone: fuse-overlayfs,
/// aufs and overlay have no size option; overlay2 has one only on xfs
/// mounted with `pquota`. `None`: the driver may apply it (a bake finds out).
pub fn driver_disk_problem(driver: &str, status: &[Vec<String>]) -> Option<String> {
    let backing = status
        .iter()
        .find(|kv| kv.first().map(String::as_str) == Some("Backing Filesystem"))
        .and_then(|kv| kv.get(1))
        .map(String::as_str);
    match driver {
        "fuse-overlayfs" | "aufs" | "overlay" => Some(format!(
            "storage driver {driver} has no per-container size option (--storage-opt size=)"
        )),
        "overlay2" => match backing {
            Some(fs) if fs != "xfs" => Some(format!(
                "storage driver overlay2 on {fs} has no per-container size limit (--storage-opt size= needs overlay2 on xfs mounted with pquota)"
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The parent's lineage labels (`csis_*`) a bake does not set, sorted: its
/// image inherits them, so they are blanked (a label cannot be removed) and
/// listed in [`BLANKED_LABEL`], for [`Runtime::query_images`] to leave out.
pub fn blanked_keys(
    parent_labels: &HashMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out: Vec<String> = parent_labels
        .keys()
        .filter(|k| k.starts_with(LINEAGE_PREFIX) && !tags.contains_key(*k))
        .cloned()
        .collect();
    out.sort();
    out
}

/// The shell that writes stdin to `path` in the stage directory, executable.
fn stage_command(path: &str) -> String {
    format!("mkdir -p {STAGE_DIR} && cat > {path} && chmod 0755 {path}")
}

/// The keys an image's [`BLANKED_LABEL`] lists (what [`blanked_keys`]
/// wrote): inherited labels that are not the image's own.
fn listed_blanked(labels: &HashMap<String, String>) -> Vec<String> {
    labels
        .get(BLANKED_LABEL)
        .map(|b| {
            b.split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Is this bake container left behind by a csis that is gone? Its owner
/// label names a process of this host that is not running, or (another
/// host's, or a container without an owner label) it was created more than
/// [`csis_runtime::owner::STALE_AFTER`] ago. Never by its name alone.
fn left_behind(c: &bollard::models::ContainerSummary) -> bool {
    let owner = c.labels.as_ref().and_then(|l| l.get(BAKE_OWNER_LABEL));
    let created = c
        .created
        .and_then(|t| u64::try_from(t).ok())
        .map(|t| std::time::UNIX_EPOCH + Duration::from_secs(t));
    csis_runtime::owner::is_left_behind(
        owner.map(String::as_str),
        created,
        std::time::SystemTime::now(),
        csis_runtime::owner::STALE_AFTER,
        &csis_runtime::owner::host_name(),
    )
}

/// An image no tag names (`<none>:<none>` is how older daemons list none).
fn is_untagged(i: &ImageSummary) -> bool {
    i.repo_tags
        .iter()
        .all(|t| t.is_empty() || t == "<none>:<none>")
}

/// The images whose parent is `id`, sorted.
fn children_of(graph: &HashMap<String, ImageSummary>, id: &str) -> Vec<String> {
    let mut out: Vec<String> = graph
        .values()
        .filter(|i| i.parent_id == id)
        .map(|i| i.id.clone())
        .collect();
    out.sort();
    out
}

/// The ancestors of `id` that are csis builds without a tag (disposed while
/// a child stood on them), nearest first, up to the first one that is not.
fn untagged_builds_above(graph: &HashMap<String, ImageSummary>, id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = graph.get(id).map(|i| i.parent_id.clone());
    while let Some(p) = cur.filter(|p| !p.is_empty()) {
        match graph.get(&p) {
            Some(i) if is_untagged(i) && i.labels.contains_key(NAME_LABEL) => {
                out.push(p.clone());
                cur = Some(i.parent_id.clone());
            }
            _ => break,
        }
    }
    out
}

/// Unix seconds as RFC 3339 (UTC).
pub fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Splits a byte stream into lines for a log sink.
struct LineSplitter<'a> {
    buf: Vec<u8>,
    sink: &'a dyn LogSink,
    prefix: &'static str,
}

impl<'a> LineSplitter<'a> {
    fn new(sink: &'a dyn LogSink, prefix: &'static str) -> Self {
        LineSplitter {
            buf: Vec::new(),
            sink,
            prefix,
        }
    }
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            self.sink
                .line(&format!("{}{}", self.prefix, text.trim_end_matches('\r')));
        }
    }
    fn finish(&mut self) {
        if !self.buf.is_empty() {
            let text = String::from_utf8_lossy(&self.buf).to_string();
            self.sink.line(&format!("{}{}", self.prefix, text));
            self.buf.clear();
        }
    }
}

/// Removes the bake container when dropped without [`ContainerGuard::disarm`]
/// (a bake future dropped mid-way), as a spawned task.
pub(crate) struct ContainerGuard {
    docker: Docker,
    name: String,
    armed: bool,
}

impl ContainerGuard {
    pub(crate) fn new(docker: Docker, name: String) -> Self {
        ContainerGuard {
            docker,
            name,
            armed: true,
        }
    }

    /// Keep the container: the caller owns it from now on.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    pub(crate) async fn remove(mut self) -> std::result::Result<(), String> {
        self.armed = false;
        remove_container_forced(&self.docker, &self.name)
            .await
            .map(drop)
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                let docker = self.docker.clone();
                let name = self.name.clone();
                h.spawn(async move {
                    let _ = remove_container_forced(&docker, &name).await;
                });
            }
        }
    }
}

/// Remove a container, running or not, with its anonymous volumes; `true`
/// when there was one to remove.
pub(crate) async fn remove_container_forced(
    docker: &Docker,
    name: &str,
) -> std::result::Result<bool, String> {
    let opts = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(name, Some(opts)).await {
        Ok(()) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(api_message(&e)),
    }
}

fn tar_of_file(path: &str, content: &[u8], mode: u32) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(content.len() as u64);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_cksum();
    b.append_data(&mut h, path.trim_start_matches('/'), content)?;
    b.into_inner()
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

    fn unreachable(&self, cause: &str) -> RuntimeError {
        let remedy = self
            .endpoint
            .as_ref()
            .map(connect::remedy)
            .unwrap_or("fix the runtime's host/context");
        RuntimeError::Unavailable(format!(
            "docker runtime {}: the daemon at {} cannot be reached ({cause}); {remedy}",
            self.settings.name,
            self.address()
        ))
    }

    /// The client, connected and with the API version negotiated (once).
    pub async fn docker(&self) -> Result<&Docker> {
        self.docker
            .get_or_try_init(|| async {
                let e = self.endpoint.as_ref().map_err(|e| self.unreachable(e))?;
                if let Some(p) = connect::ssh_port_problem(&e.host) {
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

    fn map_err(&self, what: &str, e: bollard::errors::Error) -> RuntimeError {
        match &e {
            bollard::errors::Error::DockerResponseServerError { .. } => {
                RuntimeError::Failed(format!(
                    "docker runtime {}: {what}: {}",
                    self.settings.name,
                    api_message(&e)
                ))
            }
            bollard::errors::Error::HyperResponseError { .. }
            | bollard::errors::Error::IOError { .. }
            | bollard::errors::Error::RequestTimeoutError => self.unreachable(&cause_chain(&e)),
            _ => RuntimeError::Failed(format!(
                "docker runtime {}: {what}: {e}",
                self.settings.name
            )),
        }
    }

    pub(crate) async fn inspect_image_opt(&self, reference: &str) -> Result<Option<ImageInspect>> {
        let d = self.docker().await?;
        match d.inspect_image(reference).await {
            Ok(i) => Ok(Some(i)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.map_err(&format!("inspect image {reference}"), e)),
        }
    }

    /// Pull `reference`; `Err` names it.
    async fn pull(&self, reference: &str, platform: Option<&str>) -> Result<()> {
        let d = self.docker().await?;
        let mut b = CreateImageOptionsBuilder::default().from_image(reference);
        if let Some(p) = platform {
            b = b.platform(p);
        }
        let mut s = d.create_image(Some(b.build()), None, None);
        while let Some(item) = s.next().await {
            if let Err(e) = item {
                return Err(RuntimeError::Refused(format!(
                    "docker runtime {}: image '{reference}' is not on the daemon and cannot be pulled: {}",
                    self.settings.name,
                    api_message(&e)
                )));
            }
        }
        Ok(())
    }

    /// Run `cmd` in a container, streaming each output line to `log` and
    /// keeping stdout/stderr when `capture`.
    #[allow(clippy::too_many_arguments)]
    pub async fn exec(
        &self,
        container: &str,
        cmd: Vec<String>,
        user: Option<&str>,
        env: Vec<String>,
        stdin: Option<Vec<u8>>,
        log: &dyn LogSink,
        capture: bool,
    ) -> Result<ExecOutput> {
        let d = self.docker().await?;
        let created = d
            .create_exec(
                container,
                CreateExecOptions::<String> {
                    attach_stdin: Some(stdin.is_some()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(cmd),
                    env: if env.is_empty() { None } else { Some(env) },
                    user: user.map(str::to_string),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| self.map_err(&format!("exec in {container}"), e))?;
        let started = d
            .start_exec(&created.id, None::<StartExecOptions>)
            .await
            .map_err(|e| self.map_err(&format!("exec in {container}"), e))?;
        let mut out = ExecOutput::default();
        if let StartExecResults::Attached {
            mut output,
            mut input,
        } = started
        {
            if let Some(bytes) = stdin {
                let write = async {
                    input.write_all(&bytes).await?;
                    input.flush().await?;
                    input.shutdown().await
                };
                write.await.map_err(|e| {
                    RuntimeError::Failed(format!("exec in {container}: writing stdin: {e}"))
                })?;
            }
            let mut so = LineSplitter::new(log, "");
            let mut se = LineSplitter::new(log, "");
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                        so.push(&message);
                        if capture {
                            out.stdout.push_str(&String::from_utf8_lossy(&message));
                        }
                    }
                    Ok(LogOutput::StdErr { message }) => {
                        se.push(&message);
                        if capture {
                            out.stderr.push_str(&String::from_utf8_lossy(&message));
                        }
                    }
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(e) => return Err(self.map_err(&format!("exec in {container}"), e)),
                }
            }
            so.finish();
            se.finish();
        }
        // The exit code can lag the end of the stream by a moment.
        for _ in 0..50 {
            let i = d
                .inspect_exec(&created.id)
                .await
                .map_err(|e| self.map_err(&format!("exec in {container}"), e))?;
            if i.running != Some(true) {
                out.exit_code = i.exit_code.unwrap_or(-1);
                return Ok(out);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(RuntimeError::Failed(format!(
            "exec in {container}: no exit code after its output ended"
        )))
    }

    /// Write a file into the bake container's staging dir (a tmpfs) through
    /// exec stdin, and return its path.
    async fn stage(&self, container: &str, name: &str, content: &[u8]) -> Result<String> {
        let path = format!("{STAGE_DIR}/{name}");
        let r = self
            .exec(
                container,
                vec!["/bin/sh".into(), "-c".into(), stage_command(&path)],
                Some("0"),
                vec![],
                Some(content.to_vec()),
                &csis_runtime::NullLog,
                true,
            )
            .await?;
        if r.exit_code != 0 {
            // Fall back to the archive upload API.
            let tar = tar_of_file(&path, content, 0o755)
                .map_err(|e| RuntimeError::Failed(format!("staging {name}: {e}")))?;
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
            .map_err(|e| self.map_err(&format!("copy {name} into {container}"), e))?;
        }
        Ok(path)
    }

    /// Stage and run a script with `execute_command` (packer's shell semantics).
    #[allow(clippy::too_many_arguments)]
    async fn run_script(
        &self,
        container: &str,
        file: &str,
        content: &[u8],
        user: Option<&str>,
        execute_command: Option<&str>,
        env: &[String],
        log: &dyn LogSink,
    ) -> Result<i64> {
        let (cmd, stdin) = if user.is_none_or(|u| u == "0" || u == "root") {
            // one exec: stage the script from stdin into the tmpfs, then run it
            let path = format!("{STAGE_DIR}/{file}");
            let cmd = format!(
                "{} || {{ echo 'csis: cannot write {path} in the bake container' >&2; exit 201; }}\n{}",
                stage_command(&path),
                script::execute_command(execute_command, &path, env)
            );
            (cmd, Some(content.to_vec()))
        } else {
            let path = self.stage(container, file, content).await?;
            (script::execute_command(execute_command, &path, env), None)
        };
        let r = self
            .exec(
                container,
                vec!["/bin/sh".into(), "-c".into(), cmd],
                user,
                vec![],
                stdin,
                log,
                false,
            )
            .await?;
        Ok(r.exit_code)
    }

    fn tag_ref(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository)
    }

    async fn tag(&self, image: &str, tag: &str) -> Result<()> {
        let d = self.docker().await?;
        let opts = TagImageOptionsBuilder::default()
            .repo(&self.repository)
            .tag(tag)
            .build();
        d.tag_image(image, Some(opts))
            .await
            .map_err(|e| self.map_err(&format!("tag {image} as {}", self.tag_ref(tag)), e))
    }

    /// Untag one `repo:tag` (never deletes an image that has other tags).
    async fn untag(&self, repo_tag: &str) -> Result<()> {
        let d = self.docker().await?;
        let opts = RemoveImageOptionsBuilder::default().noprune(true).build();
        match d.remove_image(repo_tag, Some(opts), None).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.map_err(&format!("untag {repo_tag}"), e)),
        }
    }

    /// The image id of a build id or reference, `None` when absent.
    async fn image_id_of(&self, build: &str) -> Result<Option<(String, Vec<String>)>> {
        Ok(self.inspect_image_opt(build).await?.map(|i| {
            (
                i.id.unwrap_or_else(|| build.to_string()),
                i.repo_tags.unwrap_or_default(),
            )
        }))
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

    /// Does the daemon limit a container's writable layer to `gb` GB
    /// (`--storage-opt size=<gb>G`)? `Err` says why not: the storage driver
    /// refuses the option (overlay2 unless on xfs with `pquota`,
    /// fuse-overlayfs, aufs, ...). Found once per size by creating (never
    /// starting) a container from `image` with the option, and again without
    /// it when refused, so that only the option is blamed.
    pub async fn disk_size_support(
        &self,
        image: &str,
        gb: u32,
    ) -> Result<std::result::Result<(), String>> {
        let mut known = self.disk_limits.lock().await;
        if let Some(r) = known.get(&gb) {
            return Ok(r.clone());
        }
        let d = self.docker().await?;
        let driver = d
            .info()
            .await
            .map_err(|e| self.map_err("daemon info", e))?
            .driver
            .unwrap_or_default();
        let body = |size: Option<String>| ContainerCreateBody {
            image: Some(image.to_string()),
            labels: Some(self.bake_labels(None)),
            entrypoint: Some(vec![]),
            cmd: Some(vec!["true".into()]),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                storage_opt: size.map(|s| HashMap::from([("size".to_string(), s)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Named like a bake container, per process and marked with its owner:
        // one a killed csis leaves is removed by the next clean_stale_bakes.
        let probe = format!(
            "{}.disk-probe-{}",
            names::bake_container_prefix(&self.settings.name),
            std::process::id()
        );
        let create = |size: Option<String>| {
            let opts = CreateContainerOptionsBuilder::default()
                .name(&probe)
                .build();
            d.create_container(Some(opts), body(size))
        };
        let gone = |r: std::result::Result<bool, String>| {
            r.map(drop).map_err(|e| {
                RuntimeError::Failed(format!(
                    "docker runtime {}: probe container {probe} cannot be removed: {e}",
                    self.settings.name
                ))
            })
        };
        gone(remove_container_forced(d, &probe).await)?;
        let verdict = match create(Some(format!("{gb}G"))).await {
            Ok(_) => {
                gone(remove_container_forced(d, &probe).await)?;
                Ok(())
            }
            Err(with) => {
                create(None)
                    .await
                    .map_err(|e| self.map_err(&format!("create a container from {image}"), e))?;
                gone(remove_container_forced(d, &probe).await)?;
                Err(format!(
                    "the daemon's storage driver {driver} refuses --storage-opt size={gb}G ({})",
                    api_message(&with).trim()
                ))
            }
        };
        known.insert(gb, verdict.clone());
        Ok(verdict)
    }

    /// The `--storage-opt size=` value a bake's container gets (`None`: no
    /// disk size, or the daemon cannot apply it; the bake log says which).
    pub(crate) async fn bake_disk_limit(
        &self,
        disk_size_gb: Option<u32>,
        image: &str,
        log: &dyn LogSink,
    ) -> Result<Option<String>> {
        let Some(gb) = disk_size_gb else {
            return Ok(None);
        };
        Ok(match self.disk_size_support(image, gb).await? {
            Ok(()) => {
                log.line(&format!(
                    "==> disk: the bake container's writable layer is limited to {gb} GB (--storage-opt size={gb}G)"
                ));
                Some(format!("{gb}G"))
            }
            Err(why) => {
                log.line(&format!(
                    "warning: disk size {gb} GB is not applied on docker runtime {}: {why}; the bake container's writable layer is bounded only by the daemon's free space",
                    self.settings.name
                ));
                None
            }
        })
    }

    /// Every image on the daemon (intermediate ones included), by id.
    async fn image_graph(&self) -> Result<HashMap<String, ImageSummary>> {
        let d = self.docker().await?;
        let opts = ListImagesOptionsBuilder::default().all(true).build();
        let list = d
            .list_images(Some(opts))
            .await
            .map_err(|e| self.map_err("list images", e))?;
        Ok(list.into_iter().map(|i| (i.id.clone(), i)).collect())
    }

    /// The labels of a bake container: this runtime's bake mark, the owner
    /// (`<host>:<pid>`), and the bake's config id, series and run.
    pub(crate) fn bake_labels(&self, req: Option<&BakeRequest>) -> HashMap<String, String> {
        let mut l = HashMap::from([
            (BAKE_LABEL.to_string(), self.settings.name.clone()),
            (
                BAKE_OWNER_LABEL.to_string(),
                csis_runtime::owner::bake_owner(),
            ),
        ]);
        if let Some(req) = req {
            for k in [csis_runtime::CONFIG_TAG, "csis_series", "csis_run"] {
                if let Some(v) = req.tags.get(k) {
                    l.insert(k.to_string(), v.clone());
                }
            }
        }
        l
    }

    /// Remove the bake container `name` when it is left behind (its owner
    /// is gone on this host, or it is another host's and older than a
    /// day); `Ok(false)` when there is none. A live owner's container is
    /// never removed: that is an error naming its owner.
    pub(crate) async fn remove_left_behind(&self, name: &str) -> Result<bool> {
        let d = self.docker().await?;
        let list = self
            .containers(HashMap::from([(
                "name".to_string(),
                vec![name.to_string()],
            )]))
            .await?;
        let Some(c) = list.into_iter().find(|c| {
            c.names
                .iter()
                .flatten()
                .any(|n| n.trim_start_matches('/') == name)
        }) else {
            return Ok(false);
        };
        if !left_behind(&c) {
            return Err(RuntimeError::Failed(format!(
                "bake container {name} belongs to a running csis ({}): not removed",
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(BAKE_OWNER_LABEL))
                    .map(String::as_str)
                    .unwrap_or("owner unknown")
            )));
        }
        remove_container_forced(d, name)
            .await
            .map_err(|e| RuntimeError::Failed(format!("removing stale bake container {name}: {e}")))
    }

    async fn containers(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<bollard::models::ContainerSummary>> {
        let d = self.docker().await?;
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        d.list_containers(Some(opts))
            .await
            .map_err(|e| self.map_err("list containers", e))
    }

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

    async fn run_steps(&self, container: &str, req: &BakeRequest) -> Result<usize> {
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
        for (i, step) in lowered.steps.iter().enumerate() {
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
                } => {
                    // the settle step (the first) always runs as root
                    let who = if i == 0 { "0" } else { user.as_str() };
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
                                Some(user.as_str()),
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
        Ok(lowered.assertions)
    }

    /// Copy a local directory's contents into the container at `destination`.
    async fn upload_dir(&self, container: &str, dir: &Path, destination: &str) -> Result<()> {
        let dir = dir.to_path_buf();
        let tar = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
            let mut b = tar::Builder::new(Vec::new());
            b.follow_symlinks(false);
            b.append_dir_all(".", &dir)?;
            b.into_inner()
        })
        .await
        .map_err(|e| RuntimeError::Failed(e.to_string()))?
        .map_err(|e| RuntimeError::Failed(e.to_string()))?;
        let d = self.docker().await?;
        d.upload_to_container(
            container,
            Some(bollard::query_parameters::UploadToContainerOptions {
                path: destination.into(),
                ..Default::default()
            }),
            bollard::body_full(tar.into()),
        )
        .await
        .map_err(|e| self.map_err(&format!("copy into {container}:{destination}"), e))
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

    async fn run_ansible(
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

    async fn create_bake_container(
        &self,
        name: &str,
        parent: &str,
        req: &BakeRequest,
        storage_size: Option<&str>,
    ) -> Result<()> {
        let d = self.docker().await?;
        let mt = self
            .settings
            .machine_type(req.machine_type.as_deref())
            .map_err(RuntimeError::Refused)?;
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
        if let Some(m) = mt {
            host.nano_cpus = m.cpus.map(|c| (c * 1e9) as i64);
            if let Some(mem) = &m.memory {
                host.memory = Some(parse_memory(mem).map_err(RuntimeError::Refused)?);
            }
        }
        let body = ContainerCreateBody {
            image: Some(parent.to_string()),
            labels: Some(self.bake_labels(Some(req))),
            // a vendor ENTRYPOINT would wrap the keepalive: reset it (an empty list, not none)
            entrypoint: Some(vec![]),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            host_config: Some(host),
            ..Default::default()
        };
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        d.create_container(Some(opts), body)
            .await
            .map_err(|e| self.map_err(&format!("create bake container {name} from {parent}"), e))?;
        d.start_container(
            name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .map_err(|e| self.map_err(&format!("start bake container {name}"), e))?;
        Ok(())
    }

    async fn commit_and_tag(
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
        labels.insert(BAKE_LABEL.to_string(), String::new());
        labels.insert(BAKE_OWNER_LABEL.to_string(), String::new());
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
        self.tag(&id, made).await?;
        let prefix = names::image_name_as_made(&req.prefix);
        if prefix != made {
            self.tag(&id, &prefix).await?;
        }
        Ok(id)
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

    /// The movable tags of an image (by short id) in this repository: key -> (value, repo tag).
    fn movable_of(&self, tags: &[String], image_id: &str) -> BTreeMap<String, (String, String)> {
        let short = names::short_id(image_id);
        let mut out = BTreeMap::new();
        for rt in tags {
            if let Some(tag) = names::tag_in_repository(rt, &self.repository) {
                if let Some((s, k, v)) = names::parse_movable_tag(tag) {
                    if s == short {
                        out.insert(k, (v, rt.clone()));
                    }
                }
            }
        }
        out
    }

    fn docker_cli_prefix(&self) -> String {
        let mut s = script::sq(&self.settings.docker_binary);
        if let Some(h) = &self.settings.host {
            s.push_str(&format!(" -H {}", script::sq(h)));
            if self.settings.tls.verify {
                s.push_str(" --tlsverify");
            }
            if let Some(p) = &self.settings.tls.cert_path {
                let p = p.display();
                s.push_str(&format!(
                    " --tlscacert {0}/ca.pem --tlscert {0}/cert.pem --tlskey {0}/key.pem",
                    script::sq(&p.to_string())
                ));
            }
        } else if let Some(c) = &self.settings.context {
            s.push_str(&format!(" --context {}", script::sq(c)));
        }
        s
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
        let mut out = Vec::new();
        let field = if self.settings.context.is_some() {
            "context"
        } else {
            "host"
        };
        match self.docker().await {
            Ok(d) => {
                if let Err(e) = d.ping().await {
                    out.push(OnlineFinding {
                        path: field.into(),
                        message: self.unreachable(&e.to_string()).to_string(),
                        error: true,
                    });
                } else {
                    if let Ok(info) = d.info().await {
                        let driver = info.driver.clone().unwrap_or_default();
                        let status = info.driver_status.clone().unwrap_or_default();
                        if let Some(why) = driver_disk_problem(&driver, &status) {
                            out.push(OnlineFinding {
                                path: String::new(),
                                message: format!(
                                    "docker runtime {}: disk sizes (primary_disk_size, default_primary_disk_size) are not applied to bake containers on this daemon: {why}",
                                    self.settings.name
                                ),
                                error: false,
                            });
                        }
                    }
                    if self.settings.network != "host" && self.settings.network != "none" {
                        if let Err(e) = d
                            .inspect_network(
                                &self.settings.network,
                                None::<bollard::query_parameters::InspectNetworkOptions>,
                            )
                            .await
                        {
                            out.push(OnlineFinding {
                            path: "networking.network".into(),
                            message: format!(
                                "docker runtime {}: network '{}' does not exist on the daemon (it is referenced, never created): {}",
                                self.settings.name,
                                self.settings.network,
                                api_message(&e)
                            ),
                            error: true,
                        });
                        }
                    }
                }
            }
            Err(e) => out.push(OnlineFinding {
                path: field.into(),
                message: e.to_string(),
                error: true,
            }),
        }
        if let Some(req) = &self.settings.docker_version {
            match version::check_docker_cli(&self.settings.docker_binary, req).await {
                Ok(_) => {}
                Err(m) if m.contains("cannot run") => out.push(OnlineFinding {
                    path: "executable".into(),
                    message: format!(
                        "docker runtime {}: {m} (native bakes do not need it; ansible's docker connection does)",
                        self.settings.name
                    ),
                    error: false,
                }),
                Err(m) => out.push(OnlineFinding {
                    path: "executable".into(),
                    message: format!("docker runtime {}: {m}", self.settings.name),
                    error: true,
                }),
            }
        }
        Ok(out)
    }

    async fn preflight(&self) -> Result<Vec<PreflightLine>> {
        let what = format!("docker runtime {} ({})", self.settings.name, self.address());
        let line = match self.docker().await {
            Ok(d) => match d.version().await {
                Ok(v) => PreflightLine {
                    ok: true,
                    what,
                    detail: format!(
                        "the daemon answers: {} {} (API {}, {}/{})",
                        v.platform
                            .map(|p| p.name)
                            .filter(|n| !n.trim().is_empty())
                            .unwrap_or_else(|| "Docker Engine".into()),
                        v.version.unwrap_or_default(),
                        v.api_version.unwrap_or_default(),
                        v.os.unwrap_or_default(),
                        v.arch.unwrap_or_default()
                    ),
                },
                Err(e) => PreflightLine {
                    ok: false,
                    what,
                    detail: self.unreachable(&e.to_string()).to_string(),
                },
            },
            Err(e) => PreflightLine {
                ok: false,
                what,
                detail: e.to_string(),
            },
        };
        Ok(vec![line])
    }

    async fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        let name = &self.settings.name;
        let (reference, platform) = match &req.image_id {
            Some(pin) => {
                names::check_image_id_pin(pin).map_err(RuntimeError::Refused)?;
                (pin.clone(), None)
            }
            None => {
                let q = query::image_query(
                    &req.query,
                    &req.family,
                    &req.family_version,
                    &req.architecture,
                )
                .map_err(|e| RuntimeError::Refused(format!("{}: {e}", req.label)))?;
                (q.reference, q.platform)
            }
        };
        let img = match self.inspect_image_opt(&reference).await? {
            Some(i) => i,
            None => {
                self.pull(&reference, platform.as_deref()).await?;
                self.inspect_image_opt(&reference).await?.ok_or_else(|| {
                    RuntimeError::Refused(format!(
                        "docker runtime {name}: image '{reference}' is not on the daemon after a pull"
                    ))
                })?
            }
        };
        let image_id = img.id.clone().unwrap_or_default();
        if let (Some(p), Some(arch)) = (&platform, &img.architecture) {
            let want = p.split('/').nth(1).unwrap_or(p);
            let have = query::platform_of(arch);
            if have.split('/').nth(1) != Some(want) {
                return Err(RuntimeError::Refused(format!(
                    "{}: image '{reference}' is {have}, the query asks {p}",
                    req.label
                )));
            }
        }
        let repo_of = |r: &str| -> String {
            let r = r.split('@').next().unwrap_or(r);
            let r = names::split_repo_tag(r).map(|(a, _)| a).unwrap_or(r);
            names::normalize_repo_tag(r).to_string()
        };
        let digests = img.repo_digests.clone().unwrap_or_default();
        let want_repo = repo_of(&reference);
        let mut facts = BTreeMap::new();
        facts.insert("image_id".to_string(), image_id.clone());
        facts.insert("reference".to_string(), reference.clone());
        if let Some(p) = &platform {
            facts.insert("platform".to_string(), p.clone());
        }
        if let Some(a) = &img.architecture {
            facts.insert("architecture".to_string(), a.clone());
        }
        let id = if reference.contains("@sha256:") {
            reference.clone()
        } else if let Some(d) = digests
            .iter()
            .find(|d| repo_of(d) == want_repo)
            .or_else(|| digests.first())
        {
            d.clone()
        } else {
            facts.insert(
                "identifier".to_string(),
                "image id (a local image with no repo digest)".to_string(),
            );
            image_id.clone()
        };
        Ok(ResolvedImage {
            id,
            name: Some(reference),
            owner: None,
            creation_date: img.created.clone().map(|c| c.to_string()),
            facts,
        })
    }

    async fn emit(&self, req: &BakeRequest) -> Result<Vec<std::path::PathBuf>> {
        if self
            .settings
            .packer_builders
            .contains_key(&req.image_builder)
        {
            crate::packer::emit(self, req).await
        } else {
            Ok(Vec::new())
        }
    }

    async fn bake(&self, req: &BakeRequest) -> Result<BakeOutcome> {
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
            return crate::packer::bake(self, req, packer).await;
        }
        let d = self.docker().await?.clone();
        let made = names::image_name_as_made(&req.final_name);
        let container = names::bake_container_name(
            &self.settings.name,
            &req.series,
            req.tags.get("csis_run").map(String::as_str),
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
        match self.remove_left_behind(&container).await {
            Ok(true) => req.log.line(&format!(
                "==> removing stale bake container {container} (left by an interrupted csis)"
            )),
            Ok(false) => {}
            Err(e) => return Err(RuntimeError::Failed(format!("{}: {e}", req.label))),
        }
        req.log
            .line(&format!("==> bake container {container} from {parent}"));
        let storage_size = self
            .bake_disk_limit(req.disk_size_gb, &parent_id, req.log.as_ref())
            .await?;
        let guard = ContainerGuard {
            docker: d.clone(),
            name: container.clone(),
            armed: true,
        };
        let work = async {
            self.create_bake_container(&container, &parent_id, req, storage_size.as_deref())
                .await?;
            self.run_steps(&container, req).await
        };
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

    async fn clean_stale_bakes(&self) -> Result<Vec<String>> {
        let d = self.docker().await?;
        let prefix = names::bake_container_prefix(&self.settings.name);
        let list = self
            .containers(HashMap::from([("name".to_string(), vec![prefix.clone()])]))
            .await?;
        let mut removed = Vec::new();
        for c in list {
            let Some(name) = c
                .names
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.trim_start_matches('/').to_string())
                .find(|n| n.starts_with(&prefix))
            else {
                continue;
            };
            // Another csis's live bake (another checkout, another CI job on
            // this daemon) keeps its container.
            if !left_behind(&c) {
                continue;
            }
            remove_container_forced(d, &name).await.map_err(|e| {
                RuntimeError::Failed(format!("removing stale bake container {name}: {e}"))
            })?;
            removed.push(name);
        }
        // Post-bake test containers whose csis is gone (killed before it
        // removed them): marked, and owned by a process that no longer runs.
        let marked = self
            .containers(HashMap::from([(
                "label".to_string(),
                vec![format!("{TEST_MACHINE_MARK}={}", self.settings.name)],
            )]))
            .await?;
        for c in marked {
            let labels = c.labels.clone().unwrap_or_default();
            let gone = labels
                .get(TEST_MACHINE_OWNER)
                .is_some_and(|o| csis_runtime::owner_gone(o));
            if !gone {
                continue;
            }
            let Some(name) = c
                .names
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.trim_start_matches('/').to_string())
                .next()
            else {
                continue;
            };
            match remove_container_forced(d, &name).await {
                Ok(_) => removed.push(format!("test machine {name}")),
                Err(e) => {
                    return Err(RuntimeError::Failed(format!(
                        "removing stale test container {name}: {e}"
                    )))
                }
            }
        }
        removed.sort();
        Ok(removed)
    }

    async fn launch_test_machine(&self, req: &TestMachineRequest) -> Result<TestMachine> {
        let d = self.docker().await?;
        let name = req.name.clone();
        let labels = HashMap::from([
            (TEST_MACHINE_MARK.to_string(), self.settings.name.clone()),
            (TEST_MACHINE_OWNER.to_string(), req.owner.clone()),
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

    async fn remove_test_machine(&self, id: &str) -> Result<bool> {
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

    async fn retag_image(&self, build_id: &str, tags: &BTreeMap<String, String>) -> Result<()> {
        let img = self.inspect_image_opt(build_id).await?.ok_or_else(|| {
            RuntimeError::Refused(format!("image {build_id} is not on the daemon"))
        })?;
        let id = img.id.clone().unwrap_or_else(|| build_id.to_string());
        let repo_tags = img.repo_tags.clone().unwrap_or_default();
        let mut labels = img.config.and_then(|c| c.labels).unwrap_or_default();
        for k in listed_blanked(&labels) {
            labels.remove(&k);
        }
        for k in tags.keys() {
            if let Some(p) = names::label_key_problem(k) {
                return Err(RuntimeError::Refused(p));
            }
        }
        let current = self.movable_of(&repo_tags, &id);
        for (k, v) in tags {
            let movable = current.get(k);
            let label = labels.get(k);
            let effective = movable.map(|(m, _)| m).or(label);
            if effective == Some(v) || (v.is_empty() && effective.is_none()) {
                continue;
            }
            if v.is_empty() || label == Some(v) {
                // the label (or nothing) shows through once the movable tag goes
                if let Some((_, rt)) = movable {
                    self.untag(rt).await?;
                }
                continue;
            }
            let tag = names::movable_tag(&id, k, v).map_err(RuntimeError::Refused)?;
            // add the new tag first, so the image never loses its last tag
            self.tag(&id, &tag).await?;
            if let Some((_, rt)) = movable {
                self.untag(rt).await?;
            }
        }
        Ok(())
    }

    async fn query_images(&self) -> Result<Vec<ImageFacts>> {
        let d = self.docker().await?;
        let filters = HashMap::from([("label".to_string(), vec!["csis_series".to_string()])]);
        let opts = ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let list = d
            .list_images(Some(opts))
            .await
            .map_err(|e| self.map_err("list images", e))?;
        let mut out = Vec::new();
        let parents: std::collections::HashSet<&str> =
            list.iter().map(|i| i.parent_id.as_str()).collect();
        for img in &list {
            let ours: Vec<&str> = img
                .repo_tags
                .iter()
                .filter_map(|rt| names::tag_in_repository(rt, &self.repository))
                .collect();
            // A build committed and never tagged (csis was killed between
            // `docker commit` and the tag): it is this repository's by its
            // label, and no child stands on it (a disposed build kept for a
            // child's layers is untagged too, and no build any more).
            let untagged_build = is_untagged(img)
                && img.labels.get(REPOSITORY_LABEL) == Some(&self.repository)
                && !parents.contains(img.id.as_str());
            if ours.is_empty() && !untagged_build {
                continue;
            }
            let blanked = listed_blanked(&img.labels);
            let mut tags: BTreeMap<String, String> = img
                .labels
                .iter()
                .filter(|(k, _)| k.starts_with(LINEAGE_PREFIX) && !blanked.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (k, (v, _)) in self.movable_of(&img.repo_tags, &img.id) {
                tags.insert(k, v);
            }
            // release tags `<series>--<model>` on this image: csis_release (as AWS and dummy say it)
            if let Some(series) = img.labels.get("csis_series") {
                let prefix = names::release_tag(series, "");
                let mut models: Vec<&str> = ours
                    .iter()
                    .filter(|t| names::parse_movable_tag(t).is_none())
                    .filter_map(|t| t.strip_prefix(prefix.as_str()))
                    .filter(|m| !m.is_empty())
                    .collect();
                models.sort();
                if !models.is_empty() {
                    tags.insert(format!("{LINEAGE_PREFIX}release"), models.join(","));
                }
            }
            let name = img
                .labels
                .get(NAME_LABEL)
                .filter(|n| !n.is_empty())
                .cloned()
                .or_else(|| {
                    ours.iter()
                        .filter(|t| {
                            names::parse_movable_tag(t).is_none() && !t.contains(names::SEP)
                        })
                        .max_by_key(|t| t.len())
                        .map(|t| t.to_string())
                });
            out.push(ImageFacts {
                build_id: img.id.clone(),
                name,
                created: Some(rfc3339(img.created)),
                tags,
            });
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.build_id.cmp(&b.build_id)));
        Ok(out)
    }

    async fn inventory(&self) -> Result<Inventory> {
        let list = self.containers(HashMap::new()).await?;
        let mut instances: Vec<InstanceFacts> = list
            .into_iter()
            .map(|c| InstanceFacts {
                id: c.id.unwrap_or_default(),
                name: c
                    .names
                    .and_then(|n| n.first().map(|n| n.trim_start_matches('/').to_string())),
                image: c.image_id,
                power: match c.state {
                    Some(bollard::models::ContainerSummaryStateEnum::RUNNING)
                    | Some(bollard::models::ContainerSummaryStateEnum::PAUSED)
                    | Some(bollard::models::ContainerSummaryStateEnum::RESTARTING) => {
                        PowerState::Running
                    }
                    Some(bollard::models::ContainerSummaryStateEnum::CREATED)
                    | Some(bollard::models::ContainerSummaryStateEnum::EXITED)
                    | Some(bollard::models::ContainerSummaryStateEnum::DEAD) => PowerState::Stopped,
                    _ => PowerState::Unknown,
                },
                config: c.labels.and_then(|l| l.get("csis_config").cloned()),
            })
            .collect();
        instances.sort_by(|a, b| a.name.cmp(&b.name));
        let volumes = self.volumes().await?;
        Ok(Inventory { instances, volumes })
    }

    async fn image_users(&self, build_id: &str) -> Result<Vec<String>> {
        let Some((id, _)) = self.image_id_of(build_id).await? else {
            return Ok(Vec::new());
        };
        let list = self
            .containers(HashMap::from([("ancestor".to_string(), vec![id.clone()])]))
            .await?;
        let mut users: Vec<String> = list
            .into_iter()
            .filter(|c| c.image_id.as_deref() == Some(id.as_str()))
            .map(|c| {
                let name = c
                    .names
                    .and_then(|n| n.first().map(|n| n.trim_start_matches('/').to_string()))
                    .unwrap_or_default();
                let short: String = c.id.unwrap_or_default().chars().take(12).collect();
                format!("{name} ({short})")
            })
            .collect();
        users.sort();
        Ok(users)
    }

    async fn dispose_image(&self, build_id: &str) -> Result<bool> {
        self.dispose_image_outcome(build_id)
            .await
            .map(|o| o.existed)
    }

    async fn dispose_image_outcome(&self, build_id: &str) -> Result<DisposeOutcome> {
        let Some((id, repo_tags)) = self.image_id_of(build_id).await? else {
            return Ok(DisposeOutcome::default());
        };
        let users = self.image_users(&id).await?;
        if !users.is_empty() {
            return Err(RuntimeError::Refused(format!(
                "image {id} is in use by container(s) {}: decommission them first; the image is never pulled from under a container",
                users.join(", ")
            )));
        }
        // Parents disposed earlier and kept (untagged) for this build: they may go with it.
        // (the graph's parent links do not change when tags go)
        let graph = self.image_graph().await?;
        let held_parents = untagged_builds_above(&graph, &id);
        let d = self.docker().await?;
        // Every tag goes (movable, release, final, floating); the last removal deletes the image.
        for rt in &repo_tags {
            let opts = RemoveImageOptionsBuilder::default().build();
            match d.remove_image(rt, Some(opts), None).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(self.map_err(&format!("remove tag {rt} of {id}"), e)),
            }
        }
        let mut notes = Vec::new();
        let opts = RemoveImageOptionsBuilder::default().build();
        match d.remove_image(&id, Some(opts), None).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) if is_conflict(&e) && api_message(&e).contains("child") => {
                // The daemon keeps the layers a child image stands on: say so.
                let children = children_of(&graph, &id);
                notes.push(format!(
                    "its tags are removed, but the daemon keeps the image {id} untagged (its layers) while child image(s) {} stand on it; it goes with the last of them",
                    if children.is_empty() {
                        "(not listed)".to_string()
                    } else {
                        children.join(", ")
                    }
                ));
                return Ok(DisposeOutcome {
                    existed: true,
                    notes,
                });
            }
            Err(e) if is_conflict(&e) => {
                return Err(RuntimeError::Refused(format!(
                    "image {id} cannot be removed: {}",
                    api_message(&e)
                )))
            }
            Err(e) => return Err(self.map_err(&format!("remove image {id}"), e)),
        }
        // The build is gone: free the parents that were kept only for it
        // (the graph listed once, each parent dropped from it as it goes).
        let mut graph = self.image_graph().await?;
        for p in held_parents {
            if graph.contains_key(&p) {
                let children = children_of(&graph, &p);
                let users = self.image_users(&p).await?;
                if !children.is_empty() || !users.is_empty() {
                    notes.push(format!(
                        "the image {p} (a build disposed earlier, kept untagged for its children) stays: {} still stand(s) on it",
                        children
                            .iter()
                            .map(|c| format!("child image {c}"))
                            .chain(users.iter().map(|u| format!("container {u}")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    break;
                }
                match d
                    .remove_image(&p, Some(RemoveImageOptionsBuilder::default().build()), None)
                    .await
                {
                    Err(e) if !is_not_found(&e) => {
                        notes.push(format!(
                            "the image {p} (a build disposed earlier, kept untagged for its children) stays: {}",
                            api_message(&e)
                        ));
                        break;
                    }
                    _ => {
                        graph.remove(&p);
                    }
                }
            }
            notes.push(format!(
                "freed the image {p} too: a build disposed earlier, kept untagged until this last child went"
            ));
        }
        Ok(DisposeOutcome {
            existed: true,
            notes,
        })
    }

    fn release_commands(&self, build_id: &str, series: &str, model: &str) -> Vec<String> {
        vec![format!(
            "{} tag {} {}",
            self.docker_cli_prefix(),
            script::sq(build_id),
            script::sq(&self.tag_ref(&names::release_tag(series, model)))
        )]
    }

    async fn release(&self, build_id: &str, series: &str, model: &str) -> Result<()> {
        let (id, _) = self.image_id_of(build_id).await?.ok_or_else(|| {
            RuntimeError::Refused(format!("image {build_id} is not on the daemon"))
        })?;
        self.tag(&id, &names::release_tag(series, model)).await
    }

    async fn query_instance_power_state(&self, instance: &str) -> Result<PowerState> {
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

    async fn start_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
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

    async fn stop_instance(&self, instance: &str, timeout_s: u64) -> Result<()> {
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

    async fn query_instance_identity(&self, instance: &str) -> Result<(String, Option<String>)> {
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

    async fn query_instance_boot_image(&self, instance: &str) -> Result<Option<String>> {
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

    /// A container against a build: it runs, it was created from the
    /// build (`expected` as an image id, a tag or a short id the daemon
    /// knows), and, when asked, data mounts under `/mnt`.
    async fn verify_instance(
        &self,
        instance: &str,
        expected_build: &str,
        expect_mounts: usize,
        timeout_s: u64,
    ) -> Result<Vec<VerifyCheck>> {
        let power = self.query_instance_power_state(instance).await?;
        if power == PowerState::Absent {
            return Err(RuntimeError::Refused(format!(
                "container {instance} does not exist on {}",
                self.settings.name
            )));
        }
        let mut checks = vec![VerifyCheck {
            name: "running".into(),
            ok: power == PowerState::Running,
            detail: format!("{power:?}").to_lowercase(),
            evidence: Vec::new(),
        }];
        let booted = self.query_instance_boot_image(instance).await?;
        let expected_id = match self.inspect_image_opt(expected_build).await? {
            Some(i) => i.id.unwrap_or_else(|| expected_build.to_string()),
            None => expected_build.to_string(),
        };
        let booted_s = booted.clone().unwrap_or_else(|| "?".into());
        let ok = booted.as_deref() == Some(expected_id.as_str());
        checks.push(VerifyCheck {
            name: "booted image".into(),
            ok,
            detail: if ok {
                format!("booted {booted_s}")
            } else {
                format!("booted {booted_s}, expected {expected_build}")
            },
            evidence: Vec::new(),
        });
        if expect_mounts > 0 {
            let check = match self
                .run_session_command(instance, "grep ' /mnt/' /proc/mounts", timeout_s.max(10))
                .await
            {
                Ok(r) => {
                    let lines: Vec<String> = r.stdout.lines().map(str::to_string).collect();
                    let n = lines.len();
                    VerifyCheck {
                        name: "data disks mounted".into(),
                        ok: n >= expect_mounts,
                        detail: format!("{n} mount(s) under /mnt, {expect_mounts} declared"),
                        evidence: last_lines(&lines, 20),
                    }
                }
                Err(e) => VerifyCheck {
                    name: "data disks mounted".into(),
                    ok: false,
                    detail: e.to_string(),
                    evidence: Vec::new(),
                },
            };
            checks.push(check);
        }
        Ok(checks)
    }

    async fn run_session_command(
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
}

fn last_lines(lines: &[String], n: usize) -> Vec<String> {
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Shared-pointer constructor for the `csis` binary.
pub fn docker_runtime(settings: DockerSettings) -> Result<Arc<DockerRuntime>> {
    DockerRuntime::new(settings).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn release_commands_name_the_daemon() {
        let mut s = DockerSettings::new("docker-local");
        s.context = Some("orbstack".into());
        let r = DockerRuntime::new(s).unwrap();
        assert_eq!(
            r.release_commands("sha256:abc", "web", "prod"),
            vec![
                "docker --context orbstack tag sha256:abc csis/docker-local:web--prod".to_string()
            ]
        );
    }

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
                "-v",
                "/t/site.yml"
            ]
        );
        assert!(env.contains(&("DOCKER_HOST".into(), "ssh://u@h".into())));
    }

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
        let p = s.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "host");
        assert!(
            p[0].1.starts_with(
                "docker runtime far: daemon address ssh://nobody@127.0.0.1:2222: port 2222 in an ssh:// address is not supported"
            ),
            "{p:?}"
        );
        assert!(
            p[0].1.ends_with("`Host 127.0.0.1-2222` with `HostName 127.0.0.1, Port 2222` in ~/.ssh/config and use host: ssh://nobody@127.0.0.1-2222"),
            "{p:?}"
        );
        // the hooks say the same, as a refusal (no ssh is started, no "cannot be reached")
        let r = DockerRuntime::new(s).unwrap();
        let e = r.docker().await.unwrap_err();
        assert!(matches!(e, RuntimeError::Refused(_)), "{e:?}");
        assert_eq!(e.to_string(), p[0].1);
        let f = r.check_online().await.unwrap();
        assert!(
            f.iter()
                .any(|f| f.error && f.path == "host" && f.message == p[0].1),
            "{f:?}"
        );
        let pf = r.preflight().await.unwrap();
        assert!(!pf[0].ok && pf[0].detail == p[0].1, "{pf:?}");
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
