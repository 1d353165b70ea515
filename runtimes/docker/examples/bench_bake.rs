//! Benchmark: a native bake of N shell steps through `DockerRuntime` beside
//! `docker build --no-cache` of the equivalent Dockerfile (FROM the same
//! busybox image, N RUN lines) on the same daemon. Not run by `cargo test`.
//!
//! ```text
//! cargo run -p csis-runtime-docker --example bench_bake -- [N=10] [REPEATS=5]
//! ```
//! Prints the median wall time of each and the ratio (target: csis <= 1.2x).

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use csis_runtime::Runtime;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let repeats: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let d = common::daemon().await.expect("no Docker daemon answers");
    let base = common::busybox_image(&d).await;
    let (rt, cleanup) = common::runtime("bench");
    let line = |i: usize| format!("echo step {i} >> /opt/bench && sleep 0");

    let dir = tempfile::tempdir().unwrap();
    let mut dockerfile = format!("FROM {}\n", common::BUSYBOX_TAG);
    dockerfile.push_str("RUN mkdir -p /opt\n");
    for i in 0..n {
        dockerfile.push_str(&format!("RUN {}\n", line(i)));
    }
    dockerfile.push_str("CMD [\"sleep\", \"infinity\"]\n");
    std::fs::write(dir.path().join("Dockerfile"), &dockerfile).unwrap();
    let build_tag = format!("{}:dockerfile", cleanup.repository);

    let mut csis_times = Vec::new();
    let mut build_times = Vec::new();
    for rep in 0..repeats {
        // csis native bake
        let mut steps = vec![common::shell("mkdir", &["mkdir -p /opt"])];
        for i in 0..n {
            steps.push(common::shell(&format!("s{i}"), &[line(i).as_str()]));
        }
        let req = common::request(
            &rt,
            "bench",
            common::vendor(&base),
            steps,
            vec![],
            Arc::new(csis_runtime::NullLog),
        );
        let t0 = Instant::now();
        let out = rt.bake(&req).await.unwrap_or_else(|e| panic!("{e}"));
        let t = t0.elapsed();
        csis_times.push(t);
        rt.dispose_image(&out.build_id).await.unwrap();

        // docker build (legacy builder on this daemon: no buildx)
        let t0 = Instant::now();
        let st = std::process::Command::new("docker")
            .args(["build", "--no-cache", "-q", "-t", &build_tag])
            .arg(dir.path())
            .env("DOCKER_BUILDKIT", "0")
            .output()
            .unwrap();
        let tb = t0.elapsed();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        build_times.push(tb);
        let _ = std::process::Command::new("docker")
            .args(["rmi", &build_tag])
            .output();
        eprintln!(
            "run {rep}: csis bake {:.2}s, docker build {:.2}s",
            t.as_secs_f64(),
            tb.as_secs_f64()
        );
    }
    let c = median(csis_times);
    let b = median(build_times);
    println!(
        "N={n} steps, {repeats} runs: csis native bake median {:.2}s; docker build --no-cache median {:.2}s; ratio {:.2}x",
        c.as_secs_f64(),
        b.as_secs_f64(),
        c.as_secs_f64() / b.as_secs_f64()
    );
}
