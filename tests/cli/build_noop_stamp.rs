//! The no-op stamp (src/noop.rs): a converged build leaves one; the next
//! build with the same arguments answers from it without reading the tree,
//! and any change to what the answer depended on sends the build down the
//! full path, which then bakes what the change made due.
//!
//! Which path a build took is read from `CSIS_TIMING=1` (stderr).

use crate::build_support;
use build_support::*;

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// Set every file and directory of the tree an hour into the past, so that
/// none is "racy" (changed within a second of the build).
fn age(dir: &Path) {
    let t = SystemTime::now() - Duration::from_secs(3600);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p.clone());
            }
            std::fs::File::open(&p).unwrap().set_modified(t).unwrap();
        }
    }
    std::fs::File::open(dir).unwrap().set_modified(t).unwrap();
}

/// `csis build --json` with timing on: (exit code, events, took the stamp?).
fn build_timed(dir: &Tree, extra: &[&str], env: &[(&str, &str)]) -> (i32, Vec<Value>, bool) {
    let mut c = dir.csis();
    c.env("CSIS_TIMING", "1")
        .arg("build")
        .arg("--json")
        .args(extra);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (
        out.status.code().unwrap_or(-1),
        events(&out.stdout),
        err.contains("no-op stamp holds"),
    )
}

fn stamps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join(".csis/cache"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("noop-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The events without the summary's elapsed time.
fn comparable(ev: &[Value]) -> Vec<Value> {
    ev.iter()
        .cloned()
        .map(|mut e| {
            if let Some(o) = e.as_object_mut() {
                o.remove("elapsed_ms");
            }
            e
        })
        .collect()
}

/// Build, age the tree, then build once on the full path (which stamps).
fn converged(name: &str) -> Tree {
    let t = tree(name);
    let d = &t;
    let (code, ev, _) = build_timed(d, &[], &[]);
    assert_eq!(code, 0, "{ev:?}");
    age(d);
    let (code, ev, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(!hit, "no stamp before the first no-op build");
    assert_eq!(summary(&ev)["baked"], 0);
    assert_eq!(stamps(d).len(), 1, "the no-op build left a stamp");
    t
}

#[test]
fn a_converged_build_answers_from_its_stamp_with_the_same_events() {
    let t = converged("basic");
    let d = &t;
    let (_, full, _) = build_timed(d, &[], &[]);
    // Undo the stamp to get the full path's events again, for comparison.
    for s in stamps(d) {
        std::fs::remove_file(d.join(".csis/cache").join(s)).unwrap();
    }
    let (code, slow, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(!hit);
    let (code, fast, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(hit, "the second no-op build answers from the stamp");
    assert_eq!(comparable(&fast), comparable(&slow));
    assert_eq!(comparable(&full), comparable(&slow));
    assert_eq!(summary(&fast)["skipped"], 7);

    // Other arguments are another stamp: a pattern.
    let (_, ev, hit) = build_timed(d, &["//images/web"], &[]);
    assert!(!hit);
    assert_eq!(summary(&ev)["skipped"], 2, "{ev:?}");
    let (_, _, hit) = build_timed(d, &["//images/web"], &[]);
    assert!(hit);
    // --force-bake and --dry-run never answer from a stamp.
    let (_, ev, hit) = build_timed(d, &["--force-bake", "worker"], &[]);
    assert!(!hit);
    assert_eq!(summary(&ev)["baked"], 1);
}

#[test]
fn a_changed_playbook_new_image_or_record_is_seen() {
    let t = converged("basic");
    let d = &t;
    assert!(build_timed(d, &[], &[]).2);

    // A playbook the compile hashed.
    std::fs::write(
        d.join("playbooks/web.yml"),
        "- hosts: all\n  tasks: []\n# changed\n",
    )
    .unwrap();
    let (code, ev, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(!hit);
    let baked = finished_bakes(&ev);
    assert_eq!(
        baked,
        [
            "//images/app@sim:bake",
            "//images/tools@sim:bake",
            "//images/web@sim:bake"
        ]
    );
    assert!(stamps(d).is_empty(), "a build that baked leaves no stamp");

    // A new image file in images/.
    age(d);
    assert!(!build_timed(d, &[], &[]).2);
    assert!(build_timed(d, &[], &[]).2);
    std::fs::write(
        d.join("images/more.yaml"),
        "images:\n  - name: extra\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    let (code, ev, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(!hit);
    assert_eq!(labels(&ev, "finished", "bake"), ["//images/extra@sim:bake"]);

    // A record gone from meta-state/ (e.g. a checkout of an older lineage).
    age(d);
    assert!(!build_timed(d, &[], &[]).2);
    assert!(build_timed(d, &[], &[]).2);
    let p = d.join("meta-state/lineage.yaml");
    let before = std::fs::read_to_string(&p).unwrap();
    let mut l = lineage(d);
    l.builds.retain(|b| b.series != "worker");
    std::fs::remove_file(&p).unwrap();
    csis_cache::MetaState::of_tree(d).save_lineage(&l).unwrap();
    assert_ne!(std::fs::read_to_string(&p).unwrap(), before);
    let (code, ev, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(!hit);
    assert_eq!(
        labels(&ev, "finished", "bake"),
        ["//images/worker@sim:bake"]
    );
}

#[test]
fn a_racy_tree_is_not_stamped() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build_timed(d, &[], &[]).0, 0);
    age(d);
    // Just written: its metadata could still change unseen.
    std::fs::write(d.join("scripts/app.sh"), "echo app\n").unwrap();
    let (_, ev, hit) = build_timed(d, &[], &[]);
    assert!(!hit);
    assert_eq!(labels(&ev, "finished", "bake").len(), 2, "{ev:?}");
    let (_, ev, hit) = build_timed(d, &[], &[]);
    assert!(!hit);
    assert_eq!(summary(&ev)["baked"], 0);
    assert!(
        stamps(d).is_empty(),
        "lineage.yaml was written a moment ago"
    );
}

#[test]
fn environment_read_by_templates_is_part_of_the_stamp() {
    let t = tree("basic");
    let d = &t;
    let p = d.join("images/images.yaml");
    let s = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        s.replacen(
            "  - name: worker\n",
            "  - name: worker\n    description: \"{{ ENV.CSIS_STAMP_OWNER }}'s worker\"\n",
            1,
        ),
    )
    .unwrap();
    let env = [("CSIS_STAMP_OWNER", "ann")];
    assert_eq!(build_timed(d, &[], &env).0, 0);
    age(d);
    assert!(!build_timed(d, &[], &env).2);
    assert!(build_timed(d, &[], &env).2);
    let (code, _, hit) = build_timed(d, &[], &[("CSIS_STAMP_OWNER", "bob")]);
    assert_eq!(code, 0);
    assert!(!hit, "the variable the tree reads changed");
    // (That build stamped `bob`; back to `ann` takes the full path once.)
    assert!(!build_timed(d, &[], &env).2);
    // A variable the tree does not read does not matter.
    let (_, _, hit) = build_timed(d, &[], &[("CSIS_STAMP_OWNER", "ann"), ("UNRELATED_X", "1")]);
    assert!(hit);
}

#[test]
fn an_update_policy_bounds_the_stamp() {
    let t = tree("basic");
    let d = &t;
    let p = d.join("cfg/os-builders.yml");
    let s = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        s.replacen(
            "    is_default: true\n",
            "    is_default: true\n    update: {policy: security, refresh_days: 2}\n",
            1,
        ),
    )
    .unwrap();
    assert_eq!(build_timed(d, &[], &[]).0, 0);
    age(d);
    assert!(!build_timed(d, &[], &[]).2);
    let [name] = &stamps(d)[..] else {
        panic!("one stamp")
    };
    let text = std::fs::read_to_string(d.join(".csis/cache").join(name)).unwrap();
    let until: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("until "))
        .unwrap()
        .parse()
        .expect("an update policy gives the stamp an end");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(until > now && until <= now + 2 * 86_400, "{until} vs {now}");
}

#[test]
fn a_fresh_checkout_with_the_cache_restored_answers_from_the_stamp() {
    let t = converged("basic");
    let d = &t;
    assert!(build_timed(d, &[], &[]).2);
    // Every file of the tree and of meta-state/ written anew, same bytes
    // (new inodes and times), as a CI checkout with `.csis/cache/` restored.
    let mut stack = vec![d.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if e.file_name() == ".csis" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                std::fs::remove_file(&p).unwrap();
                std::fs::write(&p, bytes).unwrap();
            }
        }
    }
    age(d);
    let (code, ev, hit) = build_timed(d, &[], &[]);
    assert_eq!(code, 0);
    assert!(hit, "same content: the stamp holds");
    assert_eq!(summary(&ev)["skipped"], 7);
    assert!(build_timed(d, &[], &[]).2);
}
