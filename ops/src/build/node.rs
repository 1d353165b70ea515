//! The node dispatch: each node of the run to what does it (the bake and
//! the nodes after it in `bake.rs` and `after.rs`, storage and instance
//! nodes in `crate::fleet`), and the teardown of a tofu root's unfinished
//! proofs after the run.

use super::*;

impl BuildState {
    pub(super) fn runtime(&self, name: &str) -> Result<&DynRuntime, NodeError> {
        self.runtimes
            .get(name)
            .ok_or_else(|| NodeError::new(format!("runtime {name} is not constructed")))
    }

    pub(super) async fn act(self: Arc<Self>, cx: NodeContext) -> Result<NodeOutput, NodeError> {
        let c = &self.session.compiled;
        match c.spec(cx.id()).clone() {
            NodeSpec::Resolve(r) => {
                let rt = self.runtime(&r.runtime)?;
                let req = resolve_request(&r);
                let img = rt.resolve(&req).await.map_err(rt_err)?;
                cx.log(format!("resolved {}", img.id));
                let out = json!({"id": img.id});
                self.resolved.lock().unwrap().insert(cx.id(), img);
                Ok(NodeOutput::new(out))
            }
            NodeSpec::Emit { bake } => {
                let spec = self.spec_of(bake, NodeKind::Emit)?;
                let rt = self.runtime(&spec.runtime)?;
                let parent = self.parent_for_emit(&spec)?;
                let fp = self.session.fps.get(bake).to_hex();
                let req = self.request(&spec, parent, fp, None, cx.cancel().clone());
                let files = rt.emit(&req).await.map_err(rt_err)?;
                Ok(NodeOutput::new(json!({"files": files})))
            }
            NodeSpec::Bake(spec) => self.bake(&cx, &spec).await,
            NodeSpec::Retag { bake } => {
                let Some(build) = self.built_by(bake) else {
                    return Ok(NodeOutput::none());
                };
                let spec = self.spec_of(bake, NodeKind::Retag)?;
                let rt = self.runtime(&spec.runtime)?;
                let rec = self.recorder.find(&build);
                let mut tags = BTreeMap::new();
                if let Some(r) = rec {
                    tags.insert(
                        tags::PARENT.to_string(),
                        r.parent.clone().unwrap_or_else(|| "vendor".into()),
                    );
                    if let Some(fp) = &r.input_fingerprint {
                        tags.insert(tags::FINGERPRINT.to_string(), fp.chars().take(16).collect());
                    }
                }
                match rt.retag_image(&build, &tags).await {
                    Ok(()) => Ok(NodeOutput::new(json!({"build_id": build}))),
                    Err(RuntimeError::Unsupported { .. }) => Ok(NodeOutput::none()),
                    Err(e) => Err(rt_err(e)),
                }
            }
            NodeSpec::Test { bake, tests } => self.test(&cx, bake, &tests).await,
            NodeSpec::Release { bake, model } => self.release(&cx, bake, &model).await,
            NodeSpec::Dispose {
                series,
                runtime,
                keep,
                ephemeral,
            } => {
                let keep = csis_cache::retention::keep_for(ephemeral, keep, None);
                self.dispose(&cx, &series, &runtime, keep).await
            }
            NodeSpec::Storage(_) | NodeSpec::Instance(_) => self.fleet(&cx).await,
            // mod tests have a graph of their own (crate::mod_tests)
            NodeSpec::ModTest(_) => Err(NodeError::new("a mod test is not a node of a build")),
        }
    }

    /// A storage or instance node (crate::fleet::apply): in parallel with
    /// the others (the recorder orders their records; the verdict's write
    /// takes the meta lock as the build's other writers of `meta-state/`).
    async fn fleet(&self, cx: &NodeContext) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let c = &self.session.compiled;
        let runtime = match c.spec(cx.id()) {
            NodeSpec::Storage(s) => &s.runtime,
            NodeSpec::Instance(i) => &i.runtime,
            _ => return Err(NodeError::new("not a fleet node")),
        };
        let log = |line: String| cx.log(line);
        let a = crate::fleet::apply::Apply {
            rt: self.runtime(runtime)?,
            recorder: &self.recorder,
            meta: &self.session.meta,
            tree: &self.session.tree,
            run: &self.run_id,
            cancel: cx.cancel().clone(),
            log: &log,
            meta_lock: &self.meta_lock,
        };
        let tree = &self.session.tree;
        let tofu = |ty: Option<&str>| ty.is_some_and(crate::fleet::tofu::is_tofu);
        let done = match c.spec(cx.id()) {
            NodeSpec::Storage(s)
                if tofu(
                    tree.storage_builder(&s.builder)
                        .map(|b| b.model.type_.as_str()),
                ) =>
            {
                let siblings: Vec<_> = self
                    .fleet_specs()
                    .filter_map(|n| match n {
                        NodeSpec::Storage(x) if x.builder == s.builder => Some(&**x),
                        _ => None,
                    })
                    .collect();
                crate::fleet::tofu::storage(&a, s, &siblings, &self.roots).await?
            }
            NodeSpec::Instance(i)
                if tofu(tree.instance_builder(&i.builder).map(|b| b.type_.as_str())) =>
            {
                let siblings: Vec<_> = self
                    .fleet_specs()
                    .filter_map(|n| match n {
                        NodeSpec::Instance(x) if x.builder == i.builder => Some(&**x),
                        _ => None,
                    })
                    .collect();
                crate::fleet::tofu::instance(&a, i, &siblings, &self.roots).await?
            }
            NodeSpec::Storage(s) => crate::fleet::apply::storage(&a, s).await?,
            NodeSpec::Instance(i) => crate::fleet::apply::instance(&a, i).await?,
            _ => unreachable!("matched above"),
        };
        cx.log(done.reason.clone());
        Ok(NodeOutput::new(
            serde_json::to_value(&done).map_err(NodeError::new)?,
        ))
    }

    /// After the run: the ephemerals of a tofu root whose proofs the run
    /// left unfinished (cancelled, or a due one's node skipped or failed
    /// before its verdict) are torn down now, not left standing for the
    /// root's next plan (`fleet::tofu::RootRuns::abandon`); what fails is
    /// said, the machines and their records as they stand.
    pub(super) async fn abandoned_proofs(&self) {
        for (dir, runtime) in self.roots.unfinished() {
            let root = dir.display().to_string();
            let say = |line: String| {
                self.renderer.note(&Notice::EphemeralsTeardown {
                    root: root.clone(),
                    line,
                })
            };
            let Ok(rt) = self.runtime(&runtime) else {
                continue;
            };
            let a = crate::fleet::apply::Apply {
                rt,
                recorder: &self.recorder,
                meta: &self.session.meta,
                tree: &self.session.tree,
                run: &self.run_id,
                // the run's token may be cancelled: the teardown is the
                // clean-up of what the run brought up
                cancel: CancellationToken::new(),
                log: &say,
                meta_lock: &self.meta_lock,
            };
            if let Err(e) = self.roots.abandon(&a, &dir).await {
                self.renderer.note(&Notice::Warning {
                    message: format!(
                        "tofu root {root}: the ephemerals' teardown failed: {}",
                        e.message
                    ),
                });
            }
        }
    }

    /// Every storage and instance node's spec.
    fn fleet_specs(&self) -> impl Iterator<Item = &NodeSpec> + '_ {
        let c = &self.session.compiled;
        c.graph
            .ids()
            .map(|id| c.spec(id))
            .filter(|s| matches!(s, NodeSpec::Storage(_) | NodeSpec::Instance(_)))
    }

    /// The compiled bake that the `node` (emit, retag, test, release) of
    /// `bake` stands on.
    pub(super) fn spec_of(&self, bake: NodeId, node: NodeKind) -> Result<BakeSpec, NodeError> {
        self.session
            .compiled
            .bake_spec(bake)
            .cloned()
            .ok_or_else(|| NodeError::new(format!("{node} without bake")))
    }

    /// The build `bake` made in this run, if it made one.
    pub(super) fn built_by(&self, bake: NodeId) -> Option<String> {
        self.built.lock().unwrap().get(&bake).cloned()
    }
}
