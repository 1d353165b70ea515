//! The operator's secrets commands against the loader: what `csis encrypt`
//! writes, `csis validate` (and the library's load) decrypts; `decrypt
//! --json` speaks Terraform's external protocol; `reencrypt` rotates to a new
//! recipient; `public-safe` finds planted material by file:line:field and
//! lets allowed values through; `mask` prints the CI mask lines.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use age::secrecy::ExposeSecret;
use csis_testkit::copy_dir;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyForTests admin@example";
const KEY2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAISecondKeyForTests ops@example";

fn fixtures() -> PathBuf {
    csis_testkit::fixture("config")
}

struct Id {
    secret: String,
    public: String,
}

fn identity() -> Id {
    let id = age::x25519::Identity::generate();
    Id {
        secret: id.to_string().expose_secret().to_string(),
        public: id.to_public().to_string(),
    }
}

/// The valid fixture, encrypting to `recipients`, with `cfg/zz-keys.yml`
/// holding two admin keys in clear among comments and other fields.
fn tree(recipients: &[&Id]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("valid"), dir.path());
    set_recipients(dir.path(), recipients);
    std::fs::write(dir.path().join("cfg/zz-keys.yml"), keys_yaml()).unwrap();
    dir
}

fn keys_yaml() -> String {
    format!(
        "---\n# the admins' keys\nconfig:\n  admin_public_keys:   # both\n    - {KEY}\n    - \"{KEY2}\"\n  other_setting: stays   # in clear\n"
    )
}

fn set_recipients(root: &Path, recipients: &[&Id]) {
    let mut s = String::from("---\nencryption:\n  recipients:\n");
    for r in recipients {
        s.push_str(&format!("    - {}\n", r.public));
    }
    std::fs::write(root.join("cfg/zz-encryption.yml"), s).unwrap();
}

fn csis(root: &Path) -> Command {
    let mut c = csis_testkit::csis();
    c.env_remove("CSIS_CONFIG_IDENTITY")
        .env("CSIS_TEST_USER", "avery")
        .arg("-C")
        .arg(root);
    c
}

fn with_stdin(mut c: Command, input: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn env() -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    e.insert("CSIS_TEST_USER".into(), "avery".into());
    e
}

/// The admin keys the library's load reads with `id`.
fn loaded_keys(root: &Path, id: &Id) -> Result<Vec<String>, String> {
    csis_rules::load(
        root,
        &csis_rules::LoadOptions {
            env: Some(env()),
            identity: Some(id.secret.clone()),
            ..Default::default()
        },
    )
    .map(|t| t.config.config.admin_public_keys.0.clone())
    .map_err(|d| {
        d.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn validate(root: &Path, identity: Option<&str>) -> Output {
    let mut c = csis(root);
    c.args(["validate", "--offline"]);
    if let Some(i) = identity {
        c.env("CSIS_CONFIG_IDENTITY", i);
    }
    c.output().unwrap()
}

fn encrypt_keys(root: &Path) -> Output {
    csis(root)
        .args(["encrypt", "--file"])
        .arg(root.join("cfg/zz-keys.yml"))
        .args(["--field", "admin_public_keys"])
        .output()
        .unwrap()
}

#[test]
fn encrypt_in_place_round_trips_through_validate_and_the_loader() {
    let a = identity();
    let dir = tree(&[&a]);
    let out = encrypt_keys(dir.path());
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
    let ok = validate(dir.path(), Some(&a.secret));
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let no = validate(dir.path(), None);
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
    let again = encrypt_keys(dir.path());
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again.stdout).contains("already encrypted"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap(),
        written
    );

    // decrypt --file with the wrong identity writes nothing
    let b = identity();
    let out = csis(dir.path())
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
    let out = csis(dir.path())
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
    assert_eq!(encrypt_keys(dir.path()).status.code(), Some(0));

    // a field the file does not hold is an error, and nothing changes
    let none = csis(dir.path())
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
    let a = identity();
    let dir = tree(&[&a]);
    let mut c = csis(dir.path());
    c.args(["encrypt", "-"]);
    let out = with_stdin(c, "hunter2-long-secret\n");
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
        vec!["hunter2-long-secret".to_string()]
    );

    // decrypt with the identity as a key string, and as a file
    let out = csis(dir.path())
        .args(["decrypt", &marker])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hunter2-long-secret\n");
    let idf = dir.path().join("id.age-identity");
    std::fs::write(&idf, format!("# test\n{}\n", a.secret)).unwrap();
    let mut c = csis(dir.path());
    c.args(["decrypt", "-"]).env("CSIS_CONFIG_IDENTITY", &idf);
    let out = with_stdin(c, &format!("{marker}\n"));
    assert_eq!(
        text(&out.stdout),
        "hunter2-long-secret\n",
        "{}",
        text(&out.stderr)
    );

    // the wrong identity, no identity, not a marker
    let b = identity();
    let out = csis(dir.path())
        .args(["decrypt", &marker])
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let out = csis(dir.path())
        .args(["decrypt", &marker])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no identity"),
        "{}",
        text(&out.stderr)
    );
    let out = csis(dir.path())
        .args(["decrypt", "plain"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // --json on encrypt
    let mut c = csis(dir.path());
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
    let mut c = csis(dir.path());
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
        let mut c = csis(dir.path());
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
    let mut c = csis(dir.path());
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
    let mut c = csis(dir.path());
    c.args(["decrypt", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret);
    let out = with_stdin(c, r#"{"n": 3}"#);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("`n`"), "{}", text(&out.stderr));
    let b = identity();
    let mut c = csis(dir.path());
    c.args(["decrypt", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &b.secret);
    let out = with_stdin(c, &query.to_string());
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn reencrypt_rotates_every_marker_to_the_new_recipient() {
    let a = identity();
    let b = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(dir.path()).status.code(), Some(0));
    // a second file with a marker, in a group file the loader reads raw
    std::fs::create_dir_all(dir.path().join("overlays")).unwrap();
    let mut c = csis(dir.path());
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
    let out = csis(dir.path())
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
    let out = csis(dir.path())
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
    let out = csis(dir.path())
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
    assert_eq!(validate(dir.path(), Some(&b.secret)).status.code(), Some(0));
    let after = std::fs::read_to_string(dir.path().join("cfg/zz-keys.yml")).unwrap();
    assert_ne!(after, before);
    assert!(
        after.contains("  admin_public_keys:   # both\n")
            && after.contains("  other_setting: stays   # in clear\n")
    );
    let o = std::fs::read_to_string(dir.path().join("overlays/o.yml")).unwrap();
    assert!(o.ends_with("]  # keep\n") && !o.contains(&m), "{o}");
    let out = csis(dir.path())
        .args(["decrypt", o.split_whitespace().nth(2).unwrap()])
        .env("CSIS_CONFIG_IDENTITY", &b.secret)
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "overlay-secret-value\n");
}

#[test]
fn mask_prints_an_add_mask_line_per_value() {
    let a = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(dir.path()).status.code(), Some(0));
    let mut c = csis(dir.path());
    c.args(["encrypt", "-"]);
    let short = text(&with_stdin(c, "abc").stdout).trim().to_string();
    let mut c = csis(dir.path());
    c.args(["encrypt", "-"]);
    let multi = text(&with_stdin(c, "first-line-secret\nsecond-line-50%").stdout)
        .trim()
        .to_string();
    std::fs::write(
        dir.path().join("cfg/zz-more.yml"),
        format!("config:\n  m1: {short}\n  m2: {multi}\n  m3: {short}\n"),
    )
    .unwrap();

    let out = csis(dir.path())
        .arg("mask")
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    lines.sort();
    let mut want = vec![
        "::add-mask::first-line-secret".to_string(),
        format!("::add-mask::{KEY}"),
        format!("::add-mask::{KEY2}"),
        "::add-mask::second-line-50%25".to_string(),
    ];
    want.sort();
    assert_eq!(lines, want);
    assert!(
        text(&out.stderr).contains("1 shorter than 8 not masked"),
        "{}",
        text(&out.stderr)
    );

    let out = csis(dir.path())
        .args(["mask", "--min", "2", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["markers"], 5);
    assert_eq!(j["values"].as_array().unwrap().len(), 5);
    assert!(j["values"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("abc")));

    // no identity: an error, not an empty mask
    let out = csis(dir.path()).arg("mask").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

fn public_safe(root: &Path, extra: &[&str], identity: Option<&str>) -> Output {
    let mut c = csis(root);
    c.arg("public-safe").args(extra);
    if let Some(i) = identity {
        c.env("CSIS_CONFIG_IDENTITY", i);
    }
    c.output().unwrap()
}

#[test]
fn public_safe_finds_planted_material_by_file_line_field_and_honours_allow() {
    let a = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(dir.path()).status.code(), Some(0));
    assert_eq!(public_safe(dir.path(), &[], None).status.code(), Some(0));

    let aws = "AKIAZ7Q2EXAMPLEKEY42";
    std::fs::write(
        dir.path().join("cfg/zz-leak.yml"),
        format!("---\nconfig:\n  deploy_key_id: {aws}\n  owner: jane.doe@corp.io\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("state.tfstate"), "{}").unwrap();
    let out = public_safe(dir.path(), &[], None);
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
    let out = public_safe(dir.path(), &["--json"], Some(&a.secret));
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
    let out = public_safe(dir.path(), &["--json"], Some(&a.secret));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["ok"], true);
    assert_eq!(j["allowed"], 2);

    // --config names another allow list (here an empty one): the findings return
    std::fs::write(dir.path().join("other.yml"), "public_safe:\n  allow: []\n").unwrap();
    let out = public_safe(
        dir.path(),
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
    let out = public_safe(dir.path(), &["--staged"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    // the fixture's admin keys are in clear, but SSH public keys are no secret
    let out = public_safe(
        dir.path(),
        &["--staged", "--tree", dir.path().to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("0 finding(s) in 12 staged file(s)"),
        "{}",
        text(&out.stderr)
    );
    git(dir.path(), &["commit", "-qm", "base"]);
    let out = public_safe(dir.path(), &["--staged"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let tok = "ghp_abcdefghijklmnopqrstuvwxyzABCDEF012345";
    std::fs::write(
        dir.path().join("scripts/deploy.sh"),
        format!("#!/bin/sh\nexport GH={tok}\n"),
    )
    .unwrap();
    // not staged yet: the index is clean
    assert_eq!(
        public_safe(dir.path(), &["--staged"], None).status.code(),
        Some(0)
    );
    git(dir.path(), &["add", "scripts/deploy.sh"]);
    // fixed in the work tree but not in the index: the index is what counts
    std::fs::write(dir.path().join("scripts/deploy.sh"), "#!/bin/sh\n").unwrap();
    let out = public_safe(dir.path(), &["--staged"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "scripts/deploy.sh:2:11: a GitHub token (github-token)\n"
    );
    assert!(!text(&out.stdout).contains(tok));
    assert_eq!(public_safe(dir.path(), &[], None).status.code(), Some(0));
}

#[test]
fn completions_and_man_describe_the_new_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = csis(dir.path())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = text(&out.stdout);
    assert!(
        s.contains("public-safe") && s.contains("reencrypt") && s.contains("_csis"),
        "{}",
        &s[..200.min(s.len())]
    );
    let out = csis(dir.path())
        .args(["completions", "zsh", "--json"])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["shell"], "zsh");
    assert!(j["script"].as_str().unwrap().contains("#compdef csis"));

    let out = csis(dir.path()).arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains(".TH csis 1"),
        "{}",
        text(&out.stdout)
    );
    let out = csis(dir.path())
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
    let out = csis(dir.path())
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

    let out = csis(dir.path())
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
    let out = public_safe(dir.path(), &["--json"], Some(&a.secret));
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("public_safe_tree", v);
}

/// A secret enters a fingerprint as its token (the same for every identity):
/// encrypting a clear field moves the fingerprint once (the records then
/// hold the token), rotating the recipients and identities moves nothing,
/// a new plaintext does.
#[test]
fn rotating_moves_no_fingerprint_and_a_new_plaintext_does() {
    let a = identity();
    let b = identity();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&csis_testkit::fixture("ops/basic"), dir.path());
    set_recipients(dir.path(), &[&a]);
    let plan = |id: &Id| -> Vec<(String, String)> {
        let out = csis(dir.path())
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
    let out = csis(dir.path())
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
    let out = csis(dir.path())
        .arg("reencrypt")
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(plan(&b), clear);

    // the field does enter a fingerprint: another plaintext moves it
    let mut c = csis(dir.path());
    c.args(["encrypt", "-"]);
    let m = text(&with_stdin(c, "false").stdout).trim().to_string();
    let t = std::fs::read_to_string(&images).unwrap();
    let start = t.find("ENC[age:").unwrap();
    let end = start + t[start..].find(']').unwrap() + 1;
    std::fs::write(&images, format!("{}{m}{}", &t[..start], &t[end..])).unwrap();
    assert_ne!(plan(&b), clear);
}
