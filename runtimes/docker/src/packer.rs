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
//!
//! This module renders and writes a root from plain inputs ([`Root`],
//! [`EmitContext`]) and knows no daemon: the runtime (`runtime::packer`)
//! reads the parent, lowers the recipe once per bake and runs packer.

use std::path::PathBuf;

use csis_runtime::recipe::Lowered;
use csis_runtime::{BakeRequest, Result, RuntimeError};
use csis_schema::tags;
use hcl::structure::{Attribute, Block, Body};

use crate::labels::{self, BLANKED_LABEL, NAME_LABEL, REPOSITORY_LABEL};
use crate::names;
use crate::settings::DockerSettings;

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

/// What a packer root needs from the daemon: read at the emit node (best
/// effort) or at the bake (the parent is on the daemon then).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmitContext {
    /// The parent's lineage labels the bake does not set
    /// ([`labels::blanked_keys`]): `LABEL k=""` each, and `csis.blanked`
    /// lists them.
    pub blank: Vec<String>,
    /// `--storage-opt size=` for the bake container (the daemon applies it).
    pub storage_size: Option<String>,
    /// The parent image was read from the daemon (`false`: not there yet, or
    /// the daemon did not answer; the root says so and the bake re-emits it).
    pub parent_read: bool,
}

/// What a root is rendered from besides the request: the runtime's
/// settings and repository, the parent reference, the bake container's
/// marks and the bake's steps, lowered once.
pub struct Root<'a> {
    pub settings: &'a DockerSettings,
    pub repository: &'a str,
    /// The image the bake starts from (`source.image`).
    pub parent: String,
    /// The bake container's labels (`--label k=v` each, in this order).
    pub marks: Vec<(String, String)>,
    pub lowered: &'a Lowered,
}

/// Side files a packer root names: (file name, contents).
pub type SideFiles = Vec<(String, Vec<u8>)>;

/// The packer root for a bake, as HCL text and the side files it needs.
pub fn render(root: &Root, req: &BakeRequest, ctx: &EmitContext) -> Result<(String, SideFiles)> {
    let settings = root.settings;
    let image = image_of(req);
    let container = names::bake_container_name(
        &settings.name,
        &image,
        req.tags.get(tags::RUN).map(String::as_str),
    );
    let made = names::image_name_as_made(&req.final_name);
    let changes = changes(root, req, ctx, &made);
    let run = run_command(root, req, ctx, &container)?;
    let source = Block::builder("source")
        .add_label("docker")
        .add_label(image.as_str())
        .add_attribute(Attribute::new("image", root.parent.clone()))
        .add_attribute(Attribute::new("pull", false))
        .add_attribute(Attribute::new("commit", true))
        .add_attribute(Attribute::new("changes", changes))
        .add_attribute(Attribute::new("run_command", run))
        .build();
    let (build, comments) = build_block(root, req, &image, &container, &made);

    let mut blocks = csis_packer::plugins_body(&plugins(req)).into_inner();
    // `image_version` for the ansible steps, from BASE_IMAGE_VERSION, as on AWS
    blocks.push(csis_packer::release_variable().into());
    blocks.push(csis_packer::base_image_version_variable().into());
    blocks.push(csis_packer::image_version_locals().into());
    blocks.push(source.into());
    blocks.push(build.into());
    let body = Body::from(blocks);
    let text = csis_packer::render(&body, "", &comments)
        .map_err(|e| RuntimeError::Failed(format!("{}: rendering HCL: {e}", req.label)))?;
    let files: Vec<(String, Vec<u8>)> = root
        .lowered
        .files
        .iter()
        .map(|f| (f.rel.clone(), f.content.clone()))
        .collect();
    Ok((format!("{}{text}", header(root, req, ctx)), files))
}

/// The source's `changes`: a `LABEL` per lineage tag, the parent's blanked,
/// the name and repository labels, the container's marks blanked, no
/// entrypoint and a command that keeps a container of the image up.
fn changes(root: &Root, req: &BakeRequest, ctx: &EmitContext, made: &str) -> Vec<String> {
    let mut changes: Vec<String> = req.tags.iter().map(|(k, v)| label_change(k, v)).collect();
    // the parent's lineage labels are inherited: blanked as the native commit does
    changes.extend(ctx.blank.iter().map(|k| label_change(k, "")));
    changes.push(label_change(BLANKED_LABEL, &ctx.blank.join(",")));
    changes.push(label_change(NAME_LABEL, made));
    changes.push(label_change(REPOSITORY_LABEL, root.repository));
    // the container's own marks are not the image's (a commit merges them in)
    changes.extend(labels::blanked_bake_marks().map(|(k, v)| label_change(k, v)));
    // run_command's --entrypoint=/bin/sh keeps the container up; the image gets none
    // (`ENTRYPOINT []` would keep the container's; `[""]` is the daemon's "none")
    changes.push(r#"ENTRYPOINT [""]"#.to_string());
    changes.push(r#"CMD ["sleep","infinity"]"#.to_string());
    changes
}

/// The source's `run_command`: the bake container, its marks, its machine
/// type and disk size.
fn run_command(
    root: &Root,
    req: &BakeRequest,
    ctx: &EmitContext,
    container: &str,
) -> Result<Vec<String>> {
    let settings = root.settings;
    let mut run: Vec<String> = vec![
        "-d".into(),
        "-i".into(),
        "-t".into(),
        "--init".into(),
        "--name".into(),
        container.to_string(),
        "--network".into(),
        settings.network.clone(),
        "--tmpfs".into(),
        "/run:rw,exec,nosuid,nodev,mode=755".into(),
    ];
    // the bake container's marks: the runtime, its owner (this csis), the
    // config id, series and run (clean_stale_bakes removes it only when
    // its owner is gone)
    for (k, v) in &root.marks {
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
    Ok(run)
}

/// The `build` block: the source, the lowered steps as provisioners (with
/// their comments), the `docker-tag` and `manifest` post-processors.
fn build_block(
    root: &Root,
    req: &BakeRequest,
    image: &str,
    container: &str,
    made: &str,
) -> (Block, Vec<String>) {
    let env: Vec<String> = root
        .settings
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
        &root.lowered.steps,
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
        .add_attribute(Attribute::new("name", image))
        .add_attribute(Attribute::new(
            "sources",
            vec![format!("source.docker.{image}")],
        ));
    for p in provisioners {
        build = build.add_block(p);
    }
    let prefix = names::image_name_as_made(&req.prefix);
    let mut tags = vec![made.to_string()];
    if prefix != made {
        tags.push(prefix);
    }
    build = build.add_block(
        Block::builder("post-processors")
            .add_block(
                Block::builder("post-processor")
                    .add_label("docker-tag")
                    .add_attribute(Attribute::new("repository", root.repository))
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
    (build.build(), comments)
}

/// The plugins the root requires: the request's, else docker's and
/// ansible's.
fn plugins(req: &BakeRequest) -> Vec<csis_packer::Plugin> {
    if !req.required_plugins.is_empty() {
        return req.required_plugins.clone();
    }
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
}

/// The root's header: what it is, the environment of its tools, and
/// whether the parent was read.
fn header(root: &Root, req: &BakeRequest, ctx: &EmitContext) -> String {
    let settings = root.settings;
    format!(
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
    )
}

/// Write a rendered root and its side files under `req.emit_dir`; files
/// already identical are left alone.
pub async fn emit_with(
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
