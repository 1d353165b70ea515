//! A path of the tree named like a YAML file that is not a regular file (a
//! directory, a fifo) is refused at its path, never skipped in silence, and
//! a fifo is never opened (the load would block on it). Trees are
//! temporary copies of `tests/fixtures/ops/basic`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use csis_testkit::Tree;

/// Run `cmd` to its end, or kill it after `bound` and fail: (exit code,
/// stdout, stderr). The bound only stops a hang.
fn run_bounded(mut cmd: Command, bound: Duration) -> (i32, String, String) {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            let _ = child.kill();
            panic!("{cmd:?} still running after {bound:?} (blocked on a fifo?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mkfifo(path: &std::path::Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// `validate --offline --json` of `t`: (exit code, its diagnostics).
fn validate(t: &Tree) -> (i32, Vec<serde_json::Value>) {
    let mut c = t.csis();
    c.args(["validate", "--offline", "--json"]);
    let (code, out, err) = run_bounded(c, Duration::from_secs(120));
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, v.as_array().unwrap().clone())
}

fn at<'a>(diags: &'a [serde_json::Value], file: &str) -> &'a serde_json::Value {
    diags
        .iter()
        .find(|d| d["file"] == file)
        .unwrap_or_else(|| panic!("nothing at {file}: {diags:#?}"))
}

#[test]
fn a_yaml_file_replaced_by_a_directory_is_refused_at_its_path() {
    let t = Tree::of("ops/basic");
    let images = t.root.join("images/images.yaml");
    let text = std::fs::read_to_string(&images).unwrap();
    std::fs::remove_file(&images).unwrap();
    std::fs::create_dir(&images).unwrap();
    // its YAML files are not read as the tree's either
    std::fs::write(images.join("inner.yaml"), text).unwrap();
    let cfg = t.root.join("cfg/zz-extra.yml");
    std::fs::create_dir(&cfg).unwrap();
    let (code, diags) = validate(&t);
    assert_eq!(code, 1, "{diags:#?}");
    for file in ["images/images.yaml", "cfg/zz-extra.yml"] {
        let d = at(&diags, file);
        assert_eq!(d["severity"], "error", "{d}");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains("is a directory, not a regular file"),
            "{d}"
        );
    }
    assert!(
        !diags.iter().any(|d| d["file"]
            .as_str()
            .unwrap()
            .starts_with("images/images.yaml/")),
        "{diags:#?}"
    );
}

#[test]
fn a_fifo_named_like_a_yaml_file_is_refused_without_being_opened() {
    let t = Tree::of("ops/basic");
    if !mkfifo(&t.root.join("cfg/zz-pipe.yml")) || !mkfifo(&t.root.join("images/pipe.yaml")) {
        println!("skipped: mkfifo cannot run here");
        return;
    }
    let (code, diags) = validate(&t);
    assert_eq!(code, 1, "{diags:#?}");
    for file in ["cfg/zz-pipe.yml", "images/pipe.yaml"] {
        let d = at(&diags, file);
        assert_eq!(d["severity"], "error", "{d}");
        assert!(d["message"].as_str().unwrap().contains("is a fifo"), "{d}");
    }
    // plan refuses the same way, and does not block either
    let mut c = t.csis();
    c.arg("plan");
    let (code, _, err) = run_bounded(c, Duration::from_secs(120));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cfg/zz-pipe.yml"), "{err}");
}
