//! A vendor docker tag that moved (D26), on the local Docker daemon
//! (skipped, loudly, without one): the base image's record keeps the vendor
//! image its bake started from; after `docker tag` moves the OS builder's
//! tag to another image, `csis plan` says `vendor image <ref> moved: <old>
//! -> <new>`, `csis build` bakes the base and its children again, and the
//! next build is current. A tree whose base stands on a tag is never
//! answered by the no-op stamp (only a read of the tag can tell).
//!
//! The two vendor images are busybox root filesystems imported with
//! `docker import` (no registry), the second with one file more.

use crate::ops_support;
use csis_testkit::docker::{docker, import_busybox_base, Cleanup};
use ops_support::Tree;

fn image_id(reference: &str) -> String {
    docker(&["image", "inspect", "--format", "{{.Id}}", reference])
        .unwrap_or_else(|| panic!("{reference} is not on the daemon"))
        .trim()
        .to_string()
}

fn noop_stamps(t: &Tree) -> Vec<String> {
    std::fs::read_dir(t.root.join(".csis/cache"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("noop-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_moved_vendor_tag_makes_the_base_and_its_children_due() {
    if csis_testkit::docker::skip() {
        return;
    }
    let suffix = format!("{:08x}", std::process::id() ^ 0x7e4d_0000);
    let repo = format!("csis-vendor-test/r{suffix}");
    let vendor = format!("csis-vendor-test/v{suffix}");
    let tag = format!("{vendor}:tag");
    let (a, b) = (format!("{vendor}:a"), format!("{vendor}:b"));
    let mut cleanup = Cleanup::new(&repo, "");
    cleanup.repos.push(vendor.clone());
    let t = Tree(csis_testkit::Tree::copy(
        &csis_testkit::fixture("ops/docker"),
        &[("@REPO@", &repo), ("@BASE@", &tag)],
    ));
    // two different root filesystems: a, and b with one file more
    let work = t.tmp.path().join("vendor");
    import_busybox_base(&a, &work);
    std::fs::write(work.join("rootfs/etc/vendor-b"), "b\n").unwrap();
    let tar = work.join("b.tar");
    let st = std::process::Command::new("tar")
        .arg("-C")
        .arg(work.join("rootfs"))
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    assert!(docker(&["import", &tar.to_string_lossy(), &b]).is_some());
    let (id_a, id_b) = (image_id(&a), image_id(&b));
    assert_ne!(id_a, id_b);
    assert!(docker(&["tag", &a, &tag]).is_some());

    t.ok(&["build", "--json"]);
    let base = t.builds("base");
    assert_eq!(base.len(), 1);
    let v = base[0]
        .vendor_image
        .clone()
        .expect("the base records its vendor image");
    assert_eq!(
        (v.reference.as_str(), v.id.as_str(), v.movable),
        (tag.as_str(), id_a.as_str(), true)
    );
    // an image's record has none
    assert!(t.builds("web")[0].vendor_image.is_none());

    // unmoved: current, and no stamp answers for a tree on a tag
    let plan = t.ok(&["plan"]);
    assert!(!plan.contains("moved"), "{plan}");
    t.ok(&["build", "--json"]);
    assert_eq!(t.ids("base").len(), 1);
    assert!(noop_stamps(&t).is_empty(), "{:?}", noop_stamps(&t));

    // the tag moves to b: plan says so, the children follow
    assert!(docker(&["tag", &b, &tag]).is_some());
    let plan = t.ok(&["plan"]);
    let why = format!("vendor image {tag} moved: {id_a} -> {id_b}");
    assert!(plan.contains(&why), "{why}\nin\n{plan}");
    let json: serde_json::Value = serde_json::from_str(&t.ok(&["plan", "--json"])).unwrap();
    let node = |l: &str| {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["label"] == l)
            .unwrap_or_else(|| panic!("{l} not planned: {json}"))
            .clone()
    };
    let base_node = node("//os/base@docker-ops:bake");
    assert_eq!(base_node["due"], true);
    assert_eq!(base_node["code"], "vendor-moved");
    assert_eq!(node("//images/web@docker-ops:bake")["due"], true);
    assert_eq!(node("//images/app@docker-ops:bake")["due"], true);

    t.ok(&["build", "--json"]);
    let (base, web, app) = (t.builds("base"), t.ids("web"), t.ids("app"));
    assert_eq!((base.len(), web.len(), app.len()), (2, 2, 2));
    let v = base[1].vendor_image.clone().unwrap();
    assert_eq!(v.id, id_b, "the new base is baked from b");
    assert_eq!(
        t.builds("web")[1].parent.as_deref(),
        Some(base[1].build_id.as_str())
    );
    // the new base holds b's file
    let has_b = docker(&["run", "--rm", &base[1].build_id, "cat", "/etc/vendor-b"]);
    assert_eq!(has_b.as_deref().map(str::trim), Some("b"));

    // and then current
    let plan = t.ok(&["plan"]);
    assert!(!plan.contains("moved"), "{plan}");
    t.ok(&["build", "--json"]);
    assert_eq!(t.ids("base").len(), 2);
    assert_eq!(t.ids("app").len(), 2);
    drop(cleanup);
}
