//! `csis build --keep-failed` where a due bake's runtime cannot keep a
//! failed bake's machine (the dummy runtime): refused in one line before
//! anything runs, nothing recorded. AWS keeps packer's builder instance
//! (runtimes/aws/tests/aws/bake.rs): not refused (the AWS endpoint is a
//! closed port on 127.0.0.1, so the build fails later, at the runtime).

use csis_cache::MetaState;
use csis_testkit::{fixture, Tree};

fn refused(t: &Tree, runtime: &str, kind: &str) {
    let (code, out, err) = t.run(&["build", "--keep-failed", "--no-state-query"]);
    assert_ne!(code, 0, "{out}\n{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("--keep-failed"))
        .collect();
    assert_eq!(lines.len(), 1, "{out}\n{err}");
    assert!(
        lines[0].contains(&format!("on runtime {runtime} (type {kind}"))
            && lines[0]
                .contains("cannot keep a failed bake's machine; build it without --keep-failed"),
        "{err}"
    );
    assert!(!out.contains("started"), "{out}");
    let lineage = MetaState::of_tree(&t.root).lineage().unwrap();
    assert!(lineage.builds.is_empty(), "{lineage:?}");
}

#[test]
fn keep_failed_is_not_refused_for_an_aws_runtime() {
    let t = Tree::copy(
        &fixture("ops/aws"),
        &[("@SUBNET@", "subnet-0123456789abcdef0")],
    )
    .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    .env("AWS_ACCESS_KEY_ID", "testing")
    .env("AWS_SECRET_ACCESS_KEY", "testing")
    .env("AWS_EC2_METADATA_DISABLED", "true")
    .env_remove("AWS_PROFILE");
    let (code, out, err) = t.run(&["build", "--keep-failed", "--no-state-query"]);
    assert_ne!(code, 0, "the endpoint is closed: {out}\n{err}");
    assert!(
        !err.contains("cannot keep a failed bake's machine"),
        "{out}\n{err}"
    );
}

#[test]
fn keep_failed_is_refused_for_a_dummy_runtime() {
    let t = Tree::copy(&fixture("ops/basic"), &[]);
    let rt = std::fs::read_to_string(t.root.join("cfg/runtime-builders.yml")).unwrap();
    let name = rt
        .lines()
        .find_map(|l| l.trim().strip_prefix("- name: "))
        .unwrap()
        .to_string();
    refused(&t, &name, "dummy");
}
