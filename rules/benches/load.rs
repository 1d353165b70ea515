//! Load a generated tree of 5,000 images and time it.
//!
//! `cargo bench -p csis-rules --bench load` (set CSIS_BENCH_IMAGES to change the count).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

fn generate(root: &Path, images: usize) {
    let cfg = root.join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::create_dir_all(root.join("playbooks")).unwrap();
    std::fs::write(root.join("playbooks/p.yml"), "- hosts: all\n").unwrap();
    std::fs::write(
        cfg.join("_config.yml"),
        "id: bench\nconfig:\n  admin_public_keys: ['ssh-ed25519 AAAA bench']\n",
    )
    .unwrap();
    std::fs::write(
        cfg.join("runtimes.yml"),
        "runtime_builders:\n  - {name: sim, type: dummy, is_default: true, default_machine_type: small}\n  - {name: sim2, type: dummy, default_machine_type: small}\n\
         image_builders:\n  - {name: b1, type: dummy, runtime: sim, is_default: true}\n  - {name: b2, type: dummy, runtime: sim2}\n\
         mod_builders:\n  - {name: ansible, type: ansible, is_default: true}\n  - {name: bash, type: bash-remote}\n\
         state_backends:\n  - {name: local, type: local, is_default: true}\n",
    )
    .unwrap();
    let mut os = String::from("os_builders:\n");
    for i in 0..20 {
        writeln!(
            os,
            "  - name: os-{i}\n    type: debian\n    family: debian\n    family_version: 12\n    tags: {{OS: \"{{{{ this.family }}}}\"}}\n    runtimes:\n      - image_builder: b1\n      - image_builder: b2"
        )
        .unwrap();
    }
    std::fs::write(cfg.join("os.yml"), os).unwrap();
    let per_file = 100;
    for f in 0..images.div_ceil(per_file) {
        let mut s = String::from("images:\n");
        for j in 0..per_file {
            let i = f * per_file + j;
            if i >= images {
                break;
            }
            // chains of depth up to 5; the rest start at an OS builder
            let src = if i % 5 == 0 {
                format!("os-{}", i % 20)
            } else {
                format!("img-{}", i - 1)
            };
            let desc = if i % 10 == 0 {
                "\n    description: \"image {{ this.name }} for {{ ENV['USER'] }}\""
            } else {
                ""
            };
            write!(
                s,
                "  - name: img-{i}\n    source_image: {src}{desc}\n    parent_policy: follow\n    tags: {{team: t{}}}\n    runtimes:\n      - image_builder: b1\n      - image_builder: b2\n        machine_type: large\n    modifications:\n      - name: m\n        playbooks: [playbooks/p.yml]\n        config: {{v: \"{i}\"}}\n      - name: s\n        type: bash\n        script: [\"echo {i}\"]\n    tests:\n      packages: [curl]\n      commands:\n        - run: \"true\"\n",
                i % 7
            )
            .unwrap();
        }
        std::fs::write(root.join("images").join(format!("images-{f:03}.yaml")), s).unwrap();
    }
}

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
        let r = csis_rules::yaml::parse_files(&files, dir.path());
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
