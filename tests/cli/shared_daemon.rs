//! One Docker daemon shared by several trees (two checkouts, two CI jobs),
//! through the real `csis` binary (skipped, loudly, without a daemon; a
//! failure under `CSIS_REQUIRE_DOCKER`):
//!
//! - two builds of the same series at once, from two trees with the same
//!   runtime name: each bakes in its own container
//!   (`csis-bake-<runtime>-<series>-<run id>`, owner and config id as
//!   labels), neither removes the other's live container, both succeed and
//!   each records its own builds;
//! - an image committed but never tagged (a kill between `docker commit`
//!   and the tag) is reported foreign by `state query`, listed by `empty`,
//!   adopted by `state import` and removed by `dispose`; a tree of another
//!   config id on the same repository does not see it (nor the builds).
//!
//! The base image is a busybox root filesystem imported with `docker
//! import` (no registry); everything is named after this test and removed.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use csis_cache::MetaState;
use csis_testkit::docker::{containers, docker, import_busybox_base, label, skip, Cleanup};
use csis_testkit::Tree;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A tree with config id `id`: OS builder `base` on `@BASE@`, image `web`
/// whose modification runs `web_script`.
fn tree(root: &Path, id: &str, repo: &str, base: &str, web_script: &str) {
    write(
        root,
        "cfg/_config.yml",
        &format!("id: {id}\nexecutables:\n  - name: docker\n    binary: docker\n"),
    );
    write(
        root,
        "cfg/runtime-builders.yml",
        &format!(
            "runtime_builders:\n  - name: docker-shared\n    type: docker\n    is_default: true\n    executable: docker\n    repository: \"{repo}\"\n    default_machine_type: small\n    machine_types:\n      small: {{ cpus: 1, memory: 512m }}\n"
        ),
    );
    write(
        root,
        "cfg/image-builders.yml",
        "image_builders:\n  - name: native\n    type: docker\n    is_default: true\n    runtime: docker-shared\n",
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
    write(
        root,
        "images/images.yaml",
        &format!(
            "images:\n  - name: web\n    source_image: base\n    parent_policy: follow\n    runtimes: [{{image_builder: native}}]\n    modifications:\n      - name: web-file\n        script: [{web_script:?}]\n"
        ),
    );
}

fn ids(root: &Path, series: &str) -> Vec<String> {
    MetaState::of_tree(root)
        .lineage()
        .unwrap()
        .builds
        .into_iter()
        .filter(|b| b.series == series)
        .map(|b| b.build_id)
        .collect()
}

fn setup(tag: &str, configs: &[&str]) -> (tempfile::TempDir, String, String, Cleanup) {
    let suffix = format!("{:08x}", std::process::id() ^ 0x5ade_0000);
    let repo = format!("csis-ci-test/{tag}{suffix}");
    let base = format!("csis-ci-test/base-{tag}:{suffix}");
    // only bake containers of these config ids are this test's
    let cleanup = Cleanup {
        container_filters: vec!["name=csis-bake-docker-shared-".into()],
        configs: configs.iter().map(|c| c.to_string()).collect(),
        repos: vec![repo.clone(), format!("{repo}-a"), format!("{repo}-b")],
        base: base.clone(),
        containers: Vec::new(),
    };
    let tmp = tempfile::tempdir().unwrap();
    import_busybox_base(&base, tmp.path());
    (tmp, repo, base, cleanup)
}

/// The live bake containers of `web` on the runtime, of these config ids.
fn web_bake_containers(configs: &[&str]) -> Vec<String> {
    containers(false, &["name=csis-bake-docker-shared-web-"])
        .into_iter()
        .filter(|c| configs.contains(&label(c, "csis_config").as_str()))
        .collect()
}

#[test]
fn two_builds_of_one_series_on_one_daemon_at_once() {
    if skip() {
        return;
    }
    let configs = ["shared-a", "shared-b"];
    let (tmp, repo, base, cleanup) = setup("shared", &configs);
    // web's bake waits until the test has seen both bake containers live
    let gate = "while [ ! -e /tmp/csis-go ]; do sleep 0.2; done; echo web > /web.txt";
    let a = Tree::at(tmp.path().join("a"));
    let b = Tree::at(tmp.path().join("b"));
    // the same runtime name (so the same bake container prefix), each its
    // own repository (one repository shared by two trees would share the
    // final names' tags too: not what this test is about)
    tree(&a, "shared-a", &format!("{repo}-a"), &base, gate);
    tree(&b, "shared-b", &format!("{repo}-b"), &base, gate);
    let mut pa = a
        .csis()
        .args(["build", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pb = b
        .csis()
        .args(["build", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // a generous bound for two base bakes on a shared machine; the events
    // we wait on are the two containers, not a time
    let t0 = Instant::now();
    let live = loop {
        let live = web_bake_containers(&configs);
        if live.len() >= 2 {
            break live;
        }
        let exited = pa.try_wait().unwrap().is_some() || pb.try_wait().unwrap().is_some();
        if exited || t0.elapsed() > Duration::from_secs(900) {
            let _ = pa.kill();
            let _ = pb.kill();
            let oa = pa.wait_with_output().unwrap();
            let ob = pb.wait_with_output().unwrap();
            panic!(
                "never saw two live web bake containers ({live:?})\na: {}\n{}\nb: {}\n{}",
                String::from_utf8_lossy(&oa.stdout),
                String::from_utf8_lossy(&oa.stderr),
                String::from_utf8_lossy(&ob.stdout),
                String::from_utf8_lossy(&ob.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // each container is its own run's, marked with its owner and config id
    let seen: BTreeSet<String> = live.iter().map(|c| label(c, "csis_config")).collect();
    assert_eq!(
        seen,
        BTreeSet::from(["shared-a".to_string(), "shared-b".to_string()]),
        "{live:?}"
    );
    let owners: BTreeSet<String> = live.iter().map(|c| label(c, "csis_bake_owner")).collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    for o in &owners {
        let pid: u32 = o.rsplit_once(':').unwrap().1.parse().unwrap();
        assert!(pid == pa.id() || pid == pb.id(), "{o}");
    }
    for c in &live {
        assert!(
            docker(&["exec", c, "touch", "/tmp/csis-go"]).is_some(),
            "{c}"
        );
    }
    let oa = pa.wait_with_output().unwrap();
    let ob = pb.wait_with_output().unwrap();
    for (name, o) in [("a", &oa), ("b", &ob)] {
        assert!(
            o.status.success(),
            "build {name} failed:\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (wa, wb) = (ids(&a, "web"), ids(&b, "web"));
    assert_eq!((wa.len(), wb.len()), (1, 1));
    assert_ne!(wa, wb, "each tree records its own web build");
    assert_ne!(ids(&a, "base"), ids(&b, "base"));
    // each tree's records agree with the daemon
    for t in [&a, &b] {
        let (code, out, err) = t.run(&["state", "query", "--strict"]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!out.contains("foreign"), "{out}");
    }
    // nothing of either bake is left behind
    assert!(web_bake_containers(&configs).is_empty());
    drop(cleanup);
}

#[test]
fn an_untagged_build_left_by_a_kill_is_foreign_adoptable_and_disposable() {
    if skip() {
        return;
    }
    let (tmp, repo, base, cleanup) = setup("untagged", &["untagged"]);
    let root = Tree::at(tmp.path().join("tree"));
    tree(&root, "untagged", &repo, &base, "echo web > /web.txt");
    root.ok(&["build", "--json"]);
    let web = ids(&root, "web").pop().unwrap();
    assert_eq!(
        root.run(&["state", "query", "--strict"]).0,
        0,
        "no drift after the build"
    );
    // what a kill between `docker commit` and its tag leaves: an image with
    // the bake's labels (inherited from the container) and no tag
    let c = format!("csis-ci-test-untagged-{:08x}", std::process::id());
    assert!(docker(&["create", "--name", &c, &web, "true"]).is_some());
    let untagged = docker(&["commit", &c]).expect("docker commit");
    let _ = docker(&["rm", "-f", &c]);
    assert_eq!(
        docker(&[
            "image",
            "inspect",
            "--format",
            "{{len .RepoTags}}",
            &untagged
        ])
        .as_deref(),
        Some("0")
    );
    // state query: foreign (it has lineage labels), and --strict fails
    let (code, out, _) = root.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}");
    let foreign: Vec<&str> = out.lines().filter(|l| l.contains(": foreign")).collect();
    assert_eq!(foreign.len(), 1, "{out}");
    assert!(foreign[0].contains(&untagged), "{out}");
    assert_eq!(root.run(&["state", "query", "--strict"]).0, 1);
    // empty lists it among the leftovers
    let (code, out, _) = root.run(&["empty", "--runtime", "docker-shared", "--json"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&untagged), "{out}");
    // a tree with another config id does not see it at all
    let other = Tree::at(tmp.path().join("other"));
    tree(&other, "someone-else", &repo, &base, "echo web > /web.txt");
    let (code, out, _) = other.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(&untagged), "{out}");
    // state import adopts it; dispose removes it from the daemon
    let out = root.ok(&["state", "import"]);
    assert!(
        out.contains(&format!("adopted {untagged} (web on docker-shared")),
        "{out}"
    );
    // and named as its bake would have named it (a child standing on an
    // untagged build would hide it)
    assert_ne!(
        docker(&[
            "image",
            "inspect",
            "--format",
            "{{len .RepoTags}}",
            &untagged
        ])
        .as_deref(),
        Some("0"),
        "{out}"
    );
    assert_eq!(root.run(&["state", "query", "--strict"]).0, 0);
    let out = root.ok(&["dispose", "image", &untagged]);
    assert!(out.contains(&format!("disposed {untagged}")), "{out}");
    assert!(
        docker(&["image", "inspect", &untagged]).is_none(),
        "still there"
    );
    assert!(!ids(&root, "web").contains(&untagged));
    assert_eq!(root.run(&["state", "query", "--strict"]).0, 0);
    drop(cleanup);
}

/// A kill during `docker commit` of a bake leaves the committed image with
/// the bake's labels and no tag. The next build adopts it (same tree,
/// series, parent and fingerprint) and tags it as the bake would have:
/// its name and the series' movable tag; a child bakes on it and the
/// state query agrees with the records. A second such image, committed from
/// other inputs, cannot be adopted: the build removes it and says so.
#[test]
fn a_build_committed_and_never_tagged_is_adopted_tagged_and_converges() {
    if skip() {
        return;
    }
    let (tmp, repo, base, cleanup) = setup("killcommit", &["killcommit"]);
    let root = Tree::at(tmp.path().join("tree"));
    tree(&root, "killcommit", &repo, &base, "echo web1 > /web.txt");
    let images = root.join("images/images.yaml");
    let mut text = std::fs::read_to_string(&images).unwrap();
    text.push_str(
        "  - name: app\n    source_image: web\n    parent_policy: follow\n    runtimes: [{image_builder: native}]\n    modifications:\n      - name: app-file\n        script: [\"echo app > /app.txt\"]\n",
    );
    std::fs::write(&images, &text).unwrap();
    root.ok(&["build", "--json"]);
    let w1 = ids(&root, "web").pop().unwrap();
    // web's inputs change; its bake's fingerprint, as the plan says it
    std::fs::write(&images, text.replace("echo web1", "echo web2")).unwrap();
    let plan: serde_json::Value =
        serde_json::from_str(&root.ok(&["plan", "--json"])).expect("plan --json");
    let fp = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["label"] == "//images/web@docker-shared:bake" && n["due"] == true)
        .map(|n| n["fingerprint"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("web is due: {plan}"));
    // what the killed bake left: web's labels (inherited), this bake's
    // fingerprint, run and name, no tag
    let commit = |fingerprint: &str, name: &str| {
        let c = format!("csis-ci-test-killcommit-{name}-{:08x}", std::process::id());
        assert!(docker(&["create", "--name", &c, &w1, "true"]).is_some());
        let id = docker(&[
            "commit",
            "--change",
            &format!("LABEL csis_fingerprint={fingerprint}"),
            "--change",
            // the killed run came after the build it stands beside
            &format!("LABEL csis_run={}", csis_cache::run_id_now()),
            "--change",
            &format!("LABEL csis.name={name}"),
            &c,
        ])
        .expect("docker commit");
        let _ = docker(&["rm", "-f", &c]);
        id
    };
    let killed = commit(&fp[..16], "web-killed");
    let other = commit("0123456789abcdef", "web-other");
    // an unadoptable commit the records name (a release carried from
    // another checkout): kept, and said why
    let named = commit("fedcba9876543210", "web-named");
    let meta = MetaState::of_tree(&root);
    let mut releases = meta.releases().unwrap();
    releases
        .current
        .entry("prod".into())
        .or_default()
        .insert("web".into(), named.clone());
    meta.save_releases(&releases).unwrap();
    assert_eq!(
        docker(&["image", "inspect", "--format", "{{len .RepoTags}}", &killed]).as_deref(),
        Some("0")
    );
    let (code, out, err) = root.run(&["build"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        docker(&["image", "inspect", &named]).is_some(),
        "an unadoptable commit a release names is kept"
    );
    let kept = csis_testkit::files_under(&root.join(".csis"))
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .any(|t| t.contains(&format!("kept {named}")) && t.contains("released"));
    assert!(kept, "the bake log says why {named} is kept\n{out}\n{err}");
    // (a release of a build lineage lacks is hard drift: put right by hand here)
    meta.save_releases(&csis_cache::Releases::default())
        .unwrap();
    let _ = docker(&["rmi", "-f", &named]);
    // adopted, not baked again: web's newest record is the killed bake's image
    let web = ids(&root, "web");
    assert_eq!(web.last(), Some(&killed), "{web:?}\n{out}\n{err}");
    // tagged as the bake would have tagged it: its name and the movable tag
    let tags = docker(&[
        "image",
        "inspect",
        "--format",
        "{{json .RepoTags}}",
        &killed,
    ])
    .unwrap();
    assert!(tags.contains(&format!("{repo}:web-killed")), "{tags}");
    assert_eq!(
        docker(&[
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            &format!("{repo}:web")
        ])
        .as_deref(),
        Some(killed.as_str()),
        "the movable tag names the adopted build"
    );
    // app stands on it, and records and daemon agree
    let lineage = MetaState::of_tree(&root).lineage().unwrap();
    let app = lineage
        .builds
        .iter()
        .rev()
        .find(|b| b.series == "app")
        .unwrap();
    assert_eq!(app.parent.as_deref(), Some(killed.as_str()));
    let (code, out, err) = root.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // the image from other inputs is not adoptable: removed, and said so
    assert!(
        docker(&["image", "inspect", &other]).is_none(),
        "the unadoptable commit is removed"
    );
    let logs = root.join(".csis");
    let said = csis_testkit::files_under(&logs)
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .any(|t| t.contains(&format!("removed {other}")) && t.contains("not adoptable"));
    assert!(said, "the bake log says it removed {other}\n{out}\n{err}");
    // a second build has nothing to do
    let (code, out, err) = root.run(&["build"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(ids(&root, "web").len(), web.len());
    drop(cleanup);
}

/// Two trees with one repository on one daemon: the first tree's builds
/// keep the series' movable tags (`<repo>:<series>`), the second's bake
/// says it did not move them, and `empty` of either tree sees only its
/// own config id's images and machines (a container of no tree is not a
/// leftover of either).
#[test]
fn two_trees_on_one_repository_keep_their_own_movable_tags() {
    if skip() {
        return;
    }
    let (tmp, repo, base, cleanup) = setup("onerepo", &["onerepo-a", "onerepo-b"]);
    let a = Tree::at(tmp.path().join("a"));
    let b = Tree::at(tmp.path().join("b"));
    tree(&a, "onerepo-a", &repo, &base, "echo a > /web.txt");
    tree(&b, "onerepo-b", &repo, &base, "echo b > /web.txt");
    a.ok(&["build", "--json"]);
    let tag_id = |series: &str| {
        docker(&[
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            &format!("{repo}:{series}"),
        ])
    };
    let (wa, ba) = (
        ids(&a, "web").pop().unwrap(),
        ids(&a, "base").pop().unwrap(),
    );
    assert_eq!(tag_id("web").as_deref(), Some(wa.as_str()));
    let (code, out, err) = b.run(&["build"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let wb = ids(&b, "web").pop().unwrap();
    assert_ne!(wa, wb);
    // a's builds keep the movable tags; b's bake says so
    assert_eq!(tag_id("web").as_deref(), Some(wa.as_str()), "{out}\n{err}");
    assert_eq!(tag_id("base").as_deref(), Some(ba.as_str()));
    let logs: Vec<String> = csis_testkit::files_under(&b.join(".csis"))
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    assert!(
        logs.iter().any(|t| t.contains(&format!(
            "movable tag {repo}:web not moved: it names {wa}, a build of another tree (csis_config onerepo-a)"
        ))),
        "{logs:?}"
    );
    // each tree's records still agree with the daemon
    for t in [&a, &b] {
        let (code, out, err) = t.run(&["state", "query", "--strict"]);
        assert_eq!(code, 0, "{out}\n{err}");
    }
    // b's state query reports the movable tags a's builds hold: soft
    // drift of its own class, naming a's config id and the fix (issue 25
    // item 6); a's query does not (its own builds hold them)
    let (code, out, err) = b.run(&["state", "query", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let held: Vec<&serde_json::Value> = v["drift"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["drift"] == "held")
        .collect();
    let names: BTreeSet<String> = held
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            format!("{repo}:base@docker-shared"),
            format!("{repo}:web@docker-shared")
        ]),
        "{out}"
    );
    for d in &held {
        assert_eq!(d["kind"], "tag");
        assert_eq!(d["hard"], false);
        let detail = d["detail"].as_str().unwrap();
        assert!(detail.contains("csis_config onerepo-a"), "{detail}");
        assert!(
            detail.contains("`repository:` of runtime docker-shared"),
            "{detail}"
        );
    }
    assert!(held
        .iter()
        .any(|d| d["detail"].as_str().unwrap().contains(&wa)));
    let (_, text, _) = b.run(&["state", "query"]);
    assert!(
        text.contains(&format!(
            "tag {repo}:web@docker-shared: held: {repo}:web names {wa}"
        )),
        "{text}"
    );
    let (_, out, _) = a.run(&["state", "query", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["held"], 0, "{out}");
    assert!(
        !v["drift"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["drift"] == "held"),
        "{out}"
    );
    // a container of no tree on the daemon is nobody's leftover
    let c = format!("csis-ci-test-onerepo-{:08x}", std::process::id());
    assert!(docker(&["create", "--name", &c, &base, "true"]).is_some());
    let (_, out, _) = a.run(&["empty", "--runtime", "docker-shared", "--json"]);
    let _ = docker(&["rm", "-f", &c]);
    assert!(!out.contains(&c), "{out}");
    assert!(!out.contains(&wb), "b's build is not a's leftover: {out}");
    assert!(out.contains(&wa), "a's unreleased build is: {out}");
    drop(cleanup);
}
