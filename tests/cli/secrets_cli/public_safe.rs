//! `csis public-safe` finds planted material by file:line:field, lets
//! allowed values through, and with `--staged` scans what the index would
//! commit.

use std::path::Path;
use std::process::Command;

use super::{encrypt_keys, identity, public_safe, text, tree, KEY};

#[test]
fn public_safe_finds_planted_material_by_file_line_field_and_honours_allow() {
    let a = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(&dir).status.code(), Some(0));
    assert_eq!(public_safe(&dir, &[], None).status.code(), Some(0));

    let aws = "AKIAZ7Q2EXAMPLEKEY42";
    std::fs::write(
        dir.path().join("cfg/zz-leak.yml"),
        format!("---\nconfig:\n  deploy_key_id: {aws}\n  owner: jane.doe@corp.io\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("state.tfstate"), "{}").unwrap();
    let out = public_safe(&dir, &[], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "cfg/zz-leak.yml:3:18: config.deploy_key_id: an AWS access key id (aws-access-key-id)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("cfg/zz-leak.yml:4:10: config.owner: an e-mail address (email)"),
        "{stdout}"
    );
    assert!(stdout.contains("state.tfstate:"), "{stdout}");
    let all = format!("{stdout}{}", text(&out.stderr));
    assert!(
        !all.contains(aws) && !all.contains("jane.doe"),
        "the flagged text printed: {all}"
    );

    // the tree's own plaintext, in clear elsewhere, is found when the identity opens the markers
    std::fs::write(dir.path().join("NOTES.md"), format!("the key is {KEY}\n")).unwrap();
    let out = public_safe(&dir, &["--json"], Some(&a.secret));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["ok"], false);
    assert_eq!(j["plaintexts_checked"], true);
    let rules: Vec<(String, String)> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["rule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        rules.contains(&("NOTES.md".into(), "plaintext".into())),
        "{rules:?}"
    );
    assert!(!text(&out.stdout).contains("AAAAC3"));

    // allowed by decision: a substring and paths
    std::fs::write(
        dir.path().join("cfg/zz-allow.yml"),
        "public_safe:\n  allow:\n    - \"@CORP.IO\"\n    - \"AKIAZ7Q2\"\n    - \"path:*.tfstate\"\n    - \"path:NOTES.md\"\n",
    )
    .unwrap();
    let out = public_safe(&dir, &["--json"], Some(&a.secret));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["ok"], true);
    assert_eq!(j["allowed"], 2);

    // --config names another allow list (here an empty one): the findings return
    std::fs::write(dir.path().join("other.yml"), "public_safe:\n  allow: []\n").unwrap();
    let out = public_safe(
        &dir,
        &["--config", dir.path().join("other.yml").to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(st.status.success(), "git {args:?}: {}", text(&st.stderr));
}

#[test]
fn public_safe_staged_scans_what_the_index_would_commit() {
    let a = identity();
    let dir = tree(&[&a]);
    // outside git: --staged cannot answer
    let out = public_safe(&dir, &["--staged"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    // the fixture's admin keys are in clear, but SSH public keys are no secret
    let out = public_safe(
        &dir,
        &["--staged", "--tree", dir.path().to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("0 finding(s) in 13 staged file(s)"),
        "{}",
        text(&out.stderr)
    );
    git(dir.path(), &["commit", "-qm", "base"]);
    let out = public_safe(&dir, &["--staged"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let tok = "ghp_abcdefghijklmnopqrstuvwxyzABCDEF012345";
    std::fs::write(
        dir.path().join("scripts/deploy.sh"),
        format!("#!/bin/sh\nexport GH={tok}\n"),
    )
    .unwrap();
    // not staged yet: the index is clean
    assert_eq!(
        public_safe(&dir, &["--staged"], None).status.code(),
        Some(0)
    );
    git(dir.path(), &["add", "scripts/deploy.sh"]);
    // fixed in the work tree but not in the index: the index is what counts
    std::fs::write(dir.path().join("scripts/deploy.sh"), "#!/bin/sh\n").unwrap();
    let out = public_safe(&dir, &["--staged"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "scripts/deploy.sh:2:11: a GitHub token (github-token)\n"
    );
    assert!(!text(&out.stdout).contains(tok));
    assert_eq!(public_safe(&dir, &[], None).status.code(), Some(0));
}
