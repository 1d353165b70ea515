//! An edit that moves no node patches the last graph in place; any other
//! edit, or a tree with a fleet, assembles it again; both compile like a
//! plain `compile()`.

use std::path::Path;

use csis_rules::compile::NoPins;
use csis_rules::incremental::Incremental;

use super::compile::{assert_compiles_like_plain, sync_and_compile, write_corner_tree};
use crate::incremental::opts;

/// An edit that moves inputs and no node (every series keeps its entries,
/// parents, node labels, post-bake tests and release model) patches the
/// last graph in place instead of assembling it again; any other edit
/// assembles it again; either way the graph is the plain compile's (nodes,
/// fingerprints, specs, edges, topological order, warnings). The corner
/// tree has resolve nodes, a fixed parent, a skipped second entry on one
/// runtime, a release and retention (dispose nodes).
#[test]
fn an_edit_that_moves_no_node_patches_the_graph_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_corner_tree(root);
    let corners = root.join("images/corners.yml");
    let text = std::fs::read_to_string(&corners).unwrap();
    // kid: a post-bake test
    let tested = "tests: {post_bake: {commands: [{run: \"true\"}]}}";
    let text = text.replace("  - name: kid\n", &format!("  - name: kid\n    {tested}\n"));
    std::fs::write(&corners, &text).unwrap();
    let mut inc = Incremental::counting_executions(root, &opts());
    inc.compiled().expect("compiles");
    assert_compiles_like_plain(&inc, root, &opts(), &NoPins);
    let rt = root.join("cfg/runtime-builders.yml");
    let rt_text = std::fs::read_to_string(&rt).unwrap();

    type Edit = Box<dyn Fn(&Path) -> std::io::Result<()>>;
    let on_corners = |from: &'static str, to: &'static str| -> Edit {
        let t = text.clone();
        Box::new(move |r: &Path| {
            assert!(t.contains(from), "{from}");
            std::fs::write(r.join("images/corners.yml"), t.replace(from, to))
        })
    };
    let steps: Vec<(&str, bool, Edit)> = vec![
        (
            "an input of an image on two runtimes",
            true,
            on_corners("  - name: kid\n", "  - name: kid\n    primary_disk_size: 40\n"),
        ),
        (
            "an input of an image whose second entry is skipped",
            true,
            on_corners("  - name: twice\n", "  - name: twice\n    primary_disk_size: 41\n"),
        ),
        (
            "the retention of a runtime (every dispose spec on it)",
            true,
            Box::new({
                let t = rt_text.clone();
                move |r: &Path| {
                    std::fs::write(
                        r.join("cfg/runtime-builders.yml"),
                        t.replace("retention_keep: 2", "retention_keep: 3"),
                    )
                }
            }),
        ),
        (
            "a post-bake test's command",
            false,
            on_corners("run: \"true\"", "run: \"false\""),
        ),
        (
            "a release model",
            false,
            on_corners("release: {model: stable}", "release: {model: edge}"),
        ),
        (
            "a runtime added to an image",
            false,
            on_corners(
                "  - name: far\n    source_image: deb12\n    runtimes: [{image_builder: sim2-bake}]\n",
                "  - name: far\n    source_image: deb12\n    runtimes: [{image_builder: sim2-bake}, {image_builder: sim-bake}]\n",
            ),
        ),
        (
            "back as it was, and an input of the OS builder's child",
            false,
            on_corners("  - name: far\n", "  - name: far\n    primary_disk_size: 42\n"),
        ),
        (
            "an input again, after an assembly",
            true,
            on_corners("  - name: far\n", "  - name: far\n    primary_disk_size: 43\n"),
        ),
    ];
    for (what, patch, edit) in steps {
        edit(root).unwrap();
        let (r, c) = sync_and_compile(&mut inc);
        assert!(!r.is_empty(), "{what}: the edit moved a file");
        assert_eq!(c.graphs, 1, "{what}: {c:?}");
        assert_eq!(c.graphs_patched, usize::from(patch), "{what}: {c:?}");
        assert_compiles_like_plain(&inc, root, &opts(), &NoPins);
    }
}

/// A tree with a fleet assembles its graph again at every edit (the fleet's
/// nodes read what follows each bake), and compiles like plain.
#[test]
fn a_tree_with_a_fleet_is_assembled_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    csis_testkit::copy_dir_with(
        &csis_testkit::fixture("fleet-docker-graph"),
        root,
        &[
            ("@REPO@", "csis-fleet-test/r"),
            ("@BASE@", "csis-fleet-test/base:t"),
            ("@ID@", "fleet-graph"),
            ("@APPLY@", "true"),
            ("@WEB@", "web1"),
            ("@APP@", "app1"),
        ],
    );
    let images = root.join("images/images.yaml");
    let text = std::fs::read_to_string(&images).unwrap();
    let mut inc = Incremental::counting_executions(root, &opts());
    inc.compiled().expect("compiles");
    for (i, disk) in [40, 41].into_iter().enumerate() {
        let edited = text.replace(
            "  - name: app\n",
            &format!("  - name: app\n    primary_disk_size: {disk}\n"),
        );
        assert_ne!(edited, text);
        std::fs::write(&images, edited).unwrap();
        let (_, c) = sync_and_compile(&mut inc);
        assert_eq!((c.graphs, c.graphs_patched), (1, 0), "edit {i}: {c:?}");
        assert_compiles_like_plain(&inc, root, &opts(), &NoPins);
    }
}
