//! The fleet on the local Docker daemon, through the real `csis` binary
//! (skipped, loudly, without one), on `tests/fixtures/fleet-docker-graph`:
//! a volume, a pinned instance mounting it, a follow instance and an
//! ephemeral one.
//!
//! - the first build creates the volume, launches the pinned and the
//!   follow instances and proves the ephemeral one (recorded in
//!   `verifications.yaml`, its container gone);
//! - an image change replaces only the follow instance (the new machine
//!   verified before the old one is removed) and the pinned one is behind;
//! - `csis upgrade instance` + build replaces the pinned one and a file
//!   written into its volume survives;
//! - removing an instance from the tree decommissions it only when
//!   `apply_instances` allows (gated before: the plan says so and nothing
//!   changes);
//! - a machine a killed run launched and did not record is removed before
//!   the next launch (never an unrecorded one);
//! - a launch parameter changed without a replacement is one located
//!   refusal (`validate`, `plan`, `build`), and changes nothing;
//! - a container removed behind csis is hard drift (`state query` exit 1);
//! - `plan` text and `--json` name each action; `validate` counts the
//!   instances and storages;
//! - declared tags are the container's and the volume's labels.

use csis_testkit::docker::{containers, docker, import_busybox_base, Cleanup};
use serde_json::Value;

use crate::ops_support;
use ops_support::Tree;

const RT: &str = "docker-fleet";

/// Volumes labelled with the test's config id, removed at the end.
struct Volumes(String);
impl Drop for Volumes {
    fn drop(&mut self) {
        let filter = format!("label=csis_config={}", self.0);
        if let Some(out) = docker(&["volume", "ls", "-q", "--filter", &filter]) {
            for v in out.lines().filter(|l| !l.is_empty()) {
                let _ = docker(&["volume", "rm", "-f", v]);
            }
        }
    }
}

impl Tree {
    fn fleet_plan(&self) -> Vec<Value> {
        let plan: Value = serde_json::from_str(&self.ok(&["plan", "--json"])).unwrap();
        plan["fleet"].as_array().cloned().unwrap_or_default()
    }
    /// The action the plan names for `label` (and whether it is gated).
    fn action(&self, name: &str) -> (String, bool) {
        let f = self.fleet_plan();
        let n = f
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("no fleet node {name}: {f:#?}"));
        (
            n["action"].as_str().unwrap().to_string(),
            n.get("gated").is_some(),
        )
    }
    fn instances(&self) -> Value {
        serde_json::from_str(&self.ok(&["instances", "--json"])).unwrap()
    }
    fn instance(&self, name: &str) -> Value {
        self.instances()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    }
    fn edit_all(&self, file: &str, from: &str, to: &str) {
        let p = self.root.join(file);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
    }
    fn build_said(&self) -> String {
        let (code, out, err) = self.run(&["build"]);
        assert_eq!(code, 0, "csis build failed:\n{out}\n{err}");
        format!("{out}\n{err}")
    }
}

/// The group the images activate is a posix one, whose prerequisites are
/// `getent` and `gpasswd`: busybox has neither, so the base gets small
/// ones over busybox's files and `addgroup` (and `install`), and the group
/// activation runs under `bash` (busybox's sh stands in; committed onto the same
/// reference).
fn add_account_tools(base: &str, suffix: &str) {
    let tools = r#"set -e
printf '%s\n' '#!/bin/sh' '[ "$1" = passwd ] || [ "$1" = group ] || exit 2' 'grep "^$2:" "/etc/$1"' > /bin/getent
printf '%s\n' '#!/bin/sh' '[ "$1" = -a ] || exit 2' 'addgroup "$2" "$3"' > /bin/gpasswd
printf '%s\n' '#!/bin/sh' 'd=; m=' 'while [ $# -gt 0 ]; do case "$1" in -d) d=1;; -m) m=$2; shift;; -o|-g) shift;; *) break;; esac; shift; done' 'if [ -n "$d" ]; then mkdir -p "$@"; [ -z "$m" ] || chmod "$m" "$@"; else cp "$1" "$2"; [ -z "$m" ] || chmod "$m" "$2"; fi' > /bin/install
chmod 755 /bin/getent /bin/gpasswd /bin/install
mkdir -p /usr/local/sbin /usr/local/bin
[ -e /bin/bash ] || { printf '%s\n' '#!/bin/sh' 'exec /bin/sh "$@"' > /bin/bash; chmod 755 /bin/bash; }"#;
    let tmp = format!("csis-fleet-test-tools-{suffix}");
    docker(&["run", "--name", &tmp, base, "sh", "-c", tools]).expect("the account tools");
    docker(&["commit", &tmp, base]).expect("commit the base");
    let _ = docker(&["rm", "-f", &tmp]);
}

/// The verdict `verifications.yaml` holds for generation `generation` of
/// a durable instance.
fn durable_verdict(t: &Tree, name: &str, generation: u32) -> Option<Value> {
    let v = csis_cache::verifications::Verifications::load(&t.meta()).unwrap();
    v.verifications
        .into_iter()
        .find(|e| e["instance"] == name && e["generation"] == generation && e["ephemeral"] == false)
}

fn running(name: &str) -> bool {
    containers(false, &[&format!("name=^{name}$")]).len() == 1
}

fn exists(name: &str) -> bool {
    !containers(true, &[&format!("name=^{name}$")]).is_empty()
}

#[test]
fn docker_fleet_lifecycle() {
    if csis_testkit::docker::skip() {
        return;
    }
    let suffix = format!("{:08x}", std::process::id() ^ 0xf1ee_0000);
    let repo = format!("csis-fleet-test/r{suffix}");
    let base = format!("csis-fleet-test/base:{suffix}");
    let id = format!("fleet-graph-{suffix}");
    let mut cleanup = Cleanup::new(&repo, &base);
    cleanup
        .container_filters
        .push(format!("label=csis_config={id}"));
    let _volumes = Volumes(id.clone());
    let t = Tree(csis_testkit::Tree::copy(
        &csis_testkit::fixture("fleet-docker-graph"),
        &[
            ("@REPO@", &repo),
            ("@BASE@", &base),
            ("@ID@", &id),
            ("@APPLY@", "true"),
            ("@WEB@", "web1"),
            ("@APP@", "app1"),
        ],
    ));
    import_busybox_base(&base, t.tmp.path());
    add_account_tools(&base, &suffix);
    // The hostnames are the containers' names; another run's would clash.
    for n in [
        "keeper-001",
        "keeper-002",
        "keeper-003",
        "follower-001",
        "follower-002",
    ] {
        assert!(!exists(n), "a container {n} exists already");
        cleanup.containers.push(n.to_string());
    }

    // validate counts the fleet beside the images
    let summary = t.ok(&["validate", "--offline"]);
    assert!(
        summary.contains("2 images, 3 instances, 1 storages;"),
        "{summary}"
    );

    // The plan names each action; text and JSON.
    assert_eq!(t.action("keeper"), ("launch".into(), false));
    assert_eq!(t.action("follower"), ("launch".into(), false));
    assert_eq!(t.action("prober"), ("launch".into(), false));
    assert_eq!(t.action("data"), ("create".into(), false));
    let text = t.ok(&["plan"]);
    assert!(
        text.contains(&format!("//instances/keeper@{RT}:instance"))
            && text.contains("launch keeper"),
        "{text}"
    );
    assert!(text.contains("create data"), "{text}");

    // First build: the volume, both durable instances, the proof.
    t.build_said();
    assert!(running("keeper-001") && running("follower-001"));
    let prober: Vec<String> = containers(true, &["label=csis_instance=prober"])
        .into_iter()
        .filter(|c| csis_testkit::docker::label(c, "csis_config") == id)
        .collect();
    assert!(
        prober.is_empty(),
        "the ephemeral one is removed: {prober:?}"
    );
    // recorded standing while it stood, closed once removed
    let fleet = t.meta().fleet().unwrap();
    assert!(fleet.current_generation("prober").is_none(), "closed");
    assert_eq!(
        (fleet.instances.instances.get("prober")).map(|l| l.closed().count()),
        Some(1),
        "one generation, opened and closed"
    );
    let verdicts = csis_cache::verifications::Verifications::load(&t.meta()).unwrap();
    assert!(
        verdicts
            .verifications
            .iter()
            .any(|v| v["instance"] == "prober" && v["ok"] == true),
        "{verdicts:?}"
    );
    // declared tags are labels beside csis's: the container's, the volume's
    assert_eq!(csis_testkit::docker::label("keeper-001", "role"), "keeper");
    assert_eq!(
        csis_testkit::docker::label("keeper-001", "csis_instance"),
        "keeper"
    );
    let filter = format!("label=csis_config={id}");
    let vols = docker(&["volume", "ls", "-q", "--filter", &filter]).unwrap();
    let vol = vols.lines().next().expect("the data volume");
    let purpose = docker(&[
        "volume",
        "inspect",
        "--format",
        "{{index .Labels \"purpose\"}}/{{index .Labels \"csis_storage\"}}",
        vol,
    ]);
    assert_eq!(purpose.as_deref().map(str::trim), Some("shared/data"));
    let keeper = t.instance("keeper");
    assert_eq!(keeper["state"], "launched", "{keeper}");
    assert_eq!(keeper["hostname"], "keeper-001");
    assert_eq!(keeper["generation"], 1);
    // the build's verification of a durable machine is recorded as a proof's is
    let v = durable_verdict(&t, "keeper", 1).expect("keeper's verdict");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["expected_build"], keeper["build"], "{v}");
    assert_eq!(v["hostname"], "keeper-001", "{v}");
    assert!(v["checks"].as_array().is_some_and(|c| !c.is_empty()), "{v}");
    assert_eq!(keeper["runtime"], RT);
    let first_follower_build = t.instance("follower")["build"].clone();
    assert_eq!(t.action("keeper").0, "current");
    assert_eq!(t.action("data").0, "current");

    // The fleet's records lost (meta-state/ reset): `state import
    // --instances --storages` adopts the labelled volume and machines
    // again, and the plan is current as before.
    let before = |f: &str| std::fs::read_to_string(t.meta().dir().join(f)).unwrap();
    let (launch_before, pins_before) = (before("launch-params.yaml"), before("pins.yaml"));
    for f in [
        "launch-params.yaml",
        "instance-state.yaml",
        "storage-state.yaml",
    ] {
        std::fs::remove_file(t.meta().dir().join(f)).unwrap();
    }
    let mut pins = t.meta().pins().unwrap();
    pins.instances.clear();
    t.meta().save_pins(&pins).unwrap();
    assert_eq!(t.action("keeper").0, "launch");
    let dry = t.ok(&["state", "import", "--instances", "--storages", "--dry-run"]);
    assert!(
        dry.contains("would adopt storage data")
            && dry.contains("would adopt instance keeper (keeper-001")
            && dry.contains("would adopt instance follower (follower-001"),
        "{dry}"
    );
    assert!(
        !t.meta().dir().join("launch-params.yaml").exists(),
        "a dry run writes nothing"
    );
    let out = t.ok(&["state", "import", "--instances", "--storages", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    let names = |k: &str| -> Vec<String> {
        let mut v: Vec<String> = r["fleet"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("instances"), ["follower", "keeper"], "{out}");
    assert_eq!(names("storages"), ["data"], "{out}");
    assert_eq!(t.action("keeper").0, "current");
    assert_eq!(t.action("follower").0, "current");
    assert_eq!(t.action("data").0, "current");
    assert_eq!(t.instance("keeper")["hostname"], "keeper-001");
    assert_eq!(t.instance("keeper")["generation"], 1);
    assert_eq!(
        t.meta().pins().unwrap().instances.len(),
        2,
        "pins bound again: {pins_before}"
    );
    assert!(!launch_before.is_empty());
    // a second import has nothing to do
    let again = t.ok(&["state", "import", "--instances", "--storages"]);
    assert!(again.contains("nothing to import"), "{again}");
    // A launch parameter changed without a replacement: one located
    // refusal, nothing changes.
    let keeper_decl = "  - name: keeper\n    image: app\n";
    t.edit_all(
        "instances/instances.yaml",
        keeper_decl,
        "  - name: keeper\n    image: app\n    userdata: echo changed\n",
    );
    let (code, out, err) = t.run(&["plan"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("instances/instances.yaml")
            && err.contains("userdata")
            && err.contains("immutable"),
        "{err}"
    );
    let (code, out, err) = t.run(&["validate", "--offline", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let diags: Vec<Value> = serde_json::from_str(&out).unwrap();
    let refused: Vec<&Value> = diags.iter().filter(|d| d["severity"] == "error").collect();
    assert_eq!(refused.len(), 1, "{diags:#?}");
    assert_eq!(refused[0]["file"], "instances/instances.yaml");
    assert!(
        refused[0]["path"].as_str().unwrap().ends_with("userdata"),
        "{diags:#?}"
    );
    let (code, _, err) = t.run(&["build"]);
    assert_eq!(code, 1, "{err}");
    assert!(running("keeper-001") && !exists("keeper-002"));
    t.edit_all(
        "instances/instances.yaml",
        "  - name: keeper\n    image: app\n    userdata: echo changed\n",
        keeper_decl,
    );
    // Data in the volume.
    docker(&[
        "exec",
        "keeper-001",
        "sh",
        "-c",
        "echo precious > /mnt/data/team/kept.txt",
    ])
    .expect("write into the volume");

    // Both images change: the follow instance is replaced, the pinned one
    // is behind (not due), the ephemeral one proves the new build.
    t.edit_all("images/images.yaml", "web1", "web2");
    t.edit_all("images/images.yaml", "app1", "app2");
    assert_eq!(t.action("follower").0, "replace");
    let since = docker(&["info", "--format", "{{.SystemTime}}"]).unwrap();
    let out = t.build_said();
    assert!(running("follower-002"), "{out}");
    assert!(!exists("follower-001"), "the old one is removed");
    assert!(running("keeper-001"), "the pinned one stays");
    assert_ne!(t.instance("follower")["build"], first_follower_build);
    // verified (the runtime's checks exec in the new container) before the
    // old one was removed: the daemon's events in order
    let events = docker(&[
        "events",
        "--since",
        since.trim(),
        "--until",
        &docker(&["info", "--format", "{{.SystemTime}}"]).unwrap(),
        "--filter",
        "type=container",
        "--format",
        "{{.Action}} {{.Actor.Attributes.name}}",
    ])
    .unwrap();
    let lines: Vec<&str> = events.lines().collect();
    let verified = lines
        .iter()
        .position(|l| l.starts_with("exec_start") && l.ends_with(" follower-002"));
    let removed = lines
        .iter()
        .position(|l| l.starts_with("destroy") && l.ends_with(" follower-001"));
    assert!(
        verified.is_some() && removed.is_some() && verified < removed,
        "verify before remove:\n{events}"
    );
    assert_eq!(t.action("keeper").0, "behind");
    assert!(t.instance("keeper")["behind"].is_string());

    // upgrade instance: the replacement waits for the next build.
    t.ok(&["upgrade", "instance", "keeper"]);
    assert!(running("keeper-001"), "nothing happens before the build");
    assert_eq!(t.action("keeper").0, "replace");
    // A run killed after its launch and before its record left a machine
    // of keeper's next generation: the build removes it, then launches.
    docker(&[
        "create",
        "--name",
        "keeper-002",
        "--label",
        "csis_instance=keeper",
        "--label",
        &format!("csis_config={id}"),
        "--label",
        "csis_generation=2",
        &base,
        "sleep",
        "600",
    ])
    .expect("a leftover container");
    let left = csis_testkit::docker::label("keeper-002", "csis_build");
    t.build_said();
    assert!(running("keeper-002") && !exists("keeper-001"));
    let booted = csis_testkit::docker::label("keeper-002", "csis_build");
    assert_ne!(
        booted, left,
        "the leftover was replaced by a recorded machine"
    );
    assert_eq!(
        Some(booted.as_str()),
        t.meta()
            .pins()
            .unwrap()
            .instances
            .get("keeper")
            .map(String::as_str)
    );
    let kept = docker(&["exec", "keeper-002", "cat", "/mnt/data/team/kept.txt"]);
    assert_eq!(
        kept.as_deref().map(str::trim),
        Some("precious"),
        "the volume survives"
    );
    assert_eq!(t.instance("keeper")["generation"], 2);
    let v = durable_verdict(&t, "keeper", 2).expect("the replacement's verdict");
    assert_eq!(
        (v["ok"].clone(), v["expected_build"].clone()),
        (Value::from(true), Value::from(booted.clone()))
    );

    // Declared no more, apply_instances false: gated, nothing changes.
    t.edit_all(
        "instances/instances.yaml",
        "  - name: follower\n    image: web\n    image_policy: follow\n",
        "",
    );
    t.edit_all(
        "cfg/_config.yml",
        "apply_instances: true",
        "apply_instances: false",
    );
    assert_eq!(t.action("follower"), ("decommission".into(), true));
    let out = t.build_said();
    assert!(out.contains("gated"), "{out}");
    assert!(running("follower-002"));
    // Allowed: decommissioned, forgotten.
    t.edit_all(
        "cfg/_config.yml",
        "apply_instances: false",
        "apply_instances: true",
    );
    t.build_said();
    assert!(!exists("follower-002"));
    assert!(!t.meta().pins().unwrap().instances.contains_key("follower"));
    assert!(t.instance("follower").is_null(), "{}", t.instances());

    // A container removed behind csis is hard drift.
    docker(&["rm", "-f", "keeper-002"]).unwrap();
    let (code, out, err) = t.run(&["state", "query", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}"));
    let drift = report["report"]["drift"]
        .as_array()
        .or(report["drift"].as_array())
        .cloned()
        .unwrap_or_default();
    assert!(
        drift.iter().any(|d| d["kind"] == "instance"
            && d["name"] == "keeper"
            && d["drift"] == "missing"
            && d["hard"] == true),
        "{report:#}"
    );

    let pinned = booted;

    // The build repairs it: the plan names a relaunch (gated while
    // apply_instances is false), and a build with a bake due refuses only
    // while the relaunch is gated, naming the fix.
    t.edit_all(
        "cfg/_config.yml",
        "apply_instances: true",
        "apply_instances: false",
    );
    assert_eq!(t.action("keeper"), ("relaunch".into(), true));
    t.edit_all("images/images.yaml", "app2", "app3");
    let (code, out, err) = t.run(&["build"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("hard drift: instance keeper: missing")
            && err.contains("relaunches it where apply_instances allows"),
        "{err}"
    );
    assert!(!exists("keeper-003"));
    t.edit_all(
        "cfg/_config.yml",
        "apply_instances: false",
        "apply_instances: true",
    );
    let out = t.build_said();
    assert!(running("keeper-003"), "{out}");
    assert_eq!(
        csis_testkit::docker::label("keeper-003", "csis_build"),
        pinned,
        "relaunched from the build it ran (pinned), not the new head"
    );
    let kept = docker(&["exec", "keeper-003", "cat", "/mnt/data/team/kept.txt"]);
    assert_eq!(kept.as_deref().map(str::trim), Some("precious"));
    let keeper = t.instance("keeper");
    assert_eq!(
        (keeper["generation"].clone(), keeper["hostname"].clone()),
        (Value::from(3), Value::from("keeper-003")),
        "{keeper}"
    );
    let records = csis_cache::fleet::FleetRecords::load(&t.meta()).unwrap();
    let closed: Vec<(u32, String)> = records.instances.instances["keeper"]
        .closed()
        .map(|c| (c.generation.number, format!("{:?}", c.why)))
        .collect();
    assert!(
        closed.contains(&(2, "Missing".to_string())),
        "generation 2 closed as missing: {closed:?}"
    );
    let v = durable_verdict(&t, "keeper", 3).expect("the relaunch's verdict");
    assert_eq!(v["expected_build"], Value::from(pinned.clone()), "{v}");
    // no drift left, and nothing more to do
    let (code, out, err) = t.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(t.action("keeper").0, "behind");
    // Nothing due and a converged tree (built twice: no stamp answers for
    // it): a machine removed behind csis is still noticed and relaunched.
    t.build_said();
    t.build_said();
    docker(&["rm", "-f", "keeper-003"]).unwrap();
    let out = t.build_said();
    assert!(running("keeper-004"), "{out}");
    assert_eq!(
        csis_testkit::docker::label("keeper-004", "csis_build"),
        pinned
    );
    cleanup.containers.push("keeper-004".to_string());

    // A pin alone (never launched) the tree does not declare: the node
    // decommissions it, the pin forgotten and journalled.
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("ghost".into(), pinned.clone());
    t.meta().save_pins(&pins).unwrap();
    assert_eq!(t.action("ghost"), ("decommission".into(), false));
    t.build_said();
    let pins = t.meta().pins().unwrap();
    assert!(!pins.instances.contains_key("ghost"), "{pins:?}");
    assert!(
        pins.upgrades.iter().any(|u| u.kind == "instance"
            && u.name == "ghost"
            && u.op == "decommission"
            && u.from.as_deref() == Some(pinned.as_str())),
        "{:#?}",
        pins.upgrades
    );
    assert_eq!(t.action("keeper").0, "behind", "the others are untouched");
    assert!(t.fleet_plan().iter().all(|n| n["name"] != "ghost"));
}
