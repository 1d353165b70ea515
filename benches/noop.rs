//! No-op `csis build //...` on generated trees of N images, beside `ninja`
//! doing a no-op on a build.ninja of the same graph; and the peak memory of
//! `csis plan //...`.
//!
//! ```text
//! cargo bench --bench noop                 # 1000 5000 20000
//! cargo bench --bench noop -- 1000         # one size
//! cargo bench --bench noop -- --tree DIR 5000   # only make DIR: the tree, built once (and DIR-ninja)
//! ```
//!
//! `--tree DIR N` writes the tree of N images into `DIR` and converges it
//! (the first build), for profiling one command on it (`valgrind
//! --tool=callgrind csis -C DIR plan //... --json`, BENCHMARKS.md).
//!
//! The trees use the dummy runtime (bakes take 0 s), so the first build is
//! fast; the figures are for converged builds, where nothing is due: the
//! full path (csis reads the tree and `meta-state/`, plans, and stops; its
//! no-op stamp removed before each run) without the parse cache
//! (`.csis/cache/parse.bin` removed too), with it, and with it after one
//! image file of 100 images changed (a comment added or removed: that file
//! parsed again), the three alternating; and the stamp path (the previous
//! no-op build left a stamp: csis stats the inputs and answers;
//! ops/src/build/noop.rs). After the first build the bench waits a second and a half,
//! so that no input is "racy" (changed within a second of the build).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const OS_BUILDERS: usize = 10;
const IMAGES_PER_FILE: usize = 100;
const RUNS: usize = 5;

fn parent_of(i: usize) -> String {
    if i < OS_BUILDERS {
        format!("os-{i}")
    } else {
        format!("img-{}", (i - OS_BUILDERS) / 4)
    }
}

/// A tree of `n` images on one dummy runtime: ten OS builders, each image the
/// child of an earlier one (a forest of fan-out 4), one shell modification each.
fn generate_tree(dir: &Path, n: usize) {
    fs::create_dir_all(dir.join("cfg")).unwrap();
    fs::create_dir_all(dir.join("images")).unwrap();
    fs::write(dir.join("cfg/_config.yml"), "id: bench\n").unwrap();
    fs::write(
        dir.join("cfg/runtime-builders.yml"),
        "runtime_builders:\n  - {name: sim, type: dummy, is_default: true, default_machine_type: small}\n",
    )
    .unwrap();
    fs::write(
        dir.join("cfg/image-builders.yml"),
        "image_builders:\n  - {name: sim-builder, type: dummy, is_default: true, runtime: sim}\n",
    )
    .unwrap();
    fs::write(
        dir.join("cfg/mod-builders.yml"),
        "mod_builders:\n  - {name: bash, type: bash-remote, is_default: true}\n",
    )
    .unwrap();
    let mut os = String::from("os_builders:\n");
    for i in 0..OS_BUILDERS {
        let _ = write!(
            os,
            "  - name: os-{i}\n    type: debian\n    family: debian\n    family_version: 12\n    is_default: {}\n    runtimes:\n      - image_builder: sim-builder\n        query: {{filters: {{name: debian-{i}}}}}\n",
            i == 0
        );
    }
    fs::write(dir.join("cfg/os-builders.yml"), os).unwrap();
    for (f, chunk) in (0..n)
        .collect::<Vec<_>>()
        .chunks(IMAGES_PER_FILE)
        .enumerate()
    {
        let mut s = String::from("images:\n");
        for &i in chunk {
            let policy = if i % 2 == 0 { "follow" } else { "pinned" };
            let _ = write!(
                s,
                "  - name: img-{i}\n    source_image: {}\n    parent_policy: {policy}\n    runtimes:\n      - image_builder: sim-builder\n    modifications:\n      - name: m\n        script: [\"echo {i} > /etc/img\"]\n",
                parent_of(i)
            );
        }
        fs::write(dir.join(format!("images/part-{f:04}.yaml")), s).unwrap();
    }
}

/// build.ninja of the same graph: per OS builder a resolve and a bake, per
/// image an emit, a bake (after its parent's bake) and a retag.
fn generate_ninja(dir: &Path, n: usize) {
    let mut s = String::from("rule touch\n  command = touch $out\n\n");
    for i in 0..OS_BUILDERS {
        let _ = writeln!(s, "build out/os-{i}.resolve: touch");
        let _ = writeln!(s, "build out/os-{i}.bake: touch out/os-{i}.resolve");
    }
    for i in 0..n {
        let _ = writeln!(s, "build out/img-{i}.emit: touch");
        let _ = writeln!(
            s,
            "build out/img-{i}.bake: touch out/img-{i}.emit out/{}.bake",
            parent_of(i)
        );
        let _ = writeln!(s, "build out/img-{i}.retag: touch out/img-{i}.bake");
    }
    fs::create_dir_all(dir.join("out")).unwrap();
    fs::write(dir.join("build.ninja"), s).unwrap();
}

fn run(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().expect("spawn");
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

/// Remove the parse cache of a tree (`.csis/cache/parse.bin`).
fn remove_parse_cache(tree: &Path) {
    let _ = fs::remove_file(tree.join(".csis/cache/parse.bin"));
}

/// Remove the no-op stamps of a tree (`.csis/cache/noop-*`).
fn remove_stamps(tree: &Path) {
    if let Ok(rd) = fs::read_dir(tree.join(".csis/cache")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("noop-") {
                fs::remove_file(e.path()).unwrap();
            }
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Peak resident memory of a command, in MiB (GNU time's %M), if measurable.
fn peak_mib(csis: &Path, tree: &Path, args: &[&str]) -> Option<f64> {
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(csis)
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let kib: f64 = err.lines().last()?.trim().parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let csis = PathBuf::from(env!("CARGO_BIN_EXE_csis"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--tree") {
        let dir = PathBuf::from(args.get(i + 1).expect("--tree DIR N"));
        let n: usize = args
            .get(i + 2)
            .and_then(|a| a.parse().ok())
            .expect("--tree DIR N");
        assert!(!dir.exists(), "{} exists", dir.display());
        generate_tree(&dir, n);
        run(Command::new(&csis)
            .arg("-C")
            .arg(&dir)
            .args(["build", "//...", "--json"]));
        // ninja's build.ninja of the same graph beside it, `DIR-ninja`
        // (benches/plan_vs_ninja.py times both).
        let nd = PathBuf::from(format!("{}-ninja", dir.display()));
        generate_ninja(&nd, n);
        run(Command::new("ninja").arg("-C").arg(&nd).arg("-j8"));
        println!(
            "{}: {n} images, built once; {} beside it",
            dir.display(),
            nd.display()
        );
        return;
    }
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 5000, 20000]
    } else {
        sizes
    };
    let have_ninja = Command::new("ninja").arg("--version").output().is_ok();

    println!("| images | nodes | first build | csis no-op, full path, no parse cache | full path | full path, one file edited | csis no-op, stamp | ninja no-op | full path / ninja | csis (stamp) / ninja | peak RSS of `csis plan //...` |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        generate_tree(&tree, n);
        let first = run(Command::new(&csis)
            .arg("-C")
            .arg(&tree)
            .args(["build", "//...", "--json"]));
        std::thread::sleep(Duration::from_millis(1500));
        let noop_build = || {
            run(Command::new(&csis)
                .arg("-C")
                .arg(&tree)
                .args(["build", "//...", "--json"]))
        };
        // The full path three ways, alternating: without the parse cache,
        // with it, and with it after one image file changed (a comment
        // added or removed: the plan stays a no-op, the file is parsed).
        let edited = tree.join("images/part-0000.yaml");
        let text = fs::read_to_string(&edited).unwrap();
        let (mut uncached, mut full, mut one_edit) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..RUNS {
            remove_stamps(&tree);
            remove_parse_cache(&tree);
            uncached.push(noop_build());
            remove_stamps(&tree);
            full.push(noop_build());
            remove_stamps(&tree);
            let mark = if r % 2 == 0 { "# edited\n" } else { "" };
            fs::write(&edited, format!("{text}{mark}")).unwrap();
            one_edit.push(noop_build());
        }
        let (uncached, one_edit) = (median(uncached), median(one_edit));
        remove_stamps(&tree);
        fs::write(&edited, &text).unwrap();
        let full = median(full);
        // Let the edited file age past the racy window, so that the next
        // build leaves a stamp.
        std::thread::sleep(Duration::from_millis(1500));
        noop_build();
        // The last full-path run left a stamp.
        let noop = median((0..RUNS).map(|_| noop_build()).collect());
        let (ninja, full_ratio, ratio) = if have_ninja {
            let nd = dir.path().join("ninja");
            generate_ninja(&nd, n);
            run(Command::new("ninja").arg("-C").arg(&nd).arg("-j8"));
            let t = median(
                (0..RUNS)
                    .map(|_| run(Command::new("ninja").arg("-C").arg(&nd)))
                    .collect(),
            );
            (
                format!("{:.1} ms", t.as_secs_f64() * 1e3),
                format!("{:.2}", full.as_secs_f64() / t.as_secs_f64()),
                format!("{:.2}", noop.as_secs_f64() / t.as_secs_f64()),
            )
        } else {
            ("(ninja not installed)".into(), "-".into(), "-".into())
        };
        let mem = peak_mib(&csis, &tree, &["plan", "//...", "--json"])
            .map(|m| format!("{m:.0} MiB"))
            .unwrap_or_else(|| "(no /usr/bin/time)".into());
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {n} | {} | {:.1} s | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {ninja} | {full_ratio} | {ratio} | {mem} |",
            OS_BUILDERS * 2 + n * 3,
            first.as_secs_f64(),
            ms(uncached),
            ms(full),
            ms(one_edit),
            ms(noop),
        );
    }
}
