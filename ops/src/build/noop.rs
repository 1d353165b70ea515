//! The no-op fast path of `csis build`.
//!
//! A build that finds nothing due leaves a stamp ([`csis_cache::stamp`])
//! under `.csis/cache/`: the metadata and content hash of every path its
//! answer depended on (the tree's YAML files and directories, the playbooks
//! and scripts the compile hashed, overlays, age identities, `meta-state/`,
//! the journal, the csis binary itself), the environment variables the
//! templates read, the time until which the answer holds (the earliest
//! update policy), and what the build printed. The next build with the same
//! arguments stats those paths and, when nothing moved, prints the same
//! answer without reading the tree: ninja's and git's trick, with git's
//! racy-file rule. Where only metadata moved (a fresh checkout with
//! `.csis/cache/` restored by CI, `touch`), the content hashes decide.
//!
//! When the stamp does not hold (or there is none), the build takes the
//! full path: load, compile, fingerprint, plan. Nothing else changes: the
//! stamp only ever answers "nothing is due", and only for exactly the
//! inputs it was made from.
//!
//! Not stamped (always the full path): `--dry-run`, `--force-bake`, a tree
//! whose templates iterate `ENV` or read `execution.timestamp` (the load
//! time: every build differs), a plan that keeps a launched machine
//! standing (its runtime is asked every build whether it still stands), a
//! selection with a base whose head was baked from a vendor tag (a docker
//! tag can move without a file changing: the plan reads it,
//! [`crate::vendor`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use csis_cache::stamp::{FileStat, Stamp, Watch};
use csis_cache::{LineageRecords, LocalDir};
use csis_engine::{Event, Plan, Records, Summary};

use super::BuildOptions;
use crate::session::Session;
use crate::TreeArgs;

/// What a holding stamp answers: what the no-op build printed, for the
/// caller to print again.
pub struct Replay {
    /// The compile's warnings, as the no-op build noticed them.
    pub warnings: Vec<super::Notice>,
    /// The skipped events, as JSON lines (each ending in a newline).
    pub events_json: String,
    /// The summary, its elapsed time this answer's.
    pub summary: Summary,
}

/// The stamp of one `csis build` invocation.
pub struct NoopStamp {
    stamp: Stamp,
    /// The tree's root (canonical) and the overlay files (absolute).
    root: PathBuf,
    overlays: Vec<PathBuf>,
    /// This very binary, as it was when the build started (a rebuilt csis
    /// may plan differently).
    exe: Option<(PathBuf, FileStat)>,
    /// When this build began reading its inputs.
    started: SystemTime,
    t0: std::time::Instant,
}

impl NoopStamp {
    /// The stamp for these arguments; None when the build may not be stamped.
    pub fn for_build(global: &TreeArgs, args: &BuildOptions) -> Option<NoopStamp> {
        if args.dry_run || !args.force_bake.is_empty() {
            return None;
        }
        let dir = std::fs::canonicalize(&global.dir).ok()?;
        let mut h = blake3::Hasher::new();
        let mut part = |s: &[u8]| {
            h.update(&(s.len() as u64).to_le_bytes());
            h.update(s);
        };
        part(b"csis-noop-v1");
        part(env!("CARGO_PKG_VERSION").as_bytes());
        part(dir.as_os_str().as_encoded_bytes());
        // (Not `--json`: the stamp keeps the events, the renderer shows them.)
        part(b"build");
        for p in &args.patterns {
            part(b"pattern");
            part(p.as_bytes());
        }
        let overlays: Vec<PathBuf> = global
            .overlays
            .iter()
            .map(|o| std::path::absolute(o).unwrap_or_else(|_| dir.join(o)))
            .collect();
        for o in &overlays {
            part(b"overlay");
            part(o.as_os_str().as_encoded_bytes());
        }
        for u in &global.undeclare {
            part(b"undeclare");
            part(u.as_bytes());
        }
        let key = h.finalize();
        Some(NoopStamp {
            stamp: Stamp::new(&LocalDir::of_tree(&dir).sub("cache"), key),
            root: dir,
            overlays,
            exe: std::env::current_exe().ok().map(|p| {
                let st = FileStat::of(&p);
                (p, st)
            }),
            started: SystemTime::now(),
            t0: std::time::Instant::now(),
        })
    }

    /// When the stamp holds: what the no-op build printed.
    pub fn replay(&self) -> Option<Replay> {
        let payload = self.stamp.check(SystemTime::now())?;
        let text = String::from_utf8(payload).ok()?;
        // Check the summary before printing anything.
        let summary = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("S "))
            .and_then(|s| serde_json::from_str::<Summary>(s).ok())?;
        let mut warnings = Vec::new();
        let mut events = String::new();
        for line in text.lines() {
            if let Some(w) = line.strip_prefix("W ") {
                let message = w.strip_prefix("warning: ").unwrap_or(w).to_string();
                warnings.push(super::Notice::Warning { message });
            } else if let Some(e) = line.strip_prefix("E ") {
                events.push_str(e);
                events.push('\n');
            }
        }
        let mut summary = summary;
        summary.elapsed_ms = self.t0.elapsed().as_millis() as u64;
        crate::timing::timing("no-op stamp holds", self.t0);
        Some(Replay {
            warnings,
            events_json: events,
            summary,
        })
    }

    /// After a build: when it had nothing due and everything was skipped,
    /// stamp it; otherwise drop any stamp of these arguments.
    pub fn record(&self, session: &Session, plan: &Plan, capture: &Capture, summary: &Summary) {
        // Nothing due: nothing ran, every selected node was skipped. A
        // plan with a machine it keeps standing (a launched durable
        // instance, not gated) is never stamped: each build asks the
        // runtime whether the machine still stands (a container removed
        // behind csis is relaunched by the next build).
        if plan.nodes.iter().any(|n| n.due)
            || summary.interrupted
            || super::keeps_machines(session, plan)
        {
            self.stamp.remove();
            return;
        }
        let reads = &session.tree.template_reads;
        let time_bound = reads
            .execution
            .iter()
            .any(|f| f != "date" && f != "dateformat");
        // A base baked from a vendor tag: only a read of the tag (the
        // runtime's, at every plan) tells that it did not move.
        if reads.env_all
            || time_bound
            || crate::vendor::plan_reads_vendor_tags(&session.compiled, &session.lineage, plan)
        {
            self.stamp.remove();
            return;
        }
        let mut until = refresh_deadline(session, plan);
        if reads.execution.contains("date") {
            // `execution.date` changes at midnight UTC.
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let midnight = UNIX_EPOCH + Duration::from_secs((now.as_secs() / 86_400 + 1) * 86_400);
            until = Some(until.map_or(midnight, |u| u.min(midnight)));
        }
        let mut env: Vec<String> = reads.env_keys.iter().cloned().collect();
        env.push("CSIS_CONFIG_IDENTITY".into());
        let Some((exe, exe_stat)) = &self.exe else {
            self.stamp.remove();
            return;
        };
        let mut paths: Vec<(PathBuf, Watch)> = watched_paths(&self.root, session)
            .into_iter()
            .map(|p| (p, Watch::Content))
            .collect();
        paths.extend(self.overlays.iter().map(|p| (p.clone(), Watch::Content)));
        // An interrupted build's records wait in the journal (absent = empty).
        paths.push((
            LocalDir::of_tree(&self.root).journal(),
            Watch::ContentOrAbsent,
        ));
        paths.push((exe.clone(), Watch::Binary(*exe_stat)));
        let mut payload = String::new();
        for w in &session.compiled.warnings {
            payload.push_str("W warning: ");
            payload.push_str(&w.replace('\n', " "));
            payload.push('\n');
        }
        for e in capture
            .lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            payload.push_str("E ");
            payload.push_str(e);
            payload.push('\n');
        }
        let mut s = summary.clone();
        s.elapsed_ms = 0;
        payload.push_str("S ");
        payload.push_str(&serde_json::to_string(&s).unwrap_or_default());
        payload.push('\n');
        match self
            .stamp
            .write(&env, &paths, self.started, until, payload.as_bytes())
        {
            Ok(true) => crate::timing::timing("no-op stamp written", self.t0),
            Ok(false) => crate::timing::timing("no-op stamp not written (racy files)", self.t0),
            Err(e) => log::warn!("could not write {}: {e}", self.stamp.path().display()),
        }
    }
}

/// The JSON lines of the skipped events of a run (nothing else is kept).
#[derive(Clone, Default)]
pub struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Capture {
    pub fn event(&self, e: &Event) {
        if let Event::Skipped { .. } = e {
            self.lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.to_json_line());
        }
    }
}

/// The earliest moment an update policy (`refresh_days`) makes a selected
/// bake due.
fn refresh_deadline(session: &Session, plan: &Plan) -> Option<SystemTime> {
    let now = SystemTime::now();
    let records = LineageRecords::new(&session.lineage, now);
    let graph = &session.compiled.graph;
    plan.nodes
        .iter()
        .filter_map(|n| {
            let node = graph.node(n.id);
            let days: u64 = node.attr("refresh_days")?.parse().ok()?;
            let age = records.record(node)?.age?;
            let left = Duration::from_secs(days * 86_400).saturating_sub(age);
            Some(now + left)
        })
        .min()
}

/// Every path the answer of a no-op build depended on.
fn watched_paths(root: &Path, session: &Session) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // The tree: cfg/ (flat) and the collection directories (recursive):
    // every directory (an added or removed file changes it) and file.
    out.push(root.join("cfg"));
    list(&root.join("cfg"), false, &mut out);
    for d in ["images", "groups", "storages", "instances"] {
        let d = root.join(d);
        out.push(d.clone());
        list(&d, true, &mut out);
    }
    out.extend(
        csis_rules::compile::input_files(&session.tree)
            .into_iter()
            .map(|p| std::path::absolute(&p).unwrap_or_else(|_| root.join(&p))),
    );
    // Age identities (encrypted values decrypt with them).
    if let Some(v) = std::env::var_os("CSIS_CONFIG_IDENTITY") {
        let p = PathBuf::from(&v);
        if p.is_absolute() || p.exists() {
            out.push(p.clone());
            list(&p, false, &mut out);
        }
    }
    // The records.
    let meta = root.join("meta-state");
    out.push(meta.clone());
    list(&meta, true, &mut out);
    out
}

/// The entries of `dir` (recursively: with every subdirectory's), sorted.
fn list(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(PathBuf, bool)> = rd
        .flatten()
        .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
        .collect();
    entries.sort();
    for (p, is_dir) in entries {
        out.push(p.clone());
        if is_dir && recursive {
            list(&p, true, out);
        }
    }
}
