//! Disposal (`csis dispose image`, and the dispose nodes of `csis build`).
//!
//! Plans with `csis_cache::retention` (children before parents; every
//! refusal found before anything is deleted), checks live references the
//! runtime can see (`image_users`), then disposes one build at a time: the
//! runtime's `dispose_image`, a read-back through `query_images`, and only
//! then the record is removed, with the pins to it that no declared image
//! needs (written at once, so an interruption loses nothing done). A build
//! that is released, pinned (by an instance, or by an image the tree
//! declares), launched or leased is never disposed: an explicit request
//! naming one is refused with every reason, a retention keeps it as debt.
//!
//! What happens is a stream of [`DisposeEvent`]s (typed: callers never
//! parse lines), collected into a [`DisposeReport`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::Result;
/// Which builds a dispose considers (ids, all, retention).
pub use csis_cache::retention::Selection;
use csis_cache::retention::{
    forget_build, plan_dispose, DisposePlan, DisposeRequest, LaunchParams, PlanInputs, Protections,
};
use csis_cache::{Lineage, MetaState, Pins, Revocations};
use csis_runtime::{DynRuntime, RuntimeError};
use serde::Serialize;

use crate::state::{declared_runtimes, keep_for};
use crate::Context;

/// Why a disposal request was refused (nothing was deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Refusal {
    /// The retention plan refused (a build that is released, pinned,
    /// launched, not recorded, ...).
    Plan { reason: String },
    /// A runtime the plan touches cannot be constructed or reached.
    Runtime { runtime: String, reason: String },
    /// The runtime sees the build in use.
    InUse {
        build_id: String,
        series: String,
        runtime: String,
        users: Vec<String>,
    },
    /// The runtime could not say whether the build is in use.
    CannotCheckUsers {
        build_id: String,
        runtime: String,
        reason: String,
    },
}

/// Why a disposal stopped (its record is kept; nothing after it ran).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Failure {
    /// The runtime's `dispose_image` failed.
    Dispose { error: String },
    /// The read-back still lists the build.
    StillThere,
    /// The runtime could not be asked after the disposal.
    CannotReadBack { error: String },
}

/// One thing a disposal did, kept, refused or could not check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DisposeEvent {
    /// Kept although the retention would drop it (retention debt).
    Kept {
        build_id: String,
        series: String,
        runtime: String,
        reason: String,
    },
    /// The plan disposes nothing.
    NothingToDispose,
    /// A dry run's planned disposal.
    WouldDispose {
        build_id: String,
        series: String,
        runtime: String,
        run: Option<String>,
        image_pins: Vec<String>,
    },
    /// The runtime cannot say whether the build is in use (it is disposed).
    CannotCheckUsers {
        build_id: String,
        runtime: String,
        reason: String,
    },
    /// The request was refused: nothing was deleted.
    Refused { refusals: Vec<Refusal> },
    /// Disposed and forgotten.
    Disposed {
        build_id: String,
        series: String,
        runtime: String,
        /// The runtime no longer held it.
        already_gone: bool,
        /// What the runtime kept or freed besides.
        notes: Vec<String>,
        /// Image pins removed with the record.
        image_pins_removed: Vec<String>,
    },
    /// A disposal failed: its record is kept and nothing after it ran.
    Failed {
        build_id: String,
        series: String,
        runtime: String,
        failure: Failure,
    },
}

impl DisposeEvent {
    /// A refusal or a failure (not a note).
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            DisposeEvent::Refused { .. } | DisposeEvent::Failed { .. }
        )
    }
}

/// What a disposal did, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DisposeReport {
    pub dry_run: bool,
    pub events: Vec<DisposeEvent>,
}

impl DisposeReport {
    /// Nothing refused, nothing failed.
    pub fn ok(&self) -> bool {
        !self.events.iter().any(DisposeEvent::is_problem)
    }

    /// The builds disposed.
    pub fn disposed(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                DisposeEvent::Disposed { build_id, .. } => Some(build_id.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn exit_code(&self) -> u8 {
        if self.ok() {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILURE
        }
    }
}

/// Collects the events of a disposal, passing each on as it happens.
struct Collect<'a> {
    events: Mutex<Vec<DisposeEvent>>,
    each: &'a (dyn Fn(&DisposeEvent) + Send + Sync),
}

impl Collect<'_> {
    fn push(&self, e: DisposeEvent) {
        (self.each)(&e);
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }
    fn report(self, dry_run: bool) -> DisposeReport {
        DisposeReport {
            dry_run,
            events: self.events.into_inner().unwrap_or_else(|p| p.into_inner()),
        }
    }
}

/// What to dispose.
#[derive(Debug, Clone)]
pub struct DisposeArgs {
    pub selection: Selection,
    /// Only builds on this runtime (a name or an alias).
    pub runtime: Option<String>,
    /// Never a build younger than this many days.
    pub min_age_days: Option<u64>,
    /// Plan only; delete nothing.
    pub dry_run: bool,
}

/// `csis dispose image`: plan the request against the current records and
/// carry it out (or, in a dry run, say what would go). `each` sees every
/// event as it happens. The context is opened for writing unless a dry run.
pub fn dispose(
    cx: &Context,
    args: &DisposeArgs,
    each: &(dyn Fn(&DisposeEvent) + Send + Sync),
) -> Result<DisposeReport> {
    let tree = cx.tree();
    let runtime = args
        .runtime
        .as_deref()
        .map(|r| cx.runtime_name(r).unwrap_or(r.to_string()));
    let req = DisposeRequest {
        selection: args.selection.clone(),
        runtime,
        min_age_days: args.min_age_days,
    };
    let col = Collect {
        events: Mutex::new(Vec::new()),
        each,
    };
    match compute_plan(tree, &cx.meta, &req)? {
        Err(refusals) => col.push(DisposeEvent::Refused { refusals }),
        Ok(plan) => {
            let run = csis_cache::run_id_now();
            let meta = &cx.meta;
            let runtime = |name: &str| cx.runtime(name).map_err(|e| format!("{e:#}"));
            let forget = |build_id: &str, unneeded: &[String]| -> Result<Vec<String>> {
                let mut lineage = meta.lineage()?;
                let mut pins = meta.pins()?;
                let removed = forget_build(&mut lineage, &mut pins, build_id, unneeded, Some(&run));
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
            cx.block_on(execute_with(&plan, args.dry_run, &d, &col))?;
        }
    }
    Ok(col.report(args.dry_run))
}

/// The plan of a request against the current records (every refusal at once).
pub fn compute_plan(
    tree: &csis_rules::Tree,
    meta: &MetaState,
    req: &DisposeRequest,
) -> Result<Result<DisposePlan, Vec<Refusal>>> {
    let (lineage, pins) = crate::context::records(tree.root())?;
    let releases = meta.releases()?;
    let launches = LaunchParams::load(meta)?;
    let mut prot = Protections::from_records(&pins, &releases, &launches)
        .needing(&|key| crate::state::pin_needed(tree, key))
        .with_follow(crate::state::follow_images(tree));
    // On a shared store: what other runners' live leases cover is kept as
    // a pinned build is (they may be baking on it, or on its series).
    if let Some(store) = meta.store()? {
        for (build, holder) in csis_cache::lease::protected_from(&store, "", &lineage)? {
            prot.lease(&build, &holder);
        }
    }
    let configured = declared_runtimes(tree);
    let revoked = Revocations::load(meta)?.ids();
    let inp = PlanInputs {
        lineage: &lineage,
        protections: &prot,
        configured_runtimes: &configured,
        revoked: &revoked,
        now: SystemTime::now(),
    };
    let keep = |s: &str, r: &str| keep_for(tree, s, r);
    Ok(plan_dispose(inp, req, &keep).map_err(plan_refusals))
}

fn plan_refusals(v: Vec<csis_cache::retention::Refusal>) -> Vec<Refusal> {
    v.into_iter()
        .map(|r| Refusal::Plan { reason: r.0 })
        .collect()
}

/// Forget a disposed build: its id and the pin keys no declared image needs;
/// returns the pin keys removed.
pub type Forget<'a> = dyn Fn(&str, &[String]) -> Result<Vec<String>> + Send + Sync + 'a;

/// How a disposal reaches the runtimes and the records.
pub struct Disposer<'a> {
    /// The runtime of a name (an error refuses the whole plan).
    pub runtime: &'a (dyn Fn(&str) -> Result<DynRuntime, String> + Send + Sync),
    /// Remove a disposed build's record and the image pins named (those no
    /// declared image needs), written at once; returns the pin keys removed.
    pub forget: &'a Forget<'a>,
}

/// Carry out a plan with the runtimes and records given: the debt, then
/// (unless a dry run) every runtime and its live references checked before
/// anything is deleted, then one build at a time, children first: the
/// runtime's `dispose_image`, a read-back, and only then the record.
async fn execute_with(
    plan: &DisposePlan,
    dry_run: bool,
    d: &Disposer<'_>,
    out: &Collect<'_>,
) -> Result<()> {
    for debt in &plan.debt {
        out.push(DisposeEvent::Kept {
            build_id: debt.build_id.clone(),
            series: debt.series.clone(),
            runtime: debt.runtime.clone(),
            reason: debt.reason.clone(),
        });
    }
    if plan.items.is_empty() {
        out.push(DisposeEvent::NothingToDispose);
        return Ok(());
    }
    if dry_run {
        for it in &plan.items {
            out.push(DisposeEvent::WouldDispose {
                build_id: it.build_id.clone(),
                series: it.series.clone(),
                runtime: it.runtime.clone(),
                run: it.run.clone(),
                image_pins: it.image_pins.clone(),
            });
        }
        return Ok(());
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
            Err(reason) => refusals.push(Refusal::Runtime {
                runtime: name,
                reason,
            }),
        }
    }
    // Live references the runtime can see.
    for it in &plan.items {
        let Some(rt) = rts.get(&it.runtime) else {
            continue;
        };
        match rt.image_users(&it.build_id).await {
            Ok(users) if users.is_empty() => {}
            Ok(users) => refusals.push(Refusal::InUse {
                build_id: it.build_id.clone(),
                series: it.series.clone(),
                runtime: it.runtime.clone(),
                users,
            }),
            Err(e @ RuntimeError::Unsupported { .. }) => out.push(DisposeEvent::CannotCheckUsers {
                build_id: it.build_id.clone(),
                runtime: it.runtime.clone(),
                reason: e.to_string(),
            }),
            Err(e) => refusals.push(Refusal::CannotCheckUsers {
                build_id: it.build_id.clone(),
                runtime: it.runtime.clone(),
                reason: e.to_string(),
            }),
        }
    }
    if !refusals.is_empty() {
        out.push(DisposeEvent::Refused { refusals });
        return Ok(());
    }
    for it in &plan.items {
        let rt = &rts[&it.runtime];
        let failed = |failure| DisposeEvent::Failed {
            build_id: it.build_id.clone(),
            series: it.series.clone(),
            runtime: it.runtime.clone(),
            failure,
        };
        let outcome = match rt.dispose_image_outcome(&it.build_id).await {
            Ok(o) => o,
            Err(e) => {
                out.push(failed(Failure::Dispose {
                    error: e.to_string(),
                }));
                return Ok(());
            }
        };
        // Success is read back from the runtime, not taken from the hook.
        match rt.query_images().await {
            Ok(images) if images.iter().any(|i| i.build_id == it.build_id) => {
                out.push(failed(Failure::StillThere));
                return Ok(());
            }
            Ok(_) => {}
            Err(e) => {
                out.push(failed(Failure::CannotReadBack {
                    error: e.to_string(),
                }));
                return Ok(());
            }
        }
        let removed = (d.forget)(&it.build_id, &it.image_pins)?;
        out.push(DisposeEvent::Disposed {
            build_id: it.build_id.clone(),
            series: it.series.clone(),
            runtime: it.runtime.clone(),
            already_gone: !outcome.existed,
            notes: outcome.notes.clone(),
            image_pins_removed: removed,
        });
    }
    Ok(())
}

/// The dispose node of `csis build` (core.md §5.3) for `series` on
/// `runtime`, run once the build's bake of it is recorded: the retention
/// plan of that one (series, runtime) with `keep` (0 on an ephemeral
/// runtime), then the disposals, children first, live references checked.
///
/// `lineage` and `pins` are the records as the build's `Recorder` holds
/// them (this run's bakes included); `leased` the builds other runners'
/// live leases cover (build -> holder); releases, revocations and launch
/// records are read from `meta-state/`. The caller holds the tree lock, serializes the
/// writers of `meta-state/`, and orders the node after every bake of this
/// run that stands on a build of the series (`d.forget` goes through the
/// recorder).
pub async fn retention_in_build(
    tree: &csis_rules::Tree,
    lineage: &Lineage,
    pins: &Pins,
    leased: &BTreeMap<String, String>,
    (series, runtime, keep): (&str, &str, Option<u32>),
    d: &Disposer<'_>,
    each: &(dyn Fn(&DisposeEvent) + Send + Sync),
) -> Result<DisposeReport> {
    let meta = MetaState::of_tree(tree.root());
    let releases = meta.releases()?;
    let launches = LaunchParams::load(&meta)?;
    let mut prot = Protections::from_records(pins, &releases, &launches)
        .needing(&|key| crate::state::pin_needed(tree, key))
        .with_follow(crate::state::follow_images(tree));
    for (build, holder) in leased {
        prot.lease(build, holder);
    }
    let configured = declared_runtimes(tree);
    let revoked = Revocations::load(&meta)?.ids();
    let inp = PlanInputs {
        lineage,
        protections: &prot,
        configured_runtimes: &configured,
        revoked: &revoked,
        now: SystemTime::now(),
    };
    let req = DisposeRequest {
        selection: Selection::Retention,
        runtime: Some(runtime.to_string()),
        min_age_days: None,
    };
    let only = |s: &str, r: &str| keep.filter(|_| s == series && r == runtime);
    let col = Collect {
        events: Mutex::new(Vec::new()),
        each,
    };
    match plan_dispose(inp, &req, &only) {
        Err(refusals) => col.push(DisposeEvent::Refused {
            refusals: plan_refusals(refusals),
        }),
        Ok(plan) => execute_with(&plan, false, d, &col).await?,
    }
    Ok(col.report(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use csis_cache::BuildRecord;
    use csis_runtime_dummy::{DummyStore, StoredImage};

    /// A tree with three recorded deb12 builds present in the dummy store.
    fn tree_with_builds(keep: Option<u32>) -> (tempfile::TempDir, csis_rules::Tree) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        csis_testkit::copy_dir(&csis_testkit::fixture("ops/basic"), &root);
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
        out: &(dyn Fn(&DisposeEvent) + Send + Sync),
    ) -> u8 {
        let each = |e: &DisposeEvent| out(e);
        let meta = MetaState::of_tree(tree.root());
        let (lineage, pins) = (meta.lineage().unwrap(), meta.pins().unwrap());
        let runtime = |n: &str| crate::wiring::runtime(tree, n).map_err(|e| format!("{e:#}"));
        let forget = |id: &str, unneeded: &[String]| -> Result<Vec<String>> {
            let (mut l, mut p) = (meta.lineage()?, meta.pins()?);
            let removed = forget_build(&mut l, &mut p, id, unneeded, None);
            meta.save_lineage(&l)?;
            meta.save_pins(&p)?;
            Ok(removed)
        };
        let d = Disposer {
            runtime: &runtime,
            forget: &forget,
        };
        crate::wiring::Runtimes::default()
            .block_on(retention_in_build(
                tree,
                &lineage,
                &pins,
                &BTreeMap::new(),
                (series, "sim", keep),
                &d,
                &each,
            ))
            .unwrap()
            .exit_code()
    }

    #[test]
    fn retention_in_build_disposes_beyond_keep_of_its_series_only() {
        let events = Mutex::new(Vec::new());
        let out = |e: &DisposeEvent| events.lock().unwrap().push(e.clone());
        let (_t, tree) = tree_with_builds(None);
        // no keep count: nothing planned
        assert_eq!(retention_of(&tree, "deb12", None, &out), 0);
        assert_eq!(*events.lock().unwrap(), [DisposeEvent::NothingToDispose]);
        assert_eq!(
            MetaState::of_tree(tree.root())
                .lineage()
                .unwrap()
                .builds
                .len(),
            3
        );
        // another series' node leaves deb12 alone, whatever the keep
        events.lock().unwrap().clear();
        assert_eq!(retention_of(&tree, "web", Some(1), &out), 0);
        assert_eq!(*events.lock().unwrap(), [DisposeEvent::NothingToDispose]);

        events.lock().unwrap().clear();
        let (_t, tree) = tree_with_builds(Some(1));
        assert_eq!(retention_of(&tree, "deb12", Some(1), &out), 0);
        let disposed = |id: &str| DisposeEvent::Disposed {
            build_id: id.into(),
            series: "deb12".into(),
            runtime: "sim".into(),
            already_gone: false,
            notes: Vec::new(),
            image_pins_removed: Vec::new(),
        };
        assert_eq!(*events.lock().unwrap(), [disposed("d-2"), disposed("d-1")]);
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
        let made = crate::wiring::Runtimes::default();
        let gate = |run| crate::state::state_query_gate_drift(&tree, &made, run).unwrap();
        // no report yet and no query: no opinion
        assert!(gate(false).is_empty());
        assert!(gate(true).is_empty());
        let meta = MetaState::of_tree(tree.root());
        let mut pins = meta.pins().unwrap();
        pins.instances.insert("vm".into(), "gone".into());
        meta.save_pins(&pins).unwrap();
        // the last report (no drift) still answers until the query runs again
        assert!(gate(false).is_empty());
        let hard = gate(true);
        let shown: Vec<String> = hard
            .iter()
            .map(|d| format!("{} {}: {}", d.kind, d.name, d.drift))
            .collect();
        assert_eq!(shown, ["pin instance vm: missing"]);
        let again: Vec<(String, String)> =
            gate(false).into_iter().map(|d| (d.name, d.drift)).collect();
        assert_eq!(again, [("instance vm".to_string(), "missing".to_string())]);
    }
}

#[cfg(test)]
mod op_tests {
    use super::*;
    use crate::{Access, Context, TreeArgs};

    #[test]
    fn a_refused_request_is_typed_and_deletes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        csis_testkit::copy_dir(&csis_testkit::fixture("ops/basic"), &root);
        let args = TreeArgs {
            dir: root.clone(),
            ..Default::default()
        };
        let cx = Context::open(&args, Access::Write, |_| {}).unwrap();
        let seen = Mutex::new(Vec::new());
        let each = |e: &DisposeEvent| seen.lock().unwrap().push(e.clone());
        let req = DisposeArgs {
            selection: Selection::Ids(vec!["nosuch".into()]),
            runtime: None,
            min_age_days: None,
            dry_run: false,
        };
        let report = dispose(&cx, &req, &each).unwrap();
        assert!(!report.ok());
        assert_eq!(report.exit_code(), crate::exit::FAILURE);
        assert_eq!(report.events, seen.into_inner().unwrap());
        let [DisposeEvent::Refused { refusals }] = report.events.as_slice() else {
            panic!("{:?}", report.events);
        };
        assert!(
            matches!(&refusals[..], [Refusal::Plan { reason }] if reason.contains("nosuch")),
            "{refusals:?}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["events"][0]["event"], "refused");
        assert_eq!(json["events"][0]["refusals"][0]["why"], "plan");
    }
}
