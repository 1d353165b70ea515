//! The incremental load recomputes only what an edit invalidates (files
//! added, removed, broken, undone; new options) and answers what a fresh
//! `csis_rules::load` of the same files answers.

use std::collections::BTreeMap;
use std::path::Path;

use csis_rules::compile::{compile, NoPins};
use csis_rules::incremental::{Counts, Incremental};
use csis_rules::{load, LoadOptions, Tree};

use crate::incremental::{during, opts, write_tree, APP, TOOLS, WEB};

const TREE_FILES: usize = 8;

/// What the graph sees of a tree: every node's label with its fingerprint
/// and canonical inputs, and the load's warnings.
fn graph_view(t: &Tree) -> (BTreeMap<String, (String, serde_json::Value)>, Vec<String>) {
    let c = compile(t, &NoPins).expect("compiles");
    let fps = c.graph.fingerprints().unwrap();
    let nodes = c
        .graph
        .ids()
        .map(|id| {
            (
                c.graph.node(id).label().to_string(),
                (fps.get(id).to_hex(), c.graph.canonical(id, &fps)),
            )
        })
        .collect();
    (nodes, t.warnings.iter().map(|w| w.to_string()).collect())
}

fn diag_strings(d: &[csis_schema::Diagnostic]) -> Vec<String> {
    d.iter().map(|d| d.to_string()).collect()
}

/// The incremental tree equals a fresh load of the same files.
fn assert_same_as_fresh(inc: &Incremental, root: &Path) {
    let fresh = load(root, &opts());
    match (inc.tree(), &fresh) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.images.len(), b.images.len());
            assert_eq!(graph_view(a), graph_view(b));
        }
        (Err(a), Err(b)) => assert_eq!(diag_strings(a), diag_strings(b)),
        (a, b) => panic!(
            "incremental and fresh loads disagree: {:?} vs {:?}",
            a.as_ref().map(|_| "tree").map_err(|d| diag_strings(d)),
            b.as_ref().map(|_| "tree").map_err(|d| diag_strings(d))
        ),
    }
}

fn bake_fp(inc: &Incremental, image: &str) -> String {
    let t = inc.tree().as_ref().expect("loads");
    let c = compile(t, &NoPins).unwrap();
    let fps = c.graph.fingerprints().unwrap();
    fps.get(c.bake_of(image, "sim").unwrap()).to_hex()
}

#[test]
fn first_load_parses_every_file_once_and_a_rerun_executes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    assert_eq!(inc.files().count(), TREE_FILES);
    let first = during(&mut inc, |i| {
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(first.parses, TREE_FILES);
    assert_eq!(first.loads, 1);
    assert_eq!(first.executions, TREE_FILES + 1);
    assert_same_as_fresh(&inc, dir.path());

    // unchanged: asking again, and syncing an unchanged tree, execute nothing
    let again = during(&mut inc, |i| {
        assert!(i.sync().is_empty());
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(again, Counts::default());
}

#[test]
fn editing_one_image_file_reparses_only_that_file() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    let app0 = bake_fp(&inc, "app");
    let web0 = bake_fp(&inc, "web");
    let tools0 = bake_fp(&inc, "tools");

    std::fs::write(
        dir.path().join("images/app.yml"),
        APP.replace("app-setup", "app-setup-2"),
    )
    .unwrap();
    let edit = during(&mut inc, |i| {
        let r = i.sync();
        assert_eq!((r.changed, r.added, r.removed), (1, 0, 0));
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(edit.parses, 1, "only images/app.yml re-parses");
    assert_eq!(edit.loads, 1);
    assert_eq!(edit.executions, 2);
    assert_same_as_fresh(&inc, dir.path());
    // the edit took effect: app and its follow child move, web does not
    assert_ne!(bake_fp(&inc, "app"), app0);
    assert_ne!(bake_fp(&inc, "tools"), tools0);
    assert_eq!(bake_fp(&inc, "web"), web0);

    // a cfg edit re-parses only that cfg file
    std::fs::write(
        dir.path().join("cfg/_config.yml"),
        "id: incremental-test\n# a comment\n",
    )
    .unwrap();
    let cfg = during(&mut inc, |i| {
        assert_eq!(i.sync().changed, 1);
        i.tree().as_ref().expect("loads");
    });
    assert_eq!((cfg.parses, cfg.loads), (1, 1));
    assert_same_as_fresh(&inc, dir.path());
}

#[test]
fn a_change_undone_reparses_one_file_and_does_not_reload() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.tree().as_ref().expect("loads");
    let web = dir.path().join("images/web.yml");
    // changed and changed back before the next look: the input was set
    // twice, the parse runs again, compares equal by content, is backdated,
    // and the load is not re-executed.
    std::fs::write(&web, WEB.replace("web-setup", "web-setup-2")).unwrap();
    assert_eq!(inc.sync().changed, 1);
    std::fs::write(&web, WEB).unwrap();
    assert_eq!(inc.sync().changed, 1);
    let c = during(&mut inc, |i| {
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(c.parses, 1);
    assert_eq!(c.loads, 0, "an unchanged parse does not reload the tree");
    assert_same_as_fresh(&inc, dir.path());
}

#[test]
fn added_removed_and_broken_files() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.tree().as_ref().expect("loads");

    // a new image file: parsed alone, the tree has one more image
    std::fs::write(
        dir.path().join("images/more/a-worker.yml"),
        "images:\n  - name: worker\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    let add = during(&mut inc, |i| {
        let r = i.sync();
        assert_eq!((r.changed, r.added, r.removed), (0, 1, 0));
        assert_eq!(i.tree().as_ref().expect("loads").images.len(), 4);
    });
    assert_eq!((add.parses, add.loads), (1, 1));
    assert_same_as_fresh(&inc, dir.path());

    // a removed file: nothing parses, the tree reloads without it
    std::fs::remove_file(dir.path().join("images/more/tools.yaml")).unwrap();
    let rm = during(&mut inc, |i| {
        let r = i.sync();
        assert_eq!((r.changed, r.added, r.removed), (0, 0, 1));
        assert_eq!(i.tree().as_ref().expect("loads").images.len(), 3);
    });
    assert_eq!((rm.parses, rm.loads), (0, 1));
    assert_same_as_fresh(&inc, dir.path());

    // invalid YAML: the same diagnostics as a fresh load (file and line)
    std::fs::write(
        dir.path().join("images/app.yml"),
        "images:\n  - name: [app\n",
    )
    .unwrap();
    inc.sync();
    let errs = inc.tree().as_ref().expect_err("does not load");
    assert!(
        errs.iter()
            .any(|d| d.file == "images/app.yml" && d.line >= 2),
        "{:?}",
        diag_strings(errs)
    );
    assert_same_as_fresh(&inc, dir.path());

    // fixed again: loads, and only the fixed file re-parsed
    std::fs::write(dir.path().join("images/app.yml"), APP).unwrap();
    let fix = during(&mut inc, |i| {
        assert_eq!(i.sync().changed, 1);
        i.tree().as_ref().expect("loads");
    });
    assert_eq!((fix.parses, fix.loads), (1, 1));
    assert_same_as_fresh(&inc, dir.path());
}

#[test]
fn loads_the_repository_fixture_like_load() {
    let root = csis_testkit::fixture("graph/basic");
    let inc = Incremental::counting_executions(&root, &opts());
    inc.tree().as_ref().expect("loads");
    assert_same_as_fresh(&inc, &root);
}

#[test]
fn new_options_reload_without_reparsing() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    inc.tree().as_ref().expect("loads");
    let o = LoadOptions {
        undeclares: vec!["image:tools".into()],
        ..opts()
    };
    let c = during(&mut inc, |i| {
        i.set_options(&o);
        assert_eq!(i.tree().as_ref().expect("loads").images.len(), 2);
    });
    assert_eq!((c.parses, c.loads), (0, 1));
    let fresh = load(dir.path(), &o).expect("loads");
    assert_eq!(graph_view(inc.tree().as_ref().unwrap()), graph_view(&fresh));
}

/// A file whose parse did not move gives the images, the template reads and
/// the errors of the load before (`ImageMemo`); the load answers what a fresh
/// load does after every edit, and a new environment loads every file again.
#[test]
fn an_unmoved_image_file_is_not_loaded_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_tree(root);
    std::fs::write(
        root.join("images/env.yml"),
        "images:\n  - name: envy\n    source_image: deb12\n    tags: {owner: \"{{ ENV.CSIS_MEMO_X }}\"}\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    let with_x = |v: &str| LoadOptions {
        env: Some(BTreeMap::from([("CSIS_MEMO_X".to_string(), v.to_string())])),
        ..opts()
    };
    let o = with_x("v1");
    let same_as_fresh = |inc: &Incremental, o: &LoadOptions| match (inc.tree(), load(root, o)) {
        (Ok(a), Ok(b)) => {
            assert_eq!(graph_view(a), graph_view(&b));
            assert_eq!(a.template_reads, b.template_reads);
            assert!(a.template_reads.env_keys.contains("CSIS_MEMO_X"));
            a.image("envy").unwrap().model.tags["owner"].clone()
        }
        (Err(a), Err(b)) => {
            assert_eq!(diag_strings(a), diag_strings(&b));
            String::new()
        }
        (a, b) => panic!(
            "incremental and fresh loads disagree: {:?} vs {:?}",
            a.is_ok(),
            b.is_ok()
        ),
    };
    let mut inc = Incremental::counting_executions(root, &o);
    let first = during(&mut inc, |i| {
        i.tree().as_ref().expect("loads");
    });
    assert_eq!((first.image_files_kept, first.image_files_loaded), (0, 4));
    assert_eq!(same_as_fresh(&inc, &o), "v1");

    // one file edited: its images loaded again, the other three kept, and
    // envy's template reads still count
    std::fs::write(root.join("images/app.yml"), format!("# edited\n{APP}")).unwrap();
    let edit = during(&mut inc, |i| {
        i.sync();
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(
        (edit.loads, edit.image_files_kept, edit.image_files_loaded),
        (1, 3, 1)
    );
    assert_eq!(same_as_fresh(&inc, &o), "v1");

    // an image refused in one file: its error comes again while another
    // file is edited
    std::fs::write(
        root.join("images/bad.yml"),
        "images:\n  - name: bad\n    source_image: deb12\n    parent_policy: sometimes\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    inc.sync();
    let errs = inc.tree().as_ref().expect_err("refused");
    assert!(
        diag_strings(errs).iter().any(|d| d.contains("sometimes")),
        "{errs:?}"
    );
    same_as_fresh(&inc, &o);
    std::fs::write(root.join("images/app.yml"), APP).unwrap();
    let again = during(&mut inc, |i| {
        i.sync();
        let errs = i.tree().as_ref().expect_err("still refused");
        assert!(
            diag_strings(errs).iter().any(|d| d.contains("sometimes")),
            "{errs:?}"
        );
    });
    assert_eq!((again.image_files_kept, again.image_files_loaded), (4, 1));
    same_as_fresh(&inc, &o);
    std::fs::remove_file(root.join("images/bad.yml")).unwrap();
    inc.sync();
    same_as_fresh(&inc, &o);

    // a new environment: every file loaded again, with the new value
    let o2 = with_x("v2");
    let renewed = during(&mut inc, |i| {
        i.set_options(&o2);
        i.tree().as_ref().expect("loads");
    });
    assert_eq!(
        (renewed.image_files_kept, renewed.image_files_loaded),
        (0, 4)
    );
    assert_eq!(same_as_fresh(&inc, &o2), "v2");
}

/// A file holding an `ENC[age:...]` marker is loaded anew at every load:
/// what it opens to depends on the identity file, which may change while
/// the options do not.
#[test]
fn a_file_with_a_marker_is_loaded_again_with_the_identity_of_now() {
    use age::secrecy::ExposeSecret;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_tree(root);
    let id = age::x25519::Identity::generate();
    let marker = csis_rules::secrets::Recipients::parse(&[id.to_public().to_string()])
        .unwrap()
        .encrypt("opened")
        .unwrap();
    std::fs::write(
        root.join("images/sealed.yml"),
        format!("images:\n  - name: sealed\n    source_image: deb12\n    tags: {{token: \"{marker}\"}}\n    runtimes: [{{image_builder: sim-bake}}]\n"),
    )
    .unwrap();
    let keys = tempfile::tempdir().unwrap();
    let id_file = keys.path().join("tree.age-identity");
    std::fs::write(&id_file, id.to_string().expose_secret()).unwrap();
    let o = LoadOptions {
        identity: Some(id_file.display().to_string()),
        ..opts()
    };
    let mut inc = Incremental::counting_executions(root, &o);
    let first = during(&mut inc, |i| {
        let t = i.tree().as_ref().expect("loads");
        assert_eq!(t.image("sealed").unwrap().model.tags["token"], "opened");
    });
    assert_eq!((first.image_files_kept, first.image_files_loaded), (0, 4));

    // another file edited: the sealed file is loaded again with the others kept
    std::fs::write(root.join("images/app.yml"), format!("# edited\n{APP}")).unwrap();
    let edit = during(&mut inc, |i| {
        i.sync();
        i.tree().as_ref().expect("loads");
    });
    assert_eq!((edit.image_files_kept, edit.image_files_loaded), (2, 2));

    // the identity file now holds another key: the next load cannot open
    // the marker, as a fresh load cannot
    let other = age::x25519::Identity::generate();
    std::fs::write(&id_file, other.to_string().expose_secret()).unwrap();
    std::fs::write(root.join("images/app.yml"), APP).unwrap();
    inc.sync();
    let errs = inc.tree().as_ref().expect_err("the marker does not open");
    let fresh = load(root, &o).expect_err("nor in a fresh load");
    assert_eq!(diag_strings(errs), diag_strings(&fresh));
    assert!(
        diag_strings(errs)
            .iter()
            .any(|d| d.contains("cannot decrypt")),
        "{errs:?}"
    );
}

/// Set the mtime of every file under `dir` `secs` seconds back.
fn age_files(dir: &Path, secs: u64) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    for e in csis_testkit::files_under(dir) {
        std::fs::File::options()
            .write(true)
            .open(&e)
            .unwrap()
            .set_modified(then)
            .unwrap();
    }
}

#[test]
fn a_sync_reads_only_the_files_whose_metadata_moved_or_were_read_racily() {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let mut inc = Incremental::counting_executions(dir.path(), &opts());
    assert_eq!(inc.files_read(), TREE_FILES);
    // just written: their reads were racy, read again
    inc.sync();
    assert_eq!(inc.files_read(), 2 * TREE_FILES);
    // aged: their metadata moved, read once more, then no more
    age_files(dir.path(), 30);
    inc.sync();
    assert_eq!(inc.files_read(), 3 * TREE_FILES);
    assert!(inc.sync().is_empty());
    assert_eq!(
        inc.files_read(),
        3 * TREE_FILES,
        "nothing moved: nothing read"
    );

    // one file edited: that file alone is read, and the edit is seen
    std::fs::write(
        dir.path().join("images/app.yml"),
        APP.replace("app-setup", "app-setup-2"),
    )
    .unwrap();
    assert_eq!(inc.sync().changed, 1);
    assert_eq!(inc.files_read(), 3 * TREE_FILES + 1);
    assert_same_as_fresh(&inc, dir.path());
}

/// Every image of the incremental tree is what a fresh load makes of it
/// (as `Debug` prints it: the model, the parent, the builders, the
/// runtimes and mods as resolved, the origin).
fn assert_images_as_fresh(inc: &Incremental, root: &Path) {
    let fresh = load(root, &opts()).expect("a fresh load loads");
    let t = inc.tree().as_ref().expect("loads");
    assert_eq!(format!("{:?}", t.images), format!("{:?}", fresh.images));
    assert_eq!(graph_view(t), graph_view(&fresh));
}

/// A kept file's images come resolved (parent, builders, runtimes, mods;
/// the offline checks passed) from the last load while nothing the
/// resolution reads moved: the files outside `images/` and every image's
/// names. A name that moves in another file, or a cfg edit, resolves every
/// file again; every load equals a fresh one, image by image.
#[test]
fn a_kept_files_images_come_resolved_while_the_cfg_and_the_names_hold() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_tree(root);
    let mut inc = Incremental::counting_executions(root, &opts());
    // The context counts the secrets registered (process-wide: the tests
    // beside this one register some): a load during which the count moved
    // resolves every file again, and so may the next one.
    let count = csis_schema::secret::count;
    let mut last = (count(), count());
    let mut next = |inc: &mut Incremental, expected: (usize, usize)| {
        let before = count();
        let c = during(inc, |i| {
            i.sync();
            i.tree().as_ref().expect("loads");
        });
        let now = (before, count());
        let got = (c.image_files_kept, c.image_files_resolved);
        let was = std::mem::replace(&mut last, now);
        let registry_moved = !(was.0 == was.1 && was.1 == now.0 && now.0 == now.1);
        assert!(
            got == expected || (registry_moved && got == (expected.0, 0)),
            "kept and resolved: {got:?}, expected {expected:?}"
        );
        assert_images_as_fresh(inc, root);
    };
    next(&mut inc, (0, 0));

    // one image file edited: the other two come resolved
    std::fs::write(root.join("images/app.yml"), format!("# edited\n{APP}")).unwrap();
    next(&mut inc, (2, 2));

    // web takes another name and keeps `web` as an alias: app's file is
    // kept, but its image is resolved again, to its parent's new name
    std::fs::write(
        root.join("images/web.yml"),
        WEB.replace("name: web\n", "name: site\n    aliases: [web]\n"),
    )
    .unwrap();
    next(&mut inc, (2, 0));
    let t = inc.tree().as_ref().unwrap();
    assert_eq!(
        t.image("app").unwrap().parent,
        csis_rules::tree::Parent::Image("site".to_string())
    );
    // the names hold again: the next edit keeps two files resolved
    std::fs::write(
        root.join("images/more/tools.yaml"),
        format!("# edited\n{TOOLS}"),
    )
    .unwrap();
    next(&mut inc, (2, 2));

    // a cfg file edited: every kept file is resolved again
    std::fs::write(
        root.join("cfg/_config.yml"),
        "id: incremental-test\n# a comment\n",
    )
    .unwrap();
    next(&mut inc, (3, 0));
    std::fs::write(root.join("images/app.yml"), APP).unwrap();
    next(&mut inc, (2, 2));

    // an image builder renamed in cfg/ (the images name it by its old
    // name as an alias): resolved again, to the new name
    std::fs::write(
        root.join("cfg/image-builders.yml"),
        "image_builders:\n  - name: sim-bake-2\n    aliases: [sim-bake]\n    type: dummy\n    runtime: sim\n    is_default: true\n",
    )
    .unwrap();
    next(&mut inc, (3, 0));
    let t = inc.tree().as_ref().unwrap();
    assert_eq!(
        t.image("app").unwrap().runtimes[0].image_builder.as_deref(),
        Some("sim-bake-2")
    );
}
