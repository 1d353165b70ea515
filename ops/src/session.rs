//! What `plan`, `build`, `graph` and `watch` share: load the tree and
//! `meta-state/`, compile the graph, select by patterns, fingerprint, plan.
//! Nothing here writes anything or talks to a runtime.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, Result};
use csis_cache::{Lineage, LineageRecords, LocalDir, MetaPins, MetaState, Pins, Revocations};
use csis_engine::{Fingerprints, Graph, Pattern, Plan, Records, RunPolicy, Selection};
use csis_rules::compile::{compile_with_costs, planner, Compiled, ForceBake, PinSource};
use csis_rules::Tree;

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
}

/// The compile's [`PinSource`] over the records: `meta-state/`'s pins and
/// the fingerprints recorded for builds ([`MetaPins`], which knows no
/// compile).
pub(crate) struct RecordedPins<'a>(pub MetaPins<'a>);

impl PinSource for RecordedPins<'_> {
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

/// `CSIS_TIMING=1`: print how long each phase took (stderr).
pub fn timing(what: &str, t0: std::time::Instant) {
    if std::env::var_os("CSIS_TIMING").is_some() {
        // The resident memory so far (Linux), to see which phase holds it.
        let rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .map(|v| v.trim().to_string())
            })
            .map(|v| format!(" (rss {v})"))
            .unwrap_or_default();
        eprintln!(
            "timing: {what}: {:.1} ms{rss}",
            t0.elapsed().as_secs_f64() * 1000.0
        );
    }
}

/// Load the tree (a [`crate::NotLoaded`] when it does not) and compile it.
pub fn open(dir: &Path, opts: &csis_rules::LoadOptions) -> Result<Session> {
    let t0 = std::time::Instant::now();
    let tree = crate::load_tree(dir, opts)?;
    timing("load the tree", t0);
    open_tree(tree)
}

/// Compile an already loaded tree against its `meta-state/`.
pub fn open_tree(tree: Tree) -> Result<Session> {
    let root = tree.root().to_path_buf();
    let (meta, lineage, pins, revs) = read_meta(&root)?;
    let t0 = std::time::Instant::now();
    let compiled = compile_with_costs(
        &tree,
        &RecordedPins(MetaPins::new(&pins, &lineage)),
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
    })
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
        select(&self.compiled.graph, patterns)
    }

    /// The plan for a selection.
    pub fn plan(&self, sel: &Selection, force: &ForceBake) -> Result<Plan> {
        plan(
            &self.meta,
            &self.lineage,
            &self.revs,
            &self.compiled.graph,
            &self.fps,
            sel,
            force,
        )
    }
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

/// [`Session::plan`] on a graph and its fingerprints, with the records of
/// [`read_meta`] (`csis watch` plans on the incremental compile's graph).
pub fn plan(
    meta: &MetaState,
    lineage: &Lineage,
    revs: &Revocations,
    graph: &Graph,
    fps: &Fingerprints,
    sel: &Selection,
    force: &ForceBake,
) -> Result<Plan> {
    let t0 = std::time::Instant::now();
    let now = SystemTime::now();
    let planner = planner(force);
    let records = LineageRecords::new(lineage, now);
    let mut plan = planner.plan(graph, sel, fps, &records)?;
    // The planning view holds no canonical inputs: when a due node's
    // fingerprint differs from its head's, plan again with the whole
    // records, so the plan says which inputs changed (`--explain`).
    let diffable = plan.nodes.iter().any(|n| {
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
        let records = LineageRecords::new(&lineage, now);
        plan = planner.plan(graph, sel, fps, &records)?;
    }
    name_revoked_heads(revs, &mut plan);
    timing("plan", t0);
    Ok(plan)
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
