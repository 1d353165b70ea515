//! The nodes after a bake: the post-bake test of the build this run made,
//! its release, and the retention of its series (dispose), each reading and
//! writing the records through the build's recorder.

use super::*;

impl BuildState {
    /// A post-bake test node (`tests.post_bake`): after its image's retag,
    /// launch the build this run made, run the declared tests in it, and
    /// record the outcome in `meta-state/image-tests.yaml` (crate::image_test).
    /// A failed test fails the node (and so its release); the bake's record
    /// stays. The machine is removed whatever happens.
    pub(super) async fn test(
        &self,
        cx: &NodeContext,
        bake: NodeId,
        tests: &[csis_rules::tree::InBakeTest],
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let spec = self.spec_of(bake, NodeKind::Test)?;
        let Some(build) = self.built_by(bake) else {
            cx.log(format!(
                "{} on {}: no build made in this run, nothing to test",
                spec.series, spec.runtime
            ));
            return Ok(NodeOutput::none());
        };
        let rt = self.runtime(&spec.runtime)?.clone();
        let label = cx.label().to_string();
        let log_path = run_log(&self.local, &self.run_id, &label);
        if let Some(d) = log_path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let log = BakeLog {
            label: label.clone(),
            file: Mutex::new(File::create(&log_path).ok()),
            renderer: self.renderer.clone(),
        };
        let outcome = crate::image_test::run_post_bake(
            crate::image_test::PostBake {
                rt: &rt,
                runtime: &spec.runtime,
                series: &spec.series,
                build_id: &build,
                tests,
                run: &self.run_id,
                cancel: cx.cancel().clone(),
            },
            &|line: &str| log.line(line),
        )
        .await
        .map_err(|e| {
            log.line(&format!("test failed: {e}"));
            rt_err(e)
        })?;
        {
            let _meta = self.meta_lock.lock().await;
            crate::image_test::record(&self.session.meta, &outcome).map_err(|e| {
                NodeError::new(format!(
                    "the post-bake tests of {build} ran but could not be recorded: {e:#}"
                ))
            })?;
        }
        let line = outcome.summary();
        log.line(&line);
        cx.log(line.clone());
        if !outcome.ok {
            let failed: Vec<String> = outcome
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| format!("{}: {}", c.name, c.detail))
                .collect();
            return Err(NodeError::new(format!(
                "post-bake tests of {build} FAILED ({}); log {}",
                failed.join("; "),
                log_path.display()
            )));
        }
        Ok(NodeOutput::new(json!({
            "build_id": build,
            "ok": outcome.ok,
            "checks": outcome.checks.len(),
            "instance": outcome.instance,
        })))
    }

    /// A release node (core.md §5.4): after its image's retag, release the
    /// build this run made if it qualifies. A head that does not qualify
    /// yet is reported, not a failure; a failed release (the mark on the
    /// runtime) fails the node, and with it the build's exit code.
    pub(super) async fn release(
        &self,
        cx: &NodeContext,
        bake: NodeId,
        model: &str,
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let spec = self.spec_of(bake, NodeKind::Release)?;
        let (series, runtime) = (spec.series.as_str(), spec.runtime.as_str());
        let Some(build) = self.built_by(bake) else {
            cx.log(format!(
                "{series} on {runtime}: no build made in this run, nothing to release"
            ));
            return Ok(NodeOutput::none());
        };
        let _meta = self.meta_lock.lock().await;
        if self.store.is_some() {
            self.recorder.refresh().map_err(NodeError::new)?;
        }
        // The series' records as recorded so far (this run's bakes included).
        let lineage = self
            .recorder
            .read(|l, _| records_of(l, series, None))
            .map_err(NodeError::new)?;
        let rt = self.runtimes.get(runtime).cloned();
        let tree = &self.session.tree;
        let outcome = crate::release::release_in_build(
            tree,
            lineage,
            series,
            runtime,
            model,
            &self.run_id,
            rt,
        )
        .await
        .map_err(|e| NodeError::new(format!("{e:#}")))?;
        let released = matches!(outcome, crate::release::ReleaseEvent::Released { .. });
        let problem = outcome.is_problem();
        let notice = super::Notice::Release {
            label: cx.label().to_string(),
            outcome,
        };
        let line = self.renderer.words(&notice).join("; ");
        cx.log(line.clone());
        if problem {
            return Err(NodeError::new(line));
        }
        self.renderer.note(&notice);
        Ok(NodeOutput::new(json!({
            "build_id": build,
            "model": model,
            "released": released,
            "message": line,
        })))
    }

    /// A dispose node (core.md §5.3): the retention of its (series,
    /// runtime) once its bake is recorded. Never a build in use: the plan
    /// keeps releases and pinned or launched builds (as debt), the runtime
    /// is asked for live references, and [`order_dispose_nodes`](super::order::order_dispose_nodes) runs this
    /// node after every bake of this run that stands on a build of the
    /// series (the compiled graph puts it after the series' release).
    pub(super) async fn dispose(
        &self,
        cx: &NodeContext,
        series: &str,
        runtime: &str,
        keep: Option<u32>,
    ) -> Result<NodeOutput, NodeError> {
        if self.dry_run {
            return Ok(NodeOutput::none());
        }
        let _meta = self.meta_lock.lock().await;
        // On a shared store: the records as they are now (what other
        // runners recorded since this run read them), and what their
        // leases cover (the parents their bakes stand on).
        let covered = match &self.store {
            Some(store) => {
                self.recorder.refresh().map_err(NodeError::new)?;
                csis_cache::lease::covered_by_others(store, &self.run_id).map_err(NodeError::new)?
            }
            None => BTreeMap::new(),
        };
        let (lineage, pins) = self
            .recorder
            .read(|l, p| {
                let l = records_of(l, series, Some(runtime));
                let ids: std::collections::BTreeSet<&str> =
                    l.builds.iter().map(|b| b.build_id.as_str()).collect();
                // Only what protects these builds (the retention reads no more).
                let to_these = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
                    m.iter()
                        .filter(|(_, b)| ids.contains(b.as_str()))
                        .map(|(k, b)| (k.clone(), b.clone()))
                        .collect()
                };
                let pins = csis_cache::Pins {
                    images: to_these(&p.images),
                    instances: to_these(&p.instances),
                    ..Default::default()
                };
                (l, pins)
            })
            .map_err(NodeError::new)?;
        // A build another runner's lease covers is kept as a pinned one is.
        let leased: BTreeMap<String, String> = covered
            .into_iter()
            .filter(|(build, _)| lineage.builds.iter().any(|b| &b.build_id == build))
            .collect();
        let rt = self.runtime(runtime)?.clone();
        let runtime_of = |name: &str| {
            if name == runtime {
                Ok(rt.clone())
            } else {
                Err(format!("runtime {name} is not this node's ({runtime})"))
            }
        };
        let disposed = Mutex::new(Vec::<String>::new());
        let forget = |build_id: &str, unneeded: &[String]| -> Result<Vec<String>> {
            let removed = self.recorder.update(|l, p| {
                csis_cache::retention::forget_build(l, p, build_id, unneeded, Some(&self.run_id))
            })?;
            disposed.lock().unwrap().push(build_id.to_string());
            Ok(removed)
        };
        let d = crate::dispose::Disposer {
            runtime: &runtime_of,
            forget: &forget,
        };
        let label = cx.label().to_string();
        let notice = |e: &crate::dispose::DisposeEvent| super::Notice::Dispose {
            label: label.clone(),
            outcome: e.clone(),
        };
        let each = |e: &crate::dispose::DisposeEvent| {
            let n = notice(e);
            for line in self.renderer.words(&n) {
                cx.log(line);
            }
            self.renderer.note(&n);
        };
        let report = crate::dispose::retention_in_build(
            &self.session.tree,
            &lineage,
            &pins,
            &leased,
            (series, runtime, keep),
            &d,
            &each,
        )
        .await
        .map_err(|e| NodeError::new(format!("{e:#}")));
        // What the runtime held may be gone now: recovery asks again.
        self.images.lock().await.remove(runtime);
        let disposed = disposed.into_inner().unwrap();
        let report = report?;
        if !report.ok() {
            let problems: Vec<String> = report
                .events
                .iter()
                .filter(|e| e.is_problem())
                .flat_map(|e| self.renderer.words(&notice(e)))
                .collect();
            return Err(NodeError::new(problems.join("; ")));
        }
        Ok(NodeOutput::new(json!({ "disposed": disposed })))
    }
}

/// The builds of `series` (on `runtime`, or every runtime): all a release
/// or a retention of that series reads, copied out of the recorder.
fn records_of(l: &csis_cache::Lineage, series: &str, runtime: Option<&str>) -> csis_cache::Lineage {
    let mut out = csis_cache::Lineage::default();
    for b in &l.builds {
        if b.series == series && runtime.is_none_or(|r| b.runtime.as_deref() == Some(r)) {
            out.builds.push(b.clone());
        }
    }
    out
}
