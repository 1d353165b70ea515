//! What `plan`, `build`, `graph` and `watch` share: load the tree and
//! `meta-state/`, compile the graph, select by patterns, fingerprint, plan.
//! Nothing here writes anything; the one runtime read is a base's vendor
//! tag, when its head was baked from one ([`crate::vendor`]: an inspect).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, Result};
use csis_cache::{Lineage, LineageRecords, LocalDir, MetaPins, MetaState, Pins, Revocations};
use csis_engine::{
    Fingerprints, Graph, Pattern, Plan, Planner, Records, Replan, RunPolicy, Selection,
};
/// `--force-bake` as the planner reads it.
pub use csis_rules::compile::ForceBake;
use csis_rules::compile::{
    compile_with_costs, planner_with, Compiled, NodeKind, PinSource, RecordedFleet,
    RecordedInstance, RecordedStorage, VendorMoves, PINNED_PARENT_ATTR,
};
use csis_rules::Tree;

use crate::timing::timing;

/// A loaded, compiled tree.
pub struct Session {
    pub root: PathBuf,
    pub tree: Tree,
    pub meta: MetaState,
    /// The planning view of the records (revocations applied), holding
    /// only each record's identity, parent, fingerprint and run (see
    /// [`csis_cache::load_for_planning`]); read `meta-state/` for whole records.
    pub lineage: Lineage,
    /// `meta-state/revocations.yaml`, read once.
    pub revs: Revocations,
    pub compiled: Compiled,
    pub fps: Fingerprints,
    /// The runtimes the plan's vendor reads (and a build's gate and nodes)
    /// ask, each constructed once.
    pub runtimes: crate::wiring::Runtimes,
}

/// The compile's [`PinSource`] over the records: `meta-state/`'s pins and
/// the fingerprints recorded for builds ([`MetaPins`], which knows no
/// compile).
pub(crate) struct RecordedPins<'a>(pub MetaPins<'a>, pub RecordedFleet);

impl PinSource for RecordedPins<'_> {
    fn fleet(&self) -> RecordedFleet {
        self.1.clone()
    }
    fn image_pin(&self, image: &str, runtime: &str) -> Option<String> {
        self.0.image_pin(image, runtime)
    }
    fn build_fingerprint(&self, build_id: &str) -> Option<String> {
        self.0.build_fingerprint(build_id)
    }
    fn build_capabilities(&self, build_id: &str) -> Option<serde_json::Value> {
        self.0.build_capabilities(build_id)
    }
}

/// Load the tree (a [`crate::NotLoaded`] when it does not) and compile it.
pub fn open(dir: &Path, opts: &csis_rules::LoadOptions) -> Result<Session> {
    let t0 = std::time::Instant::now();
    let tree = crate::load_tree(dir, opts)?;
    timing("load the tree", t0);
    open_tree(tree)
}

/// A build's session, in its context `cx`: the tree loaded and compiled
/// (a [`crate::NotLoaded`] when it does not load), the context's records
/// as the loaded tree names them (its `meta_state:`), and the context's
/// runtimes lent to it (its plan reads vendor tags with them, its state
/// gate asks them; the build gives them back for the run).
pub fn open_in(cx: &mut crate::Context, opts: &csis_rules::LoadOptions) -> Result<Session> {
    let mut session = open(cx.root(), opts)?;
    cx.meta = session.meta.clone();
    session.runtimes = cx.lend_runtimes();
    Ok(session)
}

/// Compile an already loaded tree against its `meta-state/`.
pub fn open_tree(tree: Tree) -> Result<Session> {
    let root = tree.root().to_path_buf();
    let (meta, lineage, pins, revs) = read_meta(&root)?;
    let t0 = std::time::Instant::now();
    let fleet = recorded_fleet(&meta, &pins, &lineage, &tree)?;
    let compiled = compile_with_costs(
        &tree,
        &RecordedPins(MetaPins::new(&pins, &lineage), fleet),
        &crate::wiring::BakeCosts,
    )?;
    timing("compile", t0);
    let t0 = std::time::Instant::now();
    let fps = compiled.graph.fingerprints()?;
    timing("fingerprints", t0);
    Ok(Session {
        root,
        tree,
        meta,
        lineage,
        revs,
        compiled,
        fps,
        runtimes: Default::default(),
    })
}

/// What the compile reads of the fleet's records: the launched and
/// pinned instances and the recorded storages (those the tree declares no
/// more get a node that retires them), pins, pending replacements, and the
/// heads of the images instances boot.
fn recorded_fleet(
    meta: &MetaState,
    pins: &Pins,
    lineage: &Lineage,
    tree: &Tree,
) -> Result<RecordedFleet> {
    // With the journal of an interrupted build merged in, as the fleet
    // view of the plan (`FleetView::load`); else the planning view's pins
    // (their instance pins and pending replacements).
    let journal = LocalDir::of_tree(tree.root()).journal();
    let whole;
    let (records, pins) = if std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0) {
        let (p, r) = meta.fleet_with_journal(&journal)?;
        whole = p;
        (r, &whole)
    } else {
        (csis_cache::fleet::FleetRecords::load(meta)?, pins)
    };
    let mut f = RecordedFleet {
        pins: pins.instances.clone(),
        pending: pins.pending_replacements.clone(),
        ..RecordedFleet::default()
    };
    for (name, r) in &records.launch.instances {
        let rec = RecordedInstance {
            runtime: r.runtime.clone(),
            image: r.image.clone(),
            build: r.build.clone(),
            mounts: r.mounts.iter().map(|m| m.storage.clone()).collect(),
        };
        f.instances.insert(name.clone(), rec);
    }
    for (name, build) in &pins.instances {
        if f.instances.contains_key(name) {
            continue;
        }
        if let Some(b) = lineage.find(build) {
            let rec = RecordedInstance {
                runtime: b.runtime.clone().unwrap_or_default(),
                image: b.series.clone(),
                build: build.clone(),
                mounts: Vec::new(),
            };
            f.instances.insert(name.clone(), rec);
        }
    }
    f.instances.retain(|_, r| !r.runtime.is_empty());
    for (name, r) in &records.storages.storages {
        let rec = RecordedStorage {
            state: r.state.as_str().to_string(),
            builder: r.facts.builder.clone(),
        };
        f.storages.insert(name.clone(), rec);
    }
    for i in &tree.instances {
        if let Some(h) = lineage.head(&i.image, &i.runtime) {
            f.heads
                .insert((i.image.clone(), i.runtime.clone()), h.build_id.clone());
        }
    }
    Ok(f)
}

/// `meta-state/` as the plan reads it: the planning view of the records
/// and the pins, and the revocations that made it.
pub fn read_meta(root: &Path) -> Result<(MetaState, Lineage, Pins, Revocations)> {
    let meta = MetaState::of_tree(root);
    // Revoked heads and pins to revoked builds are invisible to the plan
    // (lineage operations, csis_cache::planning_view).
    let t0 = std::time::Instant::now();
    // Records of an interrupted build still in the journal count. Only
    // what the plan needs is read (from `.csis/cache/` when current).
    let (lineage, pins) = csis_cache::load_for_planning(&meta, &LocalDir::of_tree(root))?;
    let revs = Revocations::load(&meta)?;
    let (lineage, pins) = planning_view(&revs, lineage, pins);
    timing("read meta-state", t0);
    Ok((meta, lineage, pins, revs))
}

impl Session {
    /// Every bake's (series, runtime) with its fingerprint (hex) and
    /// canonical inputs, in the graph's order: what a record of a build of
    /// the tree's inputs holds.
    pub fn bake_fingerprints(&self) -> Vec<((String, String), (String, serde_json::Value))> {
        let mut out = Vec::new();
        for id in self.compiled.bake_nodes() {
            if let Some(spec) = self.compiled.bake_spec(id) {
                out.push((
                    (spec.series.clone(), spec.runtime.clone()),
                    (
                        self.fps.get(id).to_hex(),
                        self.compiled.graph.canonical(id, &self.fps),
                    ),
                ));
            }
        }
        out
    }

    /// Select by patterns (none = `//...`). A pattern matching nothing is an
    /// error naming the closest labels.
    pub fn select(&self, patterns: &[String]) -> Result<Selection> {
        select(&self.compiled.graph, patterns).map_err(|e| {
            let cannot = cannot_bake(&self.tree);
            if cannot.is_empty() {
                e
            } else {
                anyhow!(NothingBakes {
                    error: e.to_string(),
                    cannot,
                })
            }
        })
    }

    /// The plan for a selection: due or current and why, without the
    /// changed fields (what `csis build` and `csis watch` need).
    pub fn plan(&self, sel: &Selection, force: &ForceBake) -> Result<Plan> {
        self.plan_with(sel, force, Explain::No)
    }

    /// The plan with the changed fields of every due bake whose head
    /// holds canonical inputs (`csis plan --explain`, the markdown table,
    /// the graph): it reads the whole records when a bake is due.
    pub fn plan_explained(&self, sel: &Selection, force: &ForceBake) -> Result<Plan> {
        self.plan_with(sel, force, Explain::Yes)
    }

    /// Plan a relaunch for each launched durable instance `drift` finds
    /// missing (crate::fleet::plan::relaunch_missing).
    pub fn relaunch_missing(
        &self,
        plan: &mut Plan,
        drift: &[csis_cache::drift::Drift],
    ) -> Result<()> {
        crate::fleet::plan::relaunch_missing(&self.meta, &self.compiled.graph, plan, drift)
    }

    fn plan_with(&self, sel: &Selection, force: &ForceBake, explain: Explain) -> Result<Plan> {
        // A base baked from a vendor tag is due when the tag moved.
        let t0 = std::time::Instant::now();
        let vendor = crate::vendor::read(
            &self.tree,
            &self.compiled,
            &self.lineage,
            sel,
            &self.runtimes,
        );
        if vendor.read > 0 {
            timing("read vendor tags", t0);
        }
        let mut plan = plan_with_vendor(
            &self.meta,
            &self.lineage,
            &self.revs,
            &self.compiled.graph,
            &self.fps,
            sel,
            force,
            explain,
            &vendor.moved,
        )?;
        crate::vendor::note_unread(&vendor, &mut plan);
        // The last state query's `missing` machines are relaunched (read
        // only when the tree has instances: a plan of images reads nothing).
        if plan.nodes.iter().any(|n| n.kind == NodeKind::Instance) {
            let seen = crate::state_file::last_report_drift(&self.tree).unwrap_or_default();
            self.relaunch_missing(&mut plan, &seen)?;
        }
        // Launch parameters changed without a replacement: refused at
        // the changed field, as a load error (nothing runs).
        let refused = crate::fleet::checks::refusals_of_plan(
            &self.tree,
            &self.meta,
            &self.compiled.graph,
            &plan,
        )?;
        if !refused.is_empty() {
            return Err(crate::NotLoaded {
                diagnostics: refused,
            }
            .into());
        }
        Ok(plan)
    }
}

/// An image or OS builder none of whose runtime entries csis can bake (its
/// image builder is of a type csis does not run, on a runtime type csis
/// does not run: the GCE starter's `packer-gce` on `gcloud`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CannotBake {
    /// `image` or `base image` (an OS builder).
    pub kind: &'static str,
    pub name: String,
    /// The entries' image builders, as declared.
    pub builders: Vec<String>,
    /// The runtime types the tree declares and csis does not run (`gcloud`).
    pub runtime_types: Vec<String>,
}

impl CannotBake {
    /// Its line of the [`NothingBakes`] error.
    fn line(&self) -> String {
        let on = match self.runtime_types.as_slice() {
            [] => "a runtime csis".to_string(),
            [t] => format!("its {t} runtime, which csis"),
            ts => format!("its runtime ({}), which csis", ts.join(", ")),
        };
        format!(
            "{} {}: cannot bake in csis yet: its image builder `{}` bakes on {on} cannot bake on yet",
            self.kind,
            self.name,
            self.builders.join("`, `")
        )
    }
}

/// A selection that matched nothing in a tree where some images cannot
/// bake in csis: the selection's error, then one line per such image.
#[derive(Debug)]
pub struct NothingBakes {
    pub error: String,
    pub cannot: Vec<CannotBake>,
}

impl std::fmt::Display for NothingBakes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.error)?;
        for c in &self.cannot {
            writeln!(f, "  {}", c.line())?;
        }
        write!(
            f,
            "`csis validate` still checked the whole tree (every declaration, at its file and line)"
        )
    }
}

impl std::error::Error for NothingBakes {}

/// The images and OS builders of `tree` that declare runtime entries of
/// which csis can bake none.
pub fn cannot_bake(tree: &Tree) -> Vec<CannotBake> {
    let runtime_types: Vec<String> = tree
        .unused
        .iter()
        .filter_map(|u| u.what.strip_suffix(" runtimes"))
        .map(str::to_string)
        .collect();
    let mut out = Vec::new();
    for os in &tree.os_builders {
        if !os.runtimes.is_empty() && os.active_runtimes().next().is_none() {
            out.push(CannotBake {
                kind: "base image",
                name: os.display.clone(),
                builders: os.runtimes.iter().map(|r| r.label.clone()).collect(),
                runtime_types: runtime_types.clone(),
            });
        }
    }
    for img in &tree.images {
        if !img.runtimes.is_empty() && img.active_runtimes().next().is_none() {
            out.push(CannotBake {
                kind: "image",
                name: img.display.clone(),
                builders: img.runtimes.iter().map(|r| r.label.clone()).collect(),
                runtime_types: runtime_types.clone(),
            });
        }
    }
    out
}

/// [`Session::select`] on a graph.
pub fn select(graph: &Graph, patterns: &[String]) -> Result<Selection> {
    let pats: Vec<Pattern> = if patterns.is_empty() {
        vec![Pattern::all()]
    } else {
        patterns
            .iter()
            .map(|p| Pattern::parse(p).map_err(|e| anyhow!("{e}")))
            .collect::<Result<_>>()?
    };
    graph.select(&pats).map_err(|e| anyhow!("{e}"))
}

/// Whether a plan says which inputs changed ([`Session::plan_explained`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explain {
    No,
    Yes,
}

/// [`Session::plan`] on a graph and its fingerprints, with the records of
/// [`read_meta`] and their planning view `records`, aged as of `now`
/// (`csis watch` plans on the incremental compile's graph, and keeps
/// `records` while the records' files do not move), carrying over from
/// `last` the nodes that did not move ([`Planner::plan_after`]).
#[allow(clippy::too_many_arguments)]
pub fn plan_after(
    meta: &MetaState,
    lineage: &Lineage,
    revs: &Revocations,
    records: &LineageRecords,
    now: SystemTime,
    graph: &Graph,
    fps: &Fingerprints,
    sel: &Selection,
    force: &ForceBake,
    last: Option<Plan>,
) -> Result<Replan> {
    let none = VendorMoves::new();
    let planner = planner_with(force, &none);
    let on = Recorded {
        meta,
        lineage,
        revs,
        records,
        now,
    };
    plan_on(&on, &planner, graph, fps, sel, Explain::No, last)
}

/// The records a plan reads, and when it plans.
struct Recorded<'a> {
    meta: &'a MetaState,
    lineage: &'a Lineage,
    revs: &'a Revocations,
    /// The lineage's planning view for the engine, aged as of `now`.
    records: &'a LineageRecords,
    now: SystemTime,
}

/// The planning view of `lineage` for the engine, without the builds
/// `revs` revoked as earlier records, aged as of `now`.
pub fn planning_records(lineage: &Lineage, revs: &Revocations, now: SystemTime) -> LineageRecords {
    LineageRecords::excluding(lineage, now, |b| revs.is_revoked(b))
}

/// [`plan`] with the vendor tags that moved ([`crate::vendor::read`]).
#[allow(clippy::too_many_arguments)]
pub fn plan_with_vendor(
    meta: &MetaState,
    lineage: &Lineage,
    revs: &Revocations,
    graph: &Graph,
    fps: &Fingerprints,
    sel: &Selection,
    force: &ForceBake,
    explain: Explain,
    vendor: &VendorMoves,
) -> Result<Plan> {
    let now = SystemTime::now();
    let planner = planner_with(force, vendor);
    let records = planning_records(lineage, revs, now);
    let on = Recorded {
        meta,
        lineage,
        revs,
        records: &records,
        now,
    };
    Ok(plan_on(&on, &planner, graph, fps, sel, explain, None)?.plan)
}

/// The plan, carrying nodes over from `last` (not with `explain`, which
/// may plan twice).
fn plan_on(
    on: &Recorded,
    planner: &Planner,
    graph: &Graph,
    fps: &Fingerprints,
    sel: &Selection,
    explain: Explain,
    last: Option<Plan>,
) -> Result<Replan> {
    let t0 = std::time::Instant::now();
    let Recorded {
        meta,
        lineage,
        revs,
        records,
        now,
    } = *on;
    let revoked = |b: &str| revs.is_revoked(b);
    let last = last.filter(|_| explain == Explain::No);
    let mut replan = planner.plan_after(graph, sel, fps, records, last)?;
    let plan = &mut replan.plan;
    // The planning view holds no canonical inputs: when a due node's
    // fingerprint differs from its head's, plan again with the whole
    // records, so the plan says which inputs changed (`--explain`).
    let diffable = explain == Explain::Yes
        && plan.nodes.iter().any(|n| {
            let node = graph.node(n.id);
            n.due
                && node.policy() == RunPolicy::Decide
                && records
                    .record(node)
                    .is_some_and(|r| r.fingerprint != Some(n.fingerprint))
        });
    if diffable {
        // The tree's root holds `meta-state/` and `.csis/`.
        let root = meta.dir().parent().unwrap_or(Path::new("."));
        let (lineage, pins) = meta.load_with_journal(&LocalDir::of_tree(root).journal())?;
        let (lineage, _) = planning_view(revs, lineage, pins);
        let records = LineageRecords::excluding(&lineage, now, revoked);
        *plan = planner.plan(graph, sel, fps, &records)?;
        replan.made = plan.nodes.iter().map(|n| n.id).collect();
    }
    let plan = &mut replan.plan;
    name_revoked_heads(revs, plan);
    retention_due(meta, lineage, revs, graph, plan, now)?;
    hold_revoked_pins(revs, graph, plan);
    crate::fleet::apply_fleet_plan(meta, lineage, graph, plan)?;
    timing("plan", t0);
    Ok(replan)
}

/// The plan's code for a dispose node due for its retention alone.
pub const RETENTION_DUE: &str = "retention";

/// Retention runs in every run where it is declared (core.md §5.3): a
/// dispose node nothing else makes due is due when the retention plan of
/// its (series, runtime) has a build to dispose (a `retention:` added to a
/// converged tree, a release moved off an old build), so `csis build`
/// disposes without a bake and `csis plan` says why. The node itself reads
/// the records afresh and asks the runtime before it deletes anything.
fn retention_due(
    meta: &MetaState,
    lineage: &Lineage,
    revs: &Revocations,
    graph: &Graph,
    plan: &mut Plan,
    now: SystemTime,
) -> Result<()> {
    use csis_cache::retention::{retention_plan, LaunchParams, PlanInputs, Protections};
    // (series, runtime) -> (the node's position, its keep count)
    let mut idle: std::collections::HashMap<(String, String), (usize, u32)> = Default::default();
    for (i, n) in plan.nodes.iter().enumerate() {
        if n.due || n.kind != NodeKind::Dispose {
            continue;
        }
        let (Some(series), Some(rt)) = (n.series.clone(), n.runtime.clone()) else {
            continue;
        };
        let inputs = graph.node(n.id).inputs();
        let keep = match inputs.get("ephemeral").and_then(|e| e.as_bool()) {
            Some(true) => Some(0),
            _ => inputs
                .get("keep")
                .and_then(|k| k.as_u64())
                .map(|k| k as u32),
        };
        if let Some(keep) = keep {
            idle.insert((series, rt), (i, keep));
        }
    }
    if idle.is_empty() {
        return Ok(());
    }
    // Only where a (series, runtime) holds more builds than it keeps.
    let mut count: std::collections::HashMap<(&str, &str), u32> = Default::default();
    for b in &lineage.builds {
        if let Some(rt) = b.runtime.as_deref() {
            *count.entry((b.series.as_str(), rt)).or_default() += 1;
        }
    }
    idle.retain(|(s, r), (_, keep)| {
        count
            .get(&(s.as_str(), r.as_str()))
            .is_some_and(|n| n > keep)
    });
    if idle.is_empty() {
        return Ok(());
    }
    let root = meta.dir().parent().unwrap_or(Path::new("."));
    let (_, mut pins) = csis_cache::load_for_planning(meta, &LocalDir::of_tree(root))?;
    // the planning view holds image pins only: an instance's pin protects too
    pins.instances = meta.pins()?.instances;
    let prot = Protections::from_records(&pins, &meta.releases()?, &LaunchParams::load(meta)?);
    let revoked = revs.ids();
    let runtimes = std::collections::BTreeSet::new();
    let inp = PlanInputs {
        lineage,
        protections: &prot,
        configured_runtimes: &runtimes,
        revoked: &revoked,
        now,
    };
    let keep_of = |s: &str, r: &str| idle.get(&(s.to_string(), r.to_string())).map(|k| k.1);
    let p = retention_plan(inp, None, None, &keep_of);
    let mut items: std::collections::BTreeMap<(&str, &str), Vec<&str>> = Default::default();
    for it in &p.items {
        items
            .entry((it.series.as_str(), it.runtime.as_str()))
            .or_default()
            .push(it.build_id.as_str());
    }
    for ((series, rt), ids) in items {
        let Some(&(i, keep)) = idle.get(&(series.to_string(), rt.to_string())) else {
            continue;
        };
        let n = &mut plan.nodes[i];
        n.due = true;
        n.code = RETENTION_DUE.to_string();
        n.reason = format!(
            "retention (keep {keep}): {} build(s) of {series} on {rt} to dispose ({})",
            ids.len(),
            ids.join(", ")
        );
        n.decision = csis_engine::Decision::Due {
            reason: csis_engine::Reason::custom(RETENTION_DUE, n.reason.clone()),
        };
    }
    Ok(())
}

/// The plan's code for an image held on a pin to a revoked build.
pub const PIN_REVOKED: &str = "pin-revoked";

/// A pinned image whose pin names a revoked build is held: its bake and
/// what follows it (emit, retag, test, release) do not run, whatever else
/// makes them due, and the plan names the upgrade that moves the pin. It is
/// never baked from the revoked build, and never moved to another parent
/// build unasked (`csis upgrade image` is the operator's decision).
fn hold_revoked_pins(revs: &Revocations, graph: &Graph, plan: &mut Plan) {
    if revs.revocations.is_empty() {
        return;
    }
    // The compile puts a pinned image's pin on its bake node.
    let held: Vec<(String, String, String)> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Bake)
        .filter_map(|n| {
            let pin = graph.node(n.id).attr(PINNED_PARENT_ATTR)?;
            revs.is_revoked(pin).then(|| {
                (
                    n.series.clone().unwrap_or_default(),
                    n.runtime.clone().unwrap_or_default(),
                    pin.to_string(),
                )
            })
        })
        .collect();
    if held.is_empty() {
        return;
    }
    let follows_bake = [
        NodeKind::Bake,
        NodeKind::Emit,
        NodeKind::Retag,
        NodeKind::Test,
        NodeKind::Release,
    ];
    for n in plan.nodes.iter_mut() {
        let (Some(series), Some(rt)) = (n.series.as_deref(), n.runtime.as_deref()) else {
            continue;
        };
        let Some((image, _, build)) = held.iter().find(|(i, r, _)| i == series && r == rt) else {
            continue;
        };
        if !follows_bake.iter().any(|k| n.kind == *k) {
            continue;
        }
        n.reason = format!(
            "held: pinned to revoked build {build}; `csis upgrade image {image} --runtime {rt}` moves the pin"
        );
        n.code = PIN_REVOKED.to_string();
        if n.due {
            n.due = false;
            n.decision = csis_engine::Decision::Current { build: None };
        }
    }
}

/// A bake due for want of a build, where the series' builds on that runtime
/// were revoked, says so: `no unrevoked build on sim (<id> revoked: <why>)`
/// rather than "no build yet".
fn name_revoked_heads(revs: &Revocations, plan: &mut Plan) {
    if revs.revocations.is_empty() {
        return;
    }
    for n in plan
        .nodes
        .iter_mut()
        .filter(|n| n.due && n.code == "no-record")
    {
        let (Some(series), Some(rt)) = (n.series.as_deref(), n.runtime.as_deref()) else {
            continue;
        };
        let Some(r) = revs
            .revocations
            .iter()
            .rev()
            .find(|r| r.series.as_deref() == Some(series) && r.runtime.as_deref() == Some(rt))
        else {
            continue;
        };
        n.reason = match r.reason.as_deref().filter(|s| !s.is_empty()) {
            Some(why) => format!("no unrevoked build on {rt} ({} revoked: {why})", r.build_id),
            None => format!("no unrevoked build on {rt} ({} revoked)", r.build_id),
        };
    }
}

/// Revoked heads and pins to revoked builds are invisible to the plan.
fn planning_view(revs: &Revocations, lineage: Lineage, pins: Pins) -> (Lineage, Pins) {
    if revs.revocations.is_empty() {
        return (lineage, pins);
    }
    csis_cache::planning_view(&lineage, &pins, revs)
}

/// Is anything due in the plan (a bake, a release, a dispose)? What
/// `csis plan --detailed-exitcode` answers with 2.
pub fn anything_due(plan: &Plan) -> bool {
    plan.nodes.iter().any(|n| n.due)
}
