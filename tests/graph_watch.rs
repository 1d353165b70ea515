//! `csis watch` prints the plan's changes when a file changes.

mod build_support;
use build_support::*;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn watch_reports_an_edited_playbook() {
    let t = tree("basic");
    let d = t.path();
    assert_eq!(build(d, &[]).0, 0);
    let mut child = csis_std(d)
        .args(["watch", "--interval-ms", "100", "--exit-after", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("watching"), "{line}");
    assert!(line.contains("0 of 7 bake(s) due"), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pb = d.join("playbooks/web.yml");
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, format!("{text}# edit\n")).unwrap();
    let mut rest = String::new();
    for l in r.lines() {
        rest.push_str(&l.unwrap());
        rest.push('\n');
    }
    assert!(child.wait().unwrap().success());
    assert!(rest.starts_with("changed:"), "{rest}");
    assert!(rest.contains("bake //images/web@sim:bake"), "{rest}");
    assert!(rest.contains("bake //images/app@sim:bake"), "{rest}");
    assert!(rest.contains("bake //images/tools@sim:bake"), "{rest}");
    assert!(!rest.contains("app-pinned"), "{rest}");
}
