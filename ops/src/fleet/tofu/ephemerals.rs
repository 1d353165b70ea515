//! The ephemeral instances of a tofu instance root (issue 22; core.md
//! §3.8): they share the root's `ephemeral_present`, so they come up
//! together and go together. The due ones are proved (verified, post-bake
//! tests, a verdict), the others that come up with them are recorded
//! standing; when no verdict is awaited any more (the last due one's, or
//! the run ended without some: [`RootRuns::abandon`]) one teardown pass
//! (`ephemeral_present = false`, destroys allowed only for the ephemerals'
//! modules) removes them all and closes each one's generation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use csis_cache::fleet::EphemeralVerdict;
use csis_engine::NodeError;
use csis_rules::compile::InstanceSpec;
use csis_rules::fleet::{Instance, OnFailure};
use csis_tofu::runner::Outcome;

use super::super::apply::{failed, post_bake, record_verdict, rt_err, verify, Applied, Apply};
use super::super::plan::FleetView;
use super::{
    applied, applied_machine, lock, machines_of_tree, named_machines, one_new, Ask, RootRun,
    RootRuns,
};

/// The ephemerals of one instance root this run proves: the root's
/// ephemerals share `ephemeral_present`, so they come up together and go
/// together, when the last of those due has its verdict.
#[derive(Debug, Clone, Default)]
pub(super) struct Proofs {
    /// Not finished yet.
    pub(super) due: BTreeSet<String>,
    /// Finished: (name, its verdict when one was recorded, kept).
    pub(super) finished: Vec<(String, Option<EphemeralVerdict>, bool)>,
    /// Every ephemeral's module in the root (what the teardown destroys).
    pub(super) modules: Vec<String>,
    /// The root's other ephemerals, with the build each boots: not due
    /// this run, they come up with the due ones (one `ephemeral_present`
    /// for all), so each is recorded standing once the apply made it and
    /// closed by the teardown, as the due ones are.
    pub(super) bystanders: Vec<(String, String)>,
    /// The root's image variables (written again for the teardown).
    pub(super) images: Vec<(String, String)>,
    pub(super) root: Option<csis_tofu::EmittedRoot>,
    pub(super) runtime: String,
}

impl RootRuns {
    /// The root's ephemerals not due this run that the apply brought up
    /// with the due ones: each recorded standing (see [`came_up`]), so the
    /// teardown closes it as it closes the due ones.
    pub(super) async fn record_bystanders(&self, a: &Apply<'_>, dir: &Path) -> Result<(), String> {
        let bystanders = match lock(&self.proofs).get(dir) {
            Some(p) if !p.bystanders.is_empty() => p.bystanders.clone(),
            _ => return Ok(()),
        };
        let recorded = came_up(a, &bystanders, "came up with the root's due ephemerals")
            .await
            .map_err(|e| e.message)?;
        if let Some(p) = lock(&self.proofs).get_mut(dir) {
            p.finished.extend(recorded);
        }
        Ok(())
    }

    /// An ephemeral of the instance root at `dir` has finished its proof
    /// (`verdict`: recorded standing; `keep`: to stay standing). The last
    /// of the root's due ephemerals tears them all down (they share
    /// `ephemeral_present`).
    pub(super) async fn finished(
        &self,
        a: &Apply<'_>,
        dir: &Path,
        name: &str,
        verdict: Option<EphemeralVerdict>,
        keep: bool,
        out: &mut Applied,
    ) -> Result<(), NodeError> {
        let last = {
            let mut all = lock(&self.proofs);
            let Some(p) = all.get_mut(dir) else {
                return Ok(());
            };
            p.due.remove(name);
            p.finished.push((name.to_string(), verdict, keep));
            if !p.due.is_empty() {
                out.reason = format!(
                    "{}; removed with the root's other ephemerals after the last verdict",
                    out.reason
                );
                return Ok(());
            }
            all.remove(dir).expect("looked up above")
        };
        self.teardown(a, dir, last, out).await
    }

    /// An ephemeral instance of `builder`'s root whose node found nothing
    /// to do when it ran (another runner proved it meanwhile): the root's
    /// proofs wait for it no more, and when it was the last one awaited,
    /// the teardown runs now rather than at the root's next plan.
    pub(super) async fn settle(
        &self,
        a: &Apply<'_>,
        builder: &str,
        name: &str,
        out: &mut Applied,
    ) -> Result<(), NodeError> {
        lock(&self.settled).insert(name.to_string());
        let dir = lock(&self.proofs)
            .iter()
            .find(|(_, p)| {
                p.due.contains(name) && p.root.as_ref().is_some_and(|r| r.builder == builder)
            })
            .map(|(d, _)| d.clone());
        match dir {
            Some(dir) => self.finished(a, &dir, name, None, false, out).await,
            None => Ok(()),
        }
    }

    /// The roots whose proofs this run left unfinished although their apply
    /// brought the ephemerals up (the run was cancelled, or a due
    /// ephemeral's node did not run or failed before its verdict): each
    /// root's directory and runtime, for [`RootRuns::abandon`].
    pub fn unfinished(&self) -> Vec<(PathBuf, String)> {
        let runs = lock(&self.runs);
        let applied = |dir: &PathBuf| {
            runs.get(dir).and_then(|c| c.get()).is_some_and(|r| {
                matches!(
                    r,
                    Ok(RootRun {
                        outcome: Outcome::Applied,
                        ..
                    })
                )
            })
        };
        lock(&self.proofs)
            .iter()
            .filter(|(d, _)| applied(d))
            .map(|(d, p)| (d.clone(), p.runtime.clone()))
            .collect()
    }

    /// The teardown of a root [`RootRuns::unfinished`] named: its
    /// ephemerals go with the verdicts there are (none is waited for any
    /// more), as after the last verdict.
    pub async fn abandon(&self, a: &Apply<'_>, dir: &Path) -> Result<(), NodeError> {
        let Some(mut p) = lock(&self.proofs).remove(dir) else {
            return Ok(());
        };
        let waited: Vec<String> = std::mem::take(&mut p.due).into_iter().collect();
        (a.log)(format!(
            "the run ended before the proof of {} (ephemeral) finished: the root's ephemerals go now",
            waited.join(", ")
        ));
        // they came up with the apply, unproved: recorded, then closed
        let up: Vec<(String, String)> = (p.images.iter())
            .filter(|(n, _)| waited.contains(n))
            .cloned()
            .collect();
        let recorded = came_up(a, &up, "came up, its proof not run").await?;
        p.finished.extend(recorded);
        self.teardown(a, dir, p, &mut Applied::default()).await
    }

    /// The teardown of a root's ephemerals once no verdict is awaited,
    /// unless one is kept: a plan with `ephemeral_present = false` whose
    /// only destroys are the ephemerals' modules, applied, then each one's
    /// record closed once its machine is gone.
    async fn teardown(
        &self,
        a: &Apply<'_>,
        dir: &Path,
        last: Proofs,
        out: &mut Applied,
    ) -> Result<(), NodeError> {
        let kept: Vec<&str> = last
            .finished
            .iter()
            .filter(|(_, _, k)| *k)
            .map(|(n, _, _)| n.as_str())
            .collect();
        if !kept.is_empty() {
            (a.log)(format!(
                "kept (on_failure: keep): {}; the root's ephemerals share ephemeral_present, so none is removed",
                kept.join(", ")
            ));
            return Ok(());
        }
        let root = last.root.as_ref().expect("registered with its root");
        csis_tofu::write_image_vars(dir, &last.images, Some(false)).map_err(NodeError::new)?;
        let ask = Ask {
            lifecycle: "instance-image",
            builder: root.builder.clone(),
            runtime: last.runtime.clone(),
            setting: "apply_instances",
            replace: Vec::new(),
            allowed: last.modules.clone(),
            images: Vec::new(),
            ephemeral: Some(false),
            archives: Default::default(),
        };
        (a.log)(format!(
            "tofu root {}: the ephemerals' teardown (ephemeral_present = false)",
            root.dir.display()
        ));
        let run = self
            .sequence(root, dir, &ask)
            .await
            .map_err(NodeError::new)?;
        let mut said = Applied::default();
        if !applied(&run, &mut said)? {
            return Err(NodeError::new(format!(
                "the teardown of {}'s ephemerals applied nothing (the apply flag is off now): they stand, recorded standing",
                root.dir.display()
            )));
        }
        let standing = machines_of_tree(a).await?;
        for (n, verdict, _) in last.finished {
            let named = |m: &&csis_runtime::InstanceFacts| {
                m.labels.get("Name").map(String::as_str) == Some(n.as_str())
            };
            if let Some(m) = standing.iter().find(named) {
                return Err(NodeError::new(format!(
                    "{n}: the teardown applied, but {} still stands; recorded standing",
                    m.id
                )));
            }
            let Some(mut verdict) = verdict else { continue };
            out.removed
                .extend(verdict.machine.instance_id.iter().cloned());
            verdict.kept = false;
            a.recorder
                .record_ephemeral(&n, &verdict, a.run)
                .map_err(|e| NodeError::new(format!("{n}: its removal: {e}")))?;
        }
        Ok(())
    }
}

/// Ephemerals (name, the build it boots) an apply brought up that no
/// proof of this run records: each one standing is recorded standing (a
/// generation of its own, opened with its machine's id; `ok: false`, no
/// verdict: it was not verified), for the teardown to close. One recorded
/// standing already, or not standing, is left as it is.
async fn came_up(
    a: &Apply<'_>,
    names: &[(String, String)],
    why: &str,
) -> Result<Vec<(String, Option<EphemeralVerdict>, bool)>, NodeError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let standing = machines_of_tree(a).await?;
    let v = a.view()?;
    let mut recorded = Vec::new();
    for (name, build) in names {
        let Some(inst) = a.tree.instance(name) else {
            continue;
        };
        let named = |m: &&csis_runtime::InstanceFacts| {
            m.labels.get("Name").map(String::as_str) == Some(name.as_str())
        };
        let Some(m) = standing.iter().find(named) else {
            continue;
        };
        if let Some(verdict) = v.standing_ephemeral(name) {
            // recorded standing already (it proved, and a run stopped
            // before its teardown): this teardown closes it
            recorded.push((name.clone(), Some(verdict), false));
            continue;
        }
        let (record, machine) = applied_machine(a, &v, inst, build, m, &mut Applied::default());
        let verdict = EphemeralVerdict {
            record,
            machine,
            ok: false,
            kept: true,
        };
        a.recorder
            .record_ephemeral(name, &verdict, a.run)
            .map_err(|e| NodeError::new(format!("{name}: {why}: {e}")))?;
        (a.log)(format!(
            "{name} (ephemeral, {}) {why}: recorded standing until the teardown",
            m.id
        ));
        recorded.push((name.clone(), Some(verdict), false));
    }
    Ok(recorded)
}

/// An ephemeral instance the apply made: verified (its image's post-bake
/// tests run in it), its verdict in `verifications.yaml`, and recorded
/// standing until the root's teardown removes it. Answers the verdict
/// recorded and, when it failed, the node's error.
pub(super) async fn prove(
    a: &Apply<'_>,
    v: &FleetView,
    spec: &InstanceSpec,
    inst: &Instance,
    build: &str,
    found: &[csis_runtime::InstanceFacts],
    out: &mut Applied,
) -> Result<(EphemeralVerdict, Option<NodeError>), NodeError> {
    let new: Vec<_> = found.iter().collect();
    let m = one_new(&spec.name, &new)?;
    let (record, machine) = applied_machine(a, v, inst, build, m, out);
    let (generation, hostname) = (machine.generation, record.hostname.clone());
    let mut checks = verify(a, &spec.name, build, inst.mounts.len())
        .await
        .map_err(rt_err)?;
    post_bake(a, spec, &m.id, &mut checks).await;
    let ok = failed(&checks).is_none();
    record_verdict(a, inst, build, &record, generation, ok, &checks).await?;
    // standing, as the apply left it: the teardown closes it
    let verdict = EphemeralVerdict {
        record,
        machine,
        ok,
        kept: true,
    };
    a.recorder
        .record_ephemeral(&inst.name, &verdict, a.run)
        .map_err(|e| NodeError::new(format!("the ephemeral verdict: {e}")))?;
    let failure = failed(&checks).map(|f| {
        NodeError::new(format!(
            "{hostname} (ephemeral, {}) did not verify: {f}{}",
            m.id,
            if inst.on_failure == OnFailure::Keep {
                "; kept (on_failure: keep)"
            } else {
                ""
            }
        ))
    });
    if failure.is_none() {
        (a.log)(format!("{hostname} (ephemeral) proved {build}"));
    }
    Ok((verdict, failure))
}

/// An ephemeral standing after its proof ([`Action::Remove`]): with no
/// other ephemeral of the root up for a proof, the root's apply
/// (`ephemeral_present = false`) destroyed it, and its generation closes
/// once its machine is gone; with one (`present`), it came up with them
/// and goes with their teardown.
pub(super) async fn removed(
    a: &Apply<'_>,
    v: &FleetView,
    name: &str,
    present: bool,
    mut out: Applied,
) -> Result<Applied, NodeError> {
    if present {
        out.reason = format!(
            "{}; removed with the root's ephemerals after their proof",
            out.reason
        );
        return Ok(out);
    }
    if let Some(m) = named_machines(a, name).await?.first() {
        return Err(NodeError::new(format!(
            "{name}: the apply was to destroy it, but {} still stands; recorded standing",
            m.id
        )));
    }
    let Some(verdict) = v.standing_ephemeral(name) else {
        return Ok(out);
    };
    out.removed
        .extend(verdict.machine.instance_id.iter().cloned());
    a.recorder
        .record_ephemeral(name, &verdict, a.run)
        .map_err(|e| NodeError::new(format!("{name}: its removal: {e}")))?;
    Ok(out)
}
