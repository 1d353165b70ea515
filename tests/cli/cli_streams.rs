//! What the binary writes where, whoever reads it: a closed stdout
//! (`csis plan | head`) ends a command quietly, stdout that is not a
//! terminal (`csis build | tee`) does not change the format (only `--json`
//! gives JSON lines), and a dry run says which bakes it would run. Trees
//! are temporary copies of `tests/fixtures/ops/basic` on the dummy runtime.

use std::process::Stdio;

use csis_testkit::Tree;

/// Run `csis ARGS` on `t` with its stdout a pipe whose reader is closed
/// before the command writes anything: (exit code, stderr).
fn with_closed_stdout(t: &Tree, args: &[&str]) -> (i32, String) {
    let mut child = t
        .csis()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The only reader of the pipe goes: every write of the child gets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_every_listing_quietly() {
    let t = Tree::of("ops/basic");
    t.ok(&["build", "--json", "-j", "1"]);
    for args in [
        &["plan"][..],
        &["plan", "--json"],
        &["plan", "--all"],
        &["builds"],
        &["builds", "--json"],
        &["validate", "--offline"],
        &["state", "query"],
    ] {
        let (code, err) = with_closed_stdout(&t, args);
        assert_eq!(code, 0, "csis {args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "csis {args:?}: {err}"
        );
    }
}

#[test]
fn a_build_into_a_pipe_prints_lines_for_people_and_json_only_when_asked() {
    let t = Tree::of("ops/basic");
    // stdout is a pipe here (the test reads it), not a terminal
    let (code, out, err) = t.run(&["build", "-j", "1"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !out.lines().any(|l| l.trim_start().starts_with('{')),
        "no JSON without --json:\n{out}"
    );
    for series in ["os/deb12", "images/web", "images/tools", "images/app"] {
        let label = format!("//{series}@sim:bake");
        assert!(
            out.lines()
                .any(|l| l.starts_with("baking  ") && l.contains(&label)),
            "{label} started:\n{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("baked   ") && l.contains(&label)),
            "{label} baked:\n{out}"
        );
    }
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("baked 4, skipped 0"),
        "{out}"
    );
    // --json: every stdout line one event
    t.ok(&["build", "--force-bake", "web"]);
    let out = t.ok(&["build", "--json", "--force-bake", "web"]);
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["event"].is_string(), "{l}");
    }
}

/// The JSON lines of `out`, parsed.
fn events(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_dry_run_reports_its_due_bakes_as_would_bake_not_skipped() {
    let t = Tree::of("ops/basic");
    let bakes = [
        "//os/deb12@sim:bake",
        "//images/web@sim:bake",
        "//images/tools@sim:bake",
        "//images/app@sim:bake",
    ];
    let ev = events(&t.ok(&["build", "--dry-run", "--json"]));
    for label in bakes {
        let e: Vec<&serde_json::Value> = ev.iter().filter(|e| e["label"] == label).collect();
        assert_eq!(e.len(), 1, "{label}: {e:?}");
        assert_eq!(e[0]["event"], "would_run", "{label}: {e:?}");
        assert_eq!(e[0]["kind"], "bake");
        assert_eq!(e[0]["reason"], "no build yet on sim");
    }
    // only resolve and emit nodes run in a dry run (no retag, no test)
    for e in ev.iter().filter(|e| e["event"] == "started") {
        assert!(e["kind"] == "emit" || e["kind"] == "resolve", "{e}");
    }
    assert!(
        ev.iter()
            .any(|e| e["event"] == "would_run" && e["kind"] == "retag"),
        "{ev:?}"
    );
    let summary = ev.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["skipped"], 0, "{summary}");
    assert_eq!(summary["baked"], 0, "{summary}");
    assert_eq!(summary["kinds"]["bake"]["would_run"], 4, "{summary}");
    assert_eq!(summary["kinds"]["bake"]["skipped"], 0, "{summary}");
    // the dry run baked nothing
    let builds: serde_json::Value = serde_json::from_str(&t.ok(&["builds", "--json"])).unwrap();
    assert_eq!(builds, serde_json::json!([]));

    // for people: `would bake` lines and the count first
    let out = t.ok(&["build", "--dry-run"]);
    assert!(
        out.contains("would bake //images/web@sim:bake: no build yet on sim"),
        "{out}"
    );
    assert!(
        out.lines().last().unwrap().starts_with("would bake 4 ("),
        "{out}"
    );

    // after a build: what is current is skipped, a forced bake (and its
    // follow child) would bake
    t.ok(&["build", "--json", "-j", "1"]);
    let ev = events(&t.ok(&["build", "--dry-run", "--json", "--force-bake", "web"]));
    let of = |label: &str| {
        ev.iter()
            .find(|e| e["label"] == label)
            .unwrap_or_else(|| panic!("{label}: {ev:?}"))["event"]
            .clone()
    };
    assert_eq!(of("//images/web@sim:bake"), "would_run");
    assert_eq!(of("//images/app@sim:bake"), "would_run");
    assert_eq!(of("//images/tools@sim:bake"), "skipped");
    assert_eq!(of("//os/deb12@sim:bake"), "skipped");
    for e in ev.iter().filter(|e| e["event"] == "started") {
        assert!(e["kind"] == "emit" || e["kind"] == "resolve", "{e}");
    }
}

#[test]
fn the_version_names_what_the_binary_carries() {
    let (code, out, err) = csis_testkit::output(csis_testkit::csis().arg("--version"));
    assert_eq!(code, 0, "{err}");
    let mut runtimes = Vec::new();
    for (on, name) in [
        (cfg!(feature = "dummy"), "dummy"),
        (cfg!(feature = "docker"), "docker"),
        (cfg!(feature = "aws"), "aws"),
    ] {
        if on {
            runtimes.push(name);
        }
    }
    let stores = if cfg!(feature = "store") {
        "local, file, s3, gs"
    } else {
        "local, file"
    };
    let opa = if cfg!(feature = "opa") { "; opa" } else { "" };
    assert_eq!(
        out.trim(),
        format!(
            "csis {} (runtimes: {}; stores: {stores}{opa})",
            env!("CARGO_PKG_VERSION"),
            runtimes.join(", ")
        )
    );
}
