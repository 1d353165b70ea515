//! The incremental compile (files -> units -> graph + fingerprints)
//! recomputes only the series an edit invalidates and compiles like a plain
//! `compile()` of a fresh load.

use std::collections::BTreeMap;
use std::path::Path;

use csis_rules::compile::{compile, Compiled, NoPins, PinSource};
use csis_rules::incremental::{CompiledTree, Counts, Incremental, SyncReport};
use csis_rules::{load, LoadOptions};

use crate::incremental::{during, opts, write_files, write_tree, APP, CFG, WEB};

/// Two more images beside web, app and tools: `solo` (its own playbook, a
/// leaf on deb12) and `pinned` (web's child under `parent_policy: pinned`).
const SOLO: &str = "images:\n  - name: solo\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}]\n    modifications:\n      - name: solo-setup\n        playbooks: [playbooks/solo.yml]\n";
const PINNED: &str = "images:\n  - name: pinned\n    source_image: web\n    parent_policy: pinned\n    runtimes: [{image_builder: sim-bake}]\n";

/// 1 OS builder and 5 images.
const SERIES: usize = 6;

fn write_compile_tree(root: &Path) {
    write_tree(root);
    for (p, text) in [
        ("images/solo.yml", SOLO),
        ("images/pinned.yml", PINNED),
        (
            "playbooks/solo.yml",
            "- hosts: all\n  tasks: [{debug: {msg: solo}}]\n",
        ),
    ] {
        std::fs::write(root.join(p), text).unwrap();
    }
}

/// `meta-state/` answers, for tests: image -> (build, recorded fingerprint).
#[derive(Default)]
struct TestPins(BTreeMap<String, (String, Option<String>)>);

impl PinSource for TestPins {
    fn image_pin(&self, image: &str, _runtime: &str) -> Option<String> {
        self.0.get(image).map(|(b, _)| b.clone())
    }
    fn build_fingerprint(&self, build_id: &str) -> Option<String> {
        self.0
            .values()
            .find(|(b, _)| b == build_id)
            .and_then(|(_, fp)| fp.clone())
    }
}

/// Everything the graph holds, node by node (label, fingerprint, canonical
/// document, dependencies, spec, attributes), then the warnings.
fn full_view(c: &Compiled, fps: &csis_engine::Fingerprints) -> Vec<String> {
    let mut v: Vec<String> = c
        .graph
        .ids()
        .map(|id| {
            let n = c.graph.node(id);
            let mut deps: Vec<String> = c
                .graph
                .deps(id)
                .map(|(d, k)| format!("{}={k:?}", c.graph.node(d).label()))
                .collect();
            deps.sort();
            format!(
                "{} {} {} {deps:?} {:?} {:?} {:?}",
                n.label(),
                fps.get(id).to_hex(),
                c.graph.canonical(id, fps),
                c.spec(id),
                n,
                fps.topo_order()[id.index()]
            )
        })
        .collect();
    v.extend(c.warnings.iter().map(|w| format!("warning: {w}")));
    v
}

/// The incremental compile equals a plain `compile()` of a fresh load of
/// the same files with the same pins (labels, fingerprints, canonical
/// inputs, dependencies, specs, warnings).
pub(super) fn assert_compiles_like_plain(
    inc: &Incremental,
    root: &Path,
    o: &LoadOptions,
    pins: &(dyn PinSource + Sync),
) {
    // The incremental load leaves a missing mod file to the content hash
    // (`missing`), as `load_from_nodes` does; `load` refuses such a tree.
    let fresh = match load(root, o) {
        Ok(t) => t,
        Err(d)
            if d.iter()
                .any(|d| d.message.contains("does not exist in the tree")) =>
        {
            let files = csis_rules::load::tree_files(root)
                .into_iter()
                .map(|p| {
                    let n = csis_schema::yaml::parse_file(&p, root);
                    (p, n)
                })
                .collect();
            csis_rules::load::load_from_nodes(root, o, files).expect("loads")
        }
        Err(d) => panic!("loads: {d:?}"),
    };
    let plain = compile(&fresh, pins).expect("compiles");
    let plain_fps = plain.graph.fingerprints().unwrap();
    let c: Arc<CompiledTree> = inc.compiled().expect("compiles incrementally");
    let (a, b) = (
        full_view(&c.compiled, &c.fps),
        full_view(&plain, &plain_fps),
    );
    assert_eq!(a.len(), b.len(), "node count");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
}

use std::sync::Arc;

/// Fingerprint of `image`'s bake as the incremental compile answers it.
fn inc_fp(inc: &Incremental, image: &str) -> String {
    let c = inc.compiled().expect("compiles");
    c.fps
        .get(c.compiled.bake_of(image, "sim").unwrap())
        .to_hex()
}

/// Sync, then compile: what the sync found, and what both executed.
pub(super) fn sync_and_compile(inc: &mut Incremental) -> (SyncReport, Counts) {
    let before = inc.counts();
    let r = inc.sync();
    inc.compiled().expect("compiles");
    (r, inc.counts() - before)
}

/// Set a file's mtime (so that a same-size rewrite is seen at once).
fn bump_mtime(p: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn first_compile_runs_each_series_once_and_a_no_change_sync_recomputes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let first = during(&mut inc, |i| {
        i.compiled().expect("compiles");
    });
    assert_eq!(first.loads, 1);
    assert_eq!(first.drafts, SERIES);
    assert_eq!(first.compiles, SERIES);
    assert_eq!(first.fingerprints, SERIES);
    assert_eq!(first.hashes, 3, "web.yml, app.sh and solo.yml, once each");
    assert_eq!(first.graphs, 1);
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);

    let again = during(&mut inc, |i| {
        assert!(i.sync().is_empty());
        assert!(!i.set_pins(&NoPins));
        i.compiled().expect("compiles");
    });
    assert_eq!(
        again,
        Counts::default(),
        "a no-change sync recomputes nothing"
    );
}

#[test]
fn editing_one_image_recompiles_it_and_refingerprints_its_follow_descendants() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    // `pinned` is pinned to a build recorded with some fingerprint: its own
    // fingerprint does not depend on web's.
    let pins = TestPins(BTreeMap::from([(
        "pinned".to_string(),
        ("b-web-1".to_string(), Some("ab".repeat(32))),
    )]));
    inc.set_pins(&pins);
    inc.compiled().expect("compiles");
    let before: Vec<String> = ["web", "app", "tools", "solo", "pinned"]
        .iter()
        .map(|i| inc_fp(&inc, i))
        .collect();

    std::fs::write(
        dir.path().join("images/app.yml"),
        APP.replace("app-setup", "app-setup-2"),
    )
    .unwrap();
    let edit = during(&mut inc, |i| {
        assert_eq!(i.sync().changed, 1);
        assert!(!i.set_pins(&pins));
        i.compiled().expect("compiles");
    });
    assert_eq!((edit.parses, edit.loads), (1, 1));
    assert_eq!(
        edit.drafts, 2,
        "app and tools, whose chain passes through app.yml (the firewall: series_key)"
    );
    assert_eq!(edit.compiles, 1, "only app recompiles");
    assert_eq!(edit.fingerprints, 2, "app and its follow child tools");
    assert_eq!(edit.hashes, 0);
    assert_eq!(edit.graphs, 1);
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);
    let after: Vec<String> = ["web", "app", "tools", "solo", "pinned"]
        .iter()
        .map(|i| inc_fp(&inc, i))
        .collect();
    assert_eq!(after[0], before[0]);
    assert_ne!(after[1], before[1]);
    assert_ne!(after[2], before[2]);
    assert_eq!(after[3..], before[3..]);

    // web: its follow descendants app and tools move; pinned (recorded
    // parent fingerprint) and solo are not fingerprinted again.
    std::fs::write(
        dir.path().join("images/web.yml"),
        WEB.replace("web-setup", "web-setup-2"),
    )
    .unwrap();
    let web = sync_and_compile(&mut inc).1;
    assert_eq!(
        web.drafts, 4,
        "web and the images below it: app, tools, pinned"
    );
    assert_eq!(web.compiles, 1, "only web recompiles");
    assert_eq!(web.fingerprints, 3, "web, app, tools");
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);

    // a cfg edit that changes no series: drafts run and are all backdated
    std::fs::write(
        dir.path().join("cfg/_config.yml"),
        "id: incremental-test\n# a comment\n",
    )
    .unwrap();
    let cfg = sync_and_compile(&mut inc).1;
    assert_eq!(cfg.drafts, SERIES);
    assert_eq!((cfg.compiles, cfg.fingerprints, cfg.graphs), (0, 0, 0));

    // an OS builder edit recompiles the OS builder and re-fingerprints
    // every follow chain on it; the pinned image keeps its fingerprint
    let os = CFG
        .iter()
        .find(|(p, _)| *p == "cfg/os-builders.yml")
        .unwrap()
        .1;
    std::fs::write(
        dir.path().join("cfg/os-builders.yml"),
        os.replace("family_version: \"12\"", "family_version: \"12.5\""),
    )
    .unwrap();
    let c = sync_and_compile(&mut inc).1;
    assert_eq!(c.compiles, 1, "only deb12 recompiles");
    assert_eq!(c.fingerprints, 5, "deb12, web, app, tools, solo");
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);
}

#[test]
fn an_edit_reassembles_the_graph_sharing_the_untouched_nodes_and_specs() {
    use csis_rules::compile::NodeSpec;
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let c0 = inc.compiled().expect("compiles");
    std::fs::write(
        dir.path().join("images/app.yml"),
        APP.replace("app-setup", "app-setup-2"),
    )
    .unwrap();
    assert_eq!(inc.sync().changed, 1);
    let c1 = inc.compiled().expect("compiles");
    assert!(!Arc::ptr_eq(&c0, &c1));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
    let (g0, g1) = (&c0.compiled.graph, &c1.compiled.graph);
    assert_eq!(g0.len(), g1.len());
    let mut shared = 0;
    for id in g1.ids() {
        let node = g1.node(id);
        let old = g0.find(node.label()).expect("same labels");
        let same_node = Arc::ptr_eq(g1.node_arc(id), g0.node_arc(old));
        let same_spec = match (c1.compiled.spec(id), c0.compiled.spec(old)) {
            (NodeSpec::Bake(a), NodeSpec::Bake(b)) => Arc::ptr_eq(a, b),
            _ => true,
        };
        if node.attr("series") == Some("app") && node.kind() == "bake" {
            assert!(!same_node && !same_spec, "{}: edited", node.label());
        } else if node.attr("series") != Some("app") {
            assert!(same_node && same_spec, "{}: not copied", node.label());
            shared += 1;
        }
    }
    assert!(shared > 10, "{shared}");
}

#[test]
fn editing_a_playbook_rehashes_that_file_only_and_refingerprints_its_images() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.compiled().expect("compiles");
    let solo0 = inc_fp(&inc, "solo");
    let web0 = inc_fp(&inc, "web");

    let pb = dir.path().join("playbooks/solo.yml");
    std::fs::write(&pb, "- hosts: all\n  tasks: [{debug: {msg: solo2}}]\n").unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!((r.changed, r.contents), (0, 1));
    assert_eq!(c.hashes, 1, "only solo.yml is read again");
    assert_eq!((c.parses, c.loads, c.drafts), (0, 0, 0), "no YAML reloads");
    assert_eq!(c.compiles, 1, "only solo recompiles");
    assert_eq!(c.fingerprints, 1, "only solo is fingerprinted again");
    assert_eq!(c.graphs, 1);
    assert_ne!(inc_fp(&inc, "solo"), solo0);
    assert_eq!(inc_fp(&inc, "web"), web0);
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);

    // web's playbook: web recompiles; web, its follow descendants (app,
    // tools) and pinned (no pin recorded: it hashes web's fingerprint) move
    let pb = dir.path().join("playbooks/web.yml");
    std::fs::write(&pb, "- hosts: all\n  tasks: []\n# edit\n").unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.contents, 1);
    assert_eq!((c.hashes, c.compiles, c.fingerprints), (1, 1, 4));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);

    // rewritten with the same bytes: read again, nothing recompiles
    let text = std::fs::read_to_string(&pb).unwrap();
    std::fs::write(&pb, text).unwrap();
    bump_mtime(&pb, 1_000_000);
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.contents, 0);
    assert_eq!(c.hashes, 1);
    assert_eq!((c.compiles, c.fingerprints, c.graphs), (0, 0, 0));

    // a removed script hashes as `missing`, like the plain compile
    std::fs::remove_file(dir.path().join("scripts/app.sh")).unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.contents, 1);
    assert_eq!((c.hashes, c.compiles), (1, 1));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);

    // a playbook named by an edit is read on first demand
    std::fs::write(dir.path().join("playbooks/new.yml"), "- hosts: all\n").unwrap();
    std::fs::write(
        dir.path().join("images/solo.yml"),
        SOLO.replace("playbooks/solo.yml", "playbooks/new.yml"),
    )
    .unwrap();
    let c = sync_and_compile(&mut inc).1;
    assert_eq!((c.hashes, c.compiles, c.fingerprints), (1, 1, 1));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
}

#[test]
fn pins_recompile_only_the_pinned_image() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.compiled().expect("compiles");
    let pinned0 = inc_fp(&inc, "pinned");

    // pinned to a build recorded with an older fingerprint
    let pins = TestPins(BTreeMap::from([(
        "pinned".to_string(),
        ("b-old".to_string(), Some("cd".repeat(32))),
    )]));
    let c = during(&mut inc, |i| {
        assert!(i.set_pins(&pins));
        i.compiled().expect("compiles");
    });
    assert_eq!((c.parses, c.loads, c.drafts, c.hashes), (0, 0, 0, 0));
    assert_eq!((c.compiles, c.fingerprints), (1, 1), "pinned alone");
    assert_ne!(inc_fp(&inc, "pinned"), pinned0);
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);

    // the same answers again: nothing is set, nothing runs
    let c = during(&mut inc, |i| {
        assert!(!i.set_pins(&pins));
        i.compiled().expect("compiles");
    });
    assert_eq!(c, Counts::default());

    // records for images that are not pinned change nothing
    let mut more = TestPins(pins.0.clone());
    more.0
        .insert("app".into(), ("b-web".into(), Some("ef".repeat(32))));
    assert!(!inc.set_pins(&more));
}

/// A [`PinSource`] that counts the pins asked of it.
struct Counted<'a>(&'a TestPins, std::cell::Cell<usize>);

impl PinSource for Counted<'_> {
    fn image_pin(&self, image: &str, runtime: &str) -> Option<String> {
        self.1.set(self.1.get() + 1);
        self.0.image_pin(image, runtime)
    }
    fn build_fingerprint(&self, build_id: &str) -> Option<String> {
        self.0.build_fingerprint(build_id)
    }
}

#[test]
fn kept_pins_are_asked_again_only_for_a_new_read_or_a_new_question() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let pins = TestPins(BTreeMap::from([(
        "pinned".to_string(),
        ("b-old".to_string(), Some("cd".repeat(32))),
    )]));
    let src = Counted(&pins, Default::default());
    assert!(inc.set_pins_kept(1, &src));
    // one question per pinned image (the default policy is pinned) and runtime
    let asked = src.1.get();
    assert!(asked >= 1, "pinned is asked");
    inc.compiled().expect("compiles");

    // an edit that asks the same pins, of the same read: not asked
    std::fs::write(
        dir.path().join("images/app.yml"),
        APP.replace("app-setup", "app-2"),
    )
    .unwrap();
    inc.sync();
    assert!(!inc.set_pins_kept(1, &src));
    assert_eq!(src.1.get(), asked);

    // a new read of the records: asked again (the same answers: unchanged)
    assert!(!inc.set_pins_kept(2, &src));
    assert_eq!(src.1.get(), 2 * asked);

    // app becomes pinned: a new question, asked, and its answer set
    let app_pinned = APP.replace("parent_policy: follow", "parent_policy: pinned");
    assert_ne!(app_pinned, APP, "the edit applies");
    std::fs::write(dir.path().join("images/app.yml"), app_pinned).unwrap();
    inc.sync();
    let mut more = TestPins(pins.0.clone());
    more.0
        .insert("app".into(), ("b-web".into(), Some("ef".repeat(32))));
    let src2 = Counted(&more, Default::default());
    assert!(inc.set_pins_kept(2, &src2), "app's pin is new");
    assert_eq!(src2.1.get(), asked + 1);
    // pins set from a source of no generation between two kept ones: the
    // kept source is asked again
    inc.set_pins(&pins);
    assert!(inc.set_pins_kept(2, &src2));
    assert_eq!(src2.1.get(), 2 * (asked + 1));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &more);
}

/// A tree with the compile's corner cases: an image whose parent does not
/// bake on its runtime (and that image's child), two entries on one
/// runtime, a fixed parent image (and its child on both runtimes).
pub(super) fn write_corner_tree(root: &Path) {
    let files: &[(&str, &str)] = &[
        ("cfg/_config.yml", "id: corners\n"),
        (
            "cfg/runtime-builders.yml",
            "runtime_builders:\n  - {name: sim, type: dummy, is_default: true, default_machine_type: small}\n  - {name: sim2, type: dummy, default_machine_type: small, retention_keep: 2}\n",
        ),
        (
            "cfg/image-builders.yml",
            "image_builders:\n  - {name: sim-bake, type: dummy, runtime: sim, is_default: true}\n  - {name: sim2-bake, type: dummy, runtime: sim2}\n  - {name: sim-bake-b, type: dummy, runtime: sim}\n",
        ),
        (
            "cfg/mod-builders.yml",
            "mod_builders:\n  - {name: ansible, type: ansible, is_default: true}\n  - {name: bash, type: bash-remote}\n",
        ),
        (
            "cfg/os-builders.yml",
            "os_builders:\n  - name: deb12\n    type: debian\n    family: debian\n    family_version: \"12\"\n    is_default: true\n    runtimes:\n      - image_builder: sim-bake\n",
        ),
        (
            "images/corners.yml",
            "images:\n\
             \x20 - name: far\n    source_image: deb12\n    runtimes: [{image_builder: sim2-bake}]\n\
             \x20 - name: farther\n    source_image: far\n    runtimes: [{image_builder: sim2-bake}]\n\
             \x20 - name: twice\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}, {image_builder: sim-bake-b}]\n\
             \x20 - name: fixed\n    source_image: deb12\n    runtimes: [{image_builder: sim2-bake, image_identifier: img-123}, {image_builder: sim-bake}]\n    release: {model: stable}\n\
             \x20 - name: kid\n    source_image: fixed\n    runtimes: [{image_builder: sim2-bake}, {image_builder: sim-bake}]\n",
        ),
    ];
    write_files(root, files.iter().copied());
}

/// A generated tree: `n` images in chains of up to 4 on 3 OS builders, two
/// runtimes, mixed policies, shared and own playbooks.
fn write_generated_tree(root: &Path, n: usize) {
    use std::fmt::Write as _;
    let mut files: Vec<(String, String)> = vec![
        ("cfg/_config.yml".into(), "id: generated\n".into()),
        (
            "cfg/runtimes.yml".into(),
            "runtime_builders:\n  - {name: sim, type: dummy, is_default: true, default_machine_type: small}\n  - {name: sim2, type: dummy, default_machine_type: small}\n\
             image_builders:\n  - {name: b1, type: dummy, runtime: sim, is_default: true}\n  - {name: b2, type: dummy, runtime: sim2}\n\
             mod_builders:\n  - {name: ansible, type: ansible, is_default: true}\n  - {name: bash, type: bash-remote}\n"
                .into(),
        ),
        ("playbooks/shared.yml".into(), "- hosts: all\n".into()),
    ];
    let mut os = String::from("os_builders:\n");
    for i in 0..3 {
        write!(os, "  - name: os-{i}\n    type: debian\n    family: debian\n    family_version: \"1{i}\"\n    runtimes: [{{image_builder: b1}}, {{image_builder: b2}}]\n").unwrap();
    }
    files.push(("cfg/os.yml".into(), os));
    let mut imgs = String::from("images:\n");
    for i in 0..n {
        let src = if i % 4 == 0 {
            format!("os-{}", i % 3)
        } else {
            format!("img-{}", i - 1)
        };
        let policy = if i % 6 == 2 { "pinned" } else { "follow" };
        let rts = if i % 5 == 1 {
            "[{image_builder: b1}]"
        } else {
            "[{image_builder: b1}, {image_builder: b2}]"
        };
        write!(imgs, "  - name: img-{i}\n    source_image: {src}\n    parent_policy: {policy}\n    runtimes: {rts}\n    modifications:\n      - name: m\n        playbooks: [playbooks/shared.yml, playbooks/own-{}.yml]\n", i % 7).unwrap();
        files.push((
            format!("playbooks/own-{}.yml", i % 7),
            format!("- hosts: all # {}\n", i % 7),
        ));
    }
    files.push(("images/all.yml".into(), imgs));
    write_files(root, files);
}

#[test]
fn compiles_like_compile_on_fixtures_and_corner_cases() {
    for f in ["graph/basic", "ops/basic", "config/valid"] {
        let root = csis_testkit::fixture(f);
        let inc = Incremental::counting_executions(&root, &opts());
        assert_compiles_like_plain(&inc, &root, &opts(), &NoPins);
    }

    let dir = tempfile::tempdir().unwrap();
    write_corner_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
    let c = inc.compiled().unwrap();
    let w = c.compiled.warnings.join("\n");
    assert!(
        w.contains("image far on sim2: its parent deb12 does not bake on sim2"),
        "{w}"
    );
    assert!(
        w.contains("image farther on sim2: its parent far does not bake on sim2"),
        "{w}"
    );
    assert!(
        w.contains("image twice: a second runtimes[] entry bakes on sim"),
        "{w}"
    );
    assert!(c.compiled.bake_of("kid", "sim2").is_some(), "{w}");
    // the OS builder gains sim2: far, farther and kid@sim2 change
    std::fs::write(
        dir.path().join("cfg/os-builders.yml"),
        "os_builders:\n  - name: deb12\n    type: debian\n    family: debian\n    family_version: \"12\"\n    is_default: true\n    runtimes:\n      - image_builder: sim-bake\n      - image_builder: sim2-bake\n",
    )
    .unwrap();
    inc.sync();
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
    assert!(inc
        .compiled()
        .unwrap()
        .compiled
        .bake_of("farther", "sim2")
        .is_some());

    let dir = tempfile::tempdir().unwrap();
    write_generated_tree(dir.path(), 60);
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let pins = TestPins(BTreeMap::from([
        (
            "img-2".to_string(),
            ("b-1".to_string(), Some("12".repeat(32))),
        ),
        ("img-8".to_string(), ("b-7".to_string(), None)),
    ]));
    inc.set_pins(&pins);
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);
    // the shared playbook: every image recompiles; the plain compile agrees
    std::fs::write(
        dir.path().join("playbooks/shared.yml"),
        "- hosts: all\n# 2\n",
    )
    .unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.contents, 1);
    assert_eq!((c.hashes, c.compiles), (1, 60));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);
    // one image's own playbook: the images using it (every 7th) recompile
    std::fs::write(
        dir.path().join("playbooks/own-3.yml"),
        "- hosts: all # 3'\n",
    )
    .unwrap();
    let c = sync_and_compile(&mut inc).1;
    assert_eq!(
        (c.hashes, c.compiles),
        (1, (0..60).filter(|i| i % 7 == 3).count())
    );
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &pins);
}

/// A tree big enough that `compiled` brings the series up to date on two
/// threads: an image edited recompiles that image alone, every query runs
/// once, and the graph is the plain compile's.
#[test]
fn a_big_tree_edit_recompiles_one_image_on_two_threads_like_plain() {
    let dir = tempfile::tempdir().unwrap();
    write_generated_tree(dir.path(), 60);
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let first = during(&mut inc, |i| {
        i.compiled().expect("compiles");
    });
    let series = 60 + 3;
    assert_eq!((first.drafts, first.compiles), (series, series));
    assert_eq!((first.fingerprints, first.graphs), (series, 1));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
    let all = dir.path().join("images/all.yml");
    let text = std::fs::read_to_string(&all).unwrap();
    // img-30 (parent img-29, follow) gains a description: the images of
    // its file are drafted again (not the OS builders), img-30's draft
    // does not move, nothing after the drafts runs
    let edited = text.replace(
        "  - name: img-30\n",
        "  - name: img-30\n    description: edited\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&all, edited).unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.changed, 1);
    assert_eq!((c.parses, c.loads, c.drafts), (1, 1, 60));
    assert_eq!((c.compiles, c.fingerprints, c.graphs), (0, 0, 0));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
    // img-30 turns pinned (no pin yet): it recompiles, and so does its
    // follow child img-31 (its capabilities come from img-30's pin now);
    // both re-fingerprint
    let edited = text.replace(
        "  - name: img-30\n    source_image: img-29\n    parent_policy: follow\n",
        "  - name: img-30\n    source_image: img-29\n    parent_policy: pinned\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&all, edited).unwrap();
    let (r, c) = sync_and_compile(&mut inc);
    assert_eq!(r.changed, 1);
    assert_eq!((c.drafts, c.compiles, c.graphs), (60, 2, 1));
    assert!(c.fingerprints >= 2, "{c:?}");
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
}

#[test]
fn a_tree_that_does_not_load_does_not_compile_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    write_compile_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.compiled().expect("compiles");
    std::fs::write(
        dir.path().join("images/app.yml"),
        "images:\n  - name: [app\n",
    )
    .unwrap();
    inc.sync();
    assert!(matches!(inc.compiled(), Err(None)));
    std::fs::write(dir.path().join("images/app.yml"), APP).unwrap();
    let c = sync_and_compile(&mut inc).1;
    // the tree is back as it was: every series' key equals its last
    // value, no draft runs, nothing else runs but the graph
    assert_eq!((c.drafts, c.compiles, c.fingerprints), (0, 0, 0));
    assert_compiles_like_plain(&inc, dir.path(), &opts(), &NoPins);
}

/// Every kind of edit `csis watch` sees, one after the other, each compiled
/// like a plain `compile()` of a fresh load: an image edited in a file of
/// several, an image added to a file and in a new file, a parent changed,
/// an image and a file removed, the configuration edited, a playbook
/// edited, a pin set; an image edit re-drafts fewer series than the tree
/// has.
#[test]
fn every_kind_of_edit_compiles_like_plain() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_compile_tree(root);
    let mut inc = Incremental::counting_executions(root, &opts());
    inc.compiled().expect("compiles");
    let web2 = "  - name: web2\n    source_image: web\n    runtimes: [{image_builder: sim-bake}]\n";
    let extra = "images:\n  - name: extra\n    source_image: web2\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n";
    let tools = crate::incremental::TOOLS;
    type Edit = Box<dyn Fn(&Path)>;
    let steps: Vec<(&str, Edit)> = vec![
        (
            "an image added to a file",
            Box::new(move |r: &Path| {
                std::fs::write(r.join("images/web.yml"), format!("{WEB}{web2}")).unwrap()
            }),
        ),
        (
            "an image in a new file",
            Box::new(move |r: &Path| std::fs::write(r.join("images/extra.yml"), extra).unwrap()),
        ),
        (
            "an image edited in a file of two",
            Box::new(move |r: &Path| {
                let t =
                    format!("{WEB}{web2}").replace("web2\n", "web2\n    primary_disk_size: 40\n");
                std::fs::write(r.join("images/web.yml"), t).unwrap()
            }),
        ),
        (
            "a parent changed",
            Box::new(move |r: &Path| {
                std::fs::write(
                    r.join("images/more/tools.yaml"),
                    tools.replace("source_image: app", "source_image: web2"),
                )
                .unwrap()
            }),
        ),
        (
            "a file removed",
            Box::new(|r: &Path| std::fs::remove_file(r.join("images/extra.yml")).unwrap()),
        ),
        (
            "the configuration edited",
            Box::new(|r: &Path| {
                std::fs::write(r.join("cfg/_config.yml"), "id: incremental-test-2\n").unwrap()
            }),
        ),
        (
            "a playbook edited",
            Box::new(|r: &Path| {
                let p = r.join("playbooks/web.yml");
                std::fs::write(&p, "- hosts: all\n  tasks: [{debug: {msg: edited}}]\n").unwrap();
                bump_mtime(&p, 1_000_000);
            }),
        ),
        (
            "an image removed from a file",
            Box::new(|r: &Path| {
                std::fs::write(r.join("images/more/tools.yaml"), crate::incremental::TOOLS)
                    .unwrap();
                std::fs::write(r.join("images/web.yml"), WEB).unwrap()
            }),
        ),
    ];
    for (what, edit) in steps {
        edit(root);
        let c = sync_and_compile(&mut inc).1;
        let yaml = what != "a playbook edited";
        assert_eq!(c.loads, usize::from(yaml), "{what}: {c:?}");
        assert_compiles_like_plain(&inc, root, &opts(), &NoPins);
        if what == "an image edited in a file of two" {
            // web, web2 and what lies below them (app, tools, pinned,
            // extra); not solo nor deb12
            assert_eq!(c.drafts, 6, "{what}: {c:?}");
        }
    }
    let pins = TestPins(BTreeMap::from([(
        "pinned".to_string(),
        ("b-web".to_string(), Some("ab".repeat(32))),
    )]));
    assert!(inc.set_pins(&pins));
    assert_compiles_like_plain(&inc, root, &opts(), &pins);
}
