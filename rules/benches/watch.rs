//! `csis watch` against a plan from scratch: one edit, on a generated tree
//! of 5,000 images (20 OS builders, 2 runtimes, files of 100 images).
//!
//! `cargo bench -p csis-rules --bench watch` (CSIS_BENCH_IMAGES changes the
//! count, CSIS_BENCH_RUNS the runs per figure).
//!
//! Times, median of the runs (min and max beside):
//! - **from scratch**: `load` + `compile` + `Graph::fingerprints` (what
//!   `csis plan` does before planning), and `compile()` alone;
//! - **watch, one image edited**: one image's config changed in one file
//!   of 100 images, then `Incremental::sync` + `Incremental::compiled`
//!   (the graph and every fingerprint), alternating two texts so that
//!   every run is an edit;
//! - **watch, playbook edited** (every image uses it) and **touch** (a
//!   file saved unchanged) for scale.

use std::path::Path;
use std::time::{Duration, Instant};

use csis_rules::compile::{compile, NoPins};
use csis_rules::incremental::Incremental;

mod tree_gen;

/// The allocator `csis` runs on (`src/main.rs`): what an edit costs in
/// `csis watch` (glibc's malloc spends a quarter of an edit in
/// `malloc_consolidate` and `unlink_chunk` freeing the replaced tree).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Stats(Vec<Duration>);

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut v = self.0.clone();
        v.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "median {:7.1} ms  (min {:.1}, max {:.1}, {} runs)",
            ms(v[v.len() / 2]),
            ms(v[0]),
            ms(v[v.len() - 1]),
            v.len()
        )
    }
}

fn time(runs: usize, mut f: impl FnMut()) -> Stats {
    Stats(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// This process's CPU time (user + system, every thread), from
/// `/proc/self/stat` (Linux; None elsewhere).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime (fields 14 and 15 of proc(5); `rest` starts at 3)
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10)) // USER_HZ = 100
}

fn bump_mtime(p: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(secs))
        .unwrap();
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let n = env("CSIS_BENCH_IMAGES", 5000);
    let runs = env("CSIS_BENCH_RUNS", 9);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree_gen::generate(root, n);
    let opts = csis_rules::LoadOptions::default();

    // from scratch
    let tree = csis_rules::load(root, &opts).unwrap_or_else(|d| panic!("{}", d[0]));
    assert_eq!(tree.images.len(), n);
    // CSIS_BENCH_WATCH_ONLY=1: skip the from-scratch figures (for profiling)
    let skip = std::env::var_os("CSIS_BENCH_WATCH_ONLY").is_some();
    let runs_plain = if skip { 1 } else { runs };
    let plain = time(runs_plain, || {
        let t = csis_rules::load(root, &opts).unwrap();
        let c = compile(&t, &NoPins).unwrap();
        let fps = c.graph.fingerprints().unwrap();
        std::hint::black_box((&c, &fps));
    });
    let load_only = time(runs_plain, || {
        std::hint::black_box(csis_rules::load(root, &opts).unwrap());
    });
    let compile_only = time(runs_plain, || {
        std::hint::black_box(compile(&tree, &NoPins).unwrap());
    });
    let c = compile(&tree, &NoPins).unwrap();
    let fps_only = time(runs_plain, || {
        std::hint::black_box(c.graph.fingerprints().unwrap());
    });
    // A deep copy of the compile's result (every node, every bake spec):
    // what reading it from any cache would at least allocate and write,
    // before the graph is assembled again. The bound on what a cache of
    // per-series compile results could save (BENCHMARKS.md).
    let copy_only = time(runs_plain, || {
        let copy: Vec<_> = c
            .graph
            .ids()
            .map(|id| (c.graph.node(id).clone(), c.bake_spec(id).cloned()))
            .collect();
        std::hint::black_box(copy);
    });
    let nodes = c.graph.len();
    drop(c);

    // watch
    let t = Instant::now();
    let mut inc = Incremental::new(root, &opts);
    let first = inc.compiled().expect("compiles");
    let first_time = t.elapsed();
    assert_eq!(first.compiled.graph.len(), nodes);
    drop(first);

    // one image in the middle of the tree, in its file of 100
    let image = n / 2;
    let f = image / tree_gen::PER_FILE;
    let path = tree_gen::image_path(root, f);
    let mut k = 0usize;
    let mut sync_t = Vec::new();
    let mut compiled_t = Vec::new();
    let mut load_t = Vec::new();
    let mut drafts = 0usize;
    let cpu0 = cpu_time();
    let edit = time(runs, || {
        k += 1;
        let v = format!("edit-{}", k % 2);
        std::fs::write(&path, tree_gen::image_file(f, n, Some((image, &v)))).unwrap();
        let before = inc.counts();
        let t = Instant::now();
        let r = inc.sync();
        sync_t.push(t.elapsed());
        let t = Instant::now();
        inc.tree().as_ref().expect("loads");
        load_t.push(t.elapsed());
        let c = inc.compiled().expect("compiles");
        compiled_t.push(t.elapsed());
        let d = inc.counts() - before;
        assert_eq!(r.changed, 1);
        assert_eq!(d.parses, 1);
        assert!(d.compiles <= 1, "only the edited image recompiles: {d:?}");
        drafts = drafts.max(d.drafts);
        std::hint::black_box(&c);
    });
    let edit_cpu = cpu0.zip(cpu_time()).map(|(a, b)| (b - a) / runs as u32);
    // the incremental graph is the plain one
    {
        let t = csis_rules::load(root, &opts).unwrap();
        let plain = compile(&t, &NoPins).unwrap();
        let pf = plain.graph.fingerprints().unwrap();
        let c = inc.compiled().unwrap();
        assert_eq!(plain.graph.len(), c.compiled.graph.len());
        for id in plain.graph.ids() {
            let l = plain.graph.node(id).label();
            let j = c.compiled.graph.find(l).expect("same labels");
            assert_eq!(pf.get(id), c.fps.get(j), "{l}");
        }
    }

    let playbook = root.join("playbooks/p.yml");
    let mut k = 0usize;
    let pb = time(if skip { 1 } else { runs.min(5) }, || {
        k += 1;
        std::fs::write(&playbook, format!("- hosts: all # {}\n", k % 2)).unwrap();
        bump_mtime(&playbook, k as u64);
        inc.sync();
        std::hint::black_box(inc.compiled().unwrap());
    });
    let touch = time(runs, || {
        inc.sync();
        std::hint::black_box(inc.compiled().unwrap());
    });

    println!(
        "tree of {n} images (20 OS builders, 2 runtimes, {} files of {}), {nodes} nodes",
        n.div_ceil(tree_gen::PER_FILE),
        tree_gen::PER_FILE
    );
    println!("from scratch: load + compile + fingerprints  {plain}");
    println!("  load                                        {load_only}");
    println!("  compile()                                   {compile_only}");
    println!("  Graph::fingerprints                         {fps_only}");
    println!("  a deep copy of compile()'s nodes and specs  {copy_only}");
    println!(
        "watch: first sync + compiled                  {:.1} ms",
        first_time.as_secs_f64() * 1e3
    );
    println!("watch: one image edited (sync + compiled)     {edit}");
    if let Some(c) = edit_cpu {
        println!(
            "  CPU time per edit (every thread)            {:.1} ms (mean)",
            c.as_secs_f64() * 1e3
        );
    }
    println!(
        "  sync                                        {}",
        Stats(sync_t)
    );
    println!(
        "  compiled                                    {}",
        Stats(compiled_t)
    );
    println!(
        "    of which the load (one query)             {}",
        Stats(load_t)
    );
    println!("  series drafted again per edit (at most)     {drafts}");
    println!("watch: the playbook edited (every image)      {pb}");
    println!("watch: nothing changed (sync + compiled)      {touch}");
}
