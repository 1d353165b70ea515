//! `csis watch [PATTERNS]`: keep watching the tree and print the plan's
//! changes when a file changes.
//!
//! The tree and its compile stay in a salsa database
//! ([`csis_rules::incremental`]): every YAML file, every playbook and
//! script the compile hashes, and the pins of `meta-state/` are inputs;
//! the parse of a file, the load, and per OS builder and per image the
//! unit of graph nodes and its fingerprints are memoized queries, from
//! which the graph is assembled. This polls file metadata (mtime + size);
//! on a change it re-reads the YAML files and re-hashes the playbooks and
//! scripts whose metadata moved, sets only the inputs that changed, reads
//! `meta-state/` as `csis plan` does and sets the pins, and asks for the
//! graph: an edit of one image file re-parses that file and recompiles
//! that image alone (every series' draft is re-derived from the reloaded
//! tree and compared), its fingerprint and its `follow` descendants'; an
//! edit of a playbook re-hashes that file and recompiles only the images
//! using it. The units are brought up to date on two threads and the
//! graph is assembled from them without copying their nodes (it shares
//! them). The plan then runs on that graph as `csis plan` runs it, and
//! the new plan is diffed against the previous one. `CSIS_TIMING=1`
//! prints, per change, what ran (parses, loads, recompiled series,
//! re-hashed files, re-fingerprinted series).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use csis_cache::MetaPins;
use csis_engine::Plan;
use csis_rules::compile::ForceBake;
use csis_rules::incremental::{Counts, Incremental};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns; default `//...`.
    pub patterns: Vec<String>,
    /// How often to look at the files, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
    /// Stop after reporting this many changes (for scripts and tests).
    #[arg(long, hide = true)]
    pub exit_after: Option<usize>,
}

type Snapshot = BTreeMap<PathBuf, (Option<SystemTime>, u64)>;

fn skip_dir(name: &str) -> bool {
    matches!(name, ".csis" | ".git" | "generated" | "_private" | "target")
}

/// Every file under the tree (except `.csis/`, `generated/`, ...) with its mtime and size.
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

/// One line per bake whose decision or fingerprint differs.
fn diff_plans(old: Option<&Plan>, new: &Plan) -> Vec<String> {
    let old_map: BTreeMap<String, (&str, bool, String)> = old
        .map(|p| {
            p.nodes
                .iter()
                .filter(|n| n.kind == "bake")
                .map(|n| {
                    (
                        n.label.to_string(),
                        (n.reason.as_str(), n.due, n.fingerprint.prefix(12)),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for n in new.nodes.iter().filter(|n| n.kind == "bake") {
        let l = n.label.to_string();
        let fp = n.fingerprint.prefix(12);
        match old_map.get(&l) {
            None => out.push(format!("+ {l}  {fp}  {}", n.reason)),
            Some((r, due, ofp)) => {
                if *r != n.reason || *due != n.due || *ofp != fp {
                    let mark = if n.due { "bake" } else { "skip" };
                    out.push(format!("{mark} {l}  {ofp} -> {fp}  {}", n.reason));
                }
            }
        }
    }
    if let Some(p) = old {
        let now: std::collections::BTreeSet<String> =
            new.nodes.iter().map(|n| n.label.to_string()).collect();
        for n in p.nodes.iter().filter(|n| n.kind == "bake") {
            if !now.contains(&n.label.to_string()) {
                out.push(format!("- {}", n.label));
            }
        }
    }
    out
}

/// The plan of the tree as `inc` holds it now, on its graph (nothing is
/// copied). `t0`, `before`: when the change was seen, and the counts then
/// (for `CSIS_TIMING`).
fn current_plan(
    inc: &mut Incremental,
    root: &Path,
    patterns: &[String],
    t0: Instant,
    before: Counts,
) -> anyhow::Result<Plan> {
    if let Err(diags) = inc.tree() {
        crate::render::print_human(diags);
        let errors = diags.iter().filter(|d| d.is_error()).count();
        anyhow::bail!("the tree does not load ({errors} error(s))");
    }
    let (meta, lineage, pins, revs) = crate::session::read_meta(root)?;
    inc.set_pins(&MetaPins::new(&pins, &lineage));
    let c = match inc.compiled() {
        Ok(c) => c,
        Err(Some(e)) => anyhow::bail!("{e}"),
        Err(None) => anyhow::bail!("the tree does not load"),
    };
    if std::env::var_os("CSIS_TIMING").is_some() {
        let n = inc.counts() - before;
        eprintln!(
            "timing: incremental load and compile: {:.1} ms ({} file(s) parsed, {} load(s), \
             {} series recompiled, {} file(s) hashed, {} series fingerprinted)",
            t0.elapsed().as_secs_f64() * 1000.0,
            n.parses,
            n.loads,
            n.compiles,
            n.hashes,
            n.fingerprints
        );
    }
    let graph = &c.compiled.graph;
    let sel = crate::session::select(graph, patterns)?;
    crate::session::plan(
        &meta,
        &lineage,
        &revs,
        graph,
        &c.fps,
        &sel,
        &ForceBake::default(),
    )
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let root = global.dir.clone();
    let mut snap = snapshot(&root);
    let t0 = Instant::now();
    let mut inc = Incremental::new(&root, &global.tree().load_options());
    let mut last: Option<Plan> = None;
    match current_plan(&mut inc, &root, &args.patterns, t0, Counts::default()) {
        Ok(p) => {
            let due = p.due_count("bake");
            let total = p.nodes.iter().filter(|n| n.kind == "bake").count();
            println!(
                "watching {} ({due} of {total} bake(s) due); Ctrl-C to stop",
                root.display()
            );
            last = Some(p);
        }
        Err(e) => println!(
            "watching {}: the tree does not load yet: {e:#}",
            root.display()
        ),
    }
    let _ = std::io::stdout().flush();
    let mut changes = 0usize;
    loop {
        std::thread::sleep(Duration::from_millis(args.interval_ms));
        let now = snapshot(&root);
        if now == snap {
            continue;
        }
        snap = now;
        let (t0, before) = (Instant::now(), inc.counts());
        inc.sync();
        match current_plan(&mut inc, &root, &args.patterns, t0, before) {
            Ok(p) => {
                let lines = diff_plans(last.as_ref(), &p);
                if lines.is_empty() {
                    println!("changed: the plan is the same");
                } else {
                    println!("changed:");
                    for l in lines {
                        println!("  {l}");
                    }
                }
                last = Some(p);
            }
            Err(e) => println!("changed: the tree does not load: {e:#}"),
        }
        let _ = std::io::stdout().flush();
        changes += 1;
        if args.exit_after.is_some_and(|n| changes >= n) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}
