//! Day-2 commands keep their promises about the records (issue 25, items 1,
//! 2 and 7): dispose never touches a build that is released, pinned or in
//! use, on any path; revocation says what it hits and nothing bakes or
//! releases from a revoked build; a record naming a build the runtime lacks
//! is hard drift, never a parent. Through the real `csis` binary on the
//! dummy runtime (`tests/fixtures/ops/basic`: deb12 <- web (follow) <- app
//! (follow), tools (pinned to web, post-bake tests)).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::ops_support;
use ops_support::Tree;

impl Tree {
    fn build_text(&self, extra: &[&str]) -> String {
        let mut a = vec!["build"];
        a.extend_from_slice(extra);
        self.ok(&a)
    }

    /// Remove a build from the dummy runtime behind csis's back.
    fn lose(&self, id: &str) {
        let mut s = self.store();
        assert!(s["images"].as_object_mut().unwrap().remove(id).is_some());
        std::fs::write(self.store_path(), serde_json::to_vec(&s).unwrap()).unwrap();
    }

    fn file(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root.join(rel)).unwrap_or_default()
    }

    /// What a refused request must leave alone: the runtime, the records.
    fn snapshot(&self) -> (BTreeSet<String>, Vec<Vec<u8>>) {
        (
            self.store_ids(),
            ["lineage.yaml", "pins.yaml", "releases.yaml"]
                .iter()
                .map(|f| self.file(&format!("meta-state/{f}")))
                .collect(),
        )
    }
}

const RUNTIME_KEEP_1: &str = "runtime_builders:
  - name: sim
    type: dummy
    is_default: true
    default_machine_type: small
    retention_keep: 1
";

/// Finding 1: `dispose image ID` deleted a released build and a build a
/// child is pinned to. Every path refuses them now, naming each reason, and
/// changes nothing: explicit ids, `--all`, `--retention` (debt) and the
/// dispose node of `csis build` (debt).
#[test]
fn dispose_refuses_released_and_pinned_builds_on_every_path() {
    let t = Tree::basic();
    t.build_text(&[]);
    let (w0, t0) = (t.ids("web")[0].clone(), t.ids("tools")[0].clone());
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w0);
    t.ok(&["release", "tools", "--model", "prod"]);
    t.pin_instance("vm-1", &t.ids("app")[0]);
    let before = t.snapshot();

    let (code, _, err) = t.run(&["dispose", "image", &t0]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "refused: build {t0} (tools) is released on model prod"
        )),
        "{err}"
    );
    assert!(err.contains("nothing was deleted"), "{err}");
    let (code, _, err) = t.run(&["dispose", "image", &w0]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "refused: build {w0} (web) is pinned by image tools@sim"
        )) && err.contains("csis upgrade image tools"),
        "{err}"
    );
    // --all names every reason at once (released, image pin, instance pin)
    let (code, _, err) = t.run(&["dispose", "image", "--all", "--runtime", "sim"]);
    assert_eq!(code, 1, "{err}");
    for why in [
        format!("{t0} (tools) is released on model prod"),
        format!("{w0} (web) is pinned by image tools@sim"),
        "(app) is pinned by instance vm-1: decommission first".to_string(),
    ] {
        assert!(err.contains(&why), "{why}\n{err}");
    }
    // the dry runs refuse the same way
    let (code, _, err) = t.run(&["dispose", "image", &w0, "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(t.snapshot(), before, "a refusal changed something");

    // retention (and the dispose node of csis build): kept as debt
    t.build_text(&["--force-bake", "deb12"]);
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);
    let out = t.ok(&["dispose", "image", "--retention", "--dry-run"]);
    assert!(
        out.contains(&format!(
            "kept (retention debt): {w0} (web on sim): pinned by image tools@sim"
        )),
        "{out}"
    );
    assert!(!out.contains(&format!("would dispose {w0}")), "{out}");
    let out = t.build_text(&["--force-bake", "deb12"]);
    assert!(
        t.store_ids().contains(&w0),
        "the dispose node deleted {w0}:\n{out}"
    );
    assert!(t.recorded().contains(&w0));
    assert!(t.store_ids().contains(&t0));
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w0);
    assert_eq!(t.meta().releases().unwrap().current["prod"]["tools"], t0);
    let q = t.ok(&["state", "query"]);
    assert!(!q.contains("[HARD]"), "{q}");
}

/// An image pin held by an image the tree no longer declares protects
/// nothing: its parent build is disposed and the pin goes with it.
#[test]
fn a_pin_no_declared_image_needs_goes_with_its_build() {
    let t = Tree::basic();
    t.build_text(&[]);
    let w0 = t.ids("web")[0].clone();
    t.build_text(&["--force-bake", "deb12"]);
    // tools stays pinned to w0 while web and app moved on; then tools goes
    let images = std::fs::read_to_string(t.root.join("images/images.yaml")).unwrap();
    let cut = images.find("  - name: tools").unwrap();
    t.write("images/images.yaml", &images[..cut]);
    let dry = t.ok(&["dispose", "image", &w0, "--dry-run"]);
    assert!(dry.contains("would remove image pin tools@sim"), "{dry}");
    let out = t.ok(&["dispose", "image", &w0]);
    assert!(out.contains("removed image pin tools@sim"), "{out}");
    assert!(!t.store_ids().contains(&w0));
    assert!(!t.meta().pins().unwrap().images.contains_key("tools@sim"));
}

/// A release or a pin naming a build that is gone (from lineage, or from
/// the runtime) is hard drift: the state query exits 1 and says which.
#[test]
fn a_release_or_pin_on_a_gone_build_is_hard_drift() {
    let t = Tree::basic();
    t.build_text(&[]);
    let t0 = t.ids("tools")[0].clone();
    t.ok(&["release", "tools", "--model", "prod"]);
    t.ok(&["state", "query"]);
    // gone from the runtime, still recorded
    t.lose(&t0);
    let (code, out, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("image {t0}@sim: missing"))
                && l.contains("the prod release of tools")
                && l.ends_with("[HARD]")),
        "{out}"
    );
    // gone from lineage too (a record deleted by hand)
    let mut l = t.meta().lineage().unwrap();
    l.builds.retain(|b| b.build_id != t0);
    t.meta().save_lineage(&l).unwrap();
    let (code, out, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("release prod tools: missing")
                && l.contains(&t0)
                && l.ends_with("[HARD]")),
        "{out}"
    );
}

const APP: &str = "  - name: app\n    source_image: web\n    parent_policy: follow\n";
const APP_RELEASED: &str =
    "  - name: app\n    source_image: web\n    parent_policy: follow\n    release: {model: beta}\n";

/// Finding 2: revoking a released, pinned build said nothing, left the
/// release in place and a child re-baked on the revoked pin. Revoke (and
/// its dry run) names the releases and pins it hits; the state query calls
/// them hard drift; the plan holds the pinned child and names the upgrade;
/// the build bakes a new parent without touching it; `release` explains a
/// revoked head and uses the image's declared model.
#[test]
fn revocation_says_what_it_hits_and_nothing_stands_on_a_revoked_build() {
    let t = Tree::basic();
    t.build_text(&[]);
    // `release IMAGE` uses the model the image declares (not `default`)
    t.edit("images/images.yaml", APP, APP_RELEASED);
    let a0 = t.ids("app")[0].clone();
    let out = t.ok(&["release", "app"]);
    assert!(
        out.contains(&format!("released {a0} as beta of app on sim")),
        "{out}"
    );
    let (w0, t0) = (t.ids("web")[0].clone(), t.ids("tools")[0].clone());
    t.ok(&["release", "tools", "--model", "prod"]);

    let dry = t.ok(&["revoke", &w0, "--dry-run"]);
    assert!(
        dry.contains(&format!(
            "warning: image tools@sim would stay pinned to revoked build {w0}: `csis upgrade image tools --runtime sim` moves it"
        )),
        "{dry}"
    );
    let dry = t.ok(&["revoke", &t0, "--dry-run", "--json"]);
    let v: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(v["releases"][0]["model"], "prod");
    assert_eq!(v["releases"][0]["build_id"], t0.as_str());
    assert!(t.meta().lineage().is_ok());
    assert!(
        !t.root.join("meta-state/revocations.yaml").exists(),
        "a dry run wrote"
    );
    let out = t.ok(&["revoke", &t0, "--reason", "CVE-1"]);
    assert!(
        out.contains(&format!(
            "warning: {t0} is the prod release of tools and revoked: release another build (`csis release tools --model prod`)"
        )),
        "{out}"
    );
    let out = t.ok(&["revoke", &w0, "--reason", "CVE-2"]);
    assert!(
        out.contains("image tools@sim stays pinned to revoked build"),
        "{out}"
    );

    let (code, q, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1, "{q}");
    for line in ["pin tools@sim: revoked", "release prod tools: revoked"] {
        assert!(
            q.lines()
                .any(|l| l.starts_with(line) && l.ends_with("[HARD]")),
            "{line}\n{q}"
        );
    }
    // the plan holds tools on its revoked pin and names the upgrade
    let plan = t.ok(&["plan"]);
    assert!(
        plan.lines().any(|l| l.contains("//images/tools@sim:bake")
            && l.contains(&format!("held: pinned to revoked build {w0}"))
            && l.contains("`csis upgrade image tools --runtime sim`")),
        "{plan}"
    );
    // the build bakes a new web (its head is revoked), never tools on w0
    t.build_text(&[]);
    let w = t.ids("web");
    assert_eq!(w.len(), 2);
    assert_eq!(
        t.ids("tools"),
        vec![t0.clone()],
        "tools baked on a revoked pin"
    );
    assert_eq!(t.meta().pins().unwrap().images["tools@sim"], w0);
    // release explains a revoked head
    let (code, _, err) = t.run(&["release", "tools", "--model", "prod"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("the head of tools on sim, {t0}, is revoked")),
        "{err}"
    );
    // the upgrade the plan named moves the pin; then tools bakes from w1
    t.ok(&["upgrade", "image", "tools"]);
    t.build_text(&[]);
    let tools = t.builds("tools");
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1].parent.as_deref(), Some(w[1].as_str()));
}

/// Finding 7: a record naming a build the runtime lacks became the head
/// and a child baked from it, while the state query called it soft drift.
#[test]
fn a_head_the_runtime_lacks_is_hard_drift_and_never_a_parent() {
    let t = Tree::basic();
    t.build_text(&[]);
    let (w0, a0) = (t.ids("web")[0].clone(), t.ids("app")[0].clone());
    t.lose(&w0);
    let (code, q, _) = t.run(&["state", "query"]);
    assert_eq!(code, 1, "{q}");
    assert!(
        q.lines()
            .any(|l| l.starts_with(&format!("image {w0}@sim: missing"))
                && l.contains("the head of web on sim")
                && l.ends_with("[HARD]")),
        "{q}"
    );
    // without the gate's report, the bake itself refuses the gone parent
    std::fs::remove_file(t.root.join("generated/state-report.json")).unwrap();
    let (code, out, err) = t.run(&["build", "--force-bake", "app", "--no-state-query"]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains(&format!(
            "parent build {w0} of web is recorded but gone from sim"
        )),
        "{out}\n{err}"
    );
    assert_eq!(t.ids("app"), vec![a0]);
}

/// Reversed records mean the same: the head is the newest run, so nothing
/// already built is due; a build recorded twice is read once and said so.
#[test]
fn reordered_or_duplicated_records_rebake_nothing() {
    let t = Tree::basic();
    t.build_text(&[]);
    t.build_text(&["--force-bake", "deb12"]);
    let mut l = t.meta().lineage().unwrap();
    l.builds.reverse();
    let dup = l.builds[0].clone();
    l.builds.push(dup.clone());
    t.meta().save_lineage(&l).unwrap();
    let (code, plan, err) = t.run(&["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(plan.contains("0 of 4 bake(s) due"), "{plan}");
    assert!(
        err.contains(&format!(
            "records build {} ({}) more than once",
            dup.build_id, dup.series
        )),
        "{err}"
    );
}

/// A string where a record holds a boolean is refused at its line: `ok:
/// 'yes'` never passes a post-bake test, so never releases.
#[test]
fn a_string_for_a_boolean_in_the_records_is_refused_at_its_line() {
    let t = Tree::basic();
    t.build_text(&[]);
    let t0 = t.ids("tools")[0].clone();
    t.write(
        "meta-state/image-tests.yaml",
        &format!("builds:\n  {t0}:\n    ok: 'yes'\n    run: r1\n"),
    );
    let (code, _, err) = t.run(&["release", "tools"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("image-tests.yaml:3"), "{err}");
    assert!(t.meta().releases().unwrap().current.is_empty());
}

/// Issue 26: a `retention:` added to a converged tree disposes on the next
/// build, without a bake; the plan says why; then the tree is converged.
#[test]
fn retention_added_to_a_converged_tree_disposes_without_a_bake() {
    let t = Tree::basic();
    t.build_text(&[]);
    t.build_text(&["--force-bake", "deb12"]);
    let (b, a) = (t.ids("deb12"), t.ids("app"));
    let tools = t.ids("tools");
    t.write("cfg/runtime-builders.yml", RUNTIME_KEEP_1);
    let plan = t.ok(&["plan"]);
    assert!(plan.contains("0 of 4 bake(s) due"), "{plan}");
    assert!(
        plan.lines().any(|l| l.contains("//os/deb12@sim:dispose")
            && l.contains(&format!(
                "retention (keep 1): 1 build(s) of deb12 on sim to dispose ({})",
                b[0]
            ))),
        "{plan}"
    );
    t.build_text(&[]);
    assert_eq!(t.ids("deb12"), vec![b[1].clone()]);
    assert_eq!(t.ids("app"), vec![a[1].clone()]);
    assert_eq!(t.ids("tools"), tools, "nothing baked");
    assert!(!t.store_ids().contains(&b[0]));
    let plan = t.ok(&["plan"]);
    assert!(!plan.contains("retention (keep"), "{plan}");
}

/// Item 8: a checkout where the report cannot be written (here `generated`
/// is a file) still gets the state query's answer, and is told so.
#[test]
fn the_state_query_answers_where_it_cannot_write_its_report() {
    let t = Tree::basic();
    t.build_text(&[]);
    let _ = std::fs::remove_dir_all(t.root.join("generated"));
    t.write("generated", "not a directory\n");
    let (code, out, err) = t.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("no drift: records and reality agree"), "{out}");
    assert!(
        err.contains("note: the report was not written (")
            && err.contains("the answer above stands"),
        "{err}"
    );
    // and hard drift still exits 1
    t.lose(&t.ids("tools")[0]);
    assert_eq!(t.run(&["state", "query"]).0, 1);
}
