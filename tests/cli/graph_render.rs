//! `csis graph`: the folded picture (one node per series x runtime) as
//! json, dot, mermaid, svg and a self-contained page, the page checked in
//! headless Chromium at 1400 x 900 on a generated 50-image catalogue.

use crate::build_support;
use build_support::*;

use std::path::Path;

use serde_json::Value;

fn graph(d: &Tree, args: &[&str]) -> String {
    let out = d.csis().arg("graph").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn ok(d: &Tree, args: &[&str]) -> String {
    let out = d.csis().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "csis {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn node<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id}"))
}

#[test]
fn folded_json_dot_mermaid_mark_due_nodes_reasons_and_edge_kinds() {
    let t = tree("basic");
    let d = &t;
    assert_eq!(build(d, &[]).0, 0);
    std::fs::write(d.join("scripts/app.sh"), "#!/bin/sh\necho app v2\n").unwrap();

    let v: Value = serde_json::from_str(&graph(d, &["--format", "json"])).unwrap();
    assert_eq!(v["folded"], true);
    let mut ids: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "//images/app-pinned@sim",
            "//images/app@sim",
            "//images/tools@sim",
            "//images/web@sim",
            "//images/worker@sim",
            "//os/alma9@sim",
            "//os/deb12@sim"
        ]
    );
    // the steps are folded into their node
    let app = node(&v, "//images/app@sim");
    let kinds: Vec<&str> = app["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["emit", "bake", "retag"]);
    // due, in words, with the changed field named (as `plan --explain` does)
    assert_eq!(app["due"]["reason"], "inputs changed");
    assert_eq!(
        app["due"]["changed"],
        serde_json::json!(["inputs.mods[0].files[0] (scripts/app.sh)"])
    );
    assert_eq!(
        node(&v, "//images/tools@sim")["due"]["reason"],
        "parent app re-bakes"
    );
    assert!(node(&v, "//images/web@sim")["due"].is_null());
    // the current build is shown; tools is released as stable
    assert!(node(&v, "//images/web@sim")["build"]["id"]
        .as_str()
        .unwrap()
        .starts_with("dummy-"));
    assert_eq!(
        node(&v, "//images/tools@sim")["released"],
        serde_json::json!(["stable"])
    );
    // app-pinned is pinned to web's build: web says so
    assert_eq!(
        node(&v, "//images/web@sim")["pinned_children"],
        serde_json::json!(["app-pinned"])
    );
    // the plan entry: fingerprint, inputs, deps, the command
    let e = &app["entry"];
    assert_eq!(e["fingerprint"].as_str().unwrap().len(), 64);
    assert_eq!(e["command"], "csis build //images/app@sim");
    assert!(e["deps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d == "//images/web@sim:bake"));
    assert!(e["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().contains("app-setup [scripts/app.sh]")));
    // edges: follow and pinned
    let edge = |from: &str, to: &str| -> Value {
        v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["from"] == from && e["to"] == to)
            .unwrap_or_else(|| panic!("no edge {from} -> {to}"))
            .clone()
    };
    assert_eq!(
        edge("//images/web@sim", "//images/app@sim")["kind"],
        "follow"
    );
    assert_eq!(
        edge("//images/web@sim", "//images/app-pinned@sim")["kind"],
        "pinned"
    );
    assert_eq!(v["edges"].as_array().unwrap().len(), 5);

    let dot = graph(d, &["--format", "dot"]);
    assert!(dot.starts_with("digraph csis {"));
    assert!(dot.contains("id=\"//images/app@sim\", class=\"node image due\""));
    assert!(dot.contains("id=\"//images/web@sim\", class=\"node image current pins\""));
    assert!(dot.contains("[class=\"pinned\", style=dashed"));
    assert!(dot.contains("[class=\"follow\", penwidth=1.4]"));

    let mm = graph(d, &["--format", "mermaid"]);
    assert!(mm.starts_with("flowchart LR"));
    assert!(mm.contains("-.->"), "pinned edges are dotted: {mm}");
    assert!(mm.contains("classDef due"));
    assert!(mm.contains("linkStyle"));

    // --all-nodes: today's full view, one node per step
    let all: Value = serde_json::from_str(&graph(d, &["--format", "json", "--all-nodes"])).unwrap();
    assert_eq!(all["folded"], false);
    assert_eq!(all["nodes"].as_array().unwrap().len(), 24);
    assert!(all["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["id"] == "//os/deb12@sim:resolve"));
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

/// Headless Chromium on `file` with a window of `height`, plus `args`.
fn chromium_run(browser: &str, file: &Path, height: f64, args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--test-type",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--window-size=1400,{height:.0}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The window height that gives the page a 1400 x 900 viewport (headless
/// Chromium's window keeps part of its height for itself).
fn window_for_900(browser: &str, file: &Path) -> f64 {
    let m = measurements(&chromium_run(browser, file, 900.0, &["--dump-dom".into()]));
    900.0 + (900.0 - m["window"]["h"].as_f64().unwrap()).max(0.0)
}

/// The page loaded in headless Chromium with a 1400 x 900 viewport: the
/// dumped DOM.
fn dump_dom(browser: &str, file: &Path) -> String {
    let h = window_for_900(browser, file);
    chromium_run(browser, file, h, &["--dump-dom".into()])
}

/// The measurements the page writes after its initial fit.
fn measurements(dom: &str) -> Value {
    let start = dom
        .find("<pre id=\"csis-measure\" hidden=\"\">")
        .expect("the measurement element");
    let rest = &dom[start..];
    let body = &rest[rest.find('>').unwrap() + 1..rest.find("</pre>").unwrap()];
    let body = body
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("measurements: {e}: {body}"))
}

#[test]
fn page_is_self_contained_and_renders_the_basic_tree() {
    let t = tree("basic");
    let d = &t;
    let file = d.join("graph.html");
    ok(
        d,
        &["graph", "--format", "html", "-o", file.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&file).unwrap();
    // no network: nothing loaded from elsewhere
    for bad in [
        "https://",
        "<script src",
        "<link",
        "src=",
        "@import",
        "url(http",
    ] {
        assert!(!html.contains(bad), "{bad} appears");
    }
    let Some(browser) = chromium() else {
        eprintln!("chromium not installed: checked the html text only");
        return;
    };
    let dom = dump_dom(browser, &file);
    let m = measurements(&dom);
    // fresh tree: 7 series nodes, all due ("no build yet")
    let nodes = m["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 7);
    assert!(nodes.iter().all(|n| n["due"] == true));
    let reasons: Vec<&str> = m["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons
            .iter()
            .filter(|r| *r == &"due: no build yet")
            .count(),
        7
    );

    // converged: nothing due
    assert_eq!(build(d, &[]).0, 0);
    ok(
        d,
        &["graph", "--format", "html", "-o", file.to_str().unwrap()],
    );
    let m = measurements(&dump_dom(browser, &file));
    assert!(m["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["due"] == false));
    assert!(m["reasons"].as_array().unwrap().is_empty());
}

/// A catalogue of 50 images on the dummy runtime: 6 images on two OS
/// builders, 12 below them, 32 below those; `worker` and `ci` images pinned,
/// the others follow. Each first-level image runs its own playbook.
fn catalogue(d: &Path) -> Vec<String> {
    let mut yaml = String::from("images:\n");
    let mut names = Vec::new();
    let first = [
        ("web", "deb12"),
        ("python", "deb12"),
        ("java", "deb12"),
        ("node", "deb12"),
        ("rh-core", "alma9"),
        ("rh-db", "alma9"),
    ];
    let mut add = |yaml: &mut String, name: &str, parent: &str, policy: &str, extra: &str| {
        yaml.push_str(&format!(
            "  - name: {name}\n    source_image: {parent}\n    parent_policy: {policy}\n    runtimes: [{{image_builder: sim-bake}}]\n{extra}"
        ));
        names.push(name.to_string());
    };
    std::fs::create_dir_all(d.join("playbooks")).unwrap();
    for (name, os) in first {
        std::fs::write(
            d.join(format!("playbooks/{name}.yml")),
            format!("- hosts: all\n  tasks:\n    - debug: {{msg: {name}}}\n"),
        )
        .unwrap();
        let extra = format!(
            "    modifications:\n      - name: {name}-setup\n        playbooks: [playbooks/{name}.yml]\n"
        );
        add(&mut yaml, name, os, "follow", &extra);
    }
    let mut second = Vec::new();
    for (name, _) in first {
        for (suffix, policy) in [("api", "follow"), ("worker", "pinned")] {
            let n = format!("{name}-{suffix}");
            let extra = if n == "rh-db-api" {
                "    release: {model: stable}\n"
            } else {
                ""
            };
            add(&mut yaml, &n, name, policy, extra);
            second.push(n);
        }
    }
    for (i, parent) in second.iter().enumerate() {
        let envs: &[(&str, &str)] = if i < 8 {
            &[("eu", "follow"), ("us", "follow"), ("ci", "pinned")]
        } else {
            &[("eu", "follow"), ("us", "follow")]
        };
        for (env, policy) in envs {
            add(&mut yaml, &format!("{parent}-{env}"), parent, policy, "");
        }
    }
    std::fs::write(d.join("images/images.yaml"), yaml).unwrap();
    names
}

/// The head build of a series, from `csis plan --json`.
fn head(d: &Tree, series: &str) -> String {
    let v: Value = serde_json::from_str(&ok(d, &["plan", "--json"])).unwrap();
    let n = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "bake" && n["series"] == series)
        .unwrap();
    let r = n["reason"].as_str().unwrap();
    r.strip_prefix("current (build ")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{series} is not current: {r}"))
        .to_string()
}

#[test]
fn fifty_images_fit_1400_by_900_with_reasons_marks_and_edge_styles() {
    let t = tree("basic");
    let d = &t;
    let names = catalogue(d);
    assert_eq!(names.len(), 50);
    let (code, ev) = build(d, &[]);
    assert_eq!(code, 0, "{:?}", ev.last());
    // released: rh-db-api by its declaration, node-api by hand
    ok(d, &["release", "node-api", "--model", "prod"]);
    // pinned behind: web moves on; web-worker (pinned) stays on the old build
    std::fs::write(
        d.join("playbooks/web.yml"),
        "- hosts: all\n  tasks:\n    - debug: {msg: web v2}\n",
    )
    .unwrap();
    assert_eq!(build(d, &["//images/web"]).0, 0);
    // revoked: java-api-us's only build
    let java = head(d, "java-api-us");
    ok(d, &["revoke", &java, "--reason", "bad base"]);
    // due with a changed file: python's playbook edited, not built
    std::fs::write(
        d.join("playbooks/python.yml"),
        "- hosts: all\n  tasks:\n    - debug: {msg: python v2}\n",
    )
    .unwrap();

    let v: Value = serde_json::from_str(&graph(d, &["--format", "json"])).unwrap();
    let python = node(&v, "//images/python@sim");
    assert_eq!(python["due"]["reason"], "inputs changed");
    assert_eq!(
        python["due"]["changed"][0],
        "inputs.mods[0].files[0] (playbooks/python.yml)"
    );
    assert_eq!(
        node(&v, "//images/web-api@sim")["due"]["reason"],
        "parent web has a newer build"
    );
    let worker = node(&v, "//images/web-worker@sim");
    assert!(worker["due"].is_null(), "{worker}");
    assert!(!worker["behind"].is_null(), "{worker}");
    assert_eq!(
        node(&v, "//images/java-api-us@sim")["revoked"][0],
        format!("{java} (bad base)")
    );
    assert!(node(&v, "//images/java-api-us@sim")["due"]["reason"]
        .as_str()
        .unwrap()
        .contains("revoked"));
    assert_eq!(
        node(&v, "//images/node-api@sim")["released"],
        serde_json::json!(["prod"])
    );
    assert_eq!(
        node(&v, "//images/rh-db-api@sim")["released"],
        serde_json::json!(["stable"])
    );
    let behind: Vec<&Value> = v["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["behind"] == true)
        .collect();
    assert_eq!(behind.len(), 1);
    assert_eq!(behind[0]["to"], "//images/web-worker@sim");
    let due_ids: Vec<String> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !n["due"].is_null())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    // python, python-api and its 3 children... and web-api with its own
    assert!(due_ids.len() >= 8, "{due_ids:?}");

    // The SVG: well-formed XML holding every image's label and name.
    let svg = graph(d, &["--format", "svg"]);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG parses as XML");
    let ids: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("data-id"))
        .collect();
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    for name in &names {
        let label = format!("//images/{name}@sim");
        assert!(ids.contains(&label.as_str()), "{label} not in the SVG");
        assert!(texts.contains(&name.as_str()), "{name} not drawn");
    }
    assert!(texts.contains(&"(playbooks/python.yml)"));

    // The page, in Chromium at 1400 x 900.
    let file = d.join("graph.html");
    ok(
        d,
        &["graph", "--format", "html", "-o", file.to_str().unwrap()],
    );
    let Some(browser) = chromium() else {
        eprintln!("chromium not installed: checked the json and svg only");
        return;
    };
    if let Some(shot) = std::env::var_os("CSIS_GRAPH_SCREENSHOT") {
        // to look at: CSIS_GRAPH_SCREENSHOT=/tmp/graph.png
        // a screenshot is of the whole window
        let arg = format!("--screenshot={}", Path::new(&shot).display());
        chromium_run(browser, &file, 900.0, &[arg]);
    }
    let m = measurements(&dump_dom(browser, &file));
    let (w, h) = (
        m["window"]["w"].as_f64().unwrap(),
        m["window"]["h"].as_f64().unwrap(),
    );
    assert_eq!((w, h), (1400.0, 900.0), "the window Chromium gave");
    let inside = |b: &Value| {
        let (x, y, bw, bh) = (
            b["x"].as_f64().unwrap(),
            b["y"].as_f64().unwrap(),
            b["w"].as_f64().unwrap(),
            b["h"].as_f64().unwrap(),
        );
        bw > 0.0 && bh > 0.0 && x >= 0.0 && y >= 0.0 && x + bw <= w && y + bh <= h
    };
    let nodes = m["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 52, "50 images and 2 OS builders");
    for n in nodes {
        assert!(
            inside(&n["box"]),
            "{} lies outside the window: {}",
            n["id"],
            n["box"]
        );
        // below the page's header
        assert!(n["box"]["y"].as_f64().unwrap() >= m["canvas"]["y"].as_f64().unwrap());
        // and not under the legend
        let bottom = n["box"]["y"].as_f64().unwrap() + n["box"]["h"].as_f64().unwrap();
        let left = n["box"]["x"].as_f64().unwrap();
        let legend = &m["legend"];
        assert!(
            bottom <= legend["y"].as_f64().unwrap()
                || left >= legend["x"].as_f64().unwrap() + legend["w"].as_f64().unwrap(),
            "{} lies under the legend",
            n["id"]
        );
    }
    // every due node's reason is drawn, visible, inside the window and its
    // card, at a size one can read
    for id in &due_ids {
        let card = &nodes.iter().find(|n| &n["id"] == id).unwrap()["box"];
        let reason = m["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| &r["id"] == id && r["cls"] == "reason")
            .unwrap_or_else(|| panic!("{id} has no reason drawn"));
        assert!(reason["text"].as_str().unwrap().starts_with("due: "));
        assert_eq!(reason["visible"], true);
        assert!(inside(&reason["box"]), "{id}: {reason}");
        let (rx, cx) = (
            reason["box"]["x"].as_f64().unwrap(),
            card["x"].as_f64().unwrap(),
        );
        assert!(
            rx >= cx
                && rx + reason["box"]["w"].as_f64().unwrap()
                    <= cx + card["w"].as_f64().unwrap() + 0.5,
            "{id}: the reason overflows its card"
        );
        assert!(reason["px"].as_f64().unwrap() >= 7.0, "{id}: {reason}");
    }
    // the changed field of python is on the page, without hovering
    assert!(m["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["id"] == "//images/python@sim"
            && r["text"] == "(playbooks/python.yml)"
            && r["visible"] == true));
    // pinned and follow edges look different
    let (f, p) = (&m["edges"]["follow"], &m["edges"]["pinned"]);
    assert!(!f.is_null() && !p.is_null(), "{}", m["edges"]);
    assert_ne!(f["dash"], p["dash"], "{f} vs {p}");
    assert_ne!(f["stroke"], p["stroke"], "{f} vs {p}");
    assert!(!m["edges"]["pinned behind"].is_null());

    // A click opens the plan entry (`#node=` does the same at load): the
    // fingerprint, inputs, dependencies, the command and the folded steps.
    let url = format!("{}#node=//images/python@sim", file.display());
    let m = measurements(&dump_dom(browser, Path::new(&url)));
    let panel = m["panel"].as_str().expect("the panel is open");
    let fp = node(&v, "//images/python@sim")["entry"]["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    for want in [
        fp.as_str(),
        "csis build //images/python@sim",
        "python-setup [playbooks/python.yml]",
        "//os/deb12@sim:bake",
        "inputs.mods[0].files[0] (playbooks/python.yml)",
        "steps (3)",
        "retag",
    ] {
        // (section titles are upper-cased by the style)
        assert!(
            panel.to_lowercase().contains(&want.to_lowercase()),
            "{want} not in the panel: {panel}"
        );
    }
    // the filter and "due only" dim what does not match
    let url = format!("{}#filter=web-&due", file.display());
    let m = measurements(&dump_dom(browser, Path::new(&url)));
    for n in m["nodes"].as_array().unwrap() {
        let id = n["id"].as_str().unwrap();
        let shown = id.contains("web-") && n["due"] == true;
        assert_eq!(n["dim"] == false, shown, "{id}");
    }
    assert!(m["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["dim"] == false));
}
