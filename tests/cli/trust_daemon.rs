//! Day-2 promises on the real Docker daemon, through the `csis` binary
//! (skipped, loudly, without a daemon; a failure under
//! `CSIS_REQUIRE_DOCKER`), issues 25 and 26:
//!
//! - `csis build --keep-failed`: a failed bake's container is kept,
//!   labelled `csis_kept_failed=<run id>`, named in the error with the
//!   commands to inspect and remove it, listed by `csis empty` as a kept
//!   failed bake, left alone by the next build and removed by `csis empty
//!   --remove`.
//!
//! - `csis inventory`: what the daemon holds of this tree (images by
//!   series and build, recorded or not, containers, volumes), never what a
//!   second tree sharing the daemon and the repository has there.
//!
//! - Nothing is baked twice: a script changed and changed back takes the
//!   first build as the head again, its movable tag `<repo>:web` back on
//!   it, without a bake.
//!
//! Each test has its own runtime name (so its own bake container names)
//! and repository; everything is named after the test and removed.

use std::path::Path;

use csis_testkit::docker::{containers, docker, import_busybox_base, label, skip, Cleanup};
use csis_testkit::Tree;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A tree with config id `id` and one docker runtime `rt` on `repo`: OS
/// builder `base` on the image `base`, image `web` (follow) whose
/// modification runs `web_script`.
fn tree(root: &Path, id: &str, rt: &str, repo: &str, base: &str, web_script: &str) {
    write(
        root,
        "cfg/_config.yml",
        &format!("id: {id}\nexecutables:\n  - name: docker\n    binary: docker\n"),
    );
    write(
        root,
        "cfg/runtime-builders.yml",
        &format!(
            "runtime_builders:\n  - name: {rt}\n    type: docker\n    is_default: true\n    executable: docker\n    repository: \"{repo}\"\n    default_machine_type: small\n    machine_types:\n      small: {{ cpus: 1, memory: 512m }}\n"
        ),
    );
    write(
        root,
        "cfg/image-builders.yml",
        &format!("image_builders:\n  - name: native\n    type: docker\n    is_default: true\n    runtime: {rt}\n"),
    );
    write(
        root,
        "cfg/mod-builders.yml",
        "mod_builders:\n  - name: bash\n    type: bash-remote\n    is_default: true\n",
    );
    write(
        root,
        "cfg/os-builders.yml",
        &format!(
            "os_builders:\n  - name: base\n    type: debian\n    family: debian\n    family_version: \"12\"\n    is_default: true\n    runtimes:\n      - image_builder: native\n        query:\n          native:\n            image: \"{base}\"\n"
        ),
    );
    write_web(root, web_script);
}

fn write_web(root: &Path, web_script: &str) {
    write(
        root,
        "images/images.yaml",
        &format!(
            "images:\n  - name: web\n    source_image: base\n    parent_policy: follow\n    runtimes: [{{image_builder: native}}]\n    modifications:\n      - name: web-file\n        script: [{web_script:?}]\n"
        ),
    );
}

/// A repository, a busybox base and the clean-up of what the runtime `rt`
/// makes for these config ids.
fn setup(tag: &str, rt: &str, configs: &[&str]) -> (tempfile::TempDir, String, String, Cleanup) {
    let suffix = format!("{:08x}", std::process::id() ^ 0x7a05_0000);
    let repo = format!("csis-ci-test/{tag}{suffix}");
    let base = format!("csis-ci-test/base-{tag}:{suffix}");
    let cleanup = Cleanup {
        container_filters: vec![
            format!("name=csis-bake-{rt}-"),
            format!("name=csis-failed-{rt}-"),
        ],
        configs: configs.iter().map(|c| c.to_string()).collect(),
        repos: vec![repo.clone(), format!("{repo}-b")],
        base: base.clone(),
        containers: Vec::new(),
    };
    let tmp = tempfile::tempdir().unwrap();
    import_busybox_base(&base, tmp.path());
    (tmp, repo, base, cleanup)
}

fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn keep_failed_keeps_labels_lists_and_removes_a_failed_bake() {
    if skip() {
        return;
    }
    let rt = "docker-kf";
    let (tmp, repo, base, _cleanup) = setup("keepfailed", rt, &["keep-failed"]);
    let root = Tree::at(tmp.path().join("t"));
    tree(
        &root,
        "keep-failed",
        rt,
        &repo,
        &base,
        "echo half > /half.txt; exit 1",
    );
    // without --keep-failed the failed bake's container goes
    let (code, out, err) = root.run(&["build"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        containers(true, &[&format!("name=csis-failed-{rt}-")]).is_empty(),
        "{out}\n{err}"
    );
    assert!(containers(true, &[&format!("name=csis-bake-{rt}-web")]).is_empty());

    let (code, out, err) = root.run(&["build", "--keep-failed", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let kept = containers(true, &[&format!("name=csis-failed-{rt}-web-")]);
    assert_eq!(kept.len(), 1, "{kept:?}\n{out}\n{err}");
    let kept = &kept[0];
    // labelled with the run, still running (a shell opens in it), what the
    // step wrote before it failed is there to see
    let run_id = label(kept, "csis_kept_failed");
    assert!(
        !run_id.is_empty() && kept.ends_with(&run_id),
        "{kept} {run_id}"
    );
    assert_eq!(label(kept, "csis_config"), "keep-failed");
    assert_eq!(
        docker(&["exec", kept, "cat", "/half.txt"]).as_deref(),
        Some("half")
    );
    // the failed event names it with the commands to inspect and remove it
    let events = json_lines(&out);
    let failed = events
        .iter()
        .find(|e| e["event"] == "failed" && e["label"].as_str().unwrap_or("").contains("web"))
        .unwrap_or_else(|| panic!("no failed web event:\n{out}"));
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("exited 1"), "{error}");
    assert!(
        error.contains(&format!("kept as {kept} (csis_kept_failed={run_id})")),
        "{error}"
    );
    assert!(
        error.contains(&format!("docker exec -it {kept} sh")),
        "{error}"
    );
    assert!(
        error.contains(&format!("csis empty --runtime {rt} --remove")),
        "{error}"
    );

    // empty lists it as a kept failed bake, not as a machine left over
    let (code, out, _) = root.run(&["empty", "--runtime", rt, "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let leftovers = v["leftovers"].as_array().unwrap();
    assert!(
        leftovers.iter().any(|l| l["kind"] == "kept_failed_bake"
            && l["name"] == kept.as_str()
            && l["run"] == run_id.as_str()
            && l["series"] == "web"),
        "{out}"
    );
    assert!(
        !leftovers
            .iter()
            .any(|l| l["kind"] == "instance" && l["name"] == kept.as_str()),
        "{out}"
    );
    // inventory lists it among this tree's
    let out = root.ok(&["inventory", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["runtimes"][0]["kept_failed"][0]["name"],
        kept.as_str(),
        "{out}"
    );
    let (_, text, _) = root.run(&["empty", "--runtime", rt]);
    assert!(
        text.contains(&format!(
            "leftover: kept failed bake {kept} (web in run {run_id}"
        )),
        "{text}"
    );

    // the next build (its owner is gone) leaves it alone, and a fixed
    // tree builds
    write_web(&root, "echo fixed > /web.txt");
    root.ok(&["build", "--keep-failed"]);
    // a bake that succeeded under --keep-failed: its image carries no kept mark
    let web = last_build(&root, "web");
    let mark = docker(&[
        "image",
        "inspect",
        "--format",
        "{{index .Config.Labels \"csis_kept_failed\"}}",
        &web,
    ])
    .unwrap_or_default();
    assert_eq!(mark.trim(), "", "{web}: csis_kept_failed={mark}");
    assert_eq!(
        containers(true, &[&format!("name=csis-failed-{rt}-web-")]),
        vec![kept.clone()]
    );

    // empty --remove takes it; then the runtime holds only released or
    // recorded builds (leftover images are this tree's builds)
    let out = ok_or_one(&root, &["empty", "--runtime", rt, "--remove"]);
    assert!(
        out.contains(&format!("removed: kept failed bake {kept}")),
        "{out}"
    );
    assert!(containers(true, &[&format!("name=csis-failed-{rt}-")]).is_empty());
    let (_, out, _) = root.run(&["empty", "--runtime", rt, "--json"]);
    assert!(!out.contains("kept_failed_bake"), "{out}");
}

/// `csis ARGS` exiting 0 or 1 (an answer, not a failure to answer).
fn ok_or_one(root: &Tree, args: &[&str]) -> String {
    let (code, out, err) = root.run(args);
    assert!(
        code == 0 || code == 1,
        "csis {args:?} exit {code}:\n{out}\n{err}"
    );
    out
}

fn last_build(root: &Path, series: &str) -> String {
    csis_cache::MetaState::of_tree(root)
        .lineage()
        .unwrap()
        .builds
        .into_iter()
        .filter(|b| b.series == series)
        .map(|b| b.build_id)
        .next_back()
        .unwrap()
}

#[test]
fn inventory_sees_only_this_trees_things_on_a_shared_daemon() {
    if skip() {
        return;
    }
    let rt = "docker-inv";
    let (tmp, repo, base, mut cleanup) = setup("inventory", rt, &["inv-a", "inv-b"]);
    let a = Tree::at(tmp.path().join("a"));
    let b = Tree::at(tmp.path().join("b"));
    tree(&a, "inv-a", rt, &repo, &base, "echo a > /web.txt");
    tree(&b, "inv-b", rt, &repo, &base, "echo b > /web.txt");
    a.ok(&["build"]);
    b.ok(&["build"]);
    let (wa, ba, wb, bb) = (
        last_build(&a, "web"),
        last_build(&a, "base"),
        last_build(&b, "web"),
        last_build(&b, "base"),
    );
    let pid = std::process::id();
    // a container of each tree's build (it carries its build's labels), a
    // volume of each tree, an unrecorded build of a's web
    let (ca, cb) = (
        format!("csis-ci-inv-a-{pid:x}"),
        format!("csis-ci-inv-b-{pid:x}"),
    );
    let (va, vb) = (
        format!("csis-ci-inv-va-{pid:x}"),
        format!("csis-ci-inv-vb-{pid:x}"),
    );
    cleanup.containers.extend([ca.clone(), cb.clone()]);
    let _volumes = Volumes(vec![va.clone(), vb.clone()]);
    assert!(docker(&["create", "--name", &ca, &wa, "true"]).is_some());
    assert!(docker(&["create", "--name", &cb, &wb, "true"]).is_some());
    for (v, c) in [(&va, "inv-a"), (&vb, "inv-b")] {
        let l = format!("csis_config={c}");
        assert!(docker(&["volume", "create", "--label", &l, v]).is_some());
    }
    let extra = docker(&["commit", &ca, &format!("{repo}:web-extra")]).unwrap();

    let out = a.ok(&["inventory", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config"], "inv-a");
    let r = &v["runtimes"][0];
    assert_eq!(r["runtime"], rt);
    assert!(r["cannot_answer"].is_null(), "{out}");
    let builds = |series: &str| -> Vec<(String, bool, bool)> {
        r["series"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["series"] == series)
            .flat_map(|s| s["builds"].as_array().unwrap().iter())
            .map(|b| {
                (
                    b["build_id"].as_str().unwrap().to_string(),
                    b["recorded"].as_bool().unwrap(),
                    b["head"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(builds("base"), vec![(ba.clone(), true, true)], "{out}");
    let web = builds("web");
    assert!(web.contains(&(wa.clone(), true, true)), "{out}");
    assert!(web.contains(&(extra.clone(), false, false)), "{out}");
    assert_eq!(web.len(), 2, "{out}");
    let machines: Vec<&str> = r["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(machines, vec![ca.as_str()], "{out}");
    assert_eq!(r["volumes"], serde_json::json!([va]), "{out}");
    for theirs in [&wb, &bb, &cb, &vb] {
        assert!(
            !out.contains(theirs.as_str()),
            "b's {theirs} in a's inventory: {out}"
        );
    }
    // b's inventory is b's
    let out = b.ok(&["inventory"]);
    assert!(out.contains(&format!("image web {wb}")), "{out}");
    assert!(out.contains(&format!("volume {vb}")), "{out}");
    for theirs in [&wa, &ba, &ca, &va, &extra] {
        assert!(
            !out.contains(theirs.as_str()),
            "a's {theirs} in b's inventory: {out}"
        );
    }
}

#[test]
fn a_script_changed_back_moves_the_tag_back_onto_the_first_build() {
    if skip() {
        return;
    }
    let rt = "docker-reinstate";
    let (tmp, repo, base, _cleanup) = setup("reinstate", rt, &["reinstate-a"]);
    let a = Tree::at(tmp.path().join("a"));
    tree(&a, "reinstate-a", rt, &repo, &base, "echo one > /web.txt");
    a.ok(&["build"]);
    let first = last_build(&a, "web");
    let tagged = || {
        docker(&[
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            &format!("{repo}:web"),
        ])
        .unwrap()
        .trim()
        .to_string()
    };
    assert_eq!(tagged(), first);
    write_web(&a, "echo two > /web.txt");
    a.ok(&["build"]);
    let second = last_build(&a, "web");
    assert_ne!(second, first);
    assert_eq!(tagged(), second);

    write_web(&a, "echo one > /web.txt");
    let plan = a.ok(&["plan"]);
    assert!(plan.contains("nothing bakes"), "{plan}");
    let out = a.ok(&["build", "--json"]);
    let summary = json_lines(&out)
        .into_iter()
        .find(|e| e["event"] == "summary")
        .unwrap();
    assert_eq!(summary["baked"], 0, "{out}");
    assert_eq!(summary["reused"], 1, "{out}");
    assert_eq!(
        tagged(),
        first,
        "the movable tag is back on the first build"
    );
    let l = csis_cache::MetaState::of_tree(&a).lineage().unwrap();
    assert_eq!(l.head("web", rt).unwrap().build_id, first);
    // both builds still stand and the next build is current
    assert!(docker(&["image", "inspect", &second]).is_some());
    let out = a.ok(&["build", "--json"]);
    assert!(out.contains("\"baked\":0"), "{out}");
    // state query sees no drift: the head is tagged
    let (code, out, err) = a.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Docker volumes a test made, removed when dropped.
struct Volumes(Vec<String>);

impl Drop for Volumes {
    fn drop(&mut self) {
        for v in &self.0 {
            let _ = docker(&["volume", "rm", "-f", v]);
        }
    }
}
