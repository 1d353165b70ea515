//! The bake node and what it stands on: the parent an emission names and
//! the one a bake takes, the request a runtime gets, and the adoption of a
//! build a killed run left unrecorded.

use super::*;

impl BuildState {
    /// The parent an emission names, before the bake: the vendor image the
    /// resolve node found; the pinned build; a build made earlier in this
    /// run; for a parent that still bakes in this run, a lookup of its
    /// newest output by name ([`BakeParent::Deferred`], the original's
    /// name-pattern query); otherwise the parent's head build. Never a
    /// placeholder.
    pub(super) fn parent_for_emit(&self, spec: &BakeSpec) -> Result<BakeParent, NodeError> {
        let c = &self.session.compiled;
        match &spec.parent {
            ParentSpec::Vendor { .. } => Ok(self.parent_for_bake(spec)?.0),
            ParentSpec::Image {
                series,
                bake,
                policy,
                pinned_build,
            } => {
                let build = |build_id: String| BakeParent::Build {
                    series: series.clone(),
                    build_id,
                };
                if let (ParentPolicy::Pinned, Some(pin)) = (policy, pinned_build) {
                    return Ok(build(pin.clone()));
                }
                if let Some(id) = self.built.lock().unwrap().get(bake).cloned() {
                    return Ok(build(id));
                }
                if self.due_bakes.contains(bake) {
                    let name_prefix = c
                        .bake_spec(*bake)
                        .map(name_prefix)
                        .unwrap_or_else(|| series.clone());
                    return Ok(BakeParent::Deferred {
                        series: series.clone(),
                        name_prefix,
                    });
                }
                Ok(self.parent_for_bake(spec)?.0)
            }
            ParentSpec::Fixed { .. } => Ok(self.parent_for_bake(spec)?.0),
        }
    }

    /// The parent build a bake starts from, known only now (the parent may
    /// have baked earlier in this run).
    pub(super) fn parent_for_bake(
        &self,
        spec: &BakeSpec,
    ) -> Result<(BakeParent, String), NodeError> {
        match &spec.parent {
            ParentSpec::Vendor { resolve } => {
                let img = self
                    .resolved
                    .lock()
                    .unwrap()
                    .get(resolve)
                    .cloned()
                    .ok_or_else(|| NodeError::new("the vendor image was not resolved"))?;
                Ok((BakeParent::Vendor(img), "vendor".into()))
            }
            ParentSpec::Image {
                series,
                policy,
                pinned_build,
                ..
            } => {
                let build = match (policy, pinned_build) {
                    (ParentPolicy::Pinned, Some(pin)) => pin.clone(),
                    _ => self
                        .recorder
                        .head_build(series, &spec.runtime)
                        .ok_or_else(|| {
                            NodeError::new(format!(
                                "parent {series} has no build on {} yet",
                                spec.runtime
                            ))
                        })?,
                };
                Ok((
                    BakeParent::Build {
                        series: series.clone(),
                        build_id: build.clone(),
                    },
                    build,
                ))
            }
            ParentSpec::Fixed { id } => Ok((
                BakeParent::Build {
                    series: String::new(),
                    build_id: id.clone(),
                },
                id.clone(),
            )),
        }
    }

    pub(super) fn request(
        &self,
        spec: &BakeSpec,
        parent: BakeParent,
        fingerprint: String,
        log: Option<Arc<dyn LogSink>>,
        cancel: CancellationToken,
    ) -> BakeRequest {
        // As the original tags: `vendor`, the parent build, or `series:<parent>`
        // while the parent's build is not known (the bake re-emits with it).
        let parent_id = match &parent {
            BakeParent::Vendor(_) => "vendor".to_string(),
            BakeParent::Build { build_id, .. } => build_id.clone(),
            BakeParent::Deferred { series, .. } => format!("series:{series}"),
        };
        let caps: Capabilities =
            serde_json::from_value(spec.capabilities.clone()).unwrap_or_default();
        let mut tags = spec.tags.clone();
        // The tree's config id on every image and bake machine: what tells
        // this tree's builds from another tree's in one account or daemon,
        // in the original's form (lowercased) so its builds and ours agree.
        tags.insert(
            tags::CONFIG.into(),
            tags::config_value(&self.session.tree.config.id),
        );
        tags.insert(tags::SERIES.into(), spec.series.clone());
        tags.insert(tags::PARENT.into(), parent_id);
        tags.insert(tags::RUN.into(), self.run_id.clone());
        tags.insert(
            tags::FINGERPRINT.into(),
            fingerprint.chars().take(16).collect(),
        );
        tags.insert(tags::IDENTITY_TYPES.into(), caps.identity_types.join(","));
        tags.insert(tags::STORAGE_TYPES.into(), caps.storage_types.join(","));
        let root = self.session.root.clone();
        let emit_dir: PathBuf = crate::emission::root_dir(
            &root,
            &self.session.tree.config.generation_directory,
            spec.base,
            &spec.series,
            &spec.runtime,
        );
        BakeRequest {
            label: spec.label.to_string(),
            series: spec.series.clone(),
            runtime: spec.runtime.clone(),
            image_builder: spec.image_builder.clone(),
            final_name: spec.final_name.clone(),
            prefix: spec.series.clone(),
            parent,
            machine_type: spec.machine_type.clone(),
            disk_size_gb: Some(spec.disk_size_gb),
            bake_user: spec.bake_user.clone(),
            package_manager: spec.package_manager.clone(),
            family: spec.family.clone(),
            architecture: spec.architecture.clone(),
            steps: steps(spec),
            tests: spec
                .tests
                .iter()
                .map(|t| TestCommand {
                    description: t.description.clone(),
                    run: t.run.clone(),
                    expect_rc: t.expect_rc,
                    contains: t.contains.clone(),
                })
                .collect(),
            recipe: steps::recipe_of(spec),
            required_plugins: spec
                .required_plugins
                .iter()
                .map(
                    |(name, version, source)| csis_runtime::recipe::RequiredPlugin {
                        name: name.clone(),
                        version: version.clone(),
                        source: source.clone(),
                    },
                )
                .collect(),
            tags,
            tree_root: root,
            emit_dir,
            log: log.unwrap_or_else(|| Arc::new(csis_runtime::NullLog)),
            cancel,
            keep_failed: self.keep_failed,
        }
    }

    /// A build on the runtime with this bake's lineage tags (series, parent,
    /// fingerprint) that no record names: a bake that finished in the
    /// runtime while the csis that started it was killed before recording
    /// it. Adopting it instead of baking again is what makes "nothing is
    /// baked twice" hold across a kill. The runtime is asked once per run;
    /// a runtime that cannot answer means no recovery, never a failure.
    pub(super) async fn unrecorded_build(
        &self,
        runtime: &str,
        tags: &BTreeMap<String, String>,
    ) -> Option<(BakeOutcome, Option<String>)> {
        let images = self.runtime_images(runtime).await?;
        let same =
            |k: &str, img: &ImageFacts| tags.get(k).is_some() && img.tags.get(k) == tags.get(k);
        // Another tree's build (another config id, or none) is never adopted;
        // this tree's is in either form of its id (the original's, csis's earlier).
        let id = &self.session.tree.config.id;
        images
            .iter()
            .filter(|img| {
                img.tags
                    .get(tags::CONFIG)
                    .is_some_and(|c| tags::is_config_of(c, id))
                    && [tags::SERIES, tags::PARENT, tags::FINGERPRINT]
                        .iter()
                        .all(|k| same(k, img))
            })
            .find(|img| self.recorder.find(&img.build_id).is_none())
            .map(|img| {
                let outcome = BakeOutcome {
                    build_id: img.build_id.clone(),
                    name: img.name.clone().unwrap_or_else(|| img.build_id.clone()),
                    assertions: 0,
                };
                (outcome, img.tags.get(tags::RUN).cloned())
            })
    }

    /// What the runtime holds, asked once per run (None: it could not say).
    async fn runtime_images(&self, runtime: &str) -> Option<Arc<Vec<ImageFacts>>> {
        let mut cache = self.images.lock().await;
        if let Some(images) = cache.get(runtime) {
            return Some(images.clone());
        }
        let rt = self.runtimes.get(runtime)?;
        let images = Arc::new(rt.query_images().await.ok()?);
        cache.insert(runtime.to_string(), images.clone());
        Some(images)
    }

    /// A recorded parent build a bake may not start from: a revoked one, or
    /// one the runtime no longer holds (a record or journal line naming a
    /// build that is gone: hard drift, never a parent). A build this run
    /// made is the runtime's; a runtime that cannot answer is no claim.
    async fn refuse_parent(&self, spec: &BakeSpec, parent: &str) -> Result<(), NodeError> {
        let ParentSpec::Image { series, .. } = &spec.parent else {
            return Ok(());
        };
        if let Some(r) = self.session.revs.get(parent) {
            return Err(NodeError::new(format!(
                "not baked: parent build {parent} of {series} is revoked{}; bake a new {series} build or move the pin (`csis upgrade image {} --runtime {}`)",
                r.reason.as_deref().map(|x| format!(" ({x})")).unwrap_or_default(),
                spec.series,
                spec.runtime
            )));
        }
        if self.built.lock().unwrap().values().any(|b| b == parent) {
            return Ok(());
        }
        let holds = |images: &[ImageFacts]| images.iter().any(|i| i.build_id == parent);
        if self
            .runtime_images(&spec.runtime)
            .await
            .is_some_and(|i| !holds(&i))
        {
            // Asked earlier in the run: ask again before refusing (another
            // runner may have baked it since).
            self.images.lock().await.remove(&spec.runtime);
            if self
                .runtime_images(&spec.runtime)
                .await
                .is_some_and(|i| !holds(&i))
            {
                return Err(NodeError::new(format!(
                    "not baked: parent build {parent} of {series} is recorded but gone from {} (hard drift: `csis state query`); a child never bakes from a build the runtime lacks",
                    spec.runtime
                )));
            }
        }
        Ok(())
    }

    /// Builds of this tree's `series` an interrupted bake committed and
    /// never named (the runtime holds them unnamed, no record names them)
    /// that this bake does not adopt: baked from other inputs, nobody can
    /// adopt them. Each is removed and said so in the bake log; one that
    /// cannot be removed is said so too, and stays (`csis state query`
    /// shows it foreign).
    async fn remove_unadoptable(
        &self,
        rt: &DynRuntime,
        runtime: &str,
        series: &str,
        adopted: Option<&str>,
        log: &BakeLog,
    ) {
        let Some(images) = self.images.lock().await.get(runtime).cloned() else {
            return;
        };
        let id = &self.session.tree.config.id;
        let candidates: Vec<_> = images
            .iter()
            .filter(|i| {
                i.unnamed
                    && Some(i.build_id.as_str()) != adopted
                    && i.tags.get(tags::SERIES).map(String::as_str) == Some(series)
                    && i.tags
                        .get(tags::CONFIG)
                        .is_some_and(|c| tags::is_config_of(c, id))
                    && self.recorder.find(&i.build_id).is_none()
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        // never one a pin, a release or a launch record names (records
        // carried from elsewhere may name a build lineage lacks); records
        // that cannot be read remove nothing
        let meta = &self.session.meta;
        let Ok(prot) =
            (|| -> Result<csis_cache::retention::Protections, csis_cache::CacheError> {
                Ok(csis_cache::retention::Protections::from_records(
                    &meta.pins()?,
                    &meta.releases()?,
                    &csis_cache::LaunchParams::load(meta)?,
                ))
            })()
        else {
            return;
        };
        for img in candidates {
            if !prot.reasons(&img.build_id).is_empty() {
                log.line(&format!(
                    "kept {}: committed by an interrupted bake of {series}, never tagged, but {}",
                    img.build_id,
                    prot.reasons(&img.build_id).join(", ")
                ));
                continue;
            }
            match rt.dispose_image(&img.build_id).await {
                Ok(_) => log.line(&format!(
                    "removed {}: an interrupted bake of {series} committed it and never tagged it, from other inputs than this bake's (not adoptable)",
                    img.build_id
                )),
                Err(e) => log.line(&format!(
                    "warning: {} (committed by an interrupted bake of {series}, never tagged, not adoptable) could not be removed: {e}",
                    img.build_id
                )),
            }
        }
    }

    pub(super) async fn bake(
        &self,
        cx: &NodeContext,
        spec: &BakeSpec,
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        if let Some(f) = self.recorder.failure() {
            return Err(NodeError::new(format!(
                "not baked: records cannot be written ({f})"
            )));
        }
        self.refuse_missing_files(spec)?;
        let rt = self.runtime(&spec.runtime)?;
        let (parent, parent_build) = self.parent_for_bake(spec)?;
        self.refuse_parent(spec, &parent_build).await?;
        let log = self.open_log(cx);
        log.line(&format!("{} ({})", cx.label(), cx.reason()));
        let fp = cx.fingerprint().to_hex();
        let req = self.request(
            spec,
            parent,
            fp.clone(),
            Some(log.clone()),
            cx.cancel().clone(),
        );
        let recovered = if matches!(cx.reason(), Reason::Forced) {
            None
        } else {
            self.unrecorded_build(&spec.runtime, &req.tags).await
        };
        if recovered.is_none() && cx.reason().code() == csis_rules::compile::REINSTATE {
            if let Some(out) = self
                .reinstate(cx, spec, rt, &fp, &parent_build, &log)
                .await?
            {
                return Ok(out);
            }
        }
        // A recovered build is named as its bake would have named it: an
        // adoption that cannot be completed is no adoption (bake anew).
        let recovered = match recovered {
            Some(r) => named_for_adoption(rt, r, &log).await,
            None => None,
        };
        // An adopted build keeps the run that baked it (its `csis_run` tag).
        let baked_by = recovered.as_ref().and_then(|r| r.1.clone());
        // The runtime's bake time (none for an adopted build).
        let mut bake_seconds = None;
        let adopted = recovered.as_ref().map(|r| r.0.build_id.clone());
        self.remove_unadoptable(rt, &spec.runtime, &spec.series, adopted.as_deref(), &log)
            .await;
        let outcome = match recovered.map(|r| r.0) {
            Some(outcome) => {
                log.line(&format!(
                    "recovered {}: an earlier, interrupted run baked it with these very inputs and did not record it",
                    outcome.build_id
                ));
                outcome
            }
            None => {
                let started = std::time::Instant::now();
                let baked = rt.bake(&req).await;
                bake_seconds = Some(started.elapsed().as_secs_f64());
                csis_runtime::recipe::remove_private_vars(&req);
                baked.map_err(|e| {
                    log.line(&format!("bake failed: {e}"));
                    rt_err(e)
                })?
            }
        };
        // Record at once, before the node is reported finished.
        let canonical = self
            .session
            .compiled
            .graph
            .canonical(cx.id(), &self.session.fps);
        let mut rec = BuildRecord::new(&outcome.build_id, &spec.series, &spec.runtime);
        rec.name = Some(outcome.name.clone());
        rec.parent = Some(parent_build.clone());
        rec.input_fingerprint = Some(fp);
        rec.run = Some(baked_by.unwrap_or_else(|| self.run_id.clone()));
        rec.capabilities = serde_json::from_value(spec.capabilities.clone()).unwrap_or_default();
        rec.mods = spec
            .mod_records
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m["run"] = json!(self.run_id);
                m
            })
            .collect();
        rec.local_mods = !spec.base && !spec.mods.is_empty();
        rec.tests = RecordTests {
            in_bake: true,
            assertions: outcome.assertions as u64,
        };
        rec.update = spec.update.clone();
        rec.chain = spec.chain.clone();
        rec.parent_fingerprint = canonical["deps"]["parent"].as_str().map(str::to_string);
        rec.inputs = Some(canonical);
        rec.fingerprint_recipe = Some(format!("{}+{}", csis_engine::RECIPE, BAKE_RECIPE));
        rec.bake_seconds = bake_seconds.map(|d| (d * 1000.0).round() / 1000.0);
        rec.vendor_image = vendor_image_of(&req.parent);
        let pin = match &spec.parent {
            ParentSpec::Image { .. } => Some(PinBinding {
                image: spec.series.clone(),
                runtime: spec.runtime.clone(),
                parent_build: parent_build.clone(),
            }),
            _ => None,
        };
        self.recorder.record(rec, pin).map_err(|e| {
            NodeError::new(format!(
                "the bake of {} succeeded as {} but could not be recorded: {e}",
                cx.label(),
                outcome.build_id
            ))
        })?;
        self.built
            .lock()
            .unwrap()
            .insert(cx.id(), outcome.build_id.clone());
        log.line(&format!("recorded {}", outcome.build_id));
        Ok(NodeOutput::new(json!({"build_id": outcome.build_id})))
    }
}

impl BuildState {
    /// A playbook or script gone since the load: refused at the line of the
    /// tree naming it, before the runtime is asked.
    fn refuse_missing_files(&self, spec: &BakeSpec) -> Result<(), NodeError> {
        let tree = &self.session.tree;
        let Some(img) = (!spec.base).then(|| tree.image(&spec.series)).flatten() else {
            return Ok(());
        };
        match csis_rules::load::missing_files_of(tree, img).first() {
            Some(d) => Err(NodeError::new(format!(
                "not baked: {}: {}: {}",
                d.location(),
                d.path,
                d.message
            ))),
            None => Ok(()),
        }
    }

    /// The bake's log in the run's folder (said to the reporter first).
    fn open_log(&self, cx: &NodeContext) -> Arc<BakeLog> {
        let log_path = run_log(&self.local, &self.run_id, &cx.label().to_string());
        self.renderer.bake_log(&cx.label().to_string(), &log_path);
        if let Some(d) = log_path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        Arc::new(BakeLog {
            label: cx.label().to_string(),
            file: Mutex::new(File::create(&log_path).ok()),
            renderer: self.renderer.clone(),
        })
    }

    /// The plan found this bake's inputs built before ([`REINSTATE`]): take
    /// that build as the series head again instead of baking the same image
    /// twice. It must be recorded with this very fingerprint and parent
    /// build, not revoked, and stand on the runtime (when the runtime can
    /// say); the runtime names it as a bake would (`Runtime::adopt`: the
    /// movable tag). `None` when any of that fails: the bake goes on.
    ///
    /// [`REINSTATE`]: csis_rules::compile::REINSTATE
    async fn reinstate(
        &self,
        cx: &NodeContext,
        spec: &BakeSpec,
        rt: &DynRuntime,
        fp: &str,
        parent_build: &str,
        log: &BakeLog,
    ) -> Result<Option<NodeOutput>, NodeError> {
        let lineage = self.recorder.lineage();
        let Some(rec) = lineage
            .series_builds(&spec.series, &spec.runtime)
            .filter(|b| b.input_fingerprint.as_deref() == Some(fp))
            .filter(|b| b.parent.as_deref().unwrap_or("vendor") == parent_build)
            .filter(|b| !self.session.revs.is_revoked(&b.build_id))
            .max_by(|a, b| csis_cache::run_order(a, b))
        else {
            log.line("no recorded build has these inputs and this parent: baking anew");
            return Ok(None);
        };
        let id = rec.build_id.clone();
        if let Some(images) = self.runtime_images(&spec.runtime).await {
            if !images.iter().any(|i| i.build_id == id) {
                log.line(&format!(
                    "{id} had these inputs but is gone from runtime {}: baking anew",
                    spec.runtime
                ));
                return Ok(None);
            }
        }
        match rt.adopt(&id, true).await {
            Ok(lines) => {
                for l in lines {
                    log.line(&format!("{id}: {l}"));
                }
            }
            Err(e) => {
                log.line(&format!(
                    "not reinstating {id}: it cannot be named ({e}); baking anew"
                ));
                return Ok(None);
            }
        }
        let pin = match &spec.parent {
            ParentSpec::Image { .. } => Some(PinBinding {
                image: spec.series.clone(),
                runtime: spec.runtime.clone(),
                parent_build: parent_build.to_string(),
            }),
            _ => None,
        };
        self.recorder
            .reinstate(&id, &self.run_id, pin)
            .map_err(|e| {
                NodeError::new(format!(
                    "{} found its inputs built as {id} but could not record it as the head: {e}",
                    cx.label()
                ))
            })?;
        self.built.lock().unwrap().insert(cx.id(), id.clone());
        log.line(&format!(
            "reinstated {id}: baked by run {} with these very inputs from the same parent; nothing baked",
            rec.run.as_deref().unwrap_or("?")
        ));
        Ok(Some(NodeOutput::reused(
            json!({"build_id": id, "reinstated": true}),
        )))
    }
}

/// What a base's record keeps of the vendor image its bake started from
/// (none for a bake from a build): the reference, the id the resolve
/// found, whether the reference can move (`csis_ops::vendor` reads it
/// again at every plan).
pub(crate) fn vendor_image_of(parent: &BakeParent) -> Option<csis_cache::VendorImage> {
    let BakeParent::Vendor(img) = parent else {
        return None;
    };
    Some(csis_cache::VendorImage {
        reference: img.name.clone().unwrap_or_else(|| img.id.clone()),
        id: img.id.clone(),
        movable: img
            .facts
            .get(csis_runtime::FACT_MOVABLE)
            .is_some_and(|v| v == "true"),
        extra: Default::default(),
    })
}

/// A build's final name without its timestamp: what a child baking in
/// the same run looks its parent up by (`<os>-<runtime>` for a base image,
/// `<image>-<image builder>`; emission.md §3.1).
pub fn name_prefix(spec: &BakeSpec) -> String {
    if spec.base {
        format!("{}-{}", spec.display, spec.runtime)
    } else {
        format!("{}-{}", spec.display, spec.image_builder)
    }
}

/// A recovered build, named as its bake would have named it; an adoption
/// that cannot be completed is no adoption (None: bake anew).
async fn named_for_adoption(
    rt: &DynRuntime,
    r: (BakeOutcome, Option<String>),
    log: &BakeLog,
) -> Option<(BakeOutcome, Option<String>)> {
    match rt.adopt(&r.0.build_id, true).await {
        Ok(lines) => {
            for l in lines {
                log.line(&format!("{}: {l}", r.0.build_id));
            }
            Some(r)
        }
        Err(e) => {
            log.line(&format!(
                "not adopting {}: it cannot be named ({e}); baking anew",
                r.0.build_id
            ));
            None
        }
    }
}
