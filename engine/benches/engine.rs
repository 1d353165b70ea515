//! Engine benchmarks (harness = false).
//!
//! ```text
//! cargo bench -p csis-engine --bench engine                 # everything
//! cargo bench -p csis-engine --bench engine -- plan 20000   # one plan size
//! cargo bench -p csis-engine --bench engine -- makespan     # makespan only
//! ```
//!
//! (a) plan: a generated tree of N images (~5 nodes per image: emit, bake,
//!     retag, release, dispose; plus resolve + bake per OS builder), chains
//!     and fan-out mixed, all recorded as current. Timed: build the graph
//!     (including the inputs' JSON), fingerprint, select `//...`, plan, and a
//!     no-op run. Each size runs in its own process so that the peak memory
//!     (VmHWM from /proc/self/status) is that size's.
//! (b) makespan: generated DAGs of bakes with known durations, run with -j 8
//!     on tokio's paused clock (auto-advance: deterministic and fast),
//!     divided by the lower bound max(longest path, total work / 8); beside
//!     it, "depth blocks" (all nodes of depth d form a block run on 8 workers,
//!     longest first; the next block starts when the whole block is done).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use csis_engine::*;
use serde_json::{json, Value};

/// Deterministic pseudo-random numbers (SplitMix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn label(s: &str) -> Label {
    Label::parse(s).unwrap()
}

/// The parent of each image: `None` = an OS builder (index `os`), else an
/// earlier image. Mix: 10% on a base, 30% chain on the previous image, the
/// rest fan out from a random earlier image.
fn shape(n: usize, seed: u64) -> Vec<Result<usize, usize>> {
    let mut rng = Rng(seed);
    let n_os = 20;
    (0..n)
        .map(|i| {
            let r = rng.below(10);
            if i == 0 || r == 0 {
                Err(rng.below(n_os) as usize)
            } else if r <= 3 {
                Ok(i - 1)
            } else {
                Ok(rng.below(i as u64) as usize)
            }
        })
        .collect()
}

fn hex64(rng: &mut Rng) -> String {
    format!(
        "{:016x}{:016x}{:016x}{:016x}",
        rng.next(),
        rng.next(),
        rng.next(),
        rng.next()
    )
}

/// Build the domain-like graph for `n` images on one runtime.
fn build_graph(n: usize) -> Graph {
    let rt = "aws-east2";
    let parents = shape(n, 42);
    let mut rng = Rng(7);
    let mut g = Graph::with_capacity(n * 5 + 40, n * 6 + 40);
    let mut os_bakes = Vec::new();
    for o in 0..20 {
        let t = label(&format!("//os/os{o}@{rt}"));
        let resolve = g
            .add_node(
                Node::new(t.clone(), "resolve")
                    .with_policy(RunPolicy::WhenDependentDue)
                    .with_pool(rt)
                    .with_inputs(json!({"family": "debian", "version": o})),
            )
            .unwrap();
        let bake = g
            .add_node(
                Node::new(t, "bake")
                    .with_pool(rt)
                    .with_attr("series", &format!("os{o}"))
                    .with_attr("runtime", rt)
                    .with_inputs(json!({
                        "series": format!("os{o}"),
                        "parent": "vendor",
                        "vendor": {"family": "debian", "family_version": "12", "architecture": "x86_64",
                                   "query": {"owners": ["136693071363"], "name": "debian-12-amd64-*"}},
                        "admin_user": "admin",
                        "admin_public_keys": [hex64(&mut rng)],
                        "update": {"refresh_days": 30},
                        "disk_size": 20,
                    })),
            )
            .unwrap();
        g.add_dep(bake, resolve, Dep::Order).unwrap();
        os_bakes.push(bake);
    }
    let mut bakes = Vec::with_capacity(n);
    for (i, parent) in parents.iter().enumerate() {
        let series = format!("img{i}");
        let t = label(&format!("//images/{series}@{rt}"));
        let mods: Vec<Value> = (0..3)
            .map(|m| {
                json!({"name": format!("mod{m}"), "type": "ansible", "operation": "ansible",
                       "idempotent": "ansible", "content_hash": hex64(&mut rng)})
            })
            .collect();
        let emit = g
            .add_node(
                Node::new(t.clone(), "emit")
                    .with_policy(RunPolicy::WhenDependentDue)
                    .with_inputs(json!({"builder": "packer-ebs", "mods": mods.len()})),
            )
            .unwrap();
        let bake = g
            .add_node(
                Node::new(t.clone(), "bake")
                    .with_pool(rt)
                    .with_attr("series", &series)
                    .with_attr("runtime", rt)
                    .with_inputs(json!({
                        "series": series,
                        "capabilities": {"identity_types": ["ldap"], "storage_types": ["nfs"]},
                        "mods": mods,
                        "tests": ["test -x /usr/bin/python3", "id -u admin"],
                        "disk_size": 30,
                    })),
            )
            .unwrap();
        let retag = g
            .add_node(Node::new(t.clone(), "retag").with_policy(RunPolicy::WhenDependencyDue))
            .unwrap();
        let release = g
            .add_node(Node::new(t.clone(), "release").with_inputs(json!({"model": "stable"})))
            .unwrap();
        let dispose = g
            .add_node(Node::new(t, "dispose").with_inputs(json!({"keep": 3})))
            .unwrap();
        g.add_dep(bake, emit, Dep::Order).unwrap();
        let p = match parent {
            Err(o) => os_bakes[*o],
            Ok(j) => bakes[*j],
        };
        g.add_dep(bake, p, Dep::hashed("parent")).unwrap();
        g.add_dep(retag, bake, Dep::Order).unwrap();
        g.add_dep(release, retag, Dep::Order).unwrap();
        g.add_dep(dispose, release, Dep::Order).unwrap();
        bakes.push(bake);
    }
    g
}

fn vm_hwm_kib() -> u64 {
    proc_status_kib("VmHWM:")
}

fn proc_status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).map(|x| x.parse().unwrap_or(0)))
        })
        .unwrap_or(0)
}

/// CPU time of this thread (ns), from /proc/thread-self/schedstat: the
/// machine is shared, so wall time alone would measure the neighbours too.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

struct Clock {
    wall: Instant,
    cpu: u64,
}
impl Clock {
    fn now() -> Clock {
        Clock {
            wall: Instant::now(),
            cpu: cpu_ns(),
        }
    }
    /// "cpu ms (wall ms)" since `self`.
    fn since(&self, later: &Clock) -> String {
        format!(
            "{:.1}ms (wall {:.1})",
            (later.cpu - self.cpu) as f64 / 1e6,
            ms(later.wall - self.wall)
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bench_plan(n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rss0 = proc_status_kib("VmRSS:");
    let c0 = Clock::now();
    let g = build_graph(n);
    let c1 = Clock::now();
    let rss_graph = proc_status_kib("VmRSS:");
    let fps = g.fingerprints().unwrap();
    let c2 = Clock::now();

    // Records (untimed: they come from meta-state): as if every Decide node
    // had been built from this exact tree, so that the plan is all current.
    let mut records = MemoryRecords::default();
    for id in g.ids() {
        if g.node(id).policy() == RunPolicy::Decide {
            records.insert(
                g.node(id).label().clone(),
                Record {
                    fingerprint: Some(fps.get(id)),
                    build: Some(format!("ami-{}", fps.get(id).prefix(8))),
                    ..Default::default()
                },
            );
        }
    }

    let c3 = Clock::now();
    let sel = g.select(&[Pattern::all()]).unwrap();
    let c4 = Clock::now();
    let plan = Planner::standard().plan(&g, &sel, &fps, &records).unwrap();
    let c5 = Clock::now();
    let rss_plan = proc_status_kib("VmRSS:");
    assert_eq!(plan.due().count(), 0, "all current");
    let report = rt.block_on(run(
        &g,
        &plan,
        RunOptions::new(8).count_kind("bake"),
        Events::none(),
        |_cx| async { Ok(NodeOutput::none()) },
    ));
    let c6 = Clock::now();
    assert_eq!(report.summary.baked, 0);
    drop(report);
    let hwm_noop = vm_hwm_kib();

    // First build: nothing recorded, every node due; actions return at once
    // (the scheduler's own cost per node: events, readiness, spawn, join).
    let empty = MemoryRecords::default();
    let c7 = Clock::now();
    let full = Planner::standard().plan(&g, &sel, &fps, &empty).unwrap();
    let c8 = Clock::now();
    let report = rt.block_on(run(
        &g,
        &full,
        RunOptions::new(8).count_kind("bake"),
        Events::none(),
        |_cx| async { Ok(NodeOutput::none()) },
    ));
    let c9 = Clock::now();
    assert_eq!(report.summary.finished, g.len());
    let cpu = |a: &Clock, b: &Clock| (b.cpu - a.cpu) as f64 / 1e6;
    let wall = |a: &Clock, b: &Clock| ms(b.wall - a.wall);
    let engine_cpu = cpu(&c1, &c2) + cpu(&c3, &c5);
    let engine_wall = wall(&c1, &c2) + wall(&c3, &c5);
    println!(
        "plan images={n} nodes={} edges={} [cpu ms (wall ms)]: build graph {} | fingerprint {} | select //... {} | plan {} | engine total (fingerprint+select+plan) {engine_cpu:.1} (wall {engine_wall:.1}) | with graph build {:.1} (wall {:.1}) | no-op run {} | all-due plan {} + run of every node with instant actions {} | peak RSS (VmHWM) after the no-op plan+run {:.1} MiB (graph {:.1} MiB, fingerprints+records+plan {:.1} MiB), after the all-due run {:.1} MiB",
        g.len(),
        g.edge_count(),
        c0.since(&c1),
        c1.since(&c2),
        c3.since(&c4),
        c4.since(&c5),
        engine_cpu + cpu(&c0, &c1),
        engine_wall + wall(&c0, &c1),
        c5.since(&c6),
        c7.since(&c8),
        c8.since(&c9),
        hwm_noop as f64 / 1024.0,
        rss_graph.saturating_sub(rss0) as f64 / 1024.0,
        rss_plan.saturating_sub(rss_graph) as f64 / 1024.0,
        vm_hwm_kib() as f64 / 1024.0,
    );
}

/// A makespan DAG: `n` bakes, parents as in `shape`, with `roots` base
/// images, durations in seconds drawn from `dur`.
struct Dag {
    parents: Vec<Option<usize>>,
    dur: Vec<u64>,
}

fn dag(name: &str, n: usize, seed: u64) -> Dag {
    let mut rng = Rng(seed);
    let mut parents = Vec::with_capacity(n);
    let mut dur = Vec::with_capacity(n);
    for i in 0..n {
        let p = match name {
            // 10% roots, 30% chain on the previous node, 60% fan out.
            "mixed" => {
                let r = rng.below(10);
                if i == 0 || r == 0 {
                    None
                } else if r <= 3 {
                    Some(i - 1)
                } else {
                    Some(rng.below(i as u64) as usize)
                }
            }
            // Few roots, wide fan-out: a bushy tree.
            "fanout" => (i >= 4).then(|| rng.below((i as u64 / 4).max(1)) as usize),
            // Long chains: 8 interleaved chains.
            "chains" => (i >= 8).then(|| i - 8),
            // Balanced: 4 long chains (the first 200 nodes, interleaved) and
            // independent nodes, so that longest path ~ total work / 8: the
            // case where the order of ready nodes decides the makespan.
            "balanced" => (4..200).contains(&i).then(|| i - 4),
            _ => unreachable!(),
        };
        parents.push(p);
        // Bake durations 1..=30 minutes, in seconds; a few long ones.
        let d = if name == "balanced" {
            700 + rng.below(600)
        } else if rng.below(20) == 0 {
            1800 + rng.below(3600)
        } else {
            60 + rng.below(1740)
        };
        dur.push(d);
    }
    Dag { parents, dur }
}

fn lower_bound(d: &Dag, jobs: u64) -> (u64, u64) {
    let mut finish = vec![0u64; d.dur.len()];
    for i in 0..d.dur.len() {
        finish[i] = d.parents[i].map_or(0, |p| finish[p]) + d.dur[i];
    }
    let longest = finish.iter().copied().max().unwrap_or(0);
    let total: u64 = d.dur.iter().sum();
    (longest, total.div_ceil(jobs))
}

/// The original's depth blocks: block d = nodes at depth d; each block on
/// `jobs` workers (longest processing time first); blocks one after another.
fn depth_blocks(d: &Dag, jobs: usize) -> u64 {
    let mut depth = vec![0usize; d.dur.len()];
    let mut blocks: HashMap<usize, Vec<u64>> = HashMap::new();
    for i in 0..d.dur.len() {
        depth[i] = d.parents[i].map_or(0, |p| depth[p] + 1);
        blocks.entry(depth[i]).or_default().push(d.dur[i]);
    }
    let mut total = 0;
    for (_, mut block) in blocks {
        block.sort_unstable_by(|a, b| b.cmp(a));
        let mut workers = vec![0u64; jobs];
        for t in block {
            let w = workers.iter_mut().min().unwrap();
            *w += t;
        }
        total += workers.into_iter().max().unwrap();
    }
    total
}

fn bench_makespan(name: &str, n: usize, jobs: usize) {
    let d = dag(name, n, 1234);
    let (longest, work) = lower_bound(&d, jobs as u64);
    let bound = longest.max(work);
    let blocks = depth_blocks(&d, jobs);
    let (weighted, wall) = simulate(&d, jobs, true);
    let (unit, _) = simulate(&d, jobs, false);
    println!(
        "makespan dag={name:<8} nodes={n:>5} -j {jobs}: longest path={longest:>6}s work/{jobs}={work:>6}s bound={bound:>6}s | csis (cost=duration)={weighted:>6}s ratio={:.3} | csis (cost=1)={unit:>6}s ratio={:.3} | depth blocks={blocks:>6}s ratio={:.3}  (simulated in {:.0} ms wall)",
        weighted as f64 / bound as f64,
        unit as f64 / bound as f64,
        blocks as f64 / bound as f64,
        wall
    );
}

/// Run the DAG through the scheduler on tokio's paused clock; returns the
/// virtual makespan (s) and the wall time of the simulation (ms). With
/// `weighted`, node costs are the durations (critical path in seconds);
/// otherwise every cost is 1 (critical path in nodes).
fn simulate(d: &Dag, jobs: usize, weighted: bool) -> (u64, f64) {
    let n = d.dur.len();
    let mut g = Graph::with_capacity(n, n);
    let ids: Vec<NodeId> = (0..n)
        .map(|i| {
            g.add_node(
                Node::new(label(&format!("//images/i{i}@rt")), "bake")
                    .with_inputs(json!({ "i": i }))
                    .with_cost(if weighted { d.dur[i] } else { 1 })
                    .with_pool("rt"),
            )
            .unwrap()
        })
        .collect();
    for i in 0..n {
        if let Some(p) = d.parents[i] {
            g.add_dep(ids[i], ids[p], Dep::hashed("parent")).unwrap();
        }
    }
    let fps = g.fingerprints().unwrap();
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let wall = Instant::now();
    let durs: Vec<u64> = d.dur.clone();
    let makespan = rt.block_on(async {
        let t0 = tokio::time::Instant::now();
        let report = run(
            &g,
            &plan,
            RunOptions::new(jobs).pool_limit("rt", jobs),
            Events::none(),
            move |cx| {
                let secs = durs[cx.id().index()];
                async move {
                    tokio::time::sleep(Duration::from_secs(secs)).await;
                    Ok(NodeOutput::none())
                }
            },
        )
        .await;
        assert_eq!(report.summary.finished, n);
        t0.elapsed().as_secs()
    });
    (makespan, ms(wall.elapsed()))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("plan") => {
            let sizes: Vec<usize> = if args.len() > 1 {
                args[1..]
                    .iter()
                    .map(|s| s.parse().expect("a size"))
                    .collect()
            } else {
                vec![1_000, 5_000, 20_000]
            };
            for n in sizes {
                if sizes_in_own_process() {
                    respawn(&["plan", &n.to_string()]);
                } else {
                    bench_plan(n);
                }
            }
        }
        Some("makespan") => makespan_all(),
        _ => {
            for n in [1_000, 5_000, 20_000] {
                respawn(&["plan", &n.to_string()]);
            }
            makespan_all();
        }
    }
}

fn makespan_all() {
    for (name, n) in [
        ("mixed", 500),
        ("mixed", 2000),
        ("fanout", 2000),
        ("chains", 400),
        ("balanced", 400),
    ] {
        bench_makespan(name, n, 8);
    }
}

/// Run one plan size per process (for a per-size VmHWM), unless already in one.
fn sizes_in_own_process() -> bool {
    std::env::var_os("CSIS_BENCH_CHILD").is_none()
}

fn respawn(args: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args(args)
        .env("CSIS_BENCH_CHILD", "1")
        .status()
        .unwrap();
    assert!(status.success());
}
