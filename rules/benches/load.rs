//! Load a generated tree of 5,000 images and time it.
//!
//! `cargo bench -p csis-rules --bench load` (set CSIS_BENCH_IMAGES to change the count).

use std::time::{Duration, Instant};

mod tree_gen;
use tree_gen::generate;

fn main() {
    let n: usize = std::env::var("CSIS_BENCH_IMAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), n);
    let opts = csis_rules::LoadOptions::default();
    // warm-up (file cache), then timed runs
    let t = csis_rules::load(dir.path(), &opts).unwrap_or_else(|d| panic!("{}", d[0]));
    assert_eq!(t.images.len(), n);
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let t = csis_rules::load(dir.path(), &opts).unwrap();
        times.push(start.elapsed());
        std::hint::black_box(&t);
    }
    times.sort();
    // the YAML parse alone (serde-saphyr into spanned nodes), for comparison
    let files: Vec<std::path::PathBuf> = {
        let mut v: Vec<_> = std::fs::read_dir(dir.path().join("images"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let mut parse: Vec<Duration> = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let r = csis_schema::yaml::parse_files(&files, dir.path());
        parse.push(start.elapsed());
        std::hint::black_box(&r);
    }
    parse.sort();
    println!(
        "load of a generated tree of {n} images (20 OS builders, 2 runtimes, chains of 5): min {:.1} ms, median {:.1} ms, max {:.1} ms",
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    println!(
        "  of which parsing the images/ YAML into spanned nodes: median {:.1} ms",
        parse[parse.len() / 2].as_secs_f64() * 1e3
    );
}
