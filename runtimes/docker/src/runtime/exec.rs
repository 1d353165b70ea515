//! Running commands in a container: exec with its output streamed line by
//! line to a log, scripts staged in the bake container's tmpfs through
//! exec stdin (the archive API as fallback), directory uploads.

use std::path::Path;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use csis_runtime::{LogSink, Result, RuntimeError};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::DockerRuntime;
use crate::script;

/// Where bake scripts are written in the bake container (`/run` is a tmpfs: never committed).
pub(super) const STAGE_DIR: &str = "/run/csis";

/// What an exec gave.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

/// The shell that writes stdin to `path` in the stage directory, executable.
pub(super) fn stage_command(path: &str) -> String {
    format!("mkdir -p {STAGE_DIR} && cat > {path} && chmod 0755 {path}")
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

pub(super) fn tar_of_file(path: &str, content: &[u8], mode: u32) -> std::io::Result<Vec<u8>> {
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
    pub(crate) async fn stage(
        &self,
        container: &str,
        name: &str,
        content: &[u8],
    ) -> Result<String> {
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
    pub(crate) async fn run_script(
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

    /// Copy a local directory's contents into the container at `destination`.
    pub(crate) async fn upload_dir(
        &self,
        container: &str,
        dir: &Path,
        destination: &str,
    ) -> Result<()> {
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
}
