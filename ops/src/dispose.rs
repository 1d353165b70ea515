//! `csis dispose image [IDS] [--runtime RT] [--all] [--retention] [--min-age DAYS] [--dry-run]`
//!
//! Plans with `csis_cache::retention` (children before parents; every
//! refusal found before anything is deleted), checks live references the
//! runtime can see (`image_users`), then disposes one build at a time: the
//! runtime's `dispose_image`, a read-back through `query_images`, and only
//! then the record and every image pin to it are removed (written at once,
//! so an interruption loses nothing done).

use std::collections::BTreeMap;
use std::time::SystemTime;

use anyhow::Result;
use csis_cache::retention::{
    forget_build, plan_dispose, DisposePlan, DisposeRequest, LaunchParams, PlanInputs, Protections,
    Selection,
};
use csis_cache::{Lineage, MetaState, Pins};
use csis_runtime::{DynRuntime, RuntimeError};

use crate::state::{declared_runtimes, keep_for};

/// The plan of a request against the current records.
pub fn compute_plan(
    tree: &csis_rules::Tree,
    meta: &MetaState,
    req: &DisposeRequest,
) -> Result<Result<DisposePlan, Vec<String>>> {
    let (lineage, pins) = crate::state::records(tree.root())?;
    let releases = meta.releases()?;
    let launches = LaunchParams::load(meta)?;
    let prot = Protections::from_records(&pins, &releases, &launches);
    let configured = declared_runtimes(tree);
    let inp = PlanInputs {
        lineage: &lineage,
        protections: &prot,
        configured_runtimes: &configured,
        now: SystemTime::now(),
    };
    let keep = |s: &str, r: &str| keep_for(tree, s, r);
    Ok(plan_dispose(inp, req, &keep).map_err(|v| v.into_iter().map(|r| r.0).collect()))
}

/// Print the plan (dry run) or carry it out; every line goes to `out`
/// (lines starting `refused:`, `error:` or `warning:` are problems).
/// Returns the exit code (0 done, 1 refused or failed). Callers hold the
/// tree lock. The runtimes are constructed here; the records are read and
/// written in `meta-state/` (the journal settled by the caller).
pub async fn execute_async(
    tree: &csis_rules::Tree,
    meta: &MetaState,
    plan: &DisposePlan,
    dry_run: bool,
    out: &(dyn Fn(String) + Send + Sync),
) -> Result<u8> {
    let run = csis_cache::run_id_now();
    let runtime = |name: &str| crate::wiring::runtime(tree, name).map_err(|e| format!("{e:#}"));
    let forget = |build_id: &str| -> Result<Vec<String>> {
        let mut lineage = meta.lineage()?;
        let mut pins = meta.pins()?;
        let removed = forget_build(&mut lineage, &mut pins, build_id, Some(&run));
        meta.save_lineage(&lineage)?;
        if !removed.is_empty() {
            meta.save_pins(&pins)?;
        }
        Ok(removed)
    };
    let d = Disposer {
        runtime: &runtime,
        forget: &forget,
    };
    execute_with(plan, dry_run, &d, out).await
}

/// How a disposal reaches the runtimes and the records.
pub struct Disposer<'a> {
    /// The runtime of a name (an error refuses the whole plan).
    pub runtime: &'a (dyn Fn(&str) -> Result<DynRuntime, String> + Send + Sync),
    /// Remove a disposed build's record and every image pin to it, written
    /// at once; returns the pin keys removed.
    pub forget: &'a (dyn Fn(&str) -> Result<Vec<String>> + Send + Sync),
}

/// [`execute_async`] with the runtimes and records given: the debt, then
/// (unless a dry run) every runtime and its live references checked before
/// anything is deleted, then one build at a time, children first: the
/// runtime's `dispose_image`, a read-back, and only then the record.
pub async fn execute_with(
    plan: &DisposePlan,
    dry_run: bool,
    d: &Disposer<'_>,
    out: &(dyn Fn(String) + Send + Sync),
) -> Result<u8> {
    for debt in &plan.debt {
        out(format!(
            "kept (retention debt): {} ({} on {}): {}",
            debt.build_id, debt.series, debt.runtime, debt.reason
        ));
    }
    if plan.items.is_empty() {
        out("nothing to dispose".into());
        return Ok(0);
    }
    if dry_run {
        for it in &plan.items {
            out(format!(
                "would dispose {} ({} on {}{})",
                it.build_id,
                it.series,
                it.runtime,
                it.run
                    .as_deref()
                    .map(|r| format!(", run {r}"))
                    .unwrap_or_default()
            ));
            for k in &it.image_pins {
                out(format!("  would remove image pin {k}"));
            }
        }
        return Ok(0);
    }
    // Every runtime first: a runtime that cannot be reached refuses the
    // whole request before anything is deleted.
    let mut rts: BTreeMap<String, DynRuntime> = BTreeMap::new();
    let mut refusals = Vec::new();
    for name in plan.runtimes() {
        match (d.runtime)(&name) {
            Ok(r) => {
                rts.insert(name, r);
            }
            Err(e) => refusals.push(format!("runtime {name}: {e}")),
        }
    }
    // Live references the runtime can see.
    for it in &plan.items {
        let Some(rt) = rts.get(&it.runtime) else {
            continue;
        };
        match rt.image_users(&it.build_id).await {
            Ok(users) if users.is_empty() => {}
            Ok(users) => refusals.push(format!(
                "build {} ({}) is in use on {}: {}; decommission first",
                it.build_id,
                it.series,
                it.runtime,
                users.join(", ")
            )),
            Err(e @ RuntimeError::Unsupported { .. }) => out(format!(
                "warning: {}: cannot check live references of {} ({e})",
                it.runtime, it.build_id
            )),
            Err(e) => refusals.push(format!(
                "cannot check live references of {} on {}: {e}",
                it.build_id, it.runtime
            )),
        }
    }
    if !refusals.is_empty() {
        for r in refusals {
            out(format!("refused: {r}"));
        }
        out("nothing was deleted".into());
        return Ok(1);
    }
    for it in &plan.items {
        let rt = &rts[&it.runtime];
        let outcome = match rt.dispose_image_outcome(&it.build_id).await {
            Ok(o) => o,
            Err(e) => {
                out(format!(
                    "error: could not dispose {} ({} on {}): {e}; its record is kept; stopping",
                    it.build_id, it.series, it.runtime
                ));
                return Ok(1);
            }
        };
        // Success is read back from the runtime, not taken from the hook.
        match rt.query_images().await {
            Ok(images) if images.iter().any(|i| i.build_id == it.build_id) => {
                out(format!(
                    "error: {} is still on {} after disposal; its record is kept; stopping",
                    it.build_id, it.runtime
                ));
                return Ok(1);
            }
            Ok(_) => {}
            Err(e) => {
                out(format!(
                    "error: cannot read back the disposal of {} from {}: {e}; its record is kept; stopping",
                    it.build_id, it.runtime
                ));
                return Ok(1);
            }
        }
        let removed = (d.forget)(&it.build_id)?;
        out(format!(
            "disposed {} ({} on {}){}",
            it.build_id,
            it.series,
            it.runtime,
            if outcome.existed {
                ""
            } else {
                " (already gone)"
            }
        ));
        // What the runtime kept or freed besides (docker: a parent's layers under its children).
        for n in &outcome.notes {
            out(format!("  {n}"));
        }
        for k in removed {
            out(format!("  removed image pin {k}"));
        }
    }
    Ok(0)
}

/// The dispose node of `csis build` (core.md §5.3) for `series` on
/// `runtime`, run once the build's bake of it is recorded: the retention
/// plan of that one (series, runtime) with `keep` (0 on an ephemeral
/// runtime), then the disposals, children first, live references checked.
///
/// `lineage` and `pins` are the records as the build's `Recorder` holds
/// them (this run's bakes included); releases and launch records are read
/// from `meta-state/`. The caller holds the tree lock, serializes the
/// writers of `meta-state/`, and orders the node after every bake of this
/// run that stands on a build of the series (`d.forget` goes through the
/// recorder). Returns 0, or 1 when refused or failed (the lines say why).
pub async fn retention_in_build(
    tree: &csis_rules::Tree,
    lineage: &Lineage,
    pins: &Pins,
    (series, runtime, keep): (&str, &str, Option<u32>),
    d: &Disposer<'_>,
    out: &(dyn Fn(String) + Send + Sync),
) -> Result<u8> {
    let meta = MetaState::of_tree(tree.root());
    let releases = meta.releases()?;
    let launches = LaunchParams::load(&meta)?;
    let prot = Protections::from_records(pins, &releases, &launches);
    let configured = declared_runtimes(tree);
    let inp = PlanInputs {
        lineage,
        protections: &prot,
        configured_runtimes: &configured,
        now: SystemTime::now(),
    };
    let req = DisposeRequest {
        selection: Selection::Retention,
        runtime: Some(runtime.to_string()),
        min_age_days: None,
    };
    let only = |s: &str, r: &str| keep.filter(|_| s == series && r == runtime);
    match plan_dispose(inp, &req, &only) {
        Err(refusals) => {
            for r in refusals {
                out(format!("refused: {r}"));
            }
            out("nothing was deleted".into());
            Ok(1)
        }
        Ok(plan) => execute_with(&plan, false, d, out).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csis_cache::BuildRecord;
    use csis_runtime_dummy::{DummyStore, StoredImage};
    use std::path::Path;
    use std::sync::Mutex;

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// A tree with three recorded deb12 builds present in the dummy store.
    fn tree_with_builds(keep: Option<u32>) -> (tempfile::TempDir, csis_rules::Tree) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ops/basic"),
            &root,
        );
        if let Some(k) = keep {
            let p = root.join("cfg/runtime-builders.yml");
            let t = std::fs::read_to_string(&p).unwrap();
            std::fs::write(&p, format!("{t}    retention_keep: {k}\n")).unwrap();
        }
        let mut l = csis_cache::Lineage::default();
        let mut store = DummyStore::default();
        for i in 1..=3 {
            let id = format!("d-{i}");
            let mut r = BuildRecord::new(&id, "deb12", "sim");
            r.parent = Some("vendor".into());
            r.run = Some(format!("2026_10_0{i}t00_00_00_000000"));
            l.add_build(r);
            store.images.insert(
                id,
                StoredImage {
                    name: format!("deb12-{i}"),
                    series: "deb12".into(),
                    created: 0,
                    tags: [("csis_series".to_string(), "deb12".to_string())].into(),
                    released: Default::default(),
                },
            );
        }
        MetaState::of_tree(&root).save_lineage(&l).unwrap();
        let sp = root.join(".csis/dummy/sim.json");
        std::fs::create_dir_all(sp.parent().unwrap()).unwrap();
        std::fs::write(&sp, serde_json::to_vec(&store).unwrap()).unwrap();
        let tree = csis_rules::load(&root, &Default::default()).expect("fixture loads");
        (tmp, tree)
    }

    /// The dispose node's work on records read from `meta-state/`.
    fn retention_of(
        tree: &csis_rules::Tree,
        series: &str,
        keep: Option<u32>,
        out: &(dyn Fn(String) + Send + Sync),
    ) -> u8 {
        let meta = MetaState::of_tree(tree.root());
        let (lineage, pins) = (meta.lineage().unwrap(), meta.pins().unwrap());
        let runtime = |n: &str| crate::wiring::runtime(tree, n).map_err(|e| format!("{e:#}"));
        let forget = |id: &str| -> Result<Vec<String>> {
            let (mut l, mut p) = (meta.lineage()?, meta.pins()?);
            let removed = forget_build(&mut l, &mut p, id, None);
            meta.save_lineage(&l)?;
            meta.save_pins(&p)?;
            Ok(removed)
        };
        let d = Disposer {
            runtime: &runtime,
            forget: &forget,
        };
        crate::state::tokio_rt()
            .unwrap()
            .block_on(retention_in_build(
                tree,
                &lineage,
                &pins,
                (series, "sim", keep),
                &d,
                out,
            ))
            .unwrap()
    }

    #[test]
    fn retention_in_build_disposes_beyond_keep_of_its_series_only() {
        let lines = Mutex::new(Vec::new());
        let out = |l: String| lines.lock().unwrap().push(l);
        let (_t, tree) = tree_with_builds(None);
        // no keep count: nothing planned
        assert_eq!(retention_of(&tree, "deb12", None, &out), 0);
        assert_eq!(*lines.lock().unwrap(), ["nothing to dispose"]);
        assert_eq!(
            MetaState::of_tree(tree.root())
                .lineage()
                .unwrap()
                .builds
                .len(),
            3
        );
        // another series' node leaves deb12 alone, whatever the keep
        lines.lock().unwrap().clear();
        assert_eq!(retention_of(&tree, "web", Some(1), &out), 0);
        assert_eq!(*lines.lock().unwrap(), ["nothing to dispose"]);

        lines.lock().unwrap().clear();
        let (_t, tree) = tree_with_builds(Some(1));
        assert_eq!(retention_of(&tree, "deb12", Some(1), &out), 0);
        let got = lines.lock().unwrap().clone();
        assert_eq!(
            got,
            vec!["disposed d-2 (deb12 on sim)", "disposed d-1 (deb12 on sim)"]
        );
        let l = MetaState::of_tree(tree.root()).lineage().unwrap();
        assert_eq!(
            l.builds
                .iter()
                .map(|b| b.build_id.as_str())
                .collect::<Vec<_>>(),
            ["d-3"]
        );
        let store: DummyStore = serde_json::from_slice(
            &std::fs::read(tree.root().join(".csis/dummy/sim.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(store.images.keys().collect::<Vec<_>>(), ["d-3"]);
    }

    #[test]
    fn the_state_query_gate_reports_hard_drift() {
        let (_t, tree) = tree_with_builds(None);
        // no report yet and no query: no opinion
        assert!(crate::state::state_query_gate(&tree, false)
            .unwrap()
            .is_empty());
        assert!(crate::state::state_query_gate(&tree, true)
            .unwrap()
            .is_empty());
        let meta = MetaState::of_tree(tree.root());
        let mut pins = meta.pins().unwrap();
        pins.instances.insert("vm".into(), "gone".into());
        meta.save_pins(&pins).unwrap();
        // the last report (no drift) still answers until the query runs again
        assert!(crate::state::state_query_gate(&tree, false)
            .unwrap()
            .is_empty());
        let hard = crate::state::state_query_gate(&tree, true).unwrap();
        assert_eq!(hard.len(), 1);
        assert!(hard[0].contains("pin instance vm: missing"), "{hard:?}");
        assert_eq!(
            crate::state::state_query_gate(&tree, false).unwrap(),
            hard
        );
    }
}
