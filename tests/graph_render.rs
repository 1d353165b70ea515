//! `csis graph`: dot, mermaid, json and a self-contained html page, the
//! latter checked in headless Chromium when it is installed.

mod build_support;
use build_support::*;

use std::path::Path;

fn graph(d: &Path, args: &[&str]) -> String {
    let out = csis(d).arg("graph").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn json_dot_mermaid_mark_due_nodes() {
    let t = tree("basic");
    let d = t.path();
    assert_eq!(build(d, &[]).0, 0);
    let pb = d.join("scripts/app.sh");
    std::fs::write(&pb, "#!/bin/sh\necho app v2\n").unwrap();

    let v: serde_json::Value =
        serde_json::from_str(&graph(d, &["--format", "json", "--bakes-only"])).unwrap();
    let mut due: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["due"] == true)
        .map(|n| n["label"].as_str().unwrap())
        .collect();
    due.sort();
    assert_eq!(
        due,
        vec!["//images/app@sim:bake", "//images/tools@sim:bake"]
    );
    let edges = v["edges"].as_array().unwrap();
    assert!(edges
        .iter()
        .any(|e| e["from"] == "//images/web@sim:bake" && e["to"] == "//images/app@sim:bake"));
    assert_eq!(edges.len(), 5);

    let dot = graph(d, &["--format", "dot"]);
    assert!(dot.starts_with("digraph csis {"));
    assert!(dot.contains("\"//images/app@sim:bake\", fillcolor=\"#ffd27f\""));
    assert!(dot.contains("\"//images/web@sim:bake\", fillcolor=\"#e8e8e8\""));

    let mm = graph(d, &["--format", "mermaid", "--bakes-only"]);
    assert!(mm.starts_with("flowchart LR"));
    assert!(mm.contains("class "));
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
}

#[test]
fn html_is_self_contained_and_renders() {
    let t = tree("basic");
    let d = t.path();
    let file = d.join("graph.html");
    csis(d)
        .args(["graph", "--format", "html", "-o"])
        .arg(&file)
        .assert()
        .success();
    let html = std::fs::read_to_string(&file).unwrap();
    // no network: nothing loaded from elsewhere
    for bad in ["http://", "https://", "<script src", "<link"] {
        let n = html.matches(bad).count();
        let allowed = if bad == "http://" { 1 } else { 0 }; // the SVG namespace
        assert!(n <= allowed, "{bad} appears {n} times");
    }
    let Some(browser) = chromium() else {
        eprintln!("chromium not installed: checked the html text only");
        for l in ALL_BAKES {
            assert!(html.contains(&format!("data-label=\"{l}\"")));
        }
        return;
    };
    let out = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    // the browser parsed the inline SVG: every node is a rendered <g> with its label
    for l in ALL_BAKES {
        assert!(
            dom.contains(&format!(
                "data-label=\"{l}\" data-kind=\"bake\" data-due=\"true\""
            )),
            "{l} not in the rendered DOM"
        );
    }
    // fresh tree: everything is due (2 resolve, 7 emit, 7 bake, 7 retag, 1 release)
    assert_eq!(dom.matches("class=\"node due\"").count(), 24);
    assert!(dom.contains("24 node(s), 24 due"));

    // converged: nothing is marked due
    assert_eq!(build(d, &[]).0, 0);
    csis(d)
        .args(["graph", "--format", "html", "-o"])
        .arg(&file)
        .assert()
        .success();
    let out = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(dom.matches("class=\"node due\"").count(), 0);
    assert_eq!(dom.matches("class=\"node current\"").count(), 24);
}
