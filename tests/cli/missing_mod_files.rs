//! A playbook or script a modification names must exist: a missing one is
//! an error at the line naming it (`validate`, `plan` and `build` refuse the
//! tree), and a file gone between the load and the bake fails that bake with
//! the tree file, line and field, before the runtime is asked. Trees are
//! temporary copies of `tests/fixtures/ops/basic` on the dummy runtime.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use csis_testkit::Tree;

const WEB: &str = "  - name: web\n    source_image: deb12\n    parent_policy: follow\n";
/// web with a script (`scripts/web.sh`, named at images/images.yaml:7:54).
const WEB_WITH_SCRIPT: &str = "  - name: web\n    source_image: deb12\n    parent_policy: follow\n    modifications:\n      - {name: web-setup, type: bash, scripts: [scripts/web.sh]}\n";

fn tree_with_script() -> Tree {
    let t = Tree::of("ops/basic");
    let f = t.root.join("images/images.yaml");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains(WEB));
    std::fs::write(&f, text.replacen(WEB, WEB_WITH_SCRIPT, 1)).unwrap();
    t
}

#[test]
fn a_missing_script_is_an_error_at_its_line() {
    let t = tree_with_script();
    let (code, out, err) = t.run(&["validate", "--offline", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let d = v
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["message"].as_str().unwrap().contains("scripts/web.sh"))
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(d["severity"], "error", "{d}");
    assert_eq!(d["file"], "images/images.yaml", "{d}");
    assert_eq!(d["line"], 7, "{d}");
    assert_eq!(d["path"], "images[0].modifications[0].scripts[0]", "{d}");
    // plan and build refuse it too, and build bakes nothing
    let (code, _, err) = t.run(&["plan"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("images/images.yaml:7:"), "{err}");
    let (code, _, err) = t.run(&["build", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("scripts/web.sh"), "{err}");
    assert_eq!(t.ok(&["builds", "--json"]).trim(), "[]");
    // with the file, the tree loads
    std::fs::create_dir_all(t.root.join("scripts")).unwrap();
    std::fs::write(t.root.join("scripts/web.sh"), "echo web\n").unwrap();
    t.ok(&["validate", "--offline"]);
}

#[test]
fn a_script_gone_before_its_bake_fails_the_bake_naming_the_tree_line() {
    let t = tree_with_script();
    std::fs::create_dir_all(t.root.join("scripts")).unwrap();
    let script = t.root.join("scripts/web.sh");
    std::fs::write(&script, "echo web\n").unwrap();
    // deb12 takes a second to bake: the script goes when its bake starts
    let f = t.root.join("cfg/runtime-builders.yml");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, format!("{text}    bake_seconds: 1\n")).unwrap();
    let mut child = t
        .csis()
        .args(["build", "--json", "-j", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut web_failed = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let e: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if e["event"] == "started" && e["label"] == "//os/deb12@sim:bake" {
            std::fs::remove_file(&script).unwrap();
        }
        if e["event"] == "failed" && e["label"] == "//images/web@sim:bake" {
            web_failed = Some(e["error"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(child.wait().unwrap().code(), Some(1));
    let error = web_failed.expect("web's bake failed");
    assert!(
        error.starts_with("not baked: images/images.yaml:7:")
            && error.contains("images[0].modifications[0].scripts[0]")
            && error.contains("`scripts/web.sh` does not exist in the tree"),
        "{error}"
    );
    // deb12 was baked and recorded; web was not
    let builds: serde_json::Value = serde_json::from_str(&t.ok(&["builds", "--json"])).unwrap();
    let series: Vec<&str> = builds
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["series"].as_str().unwrap())
        .collect();
    assert_eq!(series, ["deb12"], "{builds:#}");
}
