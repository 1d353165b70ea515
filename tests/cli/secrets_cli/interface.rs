//! The stable interfaces of the secrets commands: completions and man pages
//! describe them, and their `--json` documents are insta snapshots.

use super::{avery, identity, keys_yaml, public_safe, text, tree, Tree};

#[test]
fn completions_and_man_describe_the_new_commands() {
    let dir = avery(Tree::empty());
    std::fs::create_dir(dir.path()).unwrap();
    let out = dir.csis().args(["completions", "bash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = text(&out.stdout);
    assert!(
        s.contains("public-safe") && s.contains("reencrypt") && s.contains("_csis"),
        "{}",
        &s[..200.min(s.len())]
    );
    let out = dir
        .csis()
        .args(["completions", "zsh", "--json"])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["shell"], "zsh");
    assert!(j["script"].as_str().unwrap().contains("#compdef csis"));

    let out = dir.csis().arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains(".TH csis 1"),
        "{}",
        text(&out.stdout)
    );
    let out = dir
        .csis()
        .args(["man", "--dir"])
        .arg(dir.path().join("man"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.path().join("man/csis.1").is_file());
    assert!(dir.path().join("man/csis-public-safe.1").is_file());
    assert!(dir.path().join("man/csis-decrypt.1").is_file());
}

/// The `--json` documents of encrypt --file, reencrypt and public-safe
/// (stable interfaces), as insta snapshots.
#[test]
fn json_documents_are_stable() {
    let a = identity();
    let dir = tree(&[&a]);
    std::fs::write(
        dir.path().join("cfg/zz-keys.yml"),
        format!(
            "{}  port: 22\n  empty: \"\"\n  more:\n    admin_public_keys: []\n",
            keys_yaml()
        ),
    )
    .unwrap();
    let out = dir
        .csis()
        .args(["encrypt", "--json", "--file"])
        .arg(dir.path().join("cfg/zz-keys.yml"))
        .args([
            "--field",
            "admin_public_keys",
            "--field",
            "port",
            "--field",
            "empty",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("encrypt_file", v);

    let out = dir
        .csis()
        .args(["reencrypt", "--dry-run", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("reencrypt_dry_run", v);

    std::fs::write(
        dir.path().join("cfg/zz-leak.yml"),
        "---\nconfig:\n  deploy_key_id: AKIAZ7Q2EXAMPLEKEY42\n  owner: jane.doe@corp.io\n  ok: someone@example.org\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("run.tfplan"), "x").unwrap();
    let out = public_safe(&dir, &["--json"], Some(&a.secret));
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("public_safe_tree", v);
}
