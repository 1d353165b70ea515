//! `packer-docker` emission: the packer root the seed describes.
//!
//! One `<builder>-<image>.pkr.hcl` under the node's `emit_dir`, with the
//! settle and `ensure` scripts beside it:
//! - `packer { required_plugins { docker, ansible } }`;
//! - `source "docker" "<image>"`: `image` = the parent (vendor image or parent
//!   build), `pull = false` (the query pulled every vendor image; our builds
//!   are local), `commit = true`, `changes` = one `LABEL` per lineage tag,
//!   the parent's lineage labels the bake does not set blanked (`LABEL k=""`
//!   and `csis.blanked`, as the native path commits them) and
//!   `CMD ["sleep","infinity"]`, `run_command` starting the bake container
//!   `csis-bake-<runtime>-<image>` under `--init` on the runtime's network,
//!   with the machine type's `--cpus`/`--memory`, `/run` a tmpfs and
//!   `--storage-opt size=` for the disk size where the daemon applies it;
//! - a `build` block: the source; provisioners (settle, shell, ansible with
//!   `ansible_connection=docker ansible_host=<container>`, in-bake tests);
//!   post-processors `docker-tag` (final name and floating tag) and `manifest`.

use std::path::PathBuf;

use csis_runtime::{BakeOutcome, BakeParent, BakeRequest, BakeStep, NullLog, Result, RuntimeError};
use hcl::structure::{Attribute, Block, Body};

use crate::names;
use crate::runtime::{
    blanked_keys, remove_container_forced, ContainerGuard, DockerRuntime, BLANKED_LABEL, NAME_LABEL,
};
use crate::script;

fn image_of(req: &BakeRequest) -> String {
    req.series.clone()
}

/// `"${path.root}/<file>"` as a template (not an escaped literal).
fn root_path(file: &str) -> hcl::Expression {
    hcl::Expression::TemplateExpr(Box::new(hcl::expr::TemplateExpr::QuotedString(format!(
        "${{path.root}}/{file}"
    ))))
}

fn ident_key(k: &str) -> hcl::ObjectKey {
    hcl::ObjectKey::Identifier(hcl::Identifier::new(k).expect("identifier"))
}

/// `LABEL k="v"` with the value quoted the way a Dockerfile reads it.
fn label_change(k: &str, v: &str) -> String {
    let q = v.replace('\\', "\\\\").replace('"', "\\\"");
    format!("LABEL {k}=\"{q}\"")
}

/// What a packer root needs from the daemon: read by [`context`] (the emit
/// node, best effort) or by [`bake`] (the parent is on the daemon then).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmitContext {
    /// The parent's lineage labels the bake does not set ([`blanked_keys`]):
    /// `LABEL k=""` each, and `csis.blanked` lists them.
    pub blank: Vec<String>,
    /// `--storage-opt size=` for the bake container (the daemon applies it).
    pub storage_size: Option<String>,
    /// The parent image was read from the daemon (`false`: not there yet, or
    /// the daemon did not answer; the root says so and the bake re-emits it).
    pub parent_read: bool,
}

fn parent_of(req: &BakeRequest) -> String {
    match &req.parent {
        BakeParent::Vendor(r) => r.id.clone(),
        BakeParent::Build { build_id, .. } => build_id.clone(),
    }
}

/// The parent image's id on the daemon and the lineage labels of it the
/// bake blanks (`None`: the parent is not on the daemon).
async fn parent_on_daemon(
    rt: &DockerRuntime,
    req: &BakeRequest,
) -> Result<Option<(String, Vec<String>)>> {
    let parent = parent_of(req);
    Ok(rt.inspect_image_opt(&parent).await?.map(|img| {
        let labels = img.config.and_then(|c| c.labels).unwrap_or_default();
        (img.id.unwrap_or(parent), blanked_keys(&labels, &req.tags))
    }))
}

/// The [`EmitContext`] of a bake as far as the daemon answers now: at the
/// emit node the parent may not be baked yet, and the daemon may not answer
/// (`generated/` is written all the same).
pub async fn context(rt: &DockerRuntime, req: &BakeRequest) -> EmitContext {
    let Ok(Some((id, blank))) = parent_on_daemon(rt, req).await else {
        return EmitContext::default();
    };
    EmitContext {
        blank,
        storage_size: rt
            .bake_disk_limit(req.disk_size_gb, &id, &NullLog)
            .await
            .ok()
            .flatten(),
        parent_read: true,
    }
}

/// The packer root for a bake, as HCL text and the side files it needs.
pub fn render(
    rt: &DockerRuntime,
    req: &BakeRequest,
    ctx: &EmitContext,
) -> Result<(String, Vec<(String, String)>)> {
    let settings = rt.settings();
    let image = image_of(req);
    let container = names::bake_container_name(&settings.name, &image);
    let made = names::image_name_as_made(&req.final_name);
    if let Some(p) = names::image_name_problem(&req.final_name) {
        return Err(RuntimeError::Refused(format!("{}: {p}", req.label)));
    }
    let parent = parent_of(req);
    let mut changes: Vec<String> = req.tags.iter().map(|(k, v)| label_change(k, v)).collect();
    // the parent's lineage labels are inherited: blanked as the native commit does
    changes.extend(ctx.blank.iter().map(|k| label_change(k, "")));
    changes.push(label_change(BLANKED_LABEL, &ctx.blank.join(",")));
    changes.push(label_change(NAME_LABEL, &made));
    // run_command's --entrypoint=/bin/sh keeps the container up; the image gets none
    // (`ENTRYPOINT []` would keep the container's; `[""]` is the daemon's "none")
    changes.push(r#"ENTRYPOINT [""]"#.to_string());
    changes.push(r#"CMD ["sleep","infinity"]"#.to_string());

    let mut run: Vec<String> = vec![
        "-d".into(),
        "-i".into(),
        "-t".into(),
        "--init".into(),
        "--name".into(),
        container.clone(),
        "--network".into(),
        settings.network.clone(),
        "--tmpfs".into(),
        "/run:rw,exec,nosuid,nodev,mode=755".into(),
    ];
    if let Some(m) = settings
        .machine_type(req.machine_type.as_deref())
        .map_err(RuntimeError::Refused)?
    {
        if let Some(c) = m.cpus {
            run.extend(["--cpus".into(), format!("{c}")]);
        }
        if let Some(mem) = &m.memory {
            run.extend(["--memory".into(), mem.clone()]);
        }
    }
    if let Some(size) = &ctx.storage_size {
        run.extend(["--storage-opt".into(), format!("size={size}")]);
    }
    run.extend([
        "--entrypoint=/bin/sh".into(),
        "--".into(),
        "{{.Image}}".into(),
    ]);

    let source = Block::builder("source")
        .add_label("docker")
        .add_label(image.as_str())
        .add_attribute(Attribute::new("image", parent))
        .add_attribute(Attribute::new("pull", false))
        .add_attribute(Attribute::new("commit", true))
        .add_attribute(Attribute::new("changes", changes))
        .add_attribute(Attribute::new("run_command", run))
        .build();

    let mut files: Vec<(String, String)> = Vec::new();
    let settle_file = "settle.sh".to_string();
    files.push((
        settle_file.clone(),
        format!(
            "#!/bin/sh\n{}",
            script::settle_script(req.package_manager.as_deref())
        ),
    ));
    let mut build = Block::builder("build")
        .add_attribute(Attribute::new("name", image.as_str()))
        .add_attribute(Attribute::new(
            "sources",
            vec![format!("source.docker.{image}")],
        ))
        .add_block(
            Block::builder("provisioner")
                .add_label("shell")
                .add_attribute(Attribute::new("scripts", vec![root_path(&settle_file)]))
                .build(),
        );
    for (i, step) in req.steps.iter().enumerate() {
        match step {
            BakeStep::Shell {
                inline,
                scripts,
                ensure,
                env,
                execute_command,
                ..
            } => {
                let mut shells: Vec<Block> = Vec::new();
                let with_common = |mut b: hcl::structure::BlockBuilder| {
                    if !env.is_empty() {
                        b = b.add_attribute(Attribute::new("environment_vars", env.clone()));
                    }
                    if let Some(x) = execute_command {
                        b = b.add_attribute(Attribute::new("execute_command", x.as_str()));
                    }
                    b.build()
                };
                if !inline.is_empty() {
                    shells.push(with_common(
                        Block::builder("provisioner")
                            .add_label("shell")
                            .add_attribute(Attribute::new("inline", inline.clone())),
                    ));
                }
                if !scripts.is_empty() {
                    shells.push(with_common(
                        Block::builder("provisioner")
                            .add_label("shell")
                            .add_attribute(Attribute::new(
                                "scripts",
                                scripts
                                    .iter()
                                    .map(|p| p.display().to_string())
                                    .collect::<Vec<_>>(),
                            )),
                    ));
                }
                if let Some(e) = ensure {
                    let f = format!("step-{}-ensure.sh", i + 1);
                    files.push((
                        f.clone(),
                        format!("#!/bin/sh\n{}", script::ensure_script(e)),
                    ));
                    shells.push(with_common(
                        Block::builder("provisioner")
                            .add_label("shell")
                            .add_attribute(Attribute::new("scripts", vec![root_path(&f)])),
                    ));
                }
                for s in shells {
                    build = build.add_block(s);
                }
            }
            BakeStep::Ansible {
                playbooks,
                extra_arguments,
                binary,
                ..
            } => {
                for pb in playbooks {
                    let mut extra = vec![
                        "--extra-vars".to_string(),
                        format!("ansible_connection=docker ansible_host={container}"),
                    ];
                    extra.extend(extra_arguments.iter().cloned());
                    let env: Vec<String> = settings
                        .tool_environment()
                        .into_iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    let mut b = Block::builder("provisioner")
                        .add_label("ansible")
                        .add_attribute(Attribute::new("command", binary.as_str()))
                        .add_attribute(Attribute::new("playbook_file", pb.display().to_string()))
                        .add_attribute(Attribute::new("user", "root"))
                        .add_attribute(Attribute::new("extra_arguments", extra));
                    if !env.is_empty() {
                        b = b.add_attribute(Attribute::new("ansible_env_vars", env));
                    }
                    build = build.add_block(b.build());
                }
            }
        }
    }
    if !req.tests.is_empty() {
        let lines: Vec<String> = req
            .tests
            .iter()
            .map(|t| {
                let check = match &t.contains {
                    Some(c) => format!(
                        "out=$( {run} 2>&1 ); rc=$?; [ \"$rc\" = {rc} ] && printf '%s' \"$out\" | grep -qF -- {c} || {{ echo {fail}; exit 1; }}",
                        run = t.run,
                        rc = t.expect_rc,
                        c = script::sq(c),
                        fail = script::sq(&format!("in-bake test failed: {}", t.description))
                    ),
                    None => format!(
                        "( {run} ) >/dev/null 2>&1; rc=$?; [ \"$rc\" = {rc} ] || {{ echo {fail}; exit 1; }}",
                        run = t.run,
                        rc = t.expect_rc,
                        fail = script::sq(&format!("in-bake test failed: {}", t.description))
                    ),
                };
                check
            })
            .collect();
        build = build.add_block(
            Block::builder("provisioner")
                .add_label("shell")
                .add_attribute(Attribute::new("inline", lines))
                .build(),
        );
    }
    let prefix = names::image_name_as_made(&req.prefix);
    let mut tags = vec![made.clone()];
    if prefix != made {
        tags.push(prefix);
    }
    build = build.add_block(
        Block::builder("post-processors")
            .add_block(
                Block::builder("post-processor")
                    .add_label("docker-tag")
                    .add_attribute(Attribute::new("repository", rt.repository()))
                    .add_attribute(Attribute::new("tags", tags))
                    .build(),
            )
            .add_block(
                Block::builder("post-processor")
                    .add_label("manifest")
                    .add_attribute(Attribute::new("output", root_path("manifest.json")))
                    .add_attribute(Attribute::new("strip_path", true))
                    .build(),
            )
            .build(),
    );

    let packer = Block::builder("packer")
        .add_block(
            Block::builder("required_plugins")
                .add_attribute(Attribute::new(
                    "docker",
                    hcl::Expression::Object(hcl::Object::from([
                        (
                            ident_key("source"),
                            hcl::Expression::from("github.com/hashicorp/docker"),
                        ),
                        (ident_key("version"), hcl::Expression::from(">= 1.0.0")),
                    ])),
                ))
                .add_attribute(Attribute::new(
                    "ansible",
                    hcl::Expression::Object(hcl::Object::from([
                        (
                            ident_key("source"),
                            hcl::Expression::from("github.com/hashicorp/ansible"),
                        ),
                        (ident_key("version"), hcl::Expression::from(">= 1.0.0")),
                    ])),
                ))
                .build(),
        )
        .build();
    let body = Body::builder()
        .add_block(packer)
        .add_block(source)
        .add_block(build.build())
        .build();
    let text = hcl::format::to_string(&body)
        .map_err(|e| RuntimeError::Failed(format!("{}: rendering HCL: {e}", req.label)))?;
    let header = format!(
        "# packer-docker root for {} on docker runtime {} (generated by csis)\n# environment: {}\n{}",
        req.label,
        settings.name,
        settings
            .tool_environment()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        if ctx.parent_read {
            String::new()
        } else {
            "# the parent image was not read from the daemon (not baked yet, or no answer): its lineage labels are blanked and the disk size applied when the bake writes this root again\n".to_string()
        }
    );
    Ok((format!("{header}{text}"), files))
}

/// Write the packer root under `req.emit_dir` with the [`context`] the daemon
/// gives now; files already identical are left alone.
pub async fn emit(rt: &DockerRuntime, req: &BakeRequest) -> Result<Vec<PathBuf>> {
    let ctx = context(rt, req).await;
    emit_with(req, render(rt, req, &ctx)?).await
}

async fn emit_with(
    req: &BakeRequest,
    rendered: (String, Vec<(String, String)>),
) -> Result<Vec<PathBuf>> {
    let (hcl_text, files) = rendered;
    let image = image_of(req);
    tokio::fs::create_dir_all(&req.emit_dir)
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!("{}: {}: {e}", req.label, req.emit_dir.display()))
        })?;
    let mut out = Vec::new();
    let mut all = vec![(format!("{}-{image}.pkr.hcl", req.image_builder), hcl_text)];
    all.extend(files);
    for (name, content) in all {
        let path = req.emit_dir.join(&name);
        let same = tokio::fs::read(&path)
            .await
            .map(|c| c == content.as_bytes())
            .unwrap_or(false);
        if !same {
            let tmp = req.emit_dir.join(format!(".{name}.tmp"));
            tokio::fs::write(&tmp, content.as_bytes())
                .await
                .and(tokio::fs::rename(&tmp, &path).await)
                .map_err(|e| {
                    RuntimeError::Failed(format!("{}: {}: {e}", req.label, path.display()))
                })?;
        }
        out.push(path);
    }
    Ok(out)
}

/// The file name of the packer root of a bake.
pub fn root_file(req: &BakeRequest) -> String {
    format!("{}-{}.pkr.hcl", req.image_builder, image_of(req))
}

/// `packer version` as (major, minor).
async fn packer_version(binary: &str) -> Result<(u64, u64)> {
    let out = tokio::process::Command::new(binary)
        .arg("version")
        .output()
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!(
                "`{binary} version` cannot run: {e} (install packer: Debian `apt-get install packer`, or HashiCorp's release)"
            ))
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .split_whitespace()
        .find_map(|w| {
            let w = w.trim_start_matches('v');
            let mut it = w.split('.');
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .ok_or_else(|| {
            RuntimeError::Failed(format!(
                "cannot read a version from `{binary} version`: {}",
                text.trim()
            ))
        })?;
    Ok(v)
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

/// Bake by running packer on the emitted root: the bake container is removed
/// whatever happens (packer killed on cancellation), the build id is the
/// committed image's id (the manifest names the docker-tag artifact).
pub async fn bake(rt: &DockerRuntime, req: &BakeRequest, packer: &str) -> Result<BakeOutcome> {
    let d = rt.docker().await?.clone();
    let made = names::image_name_as_made(&req.final_name);
    let container = names::bake_container_name(&rt.settings().name, &image_of(req));
    // The parent is on the daemon now: its labels and the disk limit are known.
    let (parent_id, blank) = parent_on_daemon(rt, req).await?.ok_or_else(|| {
        RuntimeError::Refused(format!(
            "{}: parent image '{}' is not on the daemon",
            req.label,
            parent_of(req)
        ))
    })?;
    let ctx = EmitContext {
        blank,
        storage_size: rt
            .bake_disk_limit(req.disk_size_gb, &parent_id, req.log.as_ref())
            .await?,
        parent_read: true,
    };
    emit_with(req, render(rt, req, &ctx)?).await?;
    let mut file = root_file(req);
    let (major, minor) = packer_version(packer).await?;
    if (major, minor) < (1, 7) {
        // same root, minus `required_plugins` (docker and ansible are built into packer < 1.7)
        let text = tokio::fs::read_to_string(req.emit_dir.join(&file))
            .await
            .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
        let legacy = file.replace(".pkr.hcl", ".packer-lt-1.7.pkr.hcl");
        tokio::fs::write(req.emit_dir.join(&legacy), without_packer_block(&text))
            .await
            .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
        req.log.line(&format!(
            "packer {major}.{minor} predates required_plugins: building {legacy}"
        ));
        file = legacy;
    }
    let manifest = req.emit_dir.join("manifest.json");
    let _ = tokio::fs::remove_file(&manifest).await;
    if remove_container_forced(&d, &container).await.is_err() {
        return Err(RuntimeError::Failed(format!(
            "{}: a stale bake container {container} cannot be removed",
            req.label
        )));
    }
    let guard = ContainerGuard::new(d.clone(), container.clone());
    let mut cmd = tokio::process::Command::new(packer);
    cmd.args(["build", "-color=false", "-force", &file])
        .current_dir(&req.emit_dir)
        .envs(rt.settings().tool_environment())
        .env("PACKER_NO_COLOR", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    req.log
        .line(&format!("$ {packer} build -color=false -force {file}"));
    let run = async {
        let mut child = cmd.spawn().map_err(|e| {
            RuntimeError::Failed(format!("{}: `{packer}` cannot run: {e}", req.label))
        })?;
        let output = csis_runtime::stream_output(&mut child, req.log.clone(), 0);
        let status = child
            .wait()
            .await
            .map_err(|e| RuntimeError::Failed(format!("{}: packer: {e}", req.label)))?;
        output.finish().await;
        if status.success() {
            Ok(())
        } else {
            Err(RuntimeError::Failed(format!(
                "bake {}: packer build exited {}",
                req.label,
                status.code().unwrap_or(-1)
            )))
        }
    };
    let result = tokio::select! {
        r = run => r,
        _ = req.cancel.cancelled() => Err(RuntimeError::Cancelled),
    };
    let removed = guard.remove().await;
    result?;
    if let Err(e) = removed {
        req.log.line(&format!(
            "warning: bake container {container} not removed: {e}"
        ));
    }
    let text = tokio::fs::read_to_string(&manifest).await.map_err(|e| {
        RuntimeError::Failed(format!("{}: packer wrote no manifest: {e}", req.label))
    })?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| RuntimeError::Failed(format!("{}: manifest.json: {e}", req.label)))?;
    let last = v["last_run_uuid"].as_str().unwrap_or_default();
    let artifact = v["builds"]
        .as_array()
        .and_then(|b| {
            b.iter()
                .rev()
                .find(|b| b["packer_run_uuid"].as_str() == Some(last))
        })
        .and_then(|b| b["artifact_id"].as_str())
        .ok_or_else(|| {
            RuntimeError::Failed(format!("{}: manifest.json names no artifact", req.label))
        })?
        .to_string();
    let img = rt.inspect_image_opt(&artifact).await?.ok_or_else(|| {
        RuntimeError::Failed(format!(
            "{}: packer's artifact {artifact} is not on the daemon",
            req.label
        ))
    })?;
    Ok(BakeOutcome {
        build_id: img.id.unwrap_or(artifact),
        name: made,
        assertions: req.tests.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packer_block_removed() {
        let t = "# c\npacker {\n  required_plugins {\n    docker = {\n      source = \"x\"\n    }\n  }\n}\n\nsource \"docker\" \"web\" {\n  pull = false\n}\n";
        let out = without_packer_block(t);
        assert_eq!(
            out,
            "# c\n\nsource \"docker\" \"web\" {\n  pull = false\n}\n"
        );
    }
}
