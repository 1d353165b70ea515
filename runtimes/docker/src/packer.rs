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
//! - a `build` block: the source; the bake's lowered steps
//!   ([`csis_runtime::recipe::lower`]) as provisioners (ansible with
//!   `ansible_connection=docker ansible_host=<container>`);
//!   post-processors `docker-tag` (final name and floating tag) and `manifest`.

use std::path::PathBuf;

use csis_runtime::{BakeOutcome, BakeRequest, NullLog, Result, RuntimeError};
use hcl::structure::{Attribute, Block, Body};

use crate::names;
use crate::runtime::{
    blanked_keys, ContainerGuard, DockerRuntime, BAKE_LABEL, BAKE_OWNER_LABEL, BLANKED_LABEL,
    NAME_LABEL, REPOSITORY_LABEL,
};

fn image_of(req: &BakeRequest) -> String {
    req.series.clone()
}

/// `"${path.root}/<file>"` as a template (not an escaped literal).
fn root_path(file: &str) -> hcl::Expression {
    hcl::Expression::TemplateExpr(Box::new(hcl::expr::TemplateExpr::QuotedString(format!(
        "${{path.root}}/{file}"
    ))))
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

/// The parent image's id on the daemon and the lineage labels of it the
/// bake blanks (`None`: the parent is not on the daemon).
async fn parent_on_daemon(
    rt: &DockerRuntime,
    req: &BakeRequest,
) -> Result<Option<(String, Vec<String>)>> {
    let parent = rt.parent_ref(req);
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

/// Side files a packer root names: (file name, contents).
pub type SideFiles = Vec<(String, Vec<u8>)>;

/// The packer root for a bake, as HCL text and the side files it needs.
pub fn render(
    rt: &DockerRuntime,
    req: &BakeRequest,
    ctx: &EmitContext,
) -> Result<(String, SideFiles)> {
    let settings = rt.settings();
    let image = image_of(req);
    let container = names::bake_container_name(
        &settings.name,
        &image,
        req.tags.get(tags::RUN).map(String::as_str),
    );
    let made = names::image_name_as_made(&req.final_name);
    if let Some(p) = names::image_name_problem(&req.final_name) {
        return Err(RuntimeError::Refused(format!("{}: {p}", req.label)));
    }
    let parent = rt.parent_ref(req);
    let mut changes: Vec<String> = req.tags.iter().map(|(k, v)| label_change(k, v)).collect();
    // the parent's lineage labels are inherited: blanked as the native commit does
    changes.extend(ctx.blank.iter().map(|k| label_change(k, "")));
    changes.push(label_change(BLANKED_LABEL, &ctx.blank.join(",")));
    changes.push(label_change(NAME_LABEL, &made));
    changes.push(label_change(REPOSITORY_LABEL, rt.repository()));
    // the container's own marks are not the image's (a commit merges them in)
    changes.push(label_change(BAKE_LABEL, ""));
    changes.push(label_change(BAKE_OWNER_LABEL, ""));
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
    // the bake container's marks: the runtime, its owner (this csis), the
    // config id, series and run (clean_stale_bakes removes it only when
    // its owner is gone)
    let mut marks: Vec<(String, String)> = rt.bake_labels(Some(req)).into_iter().collect();
    marks.sort();
    for (k, v) in marks {
        run.extend(["--label".into(), format!("{k}={v}")]);
    }
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

    let lowered = csis_runtime::recipe::lower(req, &rt.target(true))
        .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
    let env: Vec<String> = settings
        .tool_environment()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut ansible_attributes = vec![("user".to_string(), hcl::Expression::from("root"))];
    if !env.is_empty() {
        ansible_attributes.push((
            "ansible_env_vars".to_string(),
            hcl::Expression::Array(
                env.iter()
                    .map(|e| hcl::Expression::from(e.as_str()))
                    .collect(),
            ),
        ));
    }
    let (provisioners, comments) = csis_packer::provisioners(
        &lowered.steps,
        &csis_packer::ProvisionerOptions {
            only: None,
            ansible_arguments: [
                "--extra-vars".to_string(),
                format!("ansible_connection=docker ansible_host={container}"),
            ]
            .into_iter()
            .chain(csis_packer::image_version_arguments())
            .collect(),
            ansible_attributes,
        },
    );
    let mut build = Block::builder("build")
        .add_attribute(Attribute::new("name", image.as_str()))
        .add_attribute(Attribute::new(
            "sources",
            vec![format!("source.docker.{image}")],
        ));
    for p in provisioners {
        build = build.add_block(p);
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

    let plugins = if req.required_plugins.is_empty() {
        vec![
            csis_packer::Plugin {
                name: "docker".into(),
                version: ">= 1.0.0".into(),
                source: "github.com/hashicorp/docker".into(),
            },
            csis_packer::Plugin {
                name: "ansible".into(),
                version: ">= 1.0.0".into(),
                source: "github.com/hashicorp/ansible".into(),
            },
        ]
    } else {
        req.required_plugins.clone()
    };
    let mut blocks = csis_packer::plugins_body(&plugins).into_inner();
    // `image_version` for the ansible steps, from BASE_IMAGE_VERSION, as on AWS
    blocks.push(csis_packer::release_variable().into());
    blocks.push(csis_packer::base_image_version_variable().into());
    blocks.push(csis_packer::image_version_locals().into());
    blocks.push(source.into());
    blocks.push(build.build().into());
    let body = Body::from(blocks);
    let text = csis_packer::render(&body, "", &comments)
        .map_err(|e| RuntimeError::Failed(format!("{}: rendering HCL: {e}", req.label)))?;
    let files: Vec<(String, Vec<u8>)> = lowered
        .files
        .into_iter()
        .map(|f| (f.rel, f.content))
        .collect();
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
    rendered: (String, Vec<(String, Vec<u8>)>),
) -> Result<Vec<PathBuf>> {
    let (hcl_text, files) = rendered;
    let image = image_of(req);
    let mut out = Vec::new();
    let mut all = vec![(
        format!("{}-{image}.pkr.hcl", req.image_builder),
        hcl_text.into_bytes(),
    )];
    all.extend(files);
    for (name, content) in all {
        let path = req.emit_dir.join(&name);
        let mode = if name.ends_with(".sh") || name.ends_with("/csis-mods") {
            0o755
        } else {
            0o644
        };
        csis_runtime::recipe::write_if_changed(&path, &content, mode)
            .map_err(|e| RuntimeError::Failed(format!("{}: {}: {e}", req.label, path.display())))?;
        out.push(path);
    }
    Ok(out)
}

/// The file name of the packer root of a bake.
pub fn root_file(req: &BakeRequest) -> String {
    format!("{}-{}.pkr.hcl", req.image_builder, image_of(req))
}

pub use csis_packer::process::without_packer_block;
use csis_schema::tags;

/// Bake by running packer on the emitted root: the bake container is removed
/// whatever happens (packer killed on cancellation), the build id is the
/// committed image's id (the manifest names the docker-tag artifact).
pub async fn bake(rt: &DockerRuntime, req: &BakeRequest, packer: &str) -> Result<BakeOutcome> {
    let d = rt.docker().await?.clone();
    let made = names::image_name_as_made(&req.final_name);
    let container = names::bake_container_name(
        &rt.settings().name,
        &image_of(req),
        req.tags.get(tags::RUN).map(String::as_str),
    );
    // The parent is on the daemon now: its labels and the disk limit are known.
    let (parent_id, blank) = parent_on_daemon(rt, req).await?.ok_or_else(|| {
        RuntimeError::Refused(format!(
            "{}: parent image '{}' is not on the daemon",
            req.label,
            rt.parent_ref(req)
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
    let (major, minor) = csis_packer::process::version(packer).await?;
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
    if let Err(e) = rt.remove_left_behind(&container).await {
        return Err(RuntimeError::Failed(format!("{}: {e}", req.label)));
    }
    let guard = ContainerGuard::new(d.clone(), container.clone());
    let env: std::collections::BTreeMap<String, String> =
        rt.settings().tool_environment().into_iter().collect();
    let result = csis_packer::process::run(csis_packer::process::PackerRun {
        binary: packer,
        args: &["build", "-color=false", "-force", &file],
        dir: &req.emit_dir,
        env: &env,
        log: req.log.clone(),
        cancel: &req.cancel,
        what: &format!("bake {}", req.label),
        tail: 0,
    })
    .await;
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
    let artifact = csis_packer::process::manifest_artifact(&text)
        .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
    let img = rt.inspect_image_opt(&artifact).await?.ok_or_else(|| {
        RuntimeError::Failed(format!(
            "{}: packer's artifact {artifact} is not on the daemon",
            req.label
        ))
    })?;
    Ok(BakeOutcome {
        build_id: img.id.unwrap_or(artifact),
        name: made,
        assertions: csis_runtime::recipe::lower(req, &rt.target(true))
            .map(|l| l.assertions)
            .unwrap_or(req.tests.len()),
    })
}
