//! After the bake, through the real `csis` binary on the local Docker daemon
//! (skipped, loudly, without one): post-bake tests in `csis build` (a
//! passing one is released, a failing one is recorded failed, not released,
//! and leaves no container), `csis test`, a leftover test container whose
//! csis is gone removed by the next build, `csis upgrade image` then `csis
//! build` baking exactly the upgraded image and its follow descendant once,
//! and `csis verify instance` writing its record.
//!
//! The base image is a busybox root filesystem imported with `docker import`
//! (no registry); builds go to a throwaway repository removed at the end.

use std::path::Path;

use csis_testkit::docker::{containers, docker, import_busybox_base, Cleanup};
use serde_json::Value;

use crate::ops_support;
use ops_support::Tree;

const RT: &str = "docker-after";

impl Tree {
    fn image_tests(&self) -> Value {
        let t = csis_cache::release_rules::ImageTests::load(&self.meta()).unwrap();
        serde_json::to_value(t).unwrap()
    }
    fn pins(&self) -> csis_cache::Pins {
        self.meta().pins().unwrap()
    }
}

/// The JSON lines of a build, by event.
fn events(out: &str) -> Vec<Value> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn finished_bakes(out: &str) -> Vec<String> {
    let mut v: Vec<String> = events(out)
        .into_iter()
        .filter(|e| e["event"] == "finished" && e["kind"] == "bake")
        .map(|e| e["label"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

fn test_containers() -> Vec<String> {
    containers(true, &[&format!("label=csis_test_machine={RT}")])
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn docker_post_bake_tests_upgrade_and_verify() {
    if csis_testkit::docker::skip() {
        return;
    }
    let suffix = format!("{:08x}", std::process::id() ^ 0xa17e_0000);
    let repo = format!("csis-after-test/r{suffix}");
    let base = format!("csis-after-test/base:{suffix}");
    let mut cleanup = Cleanup::new(&repo, &base);
    cleanup
        .container_filters
        .push(format!("label=csis_test_machine={RT}"));
    let t = Tree(csis_testkit::Tree::copy(
        &csis_testkit::fixture("ops/docker-after"),
        &[("@REPO@", &repo), ("@BASE@", &base)],
    ));
    import_busybox_base(&base, t.tmp.path());

    // The plan has a test node between the retag and the release.
    let plan: Value = serde_json::from_str(&t.ok(&["plan", "--json", "--all"])).unwrap();
    let node = |label: &str| {
        plan["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["label"] == label)
            .cloned()
            .unwrap_or_else(|| panic!("no node {label} in {plan:#}"))
    };
    let test = node(&format!("//images/web@{RT}:test"));
    assert_eq!(
        test["deps"],
        serde_json::json!([format!("//images/web@{RT}:retag")])
    );
    let release = node(&format!("//images/web@{RT}:release"));
    assert_eq!(
        release["deps"],
        serde_json::json!([format!("//images/web@{RT}:test")])
    );

    // First build: web's post-bake tests pass and it is released; bad's
    // fail: recorded as failed, not released, its bake record kept, the
    // build's exit code 1; no test container left.
    let (code, out, err) = t.run(&["build", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let w = t.ids("web");
    let b = t.ids("bad");
    assert_eq!((w.len(), b.len()), (1, 1), "{out}");
    let it = t.image_tests();
    let web_rec = &it["builds"][&w[0]];
    assert_eq!(web_rec["ok"], true, "{it:#}");
    assert_eq!(web_rec["runtime"], RT);
    assert!(web_rec["time"].as_str().unwrap().ends_with('Z'));
    assert!(web_rec["instance"]
        .as_str()
        .unwrap()
        .starts_with("csis-test-docker-after-web-"));
    let checks = web_rec["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "booted image" && c["ok"] == true),
        "{checks:#?}"
    );
    assert!(
        checks.iter().any(|c| c["command"] == "cat /web.txt"
            && c["exit_code"] == 0
            && c["evidence"] == serde_json::json!(["web"])),
        "{checks:#?}"
    );
    let bad_rec = &it["builds"][&b[0]];
    assert_eq!(bad_rec["ok"], false, "{it:#}");
    let failed = bad_rec["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["ok"] == false)
        .cloned()
        .unwrap();
    assert_eq!(failed["exit_code"], 1);
    assert_eq!(failed["evidence"], serde_json::json!(["looking for /nope"]));
    let releases = t.meta().releases().unwrap();
    assert!(releases.is_current(&w[0]), "web released: {out}");
    assert!(!releases.is_current(&b[0]), "bad not released: {out}");
    let ev = events(&out);
    assert!(
        ev.iter()
            .any(|e| e["event"] == "failed" && e["label"] == format!("//images/bad@{RT}:test")),
        "{out}"
    );
    assert!(
        ev.iter()
            .any(|e| e["event"] == "not_run" && e["label"] == format!("//images/bad@{RT}:release"))
            || !ev
                .iter()
                .any(|e| e["label"] == format!("//images/bad@{RT}:release")
                    && e["event"] == "finished"),
        "{out}"
    );
    assert!(test_containers().is_empty(), "a test container is left");

    // `csis test` outside a build: the same verdicts, recorded again.
    let (code, out, err) = t.run(&["test", "web", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["event"], "tested");
    assert_eq!(r["build_id"], w[0]);
    assert_eq!(r["ok"], true);
    let short = w[0].trim_start_matches("sha256:")[..12].to_string();
    let (code, out, _) = t.run(&["test", "web", "--build", &short, "--json"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = t.run(&["test", "bad"]);
    assert_eq!(code, 1);
    assert!(err.is_empty() || !err.contains("panicked"), "{err}");
    let (code, _, err) = t.run(&["test", "pinned"]);
    assert_eq!(code, 1);
    assert!(err.contains("declares no tests.post_bake"), "{err}");
    let (code, _, err) = t.run(&["test", "web", "--build", "deadbeefdeadbeef"]);
    assert_eq!(code, 1);
    assert!(err.contains("no recorded build"), "{err}");
    assert!(test_containers().is_empty(), "a test container is left");

    // A leftover test container whose csis is gone: removed by the next build.
    let dead_pid = (4_000_000u32..4_194_303)
        .rev()
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let leftover = format!("csis-test-{RT}-web-{dead_pid}");
    cleanup.containers.push(leftover.clone());
    assert!(docker(&[
        "run",
        "-d",
        "--name",
        &leftover,
        "--label",
        &format!("csis_test_machine={RT}"),
        "--label",
        &format!("csis_owner={}:{dead_pid}", host_name()),
        &w[0],
        "sleep",
        "600",
    ])
    .is_some());
    // One whose owner still runs (this test) is left alone.
    let alive = format!("csis-test-{RT}-alive-{suffix}");
    cleanup.containers.push(alive.clone());
    assert!(docker(&[
        "run",
        "-d",
        "--name",
        &alive,
        "--label",
        &format!("csis_test_machine={RT}"),
        "--label",
        &format!("csis_owner={}:{}", host_name(), std::process::id()),
        &w[0],
        "sleep",
        "600",
    ])
    .is_some());

    // A new web build: pinned stays on the old one, current but behind.
    let (_, out, err) = t.run(&["build", "--json", "--force-bake", "web"]);
    assert!(
        out.contains(&format!("removed test machine {leftover}"))
            || err.contains(&format!("removed test machine {leftover}")),
        "{out}\n{err}"
    );
    assert!(
        docker(&["inspect", &leftover]).is_none(),
        "leftover removed"
    );
    assert!(
        docker(&["inspect", &alive]).is_some(),
        "a live owner's is kept"
    );
    let _ = docker(&["rm", "-f", &alive]);
    let w = t.ids("web");
    assert_eq!(w.len(), 2);
    let p = t.ids("pinned");
    assert_eq!(t.pins().image_pin("pinned", RT), Some(w[0].as_str()));
    let text = t.ok(&["plan"]);
    assert!(
        text.contains(&format!(
            "//images/pinned@{RT} is current but behind: pinned to web {}, whose head is {} (run `csis upgrade image pinned --runtime {RT}`)",
            w[0], w[1]
        )),
        "{text}"
    );
    let plan: Value = serde_json::from_str(&t.ok(&["plan", "--json"])).unwrap();
    assert_eq!(plan["behind"][0]["image"], "pinned", "{plan:#}");
    assert_eq!(plan["behind"][0]["head"], w[1].as_str());

    // Bad input: one clear line, nothing changed.
    let pins_before = std::fs::read_to_string(t.root.join("meta-state/pins.yaml")).unwrap();
    for (to, says) in [
        (b[0].as_str(), "is of series bad, not web"),
        ("0123456789abcdef", "no recorded build"),
        ("abc", "too short"),
    ] {
        let (code, out, err) = t.run(&["upgrade", "image", "pinned", "--to", to]);
        assert_eq!(code, 1, "{to}: {out}{err}");
        assert!(
            err.contains(says) && err.contains("nothing changed"),
            "{to}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let (code, _, err) = t.run(&["upgrade", "image", "leaf"]);
    assert_eq!(code, 1);
    assert!(err.contains("parent_policy: follow"), "{err}");
    let (code, _, err) = t.run(&["upgrade", "image", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("not an image"), "{err}");
    let out = t.ok(&["upgrade", "image", "pinned", "--dry-run"]);
    assert!(out.contains("would upgrade image pinned"), "{out}");
    assert_eq!(
        std::fs::read_to_string(t.root.join("meta-state/pins.yaml")).unwrap(),
        pins_before,
        "nothing changed"
    );

    // The upgrade moves the pin; the plan shows pinned due for it, leaf
    // after it; one build bakes exactly those two, once.
    let short = w[1].trim_start_matches("sha256:")[..12].to_string();
    let (code, out, _) = t.run(&["upgrade", "image", "pinned", "--to", &short, "--json"]);
    assert_eq!(code, 0, "{out}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["event"], "moved");
    assert_eq!(r["from"], w[0].as_str());
    assert_eq!(r["to"], w[1].as_str());
    let pins = t.pins();
    assert_eq!(pins.image_pin("pinned", RT), Some(w[1].as_str()));
    let mv = pins.upgrades.last().unwrap();
    assert_eq!((mv.op.as_str(), mv.kind.as_str()), ("upgrade", "image"));
    let (code, _, err) = t.run(&["upgrade", "image", "pinned"]);
    assert_eq!(code, 1);
    assert!(err.contains("already pinned"), "{err}");
    let plan: Value = serde_json::from_str(&t.ok(&["plan", "--json"])).unwrap();
    let due: Vec<(String, String)> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["due"] == true && n["kind"] == "bake")
        .map(|n| {
            (
                n["label"].as_str().unwrap().to_string(),
                n["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        due,
        vec![
            (
                format!("//images/pinned@{RT}:bake"),
                "pin-moved".to_string()
            ),
            (format!("//images/leaf@{RT}:bake"), "dep-due".to_string()),
        ],
        "{plan:#}"
    );
    assert!(plan.get("behind").is_none(), "{plan:#}");
    let out = t.ok(&["build", "--json"]);
    assert_eq!(
        finished_bakes(&out),
        vec![
            format!("//images/leaf@{RT}:bake"),
            format!("//images/pinned@{RT}:bake"),
        ],
        "{out}"
    );
    let p2 = t.ids("pinned");
    assert_eq!(p2.len(), p.len() + 1);
    let rec = t.meta().lineage().unwrap().find(&p2[1]).cloned().unwrap();
    assert_eq!(rec.parent.as_deref(), Some(w[1].as_str()));
    let out = t.ok(&["build", "--json"]);
    assert!(finished_bakes(&out).is_empty(), "converged: {out}");

    // verify instance: a container of the web head, recorded.
    let cname = format!("csis-after-vm-{suffix}");
    cleanup.containers.push(cname.clone());
    assert!(docker(&["run", "-d", "--name", &cname, &w[1], "sleep", "600"]).is_some());
    let (code, out, err) = t.run(&[
        "verify", "instance", RT, &cname, "--expect", &short, "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["ok"], true);
    assert_eq!(r["recorded"], true);
    // a wrong expectation fails, and is recorded; --record-only does not fail
    let (code, _, _) = t.run(&["verify", "instance", RT, &cname, "--expect", &w[0]]);
    assert_eq!(code, 1);
    let (code, out, _) = t.run(&["runtime", "verify-instance", RT, &cname, "--expect", &w[0]]);
    assert_eq!(code, 1, "{out}");
    let (code, _, _) = t.run(&[
        "verify",
        "instance",
        RT,
        &cname,
        "--expect",
        &w[0],
        "--record-only",
    ]);
    assert_eq!(code, 0);
    let v = csis_cache::verifications::Verifications::load(&t.meta()).unwrap();
    assert_eq!(v.verifications.len(), 4);
    assert_eq!(v.verifications[0]["ok"], true);
    assert_eq!(v.verifications[0]["instance"], cname.as_str());
    assert_eq!(v.verifications[0]["expected_build"], w[1].as_str());
    assert_eq!(v.verifications[1]["ok"], false);
    let booted = v.verifications[1]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "booted image")
        .cloned()
        .unwrap();
    assert_eq!(
        booted["detail"],
        format!("booted {}, expected {}", w[1], w[0]).as_str()
    );
    assert!(v.verifications[0]["time"].as_str().unwrap().ends_with('Z'));
    // the instance upgrade: a pin to w[0], moved to the head, pending replacement
    let mut pins = t.pins();
    pins.instances.insert(cname.clone(), w[0].clone());
    t.meta().save_pins(&pins).unwrap();
    let (_, out, _) = t.run(&["state", "query"]);
    assert!(
        out.contains(&format!(
            "instance {cname}@{RT}: changed: booted {}, pinned to {}",
            w[1], w[0]
        )),
        "{out}"
    );
    let out = t.ok(&["upgrade", "instance", &cname]);
    assert!(out.contains(&format!("pin {} -> {}", w[0], w[1])), "{out}");
    let pins = t.pins();
    assert_eq!(pins.instances[&cname], w[1]);
    assert_eq!(pins.pending_replacements[&cname], w[1]);
    let (_, out, _) = t.run(&["state", "query"]);
    assert!(
        !out.contains(&format!("instance {cname}@{RT}: changed")),
        "{out}"
    );

    // csis builds: the tested marks; --check asks the daemon.
    let rows: Value = serde_json::from_str(&t.ok(&["builds", "--json"])).unwrap();
    let row = |rows: &Value, id: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["build_id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(row(&rows, &w[1])["tested"], true);
    assert_eq!(row(&rows, &b[0])["tested"], false);
    assert!(row(&rows, &p2[1]).get("tested").is_none());
    assert!(row(&rows, &w[1]).get("on_runtime").is_none());
    assert!(docker(&["rmi", "-f", &b[0]]).is_some());
    let rows: Value = serde_json::from_str(&t.ok(&["builds", "--check", "--json"])).unwrap();
    assert_eq!(row(&rows, &w[1])["on_runtime"], true);
    assert_eq!(row(&rows, &b[0])["on_runtime"], false);
    let text = t.ok(&["builds", "bad", "--check"]);
    assert!(text.contains("tested(FAILED) gone"), "{text}");
    drop(cleanup);
}
