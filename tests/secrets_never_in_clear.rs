//! A value that came from a decrypted `ENC[age:...]` marker or from a
//! template's `ENV` is never written or printed in clear: a distinct
//! plaintext is placed in each way users write one, every command runs
//! (text and `--json`), and every output and every file under the tree is
//! searched for each plaintext: zero hits. Fingerprints still move when a
//! secret changes, and `plan --explain` says so without showing it.
//!
//! Needs the `age` and `age-keygen` programs (Debian package `age`).

mod build_support;

use std::path::Path;

use build_support::csis;

struct Secrets {
    key_file: std::path::PathBuf,
    recipient: String,
}

fn keygen(dir: &Path) -> Secrets {
    let (key_file, recipient) = csis_testkit::age_keygen(dir);
    Secrets {
        key_file,
        recipient,
    }
}

fn encrypt(s: &Secrets, plain: &str) -> String {
    csis_testkit::age_encrypt(&s.recipient, plain)
}

/// The plaintexts, one per way of writing a secret.
const MOD_CONFIG: &str = "plain-mod-config-7f1d2a";
const IMAGE_CONFIG: &str = "plain-image-config-93be40";
const INLINE_SCRIPT: &str = "echo plain-inline-script-4c0e88";
const ENSURE_CONTENT: &str = "plain-ensure-content-d2a9f1";
const ENV_VALUE: &str = "plain-env-value-61b7c3";
const DOCKER_PASSWORD: &str = "plain-docker-pw-0a5e77";
const VALIDATED: &str = "plain-validated-field-e4412b";
const AWS_KEY_ID: &str = "AKIAPLAINKEYID5G7Q";
const AWS_SECRET: &str = "plain-aws-secret-access-key-b81c09";

fn write_tree(dir: &Path, s: &Secrets, mod_config: &str) {
    let w = |p: &str, t: String| {
        let f = dir.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    w("cfg/_config.yml", "id: secrets-tree\n".into());
    w(
        "cfg/builders.yml",
        format!(
            r#"runtime_builders:
  - name: sim
    type: dummy
    is_default: true
    default_machine_type: small
    bake_seconds: 0
  - name: dock
    type: docker
    host: "{}"
    default_machine_type: small
    machine_types:
      small: {{ cpus: 1, memory: 1g }}
  - name: cloud
    type: aws
    region: us-east-2
    account_id: "123456789012"
    default_machine_type: t3.medium
    credentials:
      aws_access_key_id: "{}"
      aws_secret_access_key: "{}"
    networking:
      network: default
      subnets:
        - name: a
          subnet_id: subnet-1
          is_default: true
image_builders:
  - name: sim-bake
    type: dummy
    runtime: sim
    is_default: true
  - name: dock-native
    type: docker
    runtime: dock
mod_builders:
  - name: ansible
    type: ansible
    is_default: true
  - name: bash
    type: bash-remote
os_builders:
  - name: deb12
    type: debian
    family: debian
    family_version: "12"
    is_default: true
    runtimes:
      - image_builder: sim-bake
"#,
            encrypt(s, &format!("tcp://csis:{DOCKER_PASSWORD}@127.0.0.1:1")),
            encrypt(s, AWS_KEY_ID),
            encrypt(s, AWS_SECRET),
        ),
    );
    w("playbooks/web.yml", "- hosts: all\n  tasks: []\n".into());
    w(
        "images/images.yaml",
        format!(
            r#"images:
  - name: web
    source_image: deb12
    runtimes: [{{image_builder: sim-bake}}]
    config:
      token: "{image_config}"
      from_env: "{{{{ ENV.CSIS_SECRET_TEST_VALUE }}}}"
    modifications:
      - name: web-setup
        playbooks: [playbooks/web.yml]
        config:
          password: "{mod_config}"
          copied: "prefix-{{{{ this.config.token }}}}"
      - name: shell
        type: bash
        script:
          - "{inline}"
        ensure:
          files:
            - path: /etc/secret
              content: "{ensure}"
"#,
            image_config = encrypt(s, IMAGE_CONFIG),
            mod_config = encrypt(s, mod_config),
            inline = encrypt(s, INLINE_SCRIPT),
            ensure = encrypt(s, ENSURE_CONTENT),
        ),
    );
}

fn all_plaintexts() -> Vec<&'static str> {
    vec![
        MOD_CONFIG,
        "plain-mod-config-rotated-55aa01",
        IMAGE_CONFIG,
        INLINE_SCRIPT,
        ENSURE_CONTENT,
        ENV_VALUE,
        DOCKER_PASSWORD,
        VALIDATED,
        AWS_KEY_ID,
        AWS_SECRET,
    ]
}

#[track_caller]
fn assert_clean(what: &str, text: &str) {
    for p in all_plaintexts() {
        assert!(
            !text.contains(p),
            "{what} holds the secret `{p}` in clear:\n{}",
            text.lines()
                .filter(|l| l.contains(p))
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

fn assert_tree_clean(dir: &Path) {
    for e in walkdir_all(dir) {
        let bytes = std::fs::read(&e).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert_clean(&e.display().to_string(), &text);
    }
}

fn walkdir_all(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Run `csis <args>` on the tree with the identity and the environment
/// value; return (exit code, stdout + stderr), checked for plaintexts.
fn run(dir: &Path, s: &Secrets, args: &[&str]) -> (i32, String) {
    let out = csis(dir)
        .env("CSIS_CONFIG_IDENTITY", &s.key_file)
        .env("CSIS_SECRET_TEST_VALUE", ENV_VALUE)
        // Never real AWS: the endpoint is a closed local port.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean(&format!("`csis {}`", args.join(" ")), &text);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn no_secret_is_written_or_printed_in_clear() {
    let keys = tempfile::tempdir().unwrap();
    let s = keygen(keys.path());
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    write_tree(dir, &s, MOD_CONFIG);

    let (code, out) = run(dir, &s, &["validate", "--offline"]);
    assert_eq!(code, 0, "{out}");
    run(dir, &s, &["validate", "--offline", "--json"]);
    run(dir, &s, &["plan"]);
    run(dir, &s, &["plan", "--json"]);
    let (code, out) = run(dir, &s, &["build", "--json"]);
    assert_eq!(code, 0, "{out}");
    run(dir, &s, &["build"]);
    run(dir, &s, &["state", "query"]);
    run(dir, &s, &["state", "query", "--json"]);
    for rt in ["sim", "dock", "cloud"] {
        run(dir, &s, &["runtime", "describe", rt]);
        run(dir, &s, &["runtime", "describe", rt, "--json"]);
    }
    // The docker runtime is unreachable (port 1): its errors name the
    // address, with the password as a token.
    let (_, out) = run(dir, &s, &["validate"]);
    assert!(
        out.contains("<secret:"),
        "the docker address is named, redacted: {out}"
    );
    run(dir, &s, &["validate", "--json"]);
    let (_, out) = run(dir, &s, &["runtime", "describe", "dock"]);
    assert!(out.contains("<secret:"), "{out}");
    run(dir, &s, &["preflight"]);
    run(dir, &s, &["preflight", "--json"]);
    assert_tree_clean(dir);

    // The records hold a token where the secret was, not the secret.
    let lineage = std::fs::read_to_string(dir.join("meta-state/lineage.yaml")).unwrap();
    assert!(lineage.contains("<secret:"), "{lineage}");

    // Rotating the secret moves the fingerprint; --explain says a secret
    // changed, at its field path, without showing either value.
    write_tree(dir, &s, "plain-mod-config-rotated-55aa01");
    let (_, explain) = run(dir, &s, &["plan", "--explain"]);
    assert!(
        explain.contains("inputs.mods[0].config.password (web-setup): a secret value changed"),
        "{explain}"
    );
    run(dir, &s, &["plan", "--explain", "--json"]);
    let (code, out) = run(dir, &s, &["build", "--json"]);
    assert_eq!(code, 0, "{out}");
    assert_tree_clean(dir);
}

#[test]
fn a_validation_error_does_not_quote_a_decrypted_value() {
    let keys = tempfile::tempdir().unwrap();
    let s = keygen(keys.path());
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    write_tree(dir, &s, MOD_CONFIG);
    let images = std::fs::read_to_string(dir.join("images/images.yaml")).unwrap();
    std::fs::write(
        dir.join("images/images.yaml"),
        images.replace(
            "    runtimes: [{image_builder: sim-bake}]\n",
            &format!(
                "    runtimes: [{{image_builder: sim-bake}}]\n    primary_disk_size: \"{}\"\n",
                encrypt(&s, VALIDATED)
            ),
        ),
    )
    .unwrap();
    let (code, out) = run(dir, &s, &["validate", "--offline"]);
    assert_ne!(code, 0, "the tree is refused: {out}");
    assert!(out.contains("primary_disk_size"), "{out}");
    // The message quoted the value: it shows the token instead.
    assert!(out.contains("<secret:"), "{out}");
    run(dir, &s, &["validate", "--offline", "--json"]);
    run(dir, &s, &["plan"]);
    assert_tree_clean(dir);
}
