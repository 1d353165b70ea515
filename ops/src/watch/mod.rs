//! `csis watch`: keep the tree loaded and say how the plan changes when a
//! file changes.
//!
//! The tree and its compile stay in a salsa database
//! ([`csis_rules::incremental`]): every YAML file, every playbook and
//! script the compile hashes, and the pins of `meta-state/` are inputs;
//! the parse of a file, the load, and per OS builder and per image the
//! unit of graph nodes and its fingerprints are memoized queries, from
//! which the graph is assembled. [`Watcher::wait`] wakes on the OS's file
//! events (inotify, through `notify`; polling every interval where the OS
//! gives none, e.g. past its watch limit) and [`Watcher::changed`] then
//! compares file metadata (mtime + size), which stays the truth; [`Watcher::replan`] re-reads the YAML files and
//! re-hashes the playbooks and scripts whose metadata moved, sets only the
//! inputs that changed, reads `meta-state/` as `csis plan` does when its
//! files moved since the last plan (their metadata, with the stamp's racy
//! rule: a read of a file changed in the last second is not kept) and sets
//! the pins, and asks for the graph: an edit of one image file re-parses
//! that file and recompiles that image alone (only the series whose chain
//! passes through that file are drafted again, `series_key`, and compared),
//! its fingerprint and its `follow` descendants'; an edit of a playbook
//! re-hashes that file and
//! recompiles only the images using it. The units are brought up to date
//! on two threads and the graph is assembled from them without copying
//! their nodes (it shares them). The plan then runs on that graph as `csis
//! plan` runs it, and the new plan is diffed against the previous one
//! ([`PlanChange`]). `CSIS_TIMING=1` prints, per change, what ran (parses,
//! loads, recompiled series, re-hashed files, re-fingerprinted series).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Result};
use csis_cache::stamp::FileStat;
use csis_cache::{Lineage, LineageRecords, LocalDir, MetaPins, MetaState, Pins, Revocations};
use csis_engine::{Fingerprint, Label, Plan, PlannedNode, Replan, Selection};
use csis_rules::compile::{ForceBake, NodeKind};
use csis_rules::incremental::{Counts, Incremental};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::session::RecordedPins;
use crate::{NotLoaded, TreeArgs};

/// Every file under the tree (except `.csis/`, `generated/`, ...) with its
/// mtime and size.
type Snapshot = BTreeMap<PathBuf, (Option<SystemTime>, u64)>;

fn skip_dir(name: &str) -> bool {
    matches!(name, ".csis" | ".git" | "generated" | "_private" | "target")
}

fn snapshot(root: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                if !skip_dir(&e.file_name().to_string_lossy()) {
                    stack.push(p);
                }
            } else {
                out.insert(p, (md.modified().ok(), md.len()));
            }
        }
    }
    out
}

/// How one bake's decision or fingerprint moved between two plans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum PlanChange {
    /// A bake the previous plan did not have.
    Added {
        label: String,
        /// The first 12 hex digits.
        fingerprint: String,
        reason: String,
    },
    /// A bake whose reason, due-ness or fingerprint differs.
    Changed {
        label: String,
        due: bool,
        old_fingerprint: String,
        fingerprint: String,
        reason: String,
    },
    /// A bake the new plan no longer has.
    Removed { label: String },
}

/// What a plan said of one bake: due, the reason, the fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BakeSaid {
    due: bool,
    reason: String,
    fingerprint: Fingerprint,
}

impl BakeSaid {
    fn of(n: &PlannedNode) -> BakeSaid {
        BakeSaid {
            due: n.due,
            reason: n.reason.clone(),
            fingerprint: n.fingerprint,
        }
    }
}

/// What the last plan said of each of its bakes, by label.
#[derive(Debug, Default)]
pub struct BakeView(FxHashMap<Label, BakeSaid>);

impl BakeView {
    /// The bakes of `plan`.
    pub fn of(plan: &Plan) -> BakeView {
        BakeView(
            plan.nodes
                .iter()
                .filter(|n| n.kind == NodeKind::Bake)
                .map(|n| (n.label.clone(), BakeSaid::of(n)))
                .collect(),
        )
    }

    /// The bakes whose decision or fingerprint moved from what the view
    /// holds to the plan `r`, and the view brought up to date. Every bake
    /// is looked at (a lookup each): one the planner carried over may have
    /// been edited after planning, by records that moved (a revoked head
    /// named, a pin held). Bakes went away only when `r` carried nothing:
    /// a plan that carried a node is of the last plan's graph shape.
    pub fn diff(&mut self, r: &Replan) -> Vec<PlanChange> {
        let mut out = Vec::new();
        for n in r.plan.nodes.iter().filter(|n| n.kind == NodeKind::Bake) {
            match self.0.get_mut(&n.label) {
                None => {
                    out.push(PlanChange::Added {
                        label: n.label.to_string(),
                        fingerprint: n.fingerprint.prefix(12),
                        reason: n.reason.clone(),
                    });
                    self.0.insert(n.label.clone(), BakeSaid::of(n));
                }
                Some(o) => {
                    if o.reason != n.reason || o.due != n.due || o.fingerprint != n.fingerprint {
                        out.push(PlanChange::Changed {
                            label: n.label.to_string(),
                            due: n.due,
                            old_fingerprint: o.fingerprint.prefix(12),
                            fingerprint: n.fingerprint.prefix(12),
                            reason: n.reason.clone(),
                        });
                        *o = BakeSaid::of(n);
                    }
                }
            }
        }
        if r.carried() == 0 {
            let now: FxHashSet<&Label> = r
                .plan
                .nodes
                .iter()
                .filter(|n| n.kind == NodeKind::Bake)
                .map(|n| &n.label)
                .collect();
            let mut gone: Vec<Label> = self
                .0
                .keys()
                .filter(|l| !now.contains(l))
                .cloned()
                .collect();
            gone.sort();
            for l in gone {
                self.0.remove(&l);
                out.push(PlanChange::Removed {
                    label: l.to_string(),
                });
            }
        }
        out
    }
}

/// The first plan of a watch: how many bakes are due of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Watching {
    pub due: usize,
    pub total: usize,
}

/// A tree kept loaded, and the last plan made of it.
pub struct Watcher {
    root: PathBuf,
    patterns: Vec<String>,
    snap: Snapshot,
    inc: Incremental,
    /// The last plan, whose unmoved nodes the next one carries over (None
    /// after a plan that failed: the next is made whole).
    last: Option<Plan>,
    /// What the last plan that succeeded said of each bake (the diff's
    /// side: kept when a plan fails).
    bakes: Option<BakeView>,
    events: Option<Events>,
    records: Option<Records>,
    /// How many plans it made.
    plans: usize,
    /// How many times it looked at the tree's files ([`Watcher::changed`]).
    looks: usize,
    /// How many nodes the last plan carried over from the one before.
    carried: usize,
    /// The patterns' selection on a graph of the shape it was made on
    /// ([`csis_engine::Graph::shape`]: the same labels at the same ids and
    /// the same edges select the same nodes).
    selection: Option<(u64, Selection)>,
    /// The last plan failed (the tree did not load, the records did not
    /// read): the next replan plans again, whatever moved.
    failed: bool,
}

/// `meta-state/` as the last plan read it ([`crate::session::read_meta`]),
/// and the metadata of the files it came from then
/// ([`csis_cache::planning_sources`]): while none of them moved, the next
/// plan reads it no more (an edit of the tree leaves the records alone).
struct Records {
    stats: Vec<(PathBuf, FileStat)>,
    read: (MetaState, Lineage, Pins, Revocations),
    /// The lineage's planning view for the engine, made once per read and
    /// aged again at each plan.
    planning: LineageRecords,
    /// Which read this is (the plan that read it): the pins the compile
    /// asked of one read are not asked again ([`Incremental::set_pins_kept`]).
    generation: u64,
}

impl Records {
    /// The metadata of the files the records are read from, now (None:
    /// records on a store, read every time).
    fn stats(root: &Path) -> Option<Vec<(PathBuf, FileStat)>> {
        let meta = MetaState::of_tree(root);
        let paths = csis_cache::planning_sources(&meta, &LocalDir::of_tree(root))?;
        Some(
            paths
                .into_iter()
                .map(|p| {
                    let st = FileStat::of(&p);
                    (p, st)
                })
                .collect(),
        )
    }
}

/// The OS's file events under the tree, when it gives them.
struct Events {
    /// The canonical root the events' paths start with.
    root: PathBuf,
    _watcher: notify::RecommendedWatcher,
    rx: std::sync::mpsc::Receiver<notify::Result<notify::Event>>,
}

impl Events {
    fn open(root: &Path) -> Option<Events> {
        use notify::Watcher as _;
        let root = std::fs::canonicalize(root).ok()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let mut w = notify::recommended_watcher(move |e| {
            let _ = tx.send(e);
        })
        .ok()?;
        w.watch(&root, notify::RecursiveMode::Recursive).ok()?;
        Some(Events {
            root,
            _watcher: w,
            rx,
        })
    }

    /// Does the event touch a file the tree is read from (not `.csis/`,
    /// `generated/`, ...)? An error of the OS's watch counts: look. An
    /// access (a file or directory opened, read, or closed unwritten)
    /// moves nothing: inotify reports every open, the watcher's own reads
    /// of the tree among them, which would wake it again and again. A
    /// close after a write counts (a write through a mapping reports no
    /// modification before it).
    fn relevant(&self, e: &notify::Result<notify::Event>) -> bool {
        use notify::event::{AccessKind, AccessMode};
        let Ok(e) = e else { return true };
        if let notify::EventKind::Access(a) = e.kind {
            if a != AccessKind::Close(AccessMode::Write) {
                return false;
            }
        }
        e.paths.iter().any(|p| {
            p.strip_prefix(&self.root).map_or(true, |rel| {
                !rel.components()
                    .any(|c| skip_dir(&c.as_os_str().to_string_lossy()))
            })
        })
    }
}

impl Watcher {
    /// Load and plan the tree once. The watcher is returned even when the
    /// tree does not load yet (the error says why: a [`NotLoaded`] carries
    /// the diagnostics).
    pub fn open(tree: &TreeArgs, patterns: Vec<String>) -> (Watcher, Result<Watching>) {
        let root = tree.dir.clone();
        let snap = snapshot(&root);
        let t0 = Instant::now();
        let inc = Incremental::with_costs(
            &root,
            &tree.load_options(),
            std::sync::Arc::new(crate::wiring::BakeCosts),
        );
        let mut w = Watcher {
            root,
            patterns,
            snap,
            inc,
            last: None,
            bakes: None,
            events: None,
            records: None,
            plans: 0,
            looks: 0,
            carried: 0,
            selection: None,
            failed: false,
        };
        w.events = Events::open(&w.root);
        let stats = Records::stats(&w.root);
        let first = w.current_plan(t0, Counts::default(), stats).map(|r| {
            let watching = Watching {
                due: r.plan.due_count(NodeKind::Bake.as_str()),
                total: r
                    .plan
                    .nodes
                    .iter()
                    .filter(|n| n.kind == NodeKind::Bake)
                    .count(),
            };
            w.bakes = Some(BakeView::of(&r.plan));
            w.last = Some(r.plan);
            watching
        });
        (w, first)
    }

    /// The tree's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Wait until a file of the tree may have changed, then say whether it
    /// did ([`Watcher::changed`]): woken by the OS's file event (and the
    /// events of the next few milliseconds, one save being several), or by
    /// `poll` elapsing (the fallback where the OS gives no events, and a
    /// bound on an event missed).
    pub fn wait(&mut self, poll: Duration) -> bool {
        let Some(ev) = &self.events else {
            std::thread::sleep(poll);
            return self.changed();
        };
        match ev.rx.recv_timeout(poll) {
            Ok(e) if ev.relevant(&e) => {
                let until = Instant::now() + Duration::from_millis(5);
                while ev
                    .rx
                    .recv_timeout(until.saturating_duration_since(Instant::now()))
                    .is_ok()
                {}
            }
            // a write under .csis/ or generated/: nothing the tree is read from
            Ok(_) => return false,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => self.events = None,
        }
        self.changed()
    }

    /// Whether a file under the tree changed (mtime or size) since the last
    /// call (or [`Watcher::open`]).
    pub fn changed(&mut self) -> bool {
        self.looks += 1;
        let now = snapshot(&self.root);
        if now == self.snap {
            return false;
        }
        self.snap = now;
        true
    }

    /// Bring the tree up to date and plan again: the bakes whose decision
    /// or fingerprint moved since the last plan that succeeded; None when
    /// nothing the plan reads moved (no plan made).
    pub fn replan(&mut self) -> Result<Option<Vec<PlanChange>>> {
        let (t0, before) = (Instant::now(), self.inc.counts());
        let synced = self.inc.sync();
        let stats = Records::stats(&self.root);
        // A file that is not the tree's moved (an editor's temporary file,
        // written before it is renamed over the one edited): nothing the
        // plan reads moved, so neither did the plan.
        if synced.is_empty() && !self.failed && self.last.is_some() && self.kept(&stats) {
            return Ok(None);
        }
        let r = self.current_plan(t0, before, stats);
        self.failed = r.is_err();
        let r = r?;
        let changes = self.bakes.get_or_insert_with(BakeView::default).diff(&r);
        self.last = Some(r.plan);
        Ok(Some(changes))
    }

    /// Whether the records the last plan read are kept and their files
    /// look as `stats` ([`Records::stats`], now) says.
    fn kept(&self, stats: &Option<Vec<(PathBuf, FileStat)>>) -> bool {
        matches!((&self.records, stats), (Some(r), Some(s)) if r.stats == *s)
    }

    /// The plan of the tree as the database holds it now, on its graph
    /// (nothing is copied). `t0`, `before`: when the change was seen, and
    /// the counts then (for `CSIS_TIMING`); `stats`: the records' files
    /// then.
    fn current_plan(
        &mut self,
        t0: Instant,
        before: Counts,
        stats: Option<Vec<(PathBuf, FileStat)>>,
    ) -> Result<Replan> {
        if let Err(diags) = self.inc.tree() {
            return Err(NotLoaded {
                diagnostics: diags.clone(),
            }
            .into());
        }
        self.plans += 1;
        if !self.kept(&stats) {
            let started = SystemTime::now();
            let read = crate::session::read_meta(&self.root)?;
            let planning = crate::session::planning_records(&read.1, &read.3, started);
            // kept for the next plan unless a file changed in the last
            // second (the same metadata could then hide another change)
            match stats.filter(|s| !s.iter().any(|(_, st)| st.is_racy(started))) {
                Some(stats) => {
                    self.records = Some(Records {
                        stats,
                        read,
                        planning,
                        generation: self.plans as u64,
                    })
                }
                None => {
                    self.records = None;
                    let mut once = Records {
                        stats: Vec::new(),
                        read,
                        planning,
                        generation: self.plans as u64,
                    };
                    return self.plan_on(t0, before, &mut once);
                }
            }
        }
        let mut read = self.records.take().expect("kept or just read");
        let plan = self.plan_on(t0, before, &mut read);
        self.records = Some(read);
        plan
    }

    /// The plan on the database's graph, against the records `r`.
    fn plan_on(&mut self, t0: Instant, before: Counts, r: &mut Records) -> Result<Replan> {
        let (meta, lineage, pins, revs) = &r.read;
        // what the records answer for the pinned images of the tree as it
        // loads now (an image that became pinned asks for its pin even
        // though the records did not move; only a changed answer is set)
        self.inc.set_pins_kept(
            r.generation,
            &RecordedPins(MetaPins::new(pins, lineage), Default::default()),
        );
        let c = match self.inc.compiled() {
            Ok(c) => c,
            Err(Some(e)) => bail!("{e}"),
            Err(None) => bail!("the tree does not load"),
        };
        if std::env::var_os("CSIS_TIMING").is_some() {
            let n = self.inc.counts() - before;
            log::info!(
                target: "csis::timing",
                "timing: incremental load and compile: {:.1} ms ({} file(s) parsed, {} load(s) \
                 ({} image file(s) loaded, {} kept, {} of them resolved), {} series recompiled, {} file(s) hashed, \
                 {} series fingerprinted, {} graph(s) assembled, {} patched)",
                t0.elapsed().as_secs_f64() * 1000.0,
                n.parses,
                n.loads,
                n.image_files_loaded,
                n.image_files_kept,
                n.image_files_resolved,
                n.compiles,
                n.hashes,
                n.fingerprints,
                n.graphs - n.graphs_patched,
                n.graphs_patched
            );
        }
        let graph = &c.compiled.graph;
        let sel = match self.selection.take() {
            Some((shape, sel)) if shape == graph.shape() => sel,
            _ => crate::session::select(graph, &self.patterns)?,
        };
        let now = SystemTime::now();
        r.planning.at(now);
        let replan = crate::session::plan_after(
            meta,
            lineage,
            revs,
            &r.planning,
            now,
            graph,
            &c.fps,
            &sel,
            &ForceBake::default(),
            self.last.take(),
        )?;
        self.selection = Some((graph.shape(), sel));
        self.carried = replan.carried();
        if std::env::var_os("CSIS_TIMING").is_some() {
            log::info!(
                target: "csis::timing",
                "timing: {} node(s) planned anew, {} carried over from the last plan",
                replan.made.len(),
                self.carried
            );
        }
        Ok(replan)
    }
}

#[cfg(test)]
mod tests;
