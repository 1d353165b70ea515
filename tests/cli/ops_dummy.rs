//! Lineage operations through the real `csis` binary on the dummy runtime:
//! retention and dispose, refusals, state query (foreign, changed, missing,
//! stale), state import, release, revoke, relabel, restamp. The rules every
//! runtime keeps are `ops_support::suite`'s, called here for `sim`; what
//! `release`, `dispose`, `revoke`, `empty` and `preflight` print is in
//! `tests/cli_cases/`.
//!
//! Builds come from `csis build` on a temporary copy of
//! `tests/fixtures/ops/basic`; the dummy runtime's store is
//! `.csis/dummy/sim.json`.

use serde_json::Value;

use crate::ops_support;
use ops_support::suite::{self, RuntimeUnderTest};
use ops_support::Tree;

impl Tree {
    fn build_ok(&self, extra: &[&str]) {
        let mut a = vec!["build", "--json"];
        a.extend_from_slice(extra);
        self.ok(&a);
    }

    fn report(&self) -> Value {
        serde_json::from_slice(
            &std::fs::read(self.root.join("generated/state-report.json")).unwrap(),
        )
        .unwrap()
    }

    /// `csis build --json` with `CSIS_DUMMY_FAIL` set to `fail` (if any):
    /// the exit code, the events, and what it said: each notice's line
    /// (a `{"event":"notice"}` of the stream), then stderr.
    fn build_json(&self, extra: &[&str], fail: Option<&str>) -> (i32, Vec<Value>, String) {
        let mut c = self.csis();
        c.args(["build", "--json"]).args(extra);
        if let Some(f) = fail {
            c.env("CSIS_DUMMY_FAIL", f);
        }
        let out = c.output().unwrap();
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
            .collect();
        let said: String = events
            .iter()
            .filter(|e| e["event"] == "notice")
            .map(|e| format!("{}\n", e["message"].as_str().expect("a notice's line")))
            .collect();
        (
            out.status.code().unwrap_or(-1),
            events,
            format!("{said}{}", String::from_utf8_lossy(&out.stderr)),
        )
    }

    /// The dummy runtime `sim` as the suite sees it: a build is held while
    /// its image is in the store, and its tags are the store's.
    fn sim<R>(&self, f: impl FnOnce(&RuntimeUnderTest) -> R) -> R {
        let holds = |id: &str| self.store_ids().contains(id);
        let tag = |id: &str, key: &str| {
            self.store()["images"][id]["tags"][key]
                .as_str()
                .map(str::to_string)
        };
        f(&RuntimeUnderTest {
            tree: self,
            name: "sim",
            holds: &holds,
            tag: Some(&tag),
        })
    }

    /// Three builds of every follow series (deb12, web, app), one of tools.
    fn three_generations(&self) {
        self.build_ok(&[]);
        self.build_ok(&["--force-bake", "deb12"]);
        self.build_ok(&["--force-bake", "deb12"]);
        assert_eq!(self.ids("deb12").len(), 3);
        assert_eq!(self.ids("web").len(), 3);
        assert_eq!(self.ids("app").len(), 3);
    }
}

const RUNTIME_KEEP_1: &str = "runtime_builders:
  - name: sim
    type: dummy
    is_default: true
    default_machine_type: small
    retention_keep: 1
";

#[test]
fn retention_keeps_released_and_pinned_and_disposes_children_first() {
    let t = Tree::basic();
    t.three_generations();
    // retention is declared only after the builds (keep 1 per series on sim)
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);
    let (b, w, a) = (t.ids("deb12"), t.ids("web"), t.ids("app"));
    t.sim(|rt| suite::retention_of_three_generations(rt, &b, &w, &a));
    // a second run has nothing left but the debt
    let again = t.ok(&["dispose", "image", "--retention"]);
    assert!(again.contains("nothing to dispose"), "{again}");
    // records and reality agree afterwards (tools' pin is stale by design)
    let q = t.ok(&["state", "query", "--strict"]);
    assert!(
        !q.contains("missing") && !q.contains("foreign") && !q.contains("changed"),
        "{q}"
    );
    assert!(q.contains("image tools@sim: stale"), "{q}");
}

/// Refused disposals delete nothing, from the runtime or the records; an
/// explicit disposal of an image-pinned parent is refused and keeps the pin.
/// What each refusal says is the case `tests/cli_cases/dispose-refusals.case`.
#[test]
fn dispose_refusals_delete_nothing() {
    let t = Tree::basic();
    t.three_generations();
    let w = t.ids("web");
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("vm-1".into(), w[0].clone());
    t.meta().save_pins(&pins).unwrap();
    let store = t.store_ids();
    let lineage = std::fs::read(t.root.join("meta-state/lineage.yaml")).unwrap();

    // a disposable build, a pinned one and an unrecorded one: all refused;
    // --all without --runtime, unknown runtime, too young
    for args in [
        &["dispose", "image", &w[1], &w[0], "sha-nothing"][..],
        &["dispose", "image", "--all"],
        &["dispose", "image", &w[1], "--runtime", "elsewhere"],
        &["dispose", "image", &w[1], "--min-age", "3"],
    ] {
        let (code, _, err) = t.run(args);
        assert_eq!(code, 1, "{args:?}: {err}");
    }
    assert_eq!(t.store_ids(), store);
    assert_eq!(
        std::fs::read(t.root.join("meta-state/lineage.yaml")).unwrap(),
        lineage
    );

    // an explicit disposal of an image-pinned parent is refused: the pin
    // stays (moving it would be an upgrade nobody asked for)
    let tools_pin = t.meta().pins().unwrap().images["tools@sim"].clone();
    assert_eq!(tools_pin, w[0], "tools is pinned to the first web build");
    let mut pins = t.meta().pins().unwrap();
    pins.instances.clear();
    t.meta().save_pins(&pins).unwrap();
    let (code, _, err) = t.run(&["dispose", "image", &w[0]]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is pinned by image tools@sim"), "{err}");
    assert!(t.store_ids().contains(&w[0]));
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w[0]);
}

#[test]
fn foreign_image_found_then_adopted_by_state_import() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let (code, out, _) = t.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no drift: records and reality agree"), "{out}");
    // the record of the app build is lost (e.g. the bake was killed before recording)
    let app = t.ids("app")[0].clone();
    let mut l = t.meta().lineage().unwrap();
    let app_fingerprint = l.find(&app).unwrap().input_fingerprint.clone();
    l.builds.retain(|b| b.build_id != app);
    t.meta().save_lineage(&l).unwrap();

    // the report and the JSON say it too
    t.run(&["state", "query"]);
    assert_eq!(t.report()["summary"]["foreign"], 1);
    let (_, json, _) = t.run(&["state", "query", "--json"]);
    let rep: Value = serde_json::from_str(&json).unwrap();
    for key in ["reality", "drift", "unavailable", "notes", "summary"] {
        assert!(rep.get(key).is_some(), "{key} missing in {json}");
    }
    assert_eq!(rep["drift"][0]["kind"], "image");
    assert_eq!(rep["drift"][0]["drift"], "foreign");
    assert_eq!(rep["drift"][0]["hard"], false);
    let dry = t.ok(&["state", "import", "--dry-run"]);
    assert!(dry.contains(&format!("would adopt {app}")), "{dry}");
    assert!(t.meta().lineage().unwrap().find(&app).is_none());

    let web = t.ids("web")[0].clone();
    t.sim(|rt| suite::foreign_is_adopted(rt, &app, "app", &web));
    // its tag's fingerprint prefix is the tree's: the record gets it whole
    let adopted = t.meta().lineage().unwrap();
    assert_eq!(
        adopted.find(&app).unwrap().input_fingerprint,
        app_fingerprint
    );
    let rec = t.meta().lineage().unwrap().find(&app).cloned().unwrap();
    assert_eq!(rec.imported, Some(true));
    assert!(!rec.tests.in_bake, "an adopted build is not verified");
    // an adopted build cannot be released before it is verified
    let (code, _, err) = t.run(&["release", "app", "--build", &app]);
    assert_eq!(code, 1);
    assert!(err.contains("in-bake"), "{err}");
}

#[test]
fn missing_changed_stale_and_pin_drift() {
    let t = Tree::basic();
    t.build_ok(&[]);
    t.build_ok(&["--force-bake", "deb12"]);
    let w = t.ids("web");
    // tools stays pinned to w[0] while web's head is w[1]: stale
    let out = t.ok(&["state", "query"]);
    assert!(out.contains("image tools@sim: stale"), "{out}");
    // change a tag on the store: changed; relabel fixes it
    let mut s = t.store();
    s["images"][&w[1]]["tags"]["csis_parent"] = Value::from("series:deb12");
    std::fs::write(t.store_path(), serde_json::to_vec(&s).unwrap()).unwrap();
    t.sim(|rt| suite::changed_until_relabelled(rt, &w[1], "parent: lineage="));
    // a pinned build gone from the runtime: missing, hard
    let mut s = t.store();
    s["images"].as_object_mut().unwrap().remove(&w[0]);
    std::fs::write(t.store_path(), serde_json::to_vec(&s).unwrap()).unwrap();
    let (code, out, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("image {}@sim: missing", w[0])) && out.contains("[HARD]"),
        "{out}"
    );
    assert_eq!(
        t.report()["drift"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["hard"] == true)
            .count(),
        1
    );
    // a pin naming an unrecorded build: missing, hard
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("vm-9".into(), "no-such-build".into());
    t.meta().save_pins(&pins).unwrap();
    let (code, out, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("pin instance vm-9: missing: pinned to no-such-build"),
        "{out}"
    );
}

/// The build ran tools' post-bake tests (the dummy's commands pass) and
/// recorded them, which a release needs; the release is recorded and marked
/// on the runtime. What `release` refuses, and `--declared`, is the case
/// `tests/cli_cases/release-rules.case`.
#[test]
fn a_release_is_recorded_and_marked_on_the_runtime() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let tools = t.ids("tools")[0].clone();
    let it = csis_cache::release_rules::ImageTests::load(&t.meta()).unwrap();
    assert_eq!(it.result(&tools), Some(true));
    t.sim(|rt| suite::release_is_recorded_and_marked(rt, "tools", &tools, "stable"));
}

#[test]
fn restamp_records_the_current_fingerprint() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let head = t.ids("deb12")[0].clone();
    t.sim(|rt| suite::restamp_records_the_current_fingerprint(rt, "deb12", &head));
    let out = t.ok(&["lineage", "restamp", "--runtime", "sim"]);
    assert!(out.contains("nothing to restamp"), "{out}");
}

#[test]
fn a_revoked_parent_blocks_its_descendants_until_a_new_parent_build_exists() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let w0 = t.ids("web")[0].clone();
    let (a0, t0) = (t.ids("app")[0].clone(), t.ids("tools")[0].clone());
    let plan = t.ok(&["plan"]);
    assert!(plan.contains("0 of 4 bake(s) due"), "{plan}");
    t.ok(&["revoke", &w0, "--descendants", "--reason", "CVE-2026-3"]);
    // the revocation makes web and its follow child due; the pinned child
    // is held on its revoked pin, with the upgrade that moves it
    let plan = t.ok(&["plan"]);
    for s in ["web", "app"] {
        assert!(
            plan.lines()
                .any(|l| l.starts_with("bake") && l.contains(&format!("//images/{s}@sim:bake"))),
            "{s} not due:\n{plan}"
        );
    }
    assert!(
        plan.lines().any(|l| l.starts_with("skip")
            && l.contains("//images/tools@sim:bake")
            && l.contains("`csis upgrade image tools --runtime sim`")),
        "{plan}"
    );
    assert!(
        plan.lines()
            .any(|l| l.starts_with("skip") && l.contains("//os/deb12@sim")),
        "{plan}"
    );
    // while no new web build exists, nothing bakes from the revoked one
    let out = t
        .csis()
        .args(["build", "--json"])
        .env("CSIS_DUMMY_FAIL", "web")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(t.ids("app"), vec![a0.clone()]);
    assert_eq!(t.ids("tools"), vec![t0.clone()]);
    // a new web build: app bakes from it; tools waits for its upgrade
    t.build_ok(&[]);
    let w = t.ids("web");
    assert_eq!(w.len(), 2);
    let b = t.builds("app");
    assert_eq!(b.len(), 2);
    assert_eq!(b[1].parent.as_deref(), Some(w[1].as_str()));
    assert_eq!(t.ids("tools"), vec![t0.clone()]);
    t.ok(&["upgrade", "image", "tools"]);
    t.build_ok(&[]);
    let b = t.builds("tools");
    assert_eq!(b.len(), 2);
    assert_eq!(b[1].parent.as_deref(), Some(w[1].as_str()));
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w[1]);
    let plan = t.ok(&["plan"]);
    assert!(plan.contains("0 of 4 bake(s) due"), "{plan}");
}

#[test]
fn a_journal_left_by_an_interrupted_build_counts_and_is_settled_before_writing() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let base = t.builds("deb12")[0].clone();
    // a bake recorded in the journal only (the build was killed before
    // lineage.yaml was rewritten), and its image in the store
    let mut rec = base.clone();
    rec.build_id = "dummy-journal-1".into();
    rec.run = Some("2026_11_01t00_00_00_000000".into());
    let line = serde_json::json!({"record": rec, "pin": null}).to_string();
    std::fs::write(t.root.join(".csis/lineage.journal"), format!("{line}\n")).unwrap();
    let mut s = t.store();
    let mut img = s["images"][&base.build_id].clone();
    img["tags"]["csis_run"] = Value::from("2026_11_01t00_00_00_000000");
    s["images"]["dummy-journal-1"] = img;
    std::fs::write(t.store_path(), serde_json::to_vec(&s).unwrap()).unwrap();
    // the state query counts it as recorded (not foreign)
    let out = t.ok(&["state", "query", "--strict"]);
    assert!(!out.contains("foreign"), "{out}");
    // a disposal settles the journal first, so nothing brings the record back
    let out = t.ok(&["dispose", "image", "dummy-journal-1"]);
    assert!(out.contains("disposed dummy-journal-1"), "{out}");
    assert!(!t.recorded().contains("dummy-journal-1"));
    t.build_ok(&[]);
    assert!(
        !t.recorded().contains("dummy-journal-1"),
        "resurrected by the journal"
    );
    let out = t.ok(&["state", "query", "--strict"]);
    assert!(out.contains("no drift"), "{out}");
}

#[test]
fn restamp_keeps_the_records_of_revoked_series() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let n = t.recorded().len();
    let web = t.ids("web")[0].clone();
    t.ok(&["revoke", &web]);
    let mut l = t.meta().lineage().unwrap();
    let app = l.builds.iter_mut().find(|b| b.series == "deb12").unwrap();
    app.input_fingerprint = Some("1".repeat(64));
    t.meta().save_lineage(&l).unwrap();
    let out = t.ok(&["lineage", "restamp", "--runtime", "sim"]);
    assert!(out.contains("restamped"), "{out}");
    assert_eq!(t.recorded().len(), n, "records were lost");
    assert!(t.recorded().contains(&web));
}

#[test]
fn csis_build_ends_with_the_declared_retention() {
    let t = Tree::basic();
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);
    t.build_ok(&[]);
    let (b1, w1, a1) = (
        t.ids("deb12")[0].clone(),
        t.ids("web")[0].clone(),
        t.ids("app")[0].clone(),
    );
    t.build_ok(&["--force-bake", "deb12"]);
    // keep 1 per series: the old base and app go; web's first build stays
    // because tools (pinned policy) is pinned to it
    assert_eq!(t.ids("deb12").len(), 1);
    assert_eq!(t.ids("app").len(), 1);
    assert_eq!(t.ids("web")[0], w1);
    assert_eq!(t.ids("web").len(), 2);
    let store = t.store_ids();
    assert!(!store.contains(&b1) && !store.contains(&a1));
    assert!(store.contains(&w1));
    let out = t.ok(&["state", "query", "--strict"]);
    assert!(
        !out.contains("missing") && !out.contains("foreign"),
        "{out}"
    );
}

#[test]
fn csis_build_refuses_on_hard_drift_until_the_query_agrees() {
    let t = Tree::basic();
    t.build_ok(&[]);
    let w1 = t.ids("tools")[0].clone();
    // the head of tools disappears from the runtime (a head is what the next
    // child would bake from: hard drift; a pinned one could not be disposed)
    let mut s = t.store();
    s["images"].as_object_mut().unwrap().remove(&w1);
    std::fs::write(t.store_path(), serde_json::to_vec(&s).unwrap()).unwrap();
    let bakes = t.store()["bakes"].as_array().unwrap().len();
    let (code, _, err) = t.run(&["build", "--json", "--force-bake", "deb12"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("image {w1}@sim: missing")), "{err}");
    assert_eq!(
        t.store()["bakes"].as_array().unwrap().len(),
        bakes,
        "nothing baked"
    );
    // fixed by disposing the record (its image is already gone)
    let out = t.ok(&["dispose", "image", &w1]);
    assert!(out.contains("(already gone)"), "{out}");
    // --no-state-query keeps the last report, which still holds the drift
    let (code, _, _) = t.run(&[
        "build",
        "--json",
        "--no-state-query",
        "--force-bake",
        "deb12",
    ]);
    assert_eq!(code, 1);
    t.ok(&["state", "query"]);
    t.build_ok(&["--no-state-query", "--force-bake", "deb12"]);
    assert!(t.store()["bakes"].as_array().unwrap().len() > bakes);
}

/// The position of the first `event` of `label` among the events.
fn at(ev: &[Value], event: &str, label: &str) -> usize {
    ev.iter()
        .position(|e| e["event"] == event && e["label"] == label)
        .unwrap_or_else(|| panic!("no {event} event for {label} in {ev:#?}"))
}

fn has(ev: &[Value], event: &str, label: &str) -> bool {
    ev.iter()
        .any(|e| e["event"] == event && e["label"] == label)
}

const APP: &str = "  - name: app\n    source_image: web\n    parent_policy: follow\n";
const APP_RELEASED: &str =
    "  - name: app\n    source_image: web\n    parent_policy: follow\n    release: {model: beta}\n";
const TOOLS: &str = "  - name: tools\n    source_image: web\n";
const TOOLS_SLOW: &str =
    "  - name: tools\n    source_image: web\n    config: {dummy_bake_seconds: 3}\n";

const RUNTIME_EPHEMERAL: &str = "runtime_builders:
  - name: sim
    type: dummy
    is_default: true
    default_machine_type: small
    ephemeral: true
";

/// A release node releases its image's new build inside the run: after that
/// image's retag, while an independent branch (tools, a 3 s bake) still bakes.
#[test]
fn a_release_node_releases_during_the_run() {
    let t = Tree::basic();
    t.edit("images/images.yaml", APP, APP_RELEASED);
    t.edit("images/images.yaml", TOOLS, TOOLS_SLOW);
    let (code, ev, err) = t.build_json(&[], None);
    assert_eq!(code, 0, "{err}");
    let app = t.ids("app")[0].clone();
    let retag = at(&ev, "finished", "//images/app@sim:retag");
    let started = at(&ev, "started", "//images/app@sim:release");
    let released = at(&ev, "finished", "//images/app@sim:release");
    let slow_started = at(&ev, "started", "//images/tools@sim:bake");
    let slow = at(&ev, "finished", "//images/tools@sim:bake");
    assert!(retag < started && started < released, "{ev:#?}");
    assert!(
        slow_started < released && released < slow,
        "the release waited for the slow branch: {ev:#?}"
    );
    assert!(
        err.contains(&format!(
            "//images/app@sim:release: released {app} as beta of app on sim (marked on the runtime)"
        )),
        "{err}"
    );
    // under --json the line is an event of the stream, as data
    let line = ev
        .iter()
        .find(|e| e["event"] == "notice" && e["label"] == "//images/app@sim:release")
        .unwrap_or_else(|| panic!("the release's notice: {ev:#?}"));
    assert_eq!(line["notice"], "node_line", "{line:#}");
    assert_eq!(
        line["line"],
        Value::from(format!(
            "released {app} as beta of app on sim (marked on the runtime)"
        )),
        "{line:#}"
    );
    let rel = t.meta().releases().unwrap();
    assert_eq!(rel.current["beta"]["app"], app);
    assert_eq!(rel.releases.len(), 1);
    assert_eq!(t.store()["images"][&app]["tags"]["csis_release"], "beta");

    // nothing due: no release node runs, nothing new is released
    let (code, ev, _) = t.build_json(&[], None);
    assert_eq!(code, 0);
    assert!(!ev.iter().any(|e| e["kind"] == "release"), "{ev:#?}");
    assert_eq!(t.meta().releases().unwrap().releases.len(), 1);
    // a dry run releases nothing either (at most it says it would)
    let (code, ev, _) = t.build_json(&["--dry-run", "--force-bake", "app"], None);
    assert_eq!(code, 0);
    assert!(
        ev.iter()
            .filter(|e| e["kind"] == "release")
            .all(|e| e["event"] == "would_run"),
        "{ev:#?}"
    );
    assert_eq!(t.meta().releases().unwrap().releases.len(), 1);
    // a new app build is released by the build that bakes it
    let (code, _, err) = t.build_json(&["--force-bake", "app"], None);
    assert_eq!(code, 0, "{err}");
    let app2 = t.ids("app")[1].clone();
    let rel = t.meta().releases().unwrap();
    assert_eq!(rel.current["beta"]["app"], app2);
    assert_eq!(rel.releases.len(), 2);
}

/// A release that fails (here: the runtime's release mark) fails its node
/// and the build's exit code; only what depends on it (the same image's
/// dispose node) does not run, every other branch finishes.
#[test]
fn a_failing_release_fails_the_build_and_stops_only_its_descendants() {
    let t = Tree::basic();
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);
    t.edit("images/images.yaml", APP, APP_RELEASED);
    let (code, ev, err) = t.build_json(&[], Some("release:app"));
    assert_eq!(code, 1, "{err}");
    let failed: Vec<&Value> = ev.iter().filter(|e| e["event"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{ev:#?}");
    assert_eq!(failed[0]["label"], "//images/app@sim:release");
    let error = failed[0]["error"].as_str().unwrap();
    assert!(error.contains("fails on purpose"), "{error}");
    assert!(error.contains("nothing recorded"), "{error}");
    let not_run: Vec<&Value> = ev.iter().filter(|e| e["event"] == "not_run").collect();
    assert_eq!(not_run.len(), 1, "{ev:#?}");
    assert_eq!(not_run[0]["label"], "//images/app@sim:dispose");
    assert_eq!(not_run[0]["reason"], "//images/app@sim:release failed");
    for l in [
        "//os/deb12@sim:bake",
        "//images/web@sim:bake",
        "//images/app@sim:bake",
        "//images/tools@sim:bake",
        "//images/app@sim:retag",
        "//os/deb12@sim:dispose",
        "//images/web@sim:dispose",
        "//images/tools@sim:dispose",
    ] {
        assert!(has(&ev, "finished", l), "{l} did not finish: {ev:#?}");
    }
    let summary = ev.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(
        (summary["failed"].as_u64(), summary["baked"].as_u64()),
        (Some(1), Some(4))
    );
    assert!(t.meta().releases().unwrap().current.is_empty());
    // the build is recorded all the same; `release --declared` releases it
    let app = t.ids("app")[0].clone();
    let out = t.ok(&["release", "--declared"]);
    assert!(
        out.contains(&format!("released {app} as beta of app on sim")),
        "{out}"
    );
}

/// Dispose nodes apply `retention_keep` inside the run, after the bakes that
/// stand on their series' builds, and keep every build in use (an
/// instance, a release, a child's pin).
#[test]
fn dispose_nodes_dispose_beyond_keep_and_never_a_build_in_use() {
    let t = Tree::basic();
    t.three_generations();
    let (b, w, a) = (t.ids("deb12"), t.ids("web"), t.ids("app"));
    let tools = t.ids("tools");
    // an instance on the first app build; the second web build released
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("vm-1".into(), a[0].clone());
    t.meta().save_pins(&pins).unwrap();
    t.ok(&["release", "web", "--build", &w[1], "--model", "prod"]);
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w[0]);
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);

    let (code, ev, err) = t.build_json(&["--force-bake", "deb12"], None);
    assert_eq!(code, 0, "{err}");
    // each dispose node runs after the bakes that stand on its series
    assert!(
        at(&ev, "finished", "//images/web@sim:bake") < at(&ev, "started", "//os/deb12@sim:dispose"),
        "{ev:#?}"
    );
    assert!(
        at(&ev, "finished", "//images/app@sim:bake")
            < at(&ev, "started", "//images/web@sim:dispose"),
        "{ev:#?}"
    );
    for l in [
        "//os/deb12@sim:dispose",
        "//images/web@sim:dispose",
        "//images/app@sim:dispose",
    ] {
        assert!(has(&ev, "finished", l), "{l}: {ev:#?}");
    }
    // tools did not bake (pinned to w[0]): its dispose node does not run
    assert!(!ev
        .iter()
        .any(|e| e["label"] == "//images/tools@sim:dispose"));

    let (b3, w3, a3) = (
        t.ids("deb12").last().unwrap().clone(),
        t.ids("web").last().unwrap().clone(),
        t.ids("app").last().unwrap().clone(),
    );
    assert_eq!(t.ids("deb12"), vec![b3.clone()]);
    assert_eq!(t.ids("web"), vec![w[0].clone(), w[1].clone(), w3.clone()]);
    assert_eq!(t.ids("app"), vec![a[0].clone(), a3.clone()]);
    assert_eq!(t.ids("tools"), tools);
    let store = t.store_ids();
    for gone in [&b[0], &b[1], &b[2], &w[2], &a[1], &a[2]] {
        assert!(!store.contains(gone), "{gone} still in the store");
        assert!(err.contains(&format!("disposed {gone} (")), "{err}");
    }
    for kept in [&b3, &w[0], &w[1], &w3, &a[0], &a3, &tools[0]] {
        assert!(store.contains(kept), "{kept} was deleted");
    }
    for why in [
        format!(
            "kept (retention debt): {} (web on sim): pinned by image tools@sim",
            w[0]
        ),
        format!(
            "kept (retention debt): {} (web on sim): released on model prod",
            w[1]
        ),
        format!(
            "kept (retention debt): {} (app on sim): pinned by instance vm-1",
            a[0]
        ),
    ] {
        assert!(err.contains(&why), "{why}\n{err}");
    }
    // the records hold the new pins; reality agrees with them
    let pins = t.meta().pins().unwrap();
    assert_eq!(pins.images["web@sim"], b3);
    assert_eq!(pins.images["app@sim"], w3);
    let mut p = pins;
    p.instances.clear();
    t.meta().save_pins(&p).unwrap();
    let q = t.ok(&["state", "query", "--strict"]);
    assert!(!q.contains("missing") && !q.contains("foreign"), "{q}");
}

/// On an ephemeral runtime (keep 0) a dispose node must not run while a
/// child bakes from its series' new build: without the ordering the base
/// build would go while web bakes from it. The children's pins keep the
/// parents; the released app build is kept (its release runs first); the
/// leaf tools build goes.
#[test]
fn on_an_ephemeral_runtime_dispose_nodes_wait_for_the_bakes_on_their_builds() {
    let t = Tree::basic();
    t.write("cfg/runtime-builders.yml", RUNTIME_EPHEMERAL);
    t.edit("images/images.yaml", APP, APP_RELEASED);
    let (code, ev, err) = t.build_json(&[], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        at(&ev, "finished", "//images/web@sim:bake") < at(&ev, "started", "//os/deb12@sim:dispose"),
        "{ev:#?}"
    );
    for c in ["app", "tools"] {
        assert!(
            at(&ev, "finished", &format!("//images/{c}@sim:bake"))
                < at(&ev, "started", "//images/web@sim:dispose"),
            "{ev:#?}"
        );
    }
    assert!(
        at(&ev, "finished", "//images/app@sim:release")
            < at(&ev, "started", "//images/app@sim:dispose"),
        "{ev:#?}"
    );
    let (b, w, a) = (t.ids("deb12"), t.ids("web"), t.ids("app"));
    assert_eq!((b.len(), w.len(), a.len()), (1, 1, 1));
    assert!(t.ids("tools").is_empty(), "the leaf's build goes");
    assert!(
        err.contains(&format!(
            "kept (retention debt): {} (deb12 on sim): pinned by image web@sim",
            b[0]
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "kept (retention debt): {} (app on sim): released on model beta",
            a[0]
        )),
        "{err}"
    );
    let store = t.store_ids();
    assert_eq!(store, [&b[0], &w[0], &a[0]].into_iter().cloned().collect());
    let q = t.ok(&["state", "query", "--strict"]);
    assert!(!q.contains("missing") && !q.contains("foreign"), "{q}");
}
