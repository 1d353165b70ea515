//! The compile on the `graph/basic` fixture: nodes and fingerprints, pinned
//! parents, forced bakes and refresh, file hashes from the hook.

use std::path::PathBuf;

use csis_engine::{MemoryRecords, Pattern, Record};

use super::*;
use crate::load::{load, LoadOptions};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/graph/basic")
}

fn tree() -> Tree {
    match load(&fixture(), &LoadOptions::default()) {
        Ok(t) => t,
        Err(d) => panic!("{:#?}", d),
    }
}

#[test]
fn compiles_the_basic_tree() {
    let t = tree();
    let c = compile(&t, &NoPins).unwrap();
    let labels: Vec<String> = c
        .graph
        .ids()
        .map(|i| c.graph.node(i).label().to_string())
        .collect();
    for l in [
        "//os/deb12@sim:resolve",
        "//os/deb12@sim:emit",
        "//os/deb12@sim:bake",
        "//os/deb12@sim:retag",
        "//images/web@sim:bake",
        "//images/tools@sim:release",
        "//images/app-pinned@sim:bake",
    ] {
        assert!(labels.iter().any(|x| x == l), "{l} missing from {labels:?}");
    }
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // app's bake hashes web's fingerprint
    let app = c.bake_of("app", "sim").unwrap();
    let web = c.bake_of("web", "sim").unwrap();
    let fps = c.graph.fingerprints().unwrap();
    let doc = c.graph.canonical(app, &fps);
    assert_eq!(
        doc["deps"]["parent"],
        serde_json::json!(fps.get(web).to_hex())
    );
    // the web bake's mod input names the playbook with its content hash
    let wdoc = c.graph.canonical(web, &fps);
    assert_eq!(
        wdoc["inputs"]["mods"][0]["files"][0]["path"],
        "playbooks/web.yml"
    );
    // nothing recorded: every bake is due; resolve/emit needed
    let sel = c.graph.select(&[Pattern::all()]).unwrap();
    let force = ForceBake::default();
    let plan = planner(&force)
        .plan(&c.graph, &sel, &fps, &MemoryRecords::default())
        .unwrap();
    assert_eq!(plan.due_count("bake"), 7);
    assert_eq!(plan.due_count("resolve"), 2);
}

struct Pinned(String, String);
impl PinSource for Pinned {
    fn image_pin(&self, image: &str, _: &str) -> Option<String> {
        (image == "app-pinned").then(|| self.0.clone())
    }
    fn build_fingerprint(&self, b: &str) -> Option<String> {
        (b == self.0).then(|| self.1.clone())
    }
}

#[test]
fn pinned_child_hashes_the_recorded_fingerprint() {
    let t = tree();
    let c0 = compile(&t, &NoPins).unwrap();
    let fps0 = c0.graph.fingerprints().unwrap();
    let web_fp = fps0.get(c0.bake_of("web", "sim").unwrap());
    // pinned to a build recorded with web's current fingerprint: same child fp as no pin
    let c1 = compile(&t, &Pinned("b-web".into(), web_fp.to_hex())).unwrap();
    let fps1 = c1.graph.fingerprints().unwrap();
    let id = c1.bake_of("app-pinned", "sim").unwrap();
    assert_eq!(fps0.get(id), fps1.get(id));
    // pinned to an older build: a different fingerprint, independent of web's
    let c2 = compile(&t, &Pinned("b-old".into(), "ab".repeat(32))).unwrap();
    let fps2 = c2.graph.fingerprints().unwrap();
    assert_ne!(fps2.get(id), fps1.get(id));
    assert_eq!(
        c2.graph.canonical(id, &fps2)["deps"]["parent"],
        serde_json::json!("ab".repeat(32))
    );
}

#[test]
fn force_bake_and_refresh() {
    let t = tree();
    let c0 = compile(&t, &NoPins).unwrap();
    let fps0 = c0.graph.fingerprints().unwrap();
    let web_fp = fps0.get(c0.bake_of("web", "sim").unwrap());
    // app-pinned is pinned to web's build (pinned with no pin behaves like follow)
    let c = compile(&t, &Pinned("b-web".into(), web_fp.to_hex())).unwrap();
    let fps = c.graph.fingerprints().unwrap();
    let sel = c.graph.select_all();
    // record every bake as current
    let mut recs = MemoryRecords::default();
    for id in c.bake_nodes() {
        recs.insert(
            c.graph.node(id).label().clone(),
            Record {
                fingerprint: Some(fps.get(id)),
                build: Some(format!("b{}", id.index())),
                ..Default::default()
            },
        );
    }
    let none = ForceBake::default();
    let plan = planner(&none).plan(&c.graph, &sel, &fps, &recs).unwrap();
    assert_eq!(plan.due().count(), 0);
    let f = ForceBake::parse(&["web@sim".into()]);
    let plan = planner(&f).plan(&c.graph, &sel, &fps, &recs).unwrap();
    let due: Vec<String> = plan
        .due()
        .filter(|n| n.kind == "bake")
        .map(|n| n.label.to_string())
        .collect();
    // web forced, its follow child app re-bakes, and app's follow child tools; app-pinned stays
    assert_eq!(
        due,
        vec![
            "//images/web@sim:bake",
            "//images/app@sim:bake",
            "//images/tools@sim:bake"
        ]
    );
}

#[test]
fn compile_with_takes_file_hashes_from_the_hook() {
    let t = tree();
    let asked: std::sync::Mutex<Vec<PathBuf>> = Default::default();
    let c = compile_with(&t, &NoPins, &DefaultCost, &|p: &Path| {
        asked.lock().unwrap().push(p.to_path_buf());
        "cafe".to_string()
    })
    .unwrap();
    let asked = asked.into_inner().unwrap();
    let fps = c.graph.fingerprints().unwrap();
    let web = c.bake_of("web", "sim").unwrap();
    assert_eq!(
        c.graph.canonical(web, &fps)["inputs"]["mods"][0]["files"][0]["blake3"],
        "cafe"
    );
    // one question per file of each image's mods: web's playbook, app's script
    let mut names: Vec<String> = asked
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["app.sh", "web.yml"]);
    // the plain compile is compile_with over the files on disk
    let plain = compile(&t, &NoPins).unwrap();
    let disk = compile_with(&t, &NoPins, &DefaultCost, &|p: &Path| file_hash(p)).unwrap();
    let (f1, f2) = (
        plain.graph.fingerprints().unwrap(),
        disk.graph.fingerprints().unwrap(),
    );
    assert_eq!(plain.graph.len(), disk.graph.len());
    for id in plain.graph.ids() {
        assert_eq!(f1.get(id), f2.get(id));
    }
    assert_ne!(f1.get(web), fps.get(web));
}

/// A pin with its recorded fingerprint and capability stamp.
struct PinnedWith {
    build: String,
    fp: String,
    caps: Option<serde_json::Value>,
}
impl PinSource for PinnedWith {
    fn image_pin(&self, image: &str, _: &str) -> Option<String> {
        (image == "app-pinned").then(|| self.build.clone())
    }
    fn build_fingerprint(&self, b: &str) -> Option<String> {
        (b == self.build).then(|| self.fp.clone())
    }
    fn build_capabilities(&self, b: &str) -> Option<serde_json::Value> {
        (b == self.build).then(|| self.caps.clone()).flatten()
    }
}

#[test]
fn a_pinned_child_keeps_its_parent_builds_capabilities_when_the_base_gains_one() {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(&fixture(), dir.path());
    let t0 = match load(dir.path(), &LoadOptions::default()) {
        Ok(t) => t,
        Err(d) => panic!("{d:#?}"),
    };
    let c0 = compile(&t0, &NoPins).unwrap();
    let fps0 = c0.graph.fingerprints().unwrap();
    let web_fp = fps0.get(c0.bake_of("web", "sim").unwrap()).to_hex();
    let recorded = serde_json::json!({"identity_types": [], "storage_types": []});
    let pins = PinnedWith {
        build: "b-web".into(),
        fp: web_fp,
        caps: Some(recorded.clone()),
    };
    let before = compile(&t0, &pins).unwrap();
    let fps_before = before.graph.fingerprints().unwrap();

    // the base gains a storage type (with the storage builder it needs)
    let os = dir.path().join("cfg/os-builders.yml");
    let text = std::fs::read_to_string(&os).unwrap().replacen(
        "    is_default: true\n",
        "    is_default: true\n    storage_types: [ebs]\n",
        1,
    );
    std::fs::write(&os, text).unwrap();
    std::fs::write(
        dir.path().join("cfg/storage-builders.yml"),
        "storage_builders:\n  - name: ebs\n    type: tf-aws-ebs\n",
    )
    .unwrap();
    let t1 = match load(dir.path(), &LoadOptions::default()) {
        Ok(t) => t,
        Err(d) => panic!("{d:#?}"),
    };
    let after = compile(&t1, &pins).unwrap();
    let fps_after = after.graph.fingerprints().unwrap();
    let fp =
        |c: &Compiled, f: &csis_engine::Fingerprints, s: &str| f.get(c.bake_of(s, "sim").unwrap());
    // the follow children move with the base's declaration
    for s in ["deb12", "web", "app"] {
        assert_ne!(
            fp(&before, &fps_before, s),
            fp(&after, &fps_after, s),
            "{s}"
        );
    }
    // the pinned child bakes from the same parent build: same inputs, same
    // stamp in its record and tags
    assert_eq!(
        fp(&before, &fps_before, "app-pinned"),
        fp(&after, &fps_after, "app-pinned")
    );
    let id = after.bake_of("app-pinned", "sim").unwrap();
    assert_eq!(after.bake_spec(id).unwrap().capabilities, recorded);
    assert_eq!(
        after.graph.canonical(id, &fps_after)["inputs"]["capabilities"],
        recorded
    );
    // a follow child stamps today's declaration
    let web = after.bake_of("web", "sim").unwrap();
    assert_eq!(
        after.bake_spec(web).unwrap().capabilities["storage_types"],
        serde_json::json!(["ebs"])
    );
    // with no recorded stamp (a pin to a build the records do not hold),
    // the declaration governs
    let unrecorded = PinnedWith { caps: None, ..pins };
    let c = compile(&t1, &unrecorded).unwrap();
    let id = c.bake_of("app-pinned", "sim").unwrap();
    assert_eq!(
        c.bake_spec(id).unwrap().capabilities["storage_types"],
        serde_json::json!(["ebs"])
    );
}

/// The images' units are made on one thread per core; assembled in order,
/// they make the graph a compile on one thread makes: the same nodes in
/// the same order, edges, fingerprints, specs and warnings.
#[test]
fn units_made_on_many_threads_assemble_as_on_one() {
    let t = tree();
    let web_fp = compile(&t, &NoPins).unwrap();
    let web_fp = web_fp
        .graph
        .fingerprints()
        .unwrap()
        .get(web_fp.bake_of("web", "sim").unwrap());
    let pins = Pinned("b-web".into(), web_fp.to_hex());
    assert!(t.images.len() >= 4, "par_map runs one thread below 4 items");
    let many = compile(&t, &pins).unwrap();
    // one thread: the units in the same order, on this thread
    let mut a = Assembler::default();
    for os in &t.os_builders {
        a.add(os_unit(&t, os, &DefaultCost).unwrap()).unwrap();
    }
    for idx in image_order(&t) {
        let draft = image_draft(&t, &t.images[idx], &DefaultCost).unwrap();
        a.add(finish_image(draft, &mut |p: &Path| file_hash(p), &pins))
            .unwrap();
    }
    a.add_fleet(&t, &pins.fleet()).unwrap();
    let one = a.finish();
    let (f1, f2) = (
        one.graph.fingerprints().unwrap(),
        many.graph.fingerprints().unwrap(),
    );
    assert_eq!(one.graph.len(), many.graph.len());
    for id in one.graph.ids() {
        assert_eq!(one.graph.node(id).label(), many.graph.node(id).label());
        assert_eq!(f1.get(id), f2.get(id), "{}", one.graph.node(id).label());
        let deps = |c: &Compiled| format!("{:?}", c.graph.deps(id).collect::<Vec<_>>());
        assert_eq!(deps(&one), deps(&many));
        assert_eq!(one.bake_spec(id), many.bake_spec(id));
        assert_eq!(
            format!("{:?}", one.spec(id)),
            format!("{:?}", many.spec(id))
        );
    }
    assert_eq!(one.warnings, many.warnings);
}
