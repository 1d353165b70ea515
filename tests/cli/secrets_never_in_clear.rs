//! A value that came from a decrypted `ENC[age:...]` marker or from a
//! template's `ENV` is never written or printed in clear: a distinct
//! plaintext is placed in each way users write one, every command runs
//! (text and `--json`), and every output and every file under the tree is
//! searched for each plaintext: zero hits. Fingerprints still move when a
//! secret changes, and `plan --explain` says so without showing it.
//!
//! Needs the `age` and `age-keygen` programs (Debian package `age`).

use std::path::Path;

use csis_testkit::Tree;

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
const TAG_VALUE: &str = "plain-tag-value-3c71de";

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
    tags:
      secret_tag: "{tag}"
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
            tag = encrypt(s, TAG_VALUE),
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
        TAG_VALUE,
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
fn run(dir: &Tree, s: &Secrets, args: &[&str]) -> (i32, String) {
    let out = dir
        .csis()
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
    let t = Tree::empty();
    let dir = &t;
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
    for args in [
        &["validate", "--offline", "--format", "github"][..],
        &["plan", "--format", "markdown"],
        &["plan", "--format", "github"],
        &["builds"],
        &["builds", "--json", "--check"],
        &["graph", "--format", "json"],
        &["graph", "--format", "dot"],
        &["graph", "--format", "mermaid"],
        &["lineage", "relabel", "--runtime", "sim", "--dry-run"],
        &[
            "lineage",
            "restamp",
            "--runtime",
            "sim",
            "--dry-run",
            "--json",
        ],
        &["state", "import", "--dry-run", "--json"],
        &["empty", "--runtime", "sim", "--json"],
    ] {
        run(dir, &s, args);
    }
    assert_tree_clean(dir);
    // the state report holds the tag as its token
    let report = walkdir_all(dir)
        .into_iter()
        .find(|p| p.ends_with("state-report.json"))
        .expect("state-report.json");
    let report = std::fs::read_to_string(report).unwrap();
    assert!(
        report.contains("\"secret_tag\": \"<secret:")
            || report.contains("\"secret_tag\":\"<secret:"),
        "{report}"
    );

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
    let t = Tree::empty();
    let dir = &t;
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

/// The plaintexts of the docker tree, one per placement a docker bake
/// reaches (the image's own, its mods', its tests', its tags').
const D_INLINE: &str = "echo plain-docker-inline-2b8e51";
const D_ENSURE: &str = "plain-docker-ensure-c40f9a";
const D_MULTI: &str = "plain-multi-line-one-71aa\nplain-multi-line-two-08be\n";
const D_MOD_ENV: &str = "CSIS_TOKEN=plain-docker-mod-env-5e3c";
const D_IN_BAKE: &str = "echo plain-docker-in-bake-93d1";
const D_POST_BAKE: &str = "echo plain-docker-post-bake-f61e";
const D_POST_CONTAINS: &str = "plain-docker-post-bake";
const D_TAG: &str = "plain-docker-tag-value-a7c2";
const D_ENV_TAG: &str = "plain-docker-env-tag-3349";

fn docker_plaintexts() -> Vec<&'static str> {
    let mut v = vec![
        D_INLINE,
        // what the inline line prints
        "plain-docker-inline-2b8e51",
        D_ENSURE,
        "plain-multi-line-one-71aa",
        "plain-multi-line-two-08be",
        D_MOD_ENV,
        "plain-docker-mod-env-5e3c",
        D_IN_BAKE,
        "plain-docker-in-bake-93d1",
        D_POST_BAKE,
        "plain-docker-post-bake-f61e",
        D_POST_CONTAINS,
        D_TAG,
        D_ENV_TAG,
    ];
    v.extend(all_plaintexts());
    v
}

#[track_caller]
fn assert_clean_of(what: &str, text: &str, secrets: &[&str]) {
    for p in secrets {
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

/// Every file under the tree but the 0600 private files of
/// `.csis/bake-vars/` (whose one job is to hold a secret for the bake's
/// tools, in 0700 directories) is clean; those are checked for their mode.
fn assert_docker_tree_clean(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let private = dir.join(".csis/bake-vars");
    for e in walkdir_all(dir) {
        if e.starts_with(&private) {
            let mode = std::fs::metadata(&e).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", e.display());
            let d = std::fs::metadata(e.parent().unwrap()).unwrap();
            assert_eq!(d.permissions().mode() & 0o777, 0o700, "{}", e.display());
            continue;
        }
        let bytes = std::fs::read(&e).unwrap_or_default();
        assert_clean_of(
            &e.display().to_string(),
            &String::from_utf8_lossy(&bytes),
            &docker_plaintexts(),
        );
    }
}

fn write_docker_tree(dir: &Path, s: &Secrets, repo: &str, base: &str, rt: &str) {
    let w = |p: &str, t: String| {
        let f = dir.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    w("cfg/_config.yml", "id: secrets-docker\n".into());
    w(
        "cfg/builders.yml",
        format!(
            r#"executables:
  - name: docker
    binary: docker
runtime_builders:
  - name: {rt}
    type: docker
    is_default: true
    executable: docker
    repository: "{repo}"
    default_machine_type: small
    machine_types:
      small: {{ cpus: 1, memory: 512m }}
    tags:
      built_by: "{{{{ ENV.CSIS_SECRET_TAG_VALUE }}}}"
image_builders:
  - name: native
    type: docker
    is_default: true
    runtime: {rt}
  - name: pd
    type: packer-docker
    runtime: {rt}
mod_builders:
  - name: bash
    type: bash-remote
    is_default: true
  - name: bash-env
    type: bash-remote
    environment_vars: ["{mod_env}"]
os_builders:
  - name: base
    type: debian
    family: debian
    family_version: "12"
    is_default: true
    runtimes:
      - image_builder: native
        query:
          native:
            image: "{base}"
"#,
            mod_env = encrypt(s, D_MOD_ENV),
        ),
    );
    let body = format!(
        r#"    config:
      token: "{image_config}"
      from_env: "{{{{ ENV.CSIS_SECRET_TEST_VALUE }}}}"
    tags:
      secret_tag: "{tag}"
    modifications:
      - name: shell
        type: bash-env
        script:
          - "{inline}"
          - "cat /etc/secret-multi"
        ensure:
          files:
            - path: /etc/secret
              content: "{ensure}"
            - path: /etc/secret-multi
              content: "{multi}"
    tests:
      commands: [{{run: "{in_bake}"}}]
      post_bake:
        commands: [{{run: "{post_bake}", contains: "{post_contains}"}}]
"#,
        image_config = encrypt(s, IMAGE_CONFIG),
        tag = encrypt(s, D_TAG),
        inline = encrypt(s, D_INLINE),
        ensure = encrypt(s, D_ENSURE),
        multi = encrypt(s, D_MULTI),
        in_bake = encrypt(s, D_IN_BAKE),
        post_bake = encrypt(s, D_POST_BAKE),
        post_contains = encrypt(s, D_POST_CONTAINS),
    );
    w(
        "images/images.yaml",
        format!(
            "images:\n  - name: web\n    source_image: base\n    runtimes: [{{image_builder: native}}]\n{body}  - name: pk\n    source_image: base\n    runtimes: [{{image_builder: pd}}]\n{body}"
        ),
    );
}

/// A docker bake of a tree with a secret in each placement a bake reaches:
/// every command's output, every file under the tree (the emission of the
/// native and the packer-docker builder, the records, the logs, the state
/// report, image-tests.yaml), the built image's labels, environment and
/// history, and the tree's containers hold none of them in clear.
#[test]
fn a_docker_bake_keeps_every_secret_out_of_files_outputs_and_labels() {
    if csis_testkit::docker::skip() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let s = keygen(keys.path());
    let t = Tree::empty();
    let dir = &t;
    let work = tempfile::tempdir().unwrap();
    let suffix = format!("{:08x}", std::process::id() ^ 0x5ec7_0000);
    let repo = format!("csis-secrets-test/r{suffix}");
    let base = format!("csis-secrets-test/base:{suffix}");
    let rt = format!("docker-secrets-{suffix}");
    let _cleanup = csis_testkit::docker::Cleanup::new(&repo, &base);
    csis_testkit::docker::import_busybox_base(&base, work.path());
    write_docker_tree(dir, &s, &repo, &base, &rt);
    let secrets = docker_plaintexts();
    let run = |args: &[&str]| -> (i32, String) {
        let out = dir
            .csis()
            .env("CSIS_CONFIG_IDENTITY", &s.key_file)
            .env("CSIS_SECRET_TEST_VALUE", ENV_VALUE)
            .env("CSIS_SECRET_TAG_VALUE", D_ENV_TAG)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_clean_of(&format!("`csis {}`", args.join(" ")), &text, &secrets);
        (out.status.code().unwrap_or(-1), text)
    };
    let ok = |args: &[&str]| {
        let (code, out) = run(args);
        assert_eq!(code, 0, "csis {}: {out}", args.join(" "));
        out
    };
    ok(&["validate", "--offline"]);
    run(&["validate", "--json"]);
    ok(&["plan"]);
    ok(&["plan", "--json", "--explain"]);
    // the packer-docker root and the native emission, without a bake
    run(&["build", "--dry-run"]);
    assert_docker_tree_clean(dir);
    let pk = dir.join(format!("generated/instance-image/pk@{rt}"));
    let hcl: Vec<_> = walkdir_all(&pk)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".pkr.hcl"))
        .collect();
    assert!(!hcl.is_empty(), "a packer root under {}", pk.display());
    let root: String = hcl
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        root.contains(".csis/bake-vars/"),
        "the root names the private files:\n{root}"
    );
    let out = ok(&["build", "--json", "//images/web"]);
    assert!(out.contains("\"finished\""), "{out}");
    ok(&["build", "//images/web"]);
    ok(&["test", "web"]);
    ok(&["test", "web", "--json"]);
    for args in [
        &["state", "query"][..],
        &["state", "query", "--json"],
        &["builds"],
        &["builds", "--json", "--check"],
        &["graph", "--format", "json"],
        &["graph", "--format", "dot"],
        &["lineage", "relabel", "--runtime", &rt, "--dry-run"],
        &[
            "lineage",
            "restamp",
            "--runtime",
            &rt,
            "--dry-run",
            "--json",
        ],
        &["runtime", "describe", &rt, "--json"],
        &["empty", "--runtime", &rt, "--json"],
        &["preflight", "--json"],
    ] {
        run(args);
    }
    assert_docker_tree_clean(dir);

    // the log printed what the script echoed, as a token
    let logs = walkdir_all(&dir.join(".csis/logs"));
    assert!(
        logs.iter().any(|l| std::fs::read_to_string(l)
            .unwrap_or_default()
            .contains("<secret:")),
        "a log shows the token where the script printed a secret"
    );
    // the image-tests record names the check by token
    let tests = walkdir_all(dir)
        .into_iter()
        .find(|p| p.ends_with("image-tests.yaml"))
        .expect("image-tests.yaml");
    let text = std::fs::read_to_string(&tests).unwrap();
    assert!(text.contains("command `<secret:"), "{text}");

    // the image: labels (tags as tokens), environment, history
    let ids = csis_testkit::docker::images_of(&repo);
    assert!(!ids.is_empty(), "a build in {repo}");
    for id in &ids {
        let inspect = csis_testkit::docker::docker(&["image", "inspect", id]).unwrap();
        assert_clean_of(&format!("docker image inspect {id}"), &inspect, &secrets);
        let history = csis_testkit::docker::docker(&[
            "history",
            "--no-trunc",
            "--format",
            "{{.CreatedBy}} {{.Comment}}",
            id,
        ])
        .unwrap_or_default();
        assert_clean_of(&format!("docker history {id}"), &history, &secrets);
    }
    let web = format!("{repo}:web");
    for tag in ["secret_tag", "built_by"] {
        let v = csis_testkit::docker::label(&web, tag);
        assert!(v.starts_with("<secret:"), "{tag} is its token: {v}");
    }
    // every container of this tree (a test machine, a bake) the daemon still has
    for c in csis_testkit::docker::containers(true, &["label=csis_config=secrets-docker"]) {
        let inspect = csis_testkit::docker::docker(&["container", "inspect", &c]).unwrap();
        assert_clean_of(&format!("docker container inspect {c}"), &inspect, &secrets);
    }
}

/// A private key pasted into `admin_public_keys` is refused without its
/// body in the report's snippet; keys that are not keys are refused at
/// their line, without quoting them.
#[test]
fn admin_keys_are_public_keys_and_a_pasted_private_key_is_not_shown() {
    let keys = tempfile::tempdir().unwrap();
    let s = keygen(keys.path());
    let t = Tree::empty();
    let dir = &t;
    write_tree(dir, &s, MOD_CONFIG);
    let body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
    std::fs::write(
        dir.join("cfg/_config.yml"),
        format!(
            "id: secrets-tree\nconfig:\n  admin_public_keys:\n    - |\n      -----BEGIN OPENSSH PRIVATE KEY-----\n      {body}\n      -----END OPENSSH PRIVATE KEY-----\n"
        ),
    )
    .unwrap();
    for args in [&["validate", "--offline"][..], &["plan"]] {
        let (code, out) = run(dir, &s, args);
        assert_ne!(code, 0, "{out}");
        assert!(out.contains("cfg/_config.yml:5"), "{out}");
        assert!(out.contains("this looks like private"), "{out}");
        assert!(!out.contains(body), "the snippet shows the key:\n{out}");
    }
    let (_, out) = run(dir, &s, &["validate", "--offline", "--json"]);
    assert!(!out.contains(body), "{out}");

    std::fs::write(
        dir.join("cfg/_config.yml"),
        "id: secrets-tree\nconfig:\n  admin_public_keys:\n    - ssh-rsa hello\n    - admin@example.com\n    - /home/me/.ssh/id_ed25519.pub\n    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@x\n",
    )
    .unwrap();
    let (code, out) = run(dir, &s, &["validate", "--offline"]);
    assert_ne!(code, 0, "{out}");
    for (i, line) in [(0, 4), (1, 5), (2, 6)] {
        let at = format!(
            "cfg/_config.yml:{line}:7: config.admin_public_keys[{i}]: not an SSH public key"
        );
        assert!(out.contains(&at), "{at}\nin\n{out}");
    }
    assert!(
        !out.contains("admin_public_keys[3]"),
        "a real key is accepted: {out}"
    );
}
