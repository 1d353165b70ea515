//! `--format github` annotations name files as GitHub reads them: from the
//! top of the repository that holds the tree (a tree in `infra/images/` of
//! a repository annotates `infra/images/cfg/...`), and from the tree's root
//! outside any repository (`tests/cli_cases/plan-github.case`).

use csis_testkit::Tree;

/// A copy of `tests/fixtures/ops/ci` at `<tmp>/repo/infra/images`, the top
/// of a git work tree at `<tmp>/repo`, with an unknown field at
/// cfg/runtime-builders.yml:6:5.
fn tree_in_a_repository() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let root = repo.join("infra/images");
    csis_testkit::copy_dir(&csis_testkit::fixture("ops/ci"), &root);
    let git = std::process::Command::new("git")
        .arg("init")
        .arg("-q")
        .arg(&repo)
        .status();
    if !git.is_ok_and(|s| s.success()) {
        // no git here: the marker the lookup reads is the same
        std::fs::create_dir_all(repo.join(".git")).unwrap();
    }
    let f = root.join("cfg/runtime-builders.yml");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("    bake_secnds: 1\n");
    std::fs::write(&f, text).unwrap();
    (tmp, root)
}

#[test]
fn annotations_name_files_from_the_top_of_the_repository() {
    let (_tmp, root) = tree_in_a_repository();
    let t = Tree::at(&root);
    let expected = "::error file=infra/images/cfg/runtime-builders.yml,line=6,col=5,title=runtime_builders[0].bake_secnds::unknown field";
    for args in [
        &["validate", "--offline", "--format", "github"][..],
        &["plan", "--format", "github"],
    ] {
        // named from outside and from inside the tree (`-C .`)
        for (cwd, dir) in [(root.parent().unwrap(), "images"), (root.as_path(), ".")] {
            let (code, out, err) = csis_testkit::output(t.csis_from(cwd, dir).args(args));
            assert_eq!(code, 1, "{args:?}: {out}\n{err}");
            assert!(
                out.lines().any(|l| l == expected),
                "{args:?} in {}: {out}",
                cwd.display()
            );
        }
    }
}

#[test]
fn outside_a_repository_annotations_stay_relative_to_the_tree() {
    let t = Tree::of("ops/ci");
    if t.root.ancestors().any(|a| a.join(".git").exists()) {
        println!("skipped: the temporary directory lies in a git work tree");
        return;
    }
    let f = t.root.join("cfg/runtime-builders.yml");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("    bake_secnds: 1\n");
    std::fs::write(&f, text).unwrap();
    let (code, out, _) = t.run(&["validate", "--offline", "--format", "github"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("::error file=cfg/runtime-builders.yml,line=6,col=5,"),
        "{out}"
    );
}
