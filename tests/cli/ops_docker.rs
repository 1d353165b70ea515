//! Lineage operations through the real `csis` binary on the local Docker
//! daemon (skipped, loudly, without one): a live container refuses a
//! disposal; retention keeps a released and a pinned build and disposes the
//! rest children-first (an explicit disposal of a released build is refused;
//! a release moves `<repository>:<series>--<model>`), read back from the daemon (a disposed parent's
//! layers kept for its child, and freed with the last of them); a build
//! whose record is lost is found foreign and adopted by `state import`;
//! relabel and restamp. The rules every runtime keeps are
//! `ops_support::suite`'s, called here for `docker-ops`.
//!
//! The base image is a busybox root filesystem imported with `docker import`
//! (no registry); builds go to a throwaway repository removed at the end.

use crate::ops_support;
use csis_testkit::docker::{docker, image_exists, import_busybox_base, tagged_in, Cleanup};
use ops_support::suite::{self, RuntimeUnderTest};
use ops_support::Tree;

#[test]
fn docker_dispose_retention_refusal_foreign_import() {
    if csis_testkit::docker::skip() {
        return;
    }
    let suffix = format!("{:08x}", std::process::id() ^ 0x5eed_0000);
    let repo = format!("csis-ops-test/r{suffix}");
    let base = format!("csis-ops-test/base:{suffix}");
    let mut cleanup = Cleanup::new(&repo, &base);
    let t = Tree(csis_testkit::Tree::copy(
        &csis_testkit::fixture("ops/docker"),
        &[("@REPO@", &repo), ("@BASE@", &base)],
    ));
    import_busybox_base(&base, t.tmp.path());

    // three generations of base, web and app
    t.ok(&["build", "--json"]);
    t.ok(&["build", "--json", "--force-bake", "base"]);
    t.ok(&["build", "--json", "--force-bake", "base"]);
    let b = t.ids("base");
    let w = t.ids("web");
    let a = t.ids("app");
    assert_eq!((b.len(), w.len(), a.len()), (3, 3, 3));
    let q = t.ok(&["state", "query", "--strict"]);
    assert!(q.contains("no drift"), "{q}");

    let holds = |id: &str| tagged_in(&repo, id);
    let rt = RuntimeUnderTest {
        tree: &t,
        name: "docker-ops",
        holds: &holds,
        tag: None,
    };

    // a container standing on a build refuses its disposal, nothing deleted
    let cname = format!("csis-ops-test-{suffix}");
    cleanup.containers.push(cname.clone());
    assert!(docker(&["create", "--name", &cname, &a[0], "sleep", "1"]).is_some());
    suite::in_use_refuses_disposal(&rt, &[&a[0]], &cname);
    let _ = docker(&["rm", "-f", &cname]);

    // retention: keep 1, a released app build, an instance pinned to web[0]
    let rt_yml = t.root.join("cfg/runtime-builders.yml");
    let text = std::fs::read_to_string(&rt_yml).unwrap();
    std::fs::write(&rt_yml, format!("{text}    retention_keep: 1\n")).unwrap();
    let out = suite::retention_of_three_generations(&rt, &b, &w, &a);
    // b[0] is gone as a build, but w[0] (kept) was baked from it: the daemon
    // keeps its layers, untagged, and the report says so under its line
    let held = format!(
        "disposed {} (base on docker-ops)\n  its tags are removed, but the daemon keeps the image {} untagged (its layers) while child image(s) {} stand on it; it goes with the last of them\n",
        b[0], b[0], w[0]
    );
    assert!(out.contains(&held), "{held}\nin\n{out}");
    assert!(image_exists(&b[0]), "kept for its child");
    // w[1] went before b[1], but the released a[1] stands on w[1]: both are
    // kept as layers, and said so
    for (p, c, series) in [(&w[1], &a[1], "web"), (&b[1], &w[1], "base")] {
        let held = format!(
            "disposed {p} ({series} on docker-ops)\n  its tags are removed, but the daemon keeps the image {p} untagged (its layers) while child image(s) {c} stand on it; it goes with the last of them\n"
        );
        assert!(out.contains(&held), "{held}\nin\n{out}");
        assert!(image_exists(p), "kept for its child");
    }
    // a[0] had no child: gone, nothing said
    assert!(!image_exists(&a[0]));
    assert!(
        out.contains(&format!("disposed {} (app on docker-ops)\n", a[0]))
            && !out.contains(&format!("daemon keeps the image {}", a[0])),
        "{out}"
    );

    // a record lost: the image is foreign, then adopted from its labels/tags
    let mut l = t.meta().lineage().unwrap();
    l.builds.retain(|x| x.build_id != a[2]);
    t.meta().save_lineage(&l).unwrap();
    suite::foreign_is_adopted(&rt, &a[2], "app", &w[2]);

    // the tag side on the daemon: a record the tags disagree with is
    // `changed`; relabel moves the tags; restamp records a new fingerprint
    let mut l = t.meta().lineage().unwrap();
    let rec = l.builds.iter_mut().find(|x| x.build_id == w[2]).unwrap();
    // (a later run: the head is the newest run, and w[2] stays web's head)
    rec.run = Some("2099_01_01t00_00_00_000000".into());
    t.meta().save_lineage(&l).unwrap();
    suite::changed_until_relabelled(&rt, &w[2], "run:");
    suite::restamp_records_the_current_fingerprint(&rt, "web", &w[2]);

    // the last child of the disposed b[0] goes: b[0]'s layers go with it, and the report says so
    let mut pins = t.meta().pins().unwrap();
    pins.instances.remove("vm-1");
    t.meta().save_pins(&pins).unwrap();
    let out = t.ok(&["dispose", "image", &w[0]]);
    let freed = format!(
        "disposed {} (web on docker-ops)\n  freed the image {} too: a build disposed earlier, kept untagged until this last child went\n",
        w[0], b[0]
    );
    assert!(out.contains(&freed), "{freed}\nin\n{out}");
    assert!(!image_exists(&w[0]) && !image_exists(&b[0]), "{out}");
    // a release moves `<repository>:<series>--<model>` (the seed's tag form)
    let release_tag = format!("{repo}:app--prod");
    let tagged = |r: &str| docker(&["image", "inspect", "--format", "{{.Id}}", r]);
    assert_eq!(
        tagged(&release_tag).as_deref().map(str::trim),
        Some(a[1].as_str())
    );
    // the released a[1] is never disposed: refused, naming the model
    let (code, _, err) = t.run(&["dispose", "image", &a[1]]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is released on model prod"), "{err}");
    assert!(image_exists(&a[1]));
    // (a[2] was adopted from its tags above, so not verified: its bake's
    // in-bake tests did pass, as the record it lost said)
    let mut l = t.meta().lineage().unwrap();
    l.builds
        .iter_mut()
        .find(|x| x.build_id == a[2])
        .unwrap()
        .tests
        .in_bake = true;
    t.meta().save_lineage(&l).unwrap();
    t.ok(&["release", "app", "--build", &a[2], "--model", "prod"]);
    assert_eq!(
        tagged(&release_tag).as_deref().map(str::trim),
        Some(a[2].as_str())
    );
    // a[1], no longer released, disposed by its id: the two kept under it go with it, nearest first
    let out = t.ok(&["dispose", "image", &a[1]]);
    let freed = format!(
        "disposed {} (app on docker-ops)\n  freed the image {} too: a build disposed earlier, kept untagged until this last child went\n  freed the image {} too: a build disposed earlier, kept untagged until this last child went\n",
        a[1], w[1], b[1]
    );
    assert!(out.contains(&freed), "{freed}\nin\n{out}");
    for g in [&a[1], &w[1], &b[1]] {
        assert!(!image_exists(g), "{g}: {out}");
    }
    let (code, out, _) = t.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}");
    drop(cleanup);
}

/// `csis build --dry-run` on docker emits real parents: the image on a
/// `packer-docker` builder whose parent bakes in the same run starts from
/// the parent's movable tag (`<repository>:<series>`), never a
/// placeholder; once the parent is recorded, from that build's id.
#[test]
fn docker_dry_run_emits_a_real_parent() {
    if csis_testkit::docker::skip() {
        return;
    }
    let pid = std::process::id();
    let repo = format!("csis-recipe-dry-{pid}");
    let base = format!("csis-recipe-dry-base:{pid}");
    let _cleanup = Cleanup::new(&repo, &base);
    let t = Tree(csis_testkit::Tree::copy(
        &csis_testkit::fixture("ops/docker"),
        // its own runtime name: bake containers (and the clean-up of
        // leftovers) are per runtime, and the other test bakes beside it
        &[
            ("@BASE@", base.as_str()),
            ("@REPO@", repo.as_str()),
            ("docker-ops", "docker-dry"),
        ],
    ));
    import_busybox_base(&base, t.tmp.path());
    let root = t.root.clone();
    std::fs::write(
        root.join("cfg/zz-packer.yml"),
        "image_builders:\n  - name: pd\n    type: packer-docker\n    runtime: docker-dry\n",
    )
    .unwrap();
    std::fs::write(
        root.join("images/zz.yaml"),
        "images:\n  - name: pk\n    source_image: web\n    parent_policy: follow\n    runtimes: [{image_builder: pd}]\n    modifications:\n      - name: pk-file\n        script: [\"echo pk > /pk.txt\"]\n",
    )
    .unwrap();
    let root_file = |t: &Tree| {
        let dir = t.root.join("generated/instance-image/pk@docker-dry");
        let f = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".pkr.hcl"))
            .expect("a packer root");
        std::fs::read_to_string(f).unwrap()
    };
    t.ok(&["build", "--dry-run"]);
    let hcl = root_file(&t);
    assert!(
        hcl.contains(&format!("\"{repo}:web\"")),
        "the parent's movable tag:\n{hcl}"
    );
    assert!(
        !hcl.contains("series:web\"\n") && !hcl.contains("image  = \"series:"),
        "{hcl}"
    );
    // the parent recorded: the child's emission names its build
    t.ok(&["build", "//images/web"]);
    let web = t.ids("web");
    assert_eq!(web.len(), 1);
    t.ok(&["build", "--dry-run", "//images/pk"]);
    let hcl = root_file(&t);
    assert!(hcl.contains(&web[0]), "the parent build {}:\n{hcl}", web[0]);
}
