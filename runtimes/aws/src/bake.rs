//! `bake` for `packer-ebs`: `packer init`, `validate`, `build` on the node's
//! root with the runtime's environment; `manifest.json` gives the AMI.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use csis_runtime::{BakeOutcome, BakeRequest, Result, RuntimeError};
use tokio::process::Command;

use crate::emit;
use crate::AwsRuntime;
use csis_schema::tags;

/// The AMI of `<region>:<ami>` in a packer manifest (the last run's build).
pub fn ami_from_manifest(text: &str, region: &str) -> Result<String> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| RuntimeError::Failed(format!("manifest.json does not parse: {e}")))?;
    let builds = v
        .get("builds")
        .and_then(|b| b.as_array())
        .cloned()
        .unwrap_or_default();
    let last_run = v.get("last_run_uuid").and_then(|s| s.as_str());
    let build = builds
        .iter()
        .rev()
        .find(|b| {
            last_run.is_none() || b.get("packer_run_uuid").and_then(|s| s.as_str()) == last_run
        })
        .ok_or_else(|| RuntimeError::Failed("manifest.json names no build".into()))?;
    let artifact = build
        .get("artifact_id")
        .and_then(|s| s.as_str())
        .unwrap_or_default();
    // `build_id_from_artifact`: `<region>:<ami>[,<region>:<ami>...]`
    let mut first = None;
    for part in artifact.split(',') {
        if let Some((r, ami)) = part.trim().split_once(':') {
            if r == region {
                return Ok(ami.to_string());
            }
            first.get_or_insert(ami.to_string());
        }
    }
    first.ok_or_else(|| {
        RuntimeError::Failed(format!(
            "manifest.json artifact '{artifact}' names no AMI (`<region>:<ami>`)"
        ))
    })
}

/// The environment a packer process of this runtime runs with.
pub fn packer_env(rt: &AwsRuntime) -> BTreeMap<String, String> {
    let st = rt.settings();
    let mut env = BTreeMap::new();
    env.insert("AWS_REGION".into(), st.region.clone());
    env.insert("AWS_DEFAULT_REGION".into(), st.region.clone());
    let c = &st.credentials;
    if let Some(p) = c.profile_name.as_deref().filter(|p| !p.is_empty()) {
        env.insert("AWS_PROFILE".into(), p.into());
    }
    if let (Some(id), Some(sec)) = (&c.aws_access_key_id, &c.aws_secret_access_key) {
        env.insert("AWS_ACCESS_KEY_ID".into(), id.clone());
        env.insert("AWS_SECRET_ACCESS_KEY".into(), sec.clone());
        if let Some(t) = &c.aws_session_token {
            env.insert("AWS_SESSION_TOKEN".into(), t.clone());
        }
    }
    if let Some(ep) = crate::client::endpoint_for(st) {
        env.insert("AWS_ENDPOINT_URL".into(), ep);
    }
    env.insert(
        format!("PKR_VAR_{}", crate::stale::BAKE_OWNER_VAR),
        crate::stale::bake_owner(),
    );
    env.insert("CHECKPOINT_DISABLE".into(), "1".into());
    env.insert("PACKER_NO_COLOR".into(), "1".into());
    for (k, v) in &st.packer_env {
        env.insert(k.clone(), v.clone());
    }
    env
}

async fn run_packer(rt: &AwsRuntime, req: &BakeRequest, dir: &Path, args: &[&str]) -> Result<()> {
    let bin = rt
        .settings()
        .packer_binary
        .clone()
        .unwrap_or_else(|| "packer".into());
    req.log.line(&format!("$ {bin} {}", args.join(" ")));
    let mut cmd = Command::new(&bin);
    cmd.args(args)
        .current_dir(dir)
        .envs(packer_env(rt))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| RuntimeError::Failed(format!("cannot run packer ('{bin}'): {e}")))?;
    let output = csis_runtime::stream_output(&mut child, req.log.clone(), 20);
    let status = tokio::select! {
        s = child.wait() => s.map_err(|e| RuntimeError::Failed(format!("packer: {e}")))?,
        _ = req.cancel.cancelled() => {
            // let packer clean up its build instance: SIGINT, then wait a while
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status();
            }
            let _ = tokio::time::timeout(std::time::Duration::from_secs(120), child.wait()).await;
            let _ = child.start_kill();
            return Err(RuntimeError::Cancelled);
        }
    };
    let tail = output.finish().await;
    if !status.success() {
        let t = tail.join("\n");
        return Err(RuntimeError::Failed(format!(
            "packer {} failed ({status}) for {}:\n{t}",
            args.first().copied().unwrap_or(""),
            req.label
        )));
    }
    Ok(())
}

/// `packer build`'s arguments: a bake that keeps its machine when it
/// fails (`csis build --keep-failed`) tells packer to leave the builder
/// instance standing (`-on-error=abort`) instead of cleaning it up.
pub fn build_args(keep_failed: bool) -> Vec<&'static str> {
    if keep_failed {
        vec!["build", "-on-error=abort", "."]
    } else {
        vec!["build", "."]
    }
}

/// The failure of a bake that keeps its machine: the builder instance
/// packer left is marked kept ([`AwsRuntime::mark_kept_bake`]) and named,
/// with how to get in and how to remove it.
async fn kept_failed_error(rt: &AwsRuntime, req: &BakeRequest, why: String) -> RuntimeError {
    let name = &rt.settings().name;
    match rt.mark_kept_bake(&req.tags).await {
        Ok(ids) if !ids.is_empty() => RuntimeError::Failed(format!(
            "{why}\nbuilder instance {} kept ({}={}): inspect with `aws ec2 describe-instances --instance-ids {}` or `aws ssm start-session --target {}`; remove with `csis empty --runtime {name} --remove`",
            ids.join(", "),
            tags::KEPT_FAILED,
            req.tags.get(tags::RUN).map(String::as_str).unwrap_or("?"),
            ids.join(" "),
            ids[0],
        )),
        Ok(_) => RuntimeError::Failed(format!(
            "{why}\n(--keep-failed: packer left no builder instance of this bake standing)"
        )),
        Err(e) => RuntimeError::Failed(format!(
            "{why}\n(--keep-failed: the builder instance could not be marked kept: {e}; the next build's clean-up may remove it)"
        )),
    }
}

/// Emit the root, run packer, read the manifest, retag the AMI.
pub async fn bake(rt: &AwsRuntime, req: &BakeRequest) -> Result<BakeOutcome> {
    let plan = rt.source_plan(req).await?;
    emit::emit_root(rt, req).await?;
    let dir = &req.emit_dir;
    let manifest = dir.join("manifest.json");
    let _ = std::fs::remove_file(&manifest);
    run_packer(rt, req, dir, &["init", "."]).await?;
    run_packer(rt, req, dir, &["validate", "."]).await?;
    if let Err(e) = run_packer(rt, req, dir, &build_args(req.keep_failed)).await {
        return Err(match e {
            RuntimeError::Failed(why) if req.keep_failed && !req.cancel.is_cancelled() => {
                kept_failed_error(rt, req, why).await
            }
            e => e,
        });
    }
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        RuntimeError::Failed(format!("packer build wrote no {}: {e}", manifest.display()))
    })?;
    let ami = ami_from_manifest(&text, &rt.settings().region)?;
    // the post-bake retag: the resolved parent and fingerprint on the AMI
    let stamp: BTreeMap<String, String> = req
        .tags
        .iter()
        .filter(|(k, _)| k.as_str() == tags::PARENT || k.as_str() == tags::FINGERPRINT)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !stamp.is_empty() {
        use csis_runtime::Runtime;
        rt.retag_image(&ami, &stamp).await?;
    }
    let n = emit::build_body(&plan, req)?.2.assertions;
    Ok(BakeOutcome {
        build_id: ami,
        name: plan.ami_name,
        assertions: n,
    })
}
