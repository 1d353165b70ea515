//! Running packer: one process runner with one cancel policy (SIGINT so
//! packer removes what it started, a bounded wait, then kill), the manifest
//! reader and the version probe.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use csis_runtime::{LogSink, Result, RuntimeError};
use tokio_util::sync::CancellationToken;

/// How long packer may take to clean up after SIGINT before it is killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(120);

/// One packer invocation.
pub struct PackerRun<'a> {
    pub binary: &'a str,
    pub args: &'a [&'a str],
    pub dir: &'a Path,
    pub env: &'a BTreeMap<String, String>,
    pub log: Arc<dyn LogSink>,
    pub cancel: &'a CancellationToken,
    /// Says what ran, in errors (`bake //images/web@rt`).
    pub what: &'a str,
    /// Lines of output kept for the error of a failed run.
    pub tail: usize,
}

/// Run packer, streaming its output to the log. On cancellation: SIGINT,
/// wait up to [`CANCEL_GRACE`], kill, and answer `Cancelled`.
pub async fn run(r: PackerRun<'_>) -> Result<()> {
    r.log.line(&format!("$ {} {}", r.binary, r.args.join(" ")));
    let mut cmd = tokio::process::Command::new(r.binary);
    cmd.args(r.args)
        .current_dir(r.dir)
        .envs(r.env)
        .env("CHECKPOINT_DISABLE", "1")
        .env("PACKER_NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        RuntimeError::Failed(format!(
            "{}: `{}` cannot run: {e} (install packer: Debian `apt-get install packer`, or HashiCorp's release)",
            r.what, r.binary
        ))
    })?;
    let output = csis_runtime::stream_output(&mut child, r.log.clone(), r.tail);
    let status = tokio::select! {
        s = child.wait() => s.map_err(|e| RuntimeError::Failed(format!("{}: packer: {e}", r.what)))?,
        _ = r.cancel.cancelled() => {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status();
            }
            if tokio::time::timeout(CANCEL_GRACE, child.wait()).await.is_err() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            output.finish().await;
            return Err(RuntimeError::Cancelled);
        }
    };
    let tail = output.finish().await;
    if status.success() {
        Ok(())
    } else {
        Err(RuntimeError::Failed(format!(
            "{}: packer {} exited {}{}",
            r.what,
            r.args.first().copied().unwrap_or(""),
            status.code().unwrap_or(-1),
            if tail.is_empty() {
                String::new()
            } else {
                format!(":\n{}", tail.join("\n"))
            }
        )))
    }
}

/// The `artifact_id` of the last run's build in a packer `manifest.json`.
pub fn manifest_artifact(text: &str) -> Result<String> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| RuntimeError::Failed(format!("manifest.json does not parse: {e}")))?;
    let last = v.get("last_run_uuid").and_then(|s| s.as_str());
    v.get("builds")
        .and_then(|b| b.as_array())
        .and_then(|b| {
            b.iter().rev().find(|b| {
                last.is_none() || b.get("packer_run_uuid").and_then(|s| s.as_str()) == last
            })
        })
        .and_then(|b| b.get("artifact_id"))
        .and_then(|s| s.as_str())
        .map(str::to_string)
        .ok_or_else(|| RuntimeError::Failed("manifest.json names no artifact".into()))
}

/// `packer version` as (major, minor).
pub async fn version(binary: &str) -> Result<(u64, u64)> {
    let out = csis_runtime::probe::run_async(binary, &["version"])
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!(
                "`{binary} version` cannot run: {e} (install packer: Debian `apt-get install packer`, or HashiCorp's release)"
            ))
        })?;
    let text = &out.stdout;
    parse_version(text).ok_or_else(|| {
        RuntimeError::Failed(format!(
            "cannot read a version from `{binary} version`: {}",
            text.trim()
        ))
    })
}

/// (major, minor) of `Packer v1.6.6`.
pub fn parse_version(text: &str) -> Option<(u64, u64)> {
    text.split_whitespace().find_map(|w| {
        let w = w.trim_start_matches('v');
        let mut it = w.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    })
}

/// Drop the top-level `packer { ... }` block (packer before 1.7 knows no `required_plugins`).
pub fn without_packer_block(hcl_text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    let mut depth = 0i32;
    for line in hcl_text.lines() {
        if !skipping && line.trim_start() == line && line.starts_with("packer {") {
            skipping = true;
        }
        if skipping {
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            if depth <= 0 {
                skipping = false;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_last_run_and_versions() {
        let m = r#"{"builds":[{"artifact_id":"a","packer_run_uuid":"1"},{"artifact_id":"b","packer_run_uuid":"2"}],"last_run_uuid":"1"}"#;
        assert_eq!(manifest_artifact(m).unwrap(), "a");
        assert!(manifest_artifact("{}").is_err());
        assert_eq!(parse_version("Packer v1.6.6\n"), Some((1, 6)));
        assert_eq!(parse_version("1.14.2"), Some((1, 14)));
    }

    #[test]
    fn packer_block_removed() {
        let t = "# c\npacker {\n  required_plugins {\n    docker = {\n      source = \"x\"\n    }\n  }\n}\n\nsource \"docker\" \"web\" {\n  pull = false\n}\n";
        assert_eq!(
            without_packer_block(t),
            "# c\n\nsource \"docker\" \"web\" {\n  pull = false\n}\n"
        );
    }

    #[tokio::test]
    async fn cancel_interrupts_packer_and_answers_cancelled() {
        let d = std::env::temp_dir();
        let fake = d.join(format!("csis-fake-packer-{}.sh", std::process::id()));
        // a packer that takes SIGINT to mean "clean up and leave"
        csis_testkit::write_executable(&fake, "#!/bin/sh\ntrap 'echo interrupted; exit 1' INT\necho started\nwhile :; do sleep 0.1; done\n").unwrap();
        #[derive(Default)]
        struct L(std::sync::Mutex<Vec<String>>);
        impl LogSink for L {
            fn line(&self, l: &str) {
                self.0.lock().unwrap().push(l.to_string());
            }
        }
        let log = Arc::new(L::default());
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let l2 = log.clone();
        tokio::spawn(async move {
            while !l2.0.lock().unwrap().iter().any(|l| l == "started") {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            c2.cancel();
        });
        let env = BTreeMap::new();
        let fake_s = fake.display().to_string();
        let r = run(PackerRun {
            binary: &fake_s,
            args: &["build", "."],
            dir: &d,
            env: &env,
            log: log.clone(),
            cancel: &cancel,
            what: "test",
            tail: 5,
        })
        .await;
        assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
        assert!(
            log.0.lock().unwrap().iter().any(|l| l == "interrupted"),
            "packer got SIGINT and cleaned up"
        );
        let _ = std::fs::remove_file(&fake);
    }
}
