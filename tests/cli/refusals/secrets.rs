//! The refusals of secrets: an `ENC[age:...]` marker embedded in a longer
//! string, or where a value is read before decryption, a value without
//! its identity, a secret where csis cannot keep it out of the packer
//! build file.

use super::*;

#[test]
fn an_embedded_marker_is_refused() {
    let d = errors("cfg--enc-embedded.yml");
    expect(
        &d,
        "cfg/zz-enc-embedded.yml:6:18",
        "runtime_builders[0].description",
        "embedded in a longer string",
        None,
    );
}

#[test]
fn markers_where_values_are_read_before_decryption() {
    let d = errors("cfg--zz-enc-forbidden.yml");
    expect(
        &d,
        "cfg/zz-zz-enc-forbidden.yml:4:7",
        "encryption",
        "`encryption` may not be encrypted",
        None,
    );
    expect(
        &d,
        "cfg/zz-zz-enc-forbidden.yml:6:18",
        "config.apply_release",
        "`apply_release` may not be encrypted",
        None,
    );
    expect(
        &d,
        "cfg/zz-zz-enc-forbidden.yml:7:3",
        "config.ENC[age:YWJj]",
        "a mapping key may not be encrypted",
        None,
    );
    assert_eq!(d.len(), 3, "no cascaded errors: {d:?}");
}

/// An `ENC[age:...]` value: decrypted with the identity, refused without
/// it (naming the value and the missing identity).
#[test]
fn encrypted_values_need_the_identity() {
    use std::io::Write;
    let id = age::x25519::Identity::generate();
    let recipient = id.to_public();
    let enc = age::Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient))
        .unwrap();
    let mut ct = Vec::new();
    let mut w = enc.wrap_output(&mut ct).unwrap();
    w.write_all(b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample admin@example")
        .unwrap();
    w.finish().unwrap();
    use base64::Engine;
    let marker = format!(
        "ENC[age:{}]",
        base64::engine::general_purpose::STANDARD.encode(&ct)
    );
    let dir = tree_with("cfg--two-defaults.yml");
    std::fs::remove_file(dir.path().join("cfg/zz-two-defaults.yml")).unwrap();
    std::fs::write(
        dir.path().join("cfg/zz-keys.yml"),
        format!("---\nconfig:\n  admin_public_keys:\n    - {marker}\n"),
    )
    .unwrap();

    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(env()),
            ..Default::default()
        },
    );
    expect(
        &d,
        "cfg/zz-keys.yml:4:7",
        "config.admin_public_keys[0]",
        "cannot decrypt the encrypted value ENC[age:",
        Some("CSIS_CONFIG_IDENTITY"),
    );
    assert!(d[0].message.contains("no identity"), "{}", d[0]);

    // the key as a string, in the environment
    use age::secrecy::ExposeSecret;
    let key = id.to_string().expose_secret().to_string();
    let mut e = env();
    e.insert("CSIS_CONFIG_IDENTITY".into(), key.clone());
    let t = load(
        dir.path(),
        &LoadOptions {
            env: Some(e),
            ..Default::default()
        },
    )
    .expect("loads with the identity");
    assert_eq!(
        t.config.config.admin_public_keys.0,
        vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample admin@example".to_string()]
    );

    // a directory of *.age-identity files
    let ids = tempfile::tempdir().unwrap();
    std::fs::write(
        ids.path().join("test.age-identity"),
        format!("# test\n{key}\n"),
    )
    .unwrap();
    let t = load(
        dir.path(),
        &LoadOptions {
            env: Some(env()),
            identity: Some(ids.path().display().to_string()),
            ..Default::default()
        },
    )
    .expect("loads with a directory");
    assert_eq!(t.config.config.admin_public_keys.0.len(), 1);

    // the wrong identity is refused, naming where it came from
    let other = age::x25519::Identity::generate();
    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(env()),
            identity: Some(other.to_string().expose_secret().to_string()),
            ..Default::default()
        },
    );
    expect(
        &d,
        "cfg/zz-keys.yml:4:7",
        "config.admin_public_keys[0]",
        "cannot decrypt with CSIS_CONFIG_IDENTITY (a key)",
        None,
    );
}

/// A secret where csis cannot keep it out of the packer build file is
/// refused at its line: in a mod builder's `execute_command`, and in its
/// `extra_arguments` anywhere but as an `-e`/`--extra-vars` value (which
/// reaches ansible as a 0600 vars file).
#[test]
fn a_secret_in_execute_command_or_a_plain_extra_argument_is_refused() {
    use age::secrecy::ExposeSecret;
    use base64::Engine;
    use std::io::Write;
    let id = age::x25519::Identity::generate();
    let recipient = id.to_public();
    let marker = |plain: &str| {
        let enc =
            age::Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient))
                .unwrap();
        let mut ct = Vec::new();
        let mut w = enc.wrap_output(&mut ct).unwrap();
        w.write_all(plain.as_bytes()).unwrap();
        w.finish().unwrap();
        format!(
            "ENC[age:{}]",
            base64::engine::general_purpose::STANDARD.encode(&ct)
        )
    };
    let dir = tree_with("cfg--two-defaults.yml");
    std::fs::remove_file(dir.path().join("cfg/zz-two-defaults.yml")).unwrap();
    std::fs::write(
        dir.path().join("cfg/zz-secret-builders.yml"),
        format!(
            "---\nmod_builders:\n  - name: bash-secret-command\n    type: bash-remote\n    execute_command: {}\n  - name: ansible-secret-args\n    type: ansible\n    extra_arguments:\n      - -e\n      - {}\n      - {}\n",
            marker("sudo -S <<< refusal-secret-sudo-3f1 sh"),
            marker("pw=refusal-secret-vars-7a2"),
            marker("--vault-password=refusal-secret-arg-9d4"),
        ),
    )
    .unwrap();
    let mut e = env();
    e.insert(
        "CSIS_CONFIG_IDENTITY".into(),
        id.to_string().expose_secret().to_string(),
    );
    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(e),
            runtime_checks: csis_ops::wiring::offline_checks(),
            ..Default::default()
        },
    );
    expect(
        &d,
        "cfg/zz-secret-builders.yml:5:22",
        "mod_builders[0].execute_command",
        "`execute_command` holds a secret",
        Some("environment_vars"),
    );
    expect(
        &d,
        "cfg/zz-secret-builders.yml:11:9",
        "mod_builders[1].extra_arguments[2]",
        "this extra argument holds a secret",
        Some("-e"),
    );
    // the `-e` value is kept secret, not refused
    assert_eq!(d.len(), 2, "{d:?}");
    for x in &d {
        assert!(!x.to_string().contains("refusal-secret"), "{x}");
    }
}
