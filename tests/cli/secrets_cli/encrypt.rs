//! `csis encrypt` (in place, or a value from stdin) and `decrypt`: what
//! encrypt writes, validate and the library's load decrypt; `decrypt --json`
//! speaks Terraform's external protocol.

use super::{
    encrypt_keys, identity, keys_yaml, loaded_keys, text, tree, validate, with_stdin, KEY, KEY2,
};

#[test]
fn encrypt_in_place_round_trips_through_validate_and_the_loader() {
    let a = identity();
    let dir = tree(&[&a]);
    let out = encrypt_keys(&dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("cfg/zz-keys.yml:5:7: config.admin_public_keys[0]: encrypted"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cfg/zz-keys.yml:6:7: config.admin_public_keys[1]: encrypted"),
        "{stdout}"
    );

    let written = std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap();
    assert!(!written.contains("AAAAC3"), "plaintext left: {written}");
    // everything but the two values is byte for byte what it was
    let lines: Vec<&str> = written.lines().collect();
    let orig = keys_yaml();
    let olines: Vec<&str> = orig.lines().collect();
    assert_eq!(lines.len(), olines.len());
    for (i, (l, o)) in lines.iter().zip(&olines).enumerate() {
        if i == 4 {
            assert!(l.starts_with("    - ENC[age:") && l.ends_with(']'), "{l}");
        } else if i == 5 {
            assert!(
                l.starts_with("    - \"ENC[age:") && l.ends_with("]\""),
                "{l}"
            );
        } else {
            assert_eq!(l, o);
        }
    }

    // validate opens them with the identity, and refuses them without
    let ok = validate(&dir, Some(&a.secret));
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let no = validate(&dir, None);
    assert_eq!(no.status.code(), Some(1));
    assert!(
        text(&no.stderr).contains("admin_public_keys[0]"),
        "{}",
        text(&no.stderr)
    );
    assert_eq!(
        loaded_keys(dir.path(), &a).unwrap(),
        vec![KEY.to_string(), KEY2.to_string()]
    );

    // a second run leaves the markers as they are
    let again = encrypt_keys(&dir);
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again.stdout).contains("already encrypted"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap(),
        written
    );

    // decrypt --file with the wrong identity writes nothing
    let b = identity();
    let out = dir
        .csis()
        .args(["decrypt", "--file"])
        .arg(dir.path().join("cfg/zz-keys.yml"))
        .args(["--field", "admin_public_keys"])
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap(),
        written
    );

    // decrypt --file is the inverse: the values come back in clear, the rest as it was
    let out = dir
        .csis()
        .args(["decrypt", "--file"])
        .arg(dir.path().join("cfg/zz-keys.yml"))
        .args(["--field", "admin_public_keys"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let clear = std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap();
    assert_eq!(
        clear,
        keys_yaml().replace(&format!("- {KEY}"), &format!("- \"{KEY}\""))
    );
    assert_eq!(encrypt_keys(&dir).status.code(), Some(0));

    // a field the file does not hold is an error, and nothing changes
    let none = dir
        .csis()
        .args(["encrypt", "--file"])
        .arg(dir.path().join("cfg/zz-keys.yml"))
        .args(["--field", "nope"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1));
    assert!(
        text(&none.stderr).contains("no field named `nope`"),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn encrypt_a_value_from_stdin_and_decrypt_it() {
    // a public key (admin_public_keys takes nothing else), its comment the secret part
    const VALUE: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample hunter2-long-secret";
    let a = identity();
    let dir = tree(&[&a]);
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let out = with_stdin(c, &format!("{VALUE}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let marker = text(&out.stdout).trim().to_string();
    assert!(
        marker.starts_with("ENC[age:") && marker.ends_with(']'),
        "{marker}"
    );
    assert!(!marker.contains("hunter2"));

    // the marker is what the loader opens: put it in the tree
    std::fs::write(
        dir.path().join("cfg/zz-keys.yml"),
        format!("config:\n  admin_public_keys: {marker}\n"),
    )
    .unwrap();
    assert_eq!(
        loaded_keys(dir.path(), &a).unwrap(),
        vec![VALUE.to_string()]
    );

    // decrypt with the identity as a key string, and as a file
    let out = dir
        .csis()
        .args(["decrypt", &marker])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{VALUE}\n"));
    let idf = dir.path().join("id.age-identity");
    std::fs::write(&idf, format!("# test\n{}\n", a.secret)).unwrap();
    let mut c = dir.csis();
    c.args(["decrypt", "-"]).env("CSIS_CONFIG_IDENTITY", &idf);
    let out = with_stdin(c, &format!("{marker}\n"));
    assert_eq!(
        text(&out.stdout),
        format!("{VALUE}\n"),
        "{}",
        text(&out.stderr)
    );

    // the wrong identity, no identity, not a marker
    let b = identity();
    let out = dir
        .csis()
        .args(["decrypt", &marker])
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let out = dir.csis().args(["decrypt", &marker]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no identity"),
        "{}",
        text(&out.stderr)
    );
    let out = dir
        .csis()
        .args(["decrypt", "plain"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // --json on encrypt
    let mut c = dir.csis();
    c.args(["encrypt", "--json", "-"]);
    let out = with_stdin(c, "x-value");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["recipients"], 1);
    assert!(j["marker"].as_str().unwrap().starts_with("ENC[age:"));

    // no recipients: refused
    std::fs::write(
        dir.path().join("cfg/zz-encryption.yml"),
        "encryption:\n  recipients: []\n",
    )
    .unwrap();
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let out = with_stdin(c, "x");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("encryption.recipients is empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn decrypt_json_speaks_terraforms_external_protocol() {
    let a = identity();
    let dir = tree(&[&a]);
    let enc = |v: &str| {
        let mut c = dir.csis();
        c.args(["encrypt", "-"]);
        text(&with_stdin(c, v).stdout).trim().to_string()
    };
    let m1 = enc("okta-api-token-123");
    let m2 = enc("corp.example");
    let query = serde_json::json!({
        "token": m1,
        "email": format!("blake.bravo@{m2}"),
        "plain": "passes through",
    });
    let mut c = dir.csis();
    c.args(["decrypt", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret);
    let out = with_stdin(c, &query.to_string());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // one flat JSON object of strings on one line
    let stdout = text(&out.stdout);
    assert_eq!(stdout.trim().lines().count(), 1, "{stdout}");
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        j,
        serde_json::json!({
            "token": "okta-api-token-123",
            "email": "blake.bravo@corp.example",
            "plain": "passes through",
        })
    );

    // a non-string value, a marker the identity does not open: exit 1, reason on stderr, nothing on stdout
    let mut c = dir.csis();
    c.args(["decrypt", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret);
    let out = with_stdin(c, r#"{"n": 3}"#);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("`n`"), "{}", text(&out.stderr));
    let b = identity();
    let mut c = dir.csis();
    c.args(["decrypt", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &b.secret);
    let out = with_stdin(c, &query.to_string());
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}
