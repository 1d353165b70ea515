//! Input that used to crash or exhaust the loader: each case is refused
//! with its file and line (and field path where there is one), quickly and
//! without a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use csis_rules::{load, LoadOptions};
use csis_schema::Diagnostic;
use csis_testkit::copy_dir;

fn fixtures() -> PathBuf {
    csis_testkit::fixture("config")
}

fn valid_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("valid"), dir.path());
    dir
}

fn opts() -> LoadOptions {
    LoadOptions {
        env: Some(BTreeMap::from([(
            "CSIS_TEST_USER".to_string(),
            "avery".to_string(),
        )])),
        ..Default::default()
    }
}

fn errors_of(dir: &Path) -> Vec<Diagnostic> {
    match load(dir, &opts()) {
        Ok(t) => panic!(
            "the tree loaded ({} images); expected refusals",
            t.images.len()
        ),
        Err(d) => d.into_iter().filter(|d| d.is_error()).collect(),
    }
}

#[track_caller]
fn find<'a>(d: &'a [Diagnostic], loc: &str, path: &str, msg: &str) -> &'a Diagnostic {
    d.iter()
        .find(|x| x.location() == loc && x.path == path && x.message.contains(msg))
        .unwrap_or_else(|| {
            panic!(
                "no diagnostic {loc}: {path}: ..{msg}..; got:\n{}",
                d.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })
}

fn image_file(body: &str) -> String {
    format!(
        "images:\n  - name: hostile\n    source_image: deb-12\n    runtimes:\n      - image_builder: sim-builder\n{body}"
    )
}

#[test]
fn an_undecryptable_marker_with_non_ascii_text_is_reported_not_a_panic() {
    let dir = valid_tree();
    // Non-ASCII characters straddle byte 20, where the message shortens the marker.
    let marker = "ENC[age:ÄÖÜäöüßéèêëïîôûùçñ€漢字かな]";
    std::fs::write(
        dir.path().join("images/zz.yaml"),
        image_file(&format!("    config:\n      secret: \"{marker}\"\n")),
    )
    .unwrap();
    let d = errors_of(dir.path());
    let x = find(
        &d,
        "images/zz.yaml:7:15",
        "images[0].config.secret",
        "cannot decrypt",
    );
    assert!(x.message.contains("ENC[age:ÄÖÜäöüßéèêëï...]"), "{x}");
}

/// Nine levels of nine aliases each: 9^9 (387 million) nodes once
/// expanded, from a file of a few hundred bytes.
fn alias_bomb(key: &str) -> String {
    let mut s = format!("{key}:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        s.push_str(&format!(
            "  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    s
}

#[test]
fn an_alias_bomb_is_refused_at_the_alias_that_exceeds_the_budget() {
    let dir = valid_tree();
    let text = image_file(&alias_bomb("    config").replace("\n  a", "\n      a"));
    std::fs::write(dir.path().join("images/zz.yaml"), &text).unwrap();
    let t = Instant::now();
    let d = errors_of(dir.path());
    let x = d
        .iter()
        .find(|x| x.file == "images/zz.yaml" && x.message.contains("aliases expand to more than"))
        .unwrap_or_else(|| panic!("no alias refusal: {d:?}"));
    // The 9^6-node level (`a5`) is the first past the budget of 250,000 nodes.
    assert_eq!(x.line, 12, "{x}");
    assert!(x.column > 0, "{x}");
    assert!(t.elapsed().as_secs() < 60, "took {:?}", t.elapsed());
}

#[test]
fn aliases_below_the_budget_still_expand() {
    let text = "a: &a {k: v, l: [1, 2]}\nb: *a\nc:\n  <<: *a\n  m: 3\n";
    let n = csis_schema::yaml::parse_str("t.yaml", Path::new("t.yaml"), text).unwrap();
    assert_eq!(n.get("b").unwrap().get_str("k").as_deref(), Some("v"));
    assert_eq!(n.get("c").unwrap().get_str("k").as_deref(), Some("v"));
    assert_eq!(n.get("c").unwrap().get_str("m").as_deref(), Some("3"));
}

#[test]
fn nesting_deeper_than_the_limit_is_refused_with_its_line() {
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let e = csis_schema::yaml::parse_str("t.yaml", Path::new("t.yaml"), &deep).unwrap_err();
    // The parser's own recursion limit or ours, whichever comes first.
    assert!(
        e.message.contains("nest deeper than") || e.message.contains("recursion limit"),
        "{e}"
    );
    assert_eq!(e.line, 1);
    // Aliases that nest deeper together than any one of them.
    let mut s = String::from("a0: &a0 [[[[[[[[[[x]]]]]]]]]]\n");
    for i in 1..40 {
        s.push_str(&format!("a{i}: &a{i} [[[[*a{}]]]]\n", i - 1));
    }
    let e = csis_schema::yaml::parse_str("t.yaml", Path::new("t.yaml"), &s).unwrap_err();
    assert!(e.message.contains("deeper than"), "{e}");
    assert!(e.line > 20, "{e}");
}

#[test]
fn a_template_loop_runs_out_of_fuel_at_its_field() {
    let dir = valid_tree();
    std::fs::write(
        dir.path().join("images/zz.yaml"),
        image_file(
            "    description: \"{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}\"\n",
        ),
    )
    .unwrap();
    let t = Instant::now();
    let d = errors_of(dir.path());
    find(
        &d,
        "images/zz.yaml:6:18",
        "images[0].description",
        "steps to render",
    );
    assert!(t.elapsed().as_secs() < 60, "took {:?}", t.elapsed());
}

#[test]
fn a_template_that_renders_too_much_text_is_refused_at_its_field() {
    let dir = valid_tree();
    std::fs::write(
        dir.path().join("images/zz.yaml"),
        image_file("    description: \"{{ 'x' * 3000000 }}\"\n"),
    )
    .unwrap();
    let d = errors_of(dir.path());
    find(
        &d,
        "images/zz.yaml:6:18",
        "images[0].description",
        "renders to more than",
    );
}

#[test]
fn invalid_utf8_names_its_line_and_column() {
    let dir = valid_tree();
    let mut bytes = image_file("    description: \"caf").into_bytes();
    bytes.extend_from_slice(b"\xff\"\n");
    std::fs::write(dir.path().join("images/zz.yaml"), bytes).unwrap();
    let d = errors_of(dir.path());
    let x = find(&d, "images/zz.yaml:6:22", "", "not UTF-8");
    assert!(x.message.contains("0xff"), "{x}");
}

#[test]
fn a_config_without_id_names_the_mapping() {
    let dir = valid_tree();
    std::fs::write(
        dir.path().join("cfg/_config.yml"),
        "---\ndateformat: \"%Y\"\nconfig:\n  carried_key: x\n",
    )
    .unwrap();
    let d = errors_of(dir.path());
    let x = d
        .iter()
        .find(|x| x.message.contains("`id`"))
        .unwrap_or_else(|| panic!("no missing-id error: {d:?}"));
    assert_eq!(x.file, "cfg/_config.yml", "{x}");
    assert_eq!((x.line, x.column), (2, 1), "{x}");
}

#[cfg(unix)]
#[test]
fn a_symlinked_image_file_is_read_like_a_cfg_one() {
    let dir = valid_tree();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("linked.yaml");
    std::fs::write(&target, image_file("")).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("images/linked.yaml")).unwrap();
    let t = load(dir.path(), &opts()).unwrap_or_else(|d| panic!("{d:?}"));
    assert!(
        t.images.iter().any(|i| i.name == "hostile"),
        "the linked file's image is loaded: {:?}",
        t.images.iter().map(|i| &i.name).collect::<Vec<_>>()
    );
    // A symlinked directory too.
    let sub = elsewhere.path().join("more");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("x.yml"),
        image_file("").replace("hostile", "via-dir"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&sub, dir.path().join("images/more")).unwrap();
    let t = load(dir.path(), &opts()).unwrap_or_else(|d| panic!("{d:?}"));
    assert!(t.images.iter().any(|i| i.name == "via-dir"));
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_in_images_is_refused() {
    let dir = valid_tree();
    std::os::unix::fs::symlink("..", dir.path().join("images/up")).unwrap();
    let d = errors_of(dir.path());
    let x = d
        .iter()
        .find(|x| x.message.contains("symbolic link loop"))
        .unwrap_or_else(|| panic!("no loop refusal: {d:?}"));
    assert_eq!(x.file, "images/up", "{x}");
}

#[cfg(unix)]
#[test]
fn a_dangling_symlinked_image_file_is_refused() {
    let dir = valid_tree();
    std::os::unix::fs::symlink("/nonexistent/x.yaml", dir.path().join("images/gone.yaml")).unwrap();
    let d = errors_of(dir.path());
    let x = d
        .iter()
        .find(|x| x.file == "images/gone.yaml")
        .unwrap_or_else(|| panic!("no refusal of the dangling link: {d:?}"));
    assert!(x.message.contains("cannot read"), "{x}");
}

#[test]
fn images_as_a_file_is_refused_not_zero_images() {
    let dir = valid_tree();
    std::fs::remove_dir_all(dir.path().join("images")).unwrap();
    std::fs::write(dir.path().join("images"), image_file("")).unwrap();
    let d = errors_of(dir.path());
    let x = d
        .iter()
        .find(|x| x.file == "images")
        .unwrap_or_else(|| panic!("no refusal of `images`: {d:?}"));
    assert!(x.message.contains("not a directory"), "{x}");
}

#[cfg(unix)]
#[test]
fn images_as_a_dangling_link_or_an_unreadable_directory_is_refused() {
    let dir = valid_tree();
    std::fs::remove_dir_all(dir.path().join("images")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/images", dir.path().join("images")).unwrap();
    let d = errors_of(dir.path());
    assert!(
        d.iter()
            .any(|x| x.file == "images/" && x.message.contains("cannot read")),
        "{d:?}"
    );
    // An unreadable directory (meaningful only when not root: root reads anything).
    use std::os::unix::fs::PermissionsExt;
    let dir = valid_tree();
    let images = dir.path().join("images");
    std::fs::set_permissions(&images, std::fs::Permissions::from_mode(0o000)).unwrap();
    let readable = std::fs::read_dir(&images).is_ok();
    let result = load(dir.path(), &opts());
    std::fs::set_permissions(&images, std::fs::Permissions::from_mode(0o755)).unwrap();
    if !readable {
        let d = result.expect_err("an unreadable images/ is refused");
        assert!(
            d.iter()
                .any(|x| x.is_error() && x.message.contains("cannot read")),
            "{d:?}"
        );
    }
}
