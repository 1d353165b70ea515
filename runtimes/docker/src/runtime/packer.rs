//! `packer-docker` bakes on the daemon: the parent read (its lineage
//! labels to blank, the disk limit), the recipe lowered once per bake, the
//! root rendered ([`crate::packer`]) and written, packer run with the bake
//! container removed whatever happens, the build found by the manifest.

use std::path::PathBuf;

use csis_runtime::{BakeOutcome, BakeRequest, NullLog, Result, RuntimeError};
use csis_schema::tags;

use super::containers::ContainerGuard;
use super::DockerRuntime;
use crate::labels::blanked_keys;
use crate::names;
use crate::packer::{self, EmitContext, Root, SideFiles};

impl DockerRuntime {
    /// The parent image's id on the daemon and the lineage labels of it the
    /// bake blanks (`None`: the parent is not on the daemon).
    async fn parent_on_daemon(&self, req: &BakeRequest) -> Result<Option<(String, Vec<String>)>> {
        let parent = self.parent_ref(req);
        Ok(self.inspect_image_opt(&parent).await?.map(|img| {
            let labels = img.config.and_then(|c| c.labels).unwrap_or_default();
            (img.id.unwrap_or(parent), blanked_keys(&labels, &req.tags))
        }))
    }

    /// The [`EmitContext`] of a bake as far as the daemon answers now: at the
    /// emit node the parent may not be baked yet, and the daemon may not answer
    /// (`generated/` is written all the same).
    pub async fn packer_context(&self, req: &BakeRequest) -> EmitContext {
        let Ok(Some((id, blank))) = self.parent_on_daemon(req).await else {
            return EmitContext::default();
        };
        EmitContext {
            blank,
            storage_size: self
                .bake_disk_limit(req.disk_size_gb, &id, &NullLog)
                .await
                .ok()
                .flatten(),
            parent_read: true,
        }
    }

    /// The packer root of a bake with `ctx` and the assertions its steps
    /// run: the recipe lowered once, for the root and for the count.
    fn render_packer_root(
        &self,
        req: &BakeRequest,
        ctx: &EmitContext,
    ) -> Result<((String, SideFiles), usize)> {
        if let Some(p) = names::image_name_problem(&req.final_name) {
            return Err(RuntimeError::Refused(format!("{}: {p}", req.label)));
        }
        let lowered = csis_runtime::recipe::lower(req, &self.target(true))
            .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
        let mut marks: Vec<(String, String)> = self.bake_labels(Some(req)).into_iter().collect();
        marks.sort();
        let root = Root {
            settings: self.settings(),
            repository: self.repository(),
            parent: self.parent_ref(req),
            marks,
            lowered: &lowered,
        };
        Ok((packer::render(&root, req, ctx)?, lowered.assertions))
    }

    /// The packer root of a bake with `ctx`, as HCL text and its side files.
    pub fn packer_root(&self, req: &BakeRequest, ctx: &EmitContext) -> Result<(String, SideFiles)> {
        self.render_packer_root(req, ctx).map(|(r, _)| r)
    }

    /// Write the packer root under `req.emit_dir` with the context the
    /// daemon gives now; files already identical are left alone.
    pub(super) async fn emit_packer_root(&self, req: &BakeRequest) -> Result<Vec<PathBuf>> {
        let ctx = self.packer_context(req).await;
        packer::emit_with(req, self.packer_root(req, &ctx)?).await
    }

    /// Bake by running packer on the emitted root: the bake container is removed
    /// whatever happens (packer killed on cancellation), the build id is the
    /// committed image's id (the manifest names the docker-tag artifact).
    pub(super) async fn packer_bake(&self, req: &BakeRequest, binary: &str) -> Result<BakeOutcome> {
        let d = self.docker().await?.clone();
        let made = names::image_name_as_made(&req.final_name);
        let container = names::bake_container_name(
            &self.settings().name,
            &req.series,
            req.tags.get(tags::RUN).map(String::as_str),
        );
        // The parent is on the daemon now: its labels and the disk limit are known.
        let (parent_id, blank) = self.parent_on_daemon(req).await?.ok_or_else(|| {
            RuntimeError::Refused(format!(
                "{}: parent image '{}' is not on the daemon",
                req.label,
                self.parent_ref(req)
            ))
        })?;
        let ctx = EmitContext {
            blank,
            storage_size: self
                .bake_disk_limit(req.disk_size_gb, &parent_id, req.log.as_ref())
                .await?,
            parent_read: true,
        };
        let (rendered, assertions) = self.render_packer_root(req, &ctx)?;
        packer::emit_with(req, rendered).await?;
        let mut file = packer::root_file(req);
        let (major, minor) = csis_packer::process::version(binary).await?;
        if (major, minor) < (1, 7) {
            // same root, minus `required_plugins` (docker and ansible are built into packer < 1.7)
            let text = tokio::fs::read_to_string(req.emit_dir.join(&file))
                .await
                .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
            let legacy = file.replace(".pkr.hcl", ".packer-lt-1.7.pkr.hcl");
            tokio::fs::write(
                req.emit_dir.join(&legacy),
                packer::without_packer_block(&text),
            )
            .await
            .map_err(|e| RuntimeError::Failed(format!("{}: {e}", req.label)))?;
            req.log.line(&format!(
                "packer {major}.{minor} predates required_plugins: building {legacy}"
            ));
            file = legacy;
        }
        let manifest = req.emit_dir.join("manifest.json");
        let _ = tokio::fs::remove_file(&manifest).await;
        if let Err(e) = self.remove_left_behind(&container).await {
            return Err(RuntimeError::Failed(format!("{}: {e}", req.label)));
        }
        let guard = ContainerGuard::bake(d.clone(), container.clone());
        let env: std::collections::BTreeMap<String, String> =
            self.settings().tool_environment().into_iter().collect();
        let result = csis_packer::process::run(csis_packer::process::PackerRun {
            binary,
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
        let img = self.inspect_image_opt(&artifact).await?.ok_or_else(|| {
            RuntimeError::Failed(format!(
                "{}: packer's artifact {artifact} is not on the daemon",
                req.label
            ))
        })?;
        Ok(BakeOutcome {
            build_id: img.id.unwrap_or(artifact),
            name: made,
            assertions,
        })
    }
}
