//! `csis reencrypt` rotates every marker to the new recipients, and a
//! rotation moves no fingerprint while a new plaintext does.

use super::{
    avery, encrypt_keys, identity, loaded_keys, set_recipients, text, tree, validate, with_stdin,
    Id, Tree, KEY, KEY2,
};

#[test]
fn reencrypt_rotates_every_marker_to_the_new_recipient() {
    let a = identity();
    let b = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(&dir).status.code(), Some(0));
    // a second file with a marker, in a group file the loader reads raw
    std::fs::create_dir_all(dir.path().join("overlays")).unwrap();
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let m = text(&with_stdin(c, "overlay-secret-value").stdout)
        .trim()
        .to_string();
    std::fs::write(
        dir.path().join("overlays/o.yml"),
        format!("config:\n  token: {m}  # keep\n"),
    )
    .unwrap();

    // the recipients change: B replaces A
    set_recipients(dir.path(), &[&b]);
    let before = std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap();

    // the wrong identity opens nothing: refused, nothing written
    let out = dir
        .csis()
        .arg("reencrypt")
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("3 encrypted value(s) do not open; nothing written"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("cfg/zz-keys.yml:5:7: config.admin_public_keys[0]"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap(),
        before
    );

    // dry run: lists, writes nothing
    let out = dir
        .csis()
        .args(["reencrypt", "--dry-run", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["dry_run"], true);
    assert_eq!(j["markers"], 3);
    let files: Vec<&str> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, vec!["cfg/zz-keys.yml", "overlays/o.yml"]);
    assert_eq!(
        j["files"][0]["markers"][1]["field"],
        "config.admin_public_keys[1]"
    );
    assert_eq!(j["files"][0]["markers"][1]["line"], 6);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap(),
        before
    );

    // the rotation
    let out = dir
        .csis()
        .arg("reencrypt")
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        !all.contains("AAAAC3") && !all.contains("overlay-secret"),
        "plaintext printed: {all}"
    );
    assert!(
        all.contains("re-encrypted 3 marker(s) in 2 file(s) to 1 recipient(s)"),
        "{all}"
    );

    // B opens everything now, A nothing; the rest of the files is kept
    assert_eq!(
        loaded_keys(dir.path(), &b).unwrap(),
        vec![KEY.to_string(), KEY2.to_string()]
    );
    assert!(loaded_keys(dir.path(), &a).is_err());
    assert_eq!(validate(&dir, Some(&b.secret)).status.code(), Some(0));
    let after = std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap();
    assert_ne!(after, before);
    assert!(
        after.contains("  admin_public_keys:   # both\n")
            && after.contains("  other_setting: stays   # in clear\n")
    );
    let o = std::fs::read_to_string(dir.path().join("overlays/o.yml")).unwrap();
    assert!(o.ends_with("]  # keep\n") && !o.contains(&m), "{o}");
    let out = dir
        .csis()
        .args(["decrypt", o.split_whitespace().nth(2).unwrap()])
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "overlay-secret-value\n");
}

/// A secret enters a fingerprint as its token (the same for every identity):
/// encrypting a clear field moves the fingerprint once (the records then
/// hold the token), rotating the recipients and identities moves nothing,
/// a new plaintext does.
#[test]
fn rotating_moves_no_fingerprint_and_a_new_plaintext_does() {
    let a = identity();
    let b = identity();
    let dir = avery(Tree::of("ops/basic"));
    set_recipients(dir.path(), &[&a]);
    let plan = |id: &Id| -> Vec<(String, String)> {
        let out = dir
            .csis()
            .args(["plan", "--json"])
            .env("CSIS_CONFIG_IDENTITY", &id.secret)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["label"].as_str().unwrap().to_string(),
                    n["fingerprint"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // an in-bake test command enters the bake's fingerprint
    let images = dir.path().join("images/images.yaml");
    let t = std::fs::read_to_string(&images).unwrap();
    let t = t.replacen(
        "  - name: app\n    source_image: web\n    parent_policy: follow\n",
        "  - name: app\n    source_image: web\n    parent_policy: follow\n    tests:\n      commands:\n        - run: \"echo app-ok\"\n",
        1,
    );
    assert!(t.contains("echo app-ok"));
    std::fs::write(&images, t).unwrap();
    let clear = plan(&a);
    let out = dir
        .csis()
        .args(["encrypt", "--file"])
        .arg(&images)
        .args(["--field", "run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&images)
        .unwrap()
        .contains("- run: \"ENC[age:"));
    // the bake's inputs now hold the value's token, not its plaintext: the
    // one bake that encrypting costs
    let sealed = plan(&a);
    assert_ne!(sealed, clear);
    let clear = sealed;

    set_recipients(dir.path(), &[&b]);
    let out = dir
        .csis()
        .arg("reencrypt")
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(plan(&b), clear);

    // the field does enter a fingerprint: another plaintext moves it
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let m = text(&with_stdin(c, "false").stdout).trim().to_string();
    let t = std::fs::read_to_string(&images).unwrap();
    let start = t.find("ENC[age:").unwrap();
    let end = start + t[start..].find(']').unwrap() + 1;
    std::fs::write(&images, format!("{}{m}{}", &t[..start], &t[end..])).unwrap();
    assert_ne!(plan(&b), clear);
}
