//! `csis watch` prints the plan's changes when a file changes, recompiling
//! only what the change concerns (`CSIS_TIMING=1` says what ran).

use crate::build_support;
use build_support::*;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines from `r`, read on a thread.
fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line and those that arrive within `wait` after it.
fn block(rx: &mpsc::Receiver<String>, wait: Duration) -> String {
    let mut out = String::new();
    let first = rx.recv_timeout(Duration::from_secs(30)).expect("a line");
    out.push_str(&first);
    out.push('\n');
    let end = Instant::now() + wait;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                out.push_str(&l);
                out.push('\n');
            }
            Err(_) => break,
        }
    }
    out
}

#[test]
fn watch_reports_an_edited_playbook_and_an_edited_image() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    let mut child = d
        .csis()
        .args(["watch", "--interval-ms", "100", "--exit-after", "2"])
        .env("CSIS_TIMING", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let line = out.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(line.starts_with("watching"), "{line}");
    assert!(line.contains("0 of 7 bake(s) due"), "{line}");
    std::thread::sleep(Duration::from_millis(300));

    // a playbook: web, and its follow descendants app and tools, re-bake;
    // app-pinned (pinned to web's recorded build) does not move
    let pb = d.join("playbooks/web.yml");
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, format!("{text}# edit\n")).unwrap();
    let first = block(&out, Duration::from_millis(700));
    assert!(first.starts_with("changed:"), "{first}");
    assert!(first.contains("bake //images/web@sim:bake"), "{first}");
    assert!(first.contains("bake //images/app@sim:bake"), "{first}");
    assert!(first.contains("bake //images/tools@sim:bake"), "{first}");
    assert!(!first.contains("app-pinned"), "{first}");
    assert!(!first.contains("worker"), "{first}");

    // one image in images.yaml: worker alone
    let im = d.join("images/images.yaml");
    let text = std::fs::read_to_string(&im).unwrap();
    std::fs::write(
        &im,
        text.replace("- run: \"true\"", "- run: \"true && true\""),
    )
    .unwrap();
    let mut second = String::new();
    for l in out.iter() {
        second.push_str(&l);
        second.push('\n');
    }
    assert!(child.wait().unwrap().success());
    assert!(second.starts_with("changed:"), "{second}");
    assert!(second.contains("bake //images/worker@sim:bake"), "{second}");
    assert_eq!(second.lines().count(), 2, "{second}");

    // what ran: the first look loads every image file and compiles all 7
    // series; the playbook edit re-hashes one file, parses and loads
    // nothing, recompiles web and re-fingerprints web, app, tools; the
    // image edit parses and loads its file again (the tree's one image
    // file), recompiles and re-fingerprints worker alone (its in-bake
    // test, an input of its bake); neither moves a node, so both patch
    // the graph in place
    let timing: Vec<String> = err
        .iter()
        .filter(|l| l.contains("incremental load and compile"))
        .collect();
    assert_eq!(timing.len(), 3, "{timing:?}");
    assert!(
        timing[0].contains(
            "1 load(s) (1 image file(s) loaded, 0 kept, 0 of them resolved), 7 series recompiled, 2 file(s) hashed, 7 series fingerprinted, 1 graph(s) assembled, 0 patched)"
        ),
        "{timing:?}"
    );
    assert!(
        timing[1].contains(
            "(0 file(s) parsed, 0 load(s) (0 image file(s) loaded, 0 kept, 0 of them resolved), 1 series recompiled, 1 file(s) hashed, 3 series fingerprinted, 0 graph(s) assembled, 1 patched)"
        ),
        "{timing:?}"
    );
    assert!(
        timing[2].contains(
            "(1 file(s) parsed, 1 load(s) (1 image file(s) loaded, 0 kept, 0 of them resolved), 1 series recompiled, 0 file(s) hashed, 1 series fingerprinted, 0 graph(s) assembled, 1 patched)"
        ),
        "{timing:?}"
    );
}
