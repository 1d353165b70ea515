//! What a bake recipe cannot honour is refused at load, with the file, the
//! line and the field: the docker example tree with one OS builder changed.

use csis_rules::{load, LoadOptions};

fn example_with(os_builder_tail: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(
        &csis_testkit::workspace().join("examples/docker"),
        dir.path(),
    );
    std::fs::write(
        dir.path().join("cfg/zz-more-os.yml"),
        format!(
            "os_builders:\n  - name: extra\n    type: alpine\n    family: alpine\n    family_version: \"3.20\"\n{os_builder_tail}    runtimes:\n      - image_builder: native\n        query:\n          native:\n            image: \"alpine:3.20\"\n"
        ),
    )
    .unwrap();
    dir
}

fn errors(tail: &str) -> Vec<String> {
    let dir = example_with(tail);
    match load(dir.path(), &LoadOptions::default()) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .into_iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.path, d.message))
            .collect(),
    }
}

#[test]
fn the_example_itself_loads() {
    assert!(errors("").is_empty(), "{:?}", errors(""));
}

#[test]
fn an_update_policy_the_family_cannot_honour_is_refused() {
    let e = errors("    update:\n      policy: security\n      exclude: [\"linux*\"]\n");
    assert!(
        e.iter().any(|l| l.starts_with("cfg/zz-more-os.yml:7: os_builders[0].update.policy: update policy `security` cannot be honoured on family alpine")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|l| l.starts_with("cfg/zz-more-os.yml:7: os_builders[0].update.exclude:")),
        "{e:?}"
    );
}

#[test]
fn okta_on_docker_and_unknown_types_are_refused() {
    let e = errors("    identity_types: [okta, kerberos]\n    storage_types: [tape]\n");
    assert!(
        e.iter().any(|l| l.starts_with("cfg/zz-more-os.yml:6: os_builders[0].identity_types[0]: identity type `okta` cannot be honoured on docker runtime")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|l| l
                .contains("os_builders[0].identity_types[1]: unknown identity type `kerberos`")),
        "{e:?}"
    );
    assert!(
        e.iter().any(|l| l.starts_with(
            "cfg/zz-more-os.yml:7: os_builders[0].storage_types[0]: unknown storage type `tape`"
        )),
        "{e:?}"
    );
}

/// The docker example with one more image file.
fn errors_with_image(image: &str) -> Vec<String> {
    let dir = example_with("");
    std::fs::write(dir.path().join("images/zz-more.yaml"), image).unwrap();
    match load(dir.path(), &LoadOptions::default()) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .into_iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.path, d.message))
            .collect(),
    }
}

#[test]
fn an_undeclared_machine_type_is_refused_at_its_line() {
    let e = errors_with_image(
        "images:\n  - name: big\n    source_image: extra\n    runtimes:\n      - image_builder: native\n        machine_type: huge\n",
    );
    assert_eq!(
        e,
        vec!["images/zz-more.yaml:6: images[0].runtimes[0].machine_type: machine type `huge` is not declared by runtime docker-local"],
    );
    // a declared one loads
    let ok = errors_with_image(
        "images:\n  - name: big\n    source_image: extra\n    runtimes:\n      - image_builder: native\n        machine_type: small\n",
    );
    assert!(ok.is_empty(), "{ok:?}");
}
