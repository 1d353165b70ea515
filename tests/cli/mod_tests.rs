//! `csis test-mods` on the local Docker daemon: each mod applied twice in a
//! throwaway busybox container; `meta-state/mod-tests.yaml` records a pass,
//! a failure and a mod that is not idempotent by content hash, and a second
//! run tests nothing again (the passes are current). The same for ansible
//! mods, run by `ansible-playbook` over its docker connection against a
//! Debian image (debootstrap-made, kept; skipped, loudly, where debootstrap
//! or the mirror is not available): a recap that still changes something
//! on the second apply is not idempotent.

use std::path::Path;

use csis_testkit::docker;

fn tree(dir: &Path, base: &str) {
    std::fs::write(
        dir.join("cfg/zz-bb.yml"),
        format!(
            "os_builders:\n  - name: bb\n    type: debian\n    family: debian\n    family_version: \"12\"\n    local_test_image: \"{base}\"\n    runtimes:\n      - image_builder: sim-bake\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("images/zz-mods.yaml"),
        "images:\n  - name: mods\n    source_image: bb\n    runtimes: [{image_builder: sim-bake}]\n    modifications:\n      - name: good\n        type: bash\n        script:\n          - mkdir -p /opt/good\n          - echo hello > /opt/good/f\n      - name: bad\n        type: bash\n        script:\n          - exit 3\n      - name: grows\n        type: bash\n        script:\n          - echo again >> /etc/grows\n",
    )
    .unwrap();
}

#[test]
fn test_mods_records_pass_fail_and_not_idempotent() {
    if docker::skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let base = format!("csis-modtests/bb:{}", std::process::id());
    docker::import_busybox_base(&base, work.path());
    let mut clean = docker::Cleanup::new("csis-modtests-none", &base);
    // this test's own containers only (the tests run in parallel)
    clean
        .container_filters
        .push("name=csis-bake-local-mods-modtest".into());
    let t = csis_testkit::Tree::of("graph/basic");
    tree(&t.root, &base);
    let dir = &t.root;
    let (code, out, err) = t.run(&["test-mods", "--image", "mods"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("pass           mods/good"), "{out}");
    assert!(out.contains("FAIL           mods/bad"), "{out}");
    assert!(out.contains("NOT IDEMPOTENT mods/grows"), "{out}");
    assert!(out.contains("second apply: C /etc/grows"), "{out}");
    let text = std::fs::read_to_string(dir.join("meta-state/mod-tests.yaml")).unwrap();
    let y: serde_json::Value = serde_yaml_ng_or_json(&text);
    let results = y["results"].as_object().unwrap();
    assert_eq!(results.len(), 3, "{text}");
    let by = |m: &str| {
        results
            .values()
            .find(|r| r["mod"] == m)
            .unwrap_or_else(|| panic!("{m} not recorded: {text}"))
            .clone()
    };
    assert_eq!(by("good")["status"], "pass");
    assert_eq!(by("good")["idempotent"], true);
    assert_eq!(by("bad")["status"], "fail");
    assert_eq!(by("grows")["status"], "pass");
    assert_eq!(by("grows")["idempotent"], false);
    // no container is left
    assert!(docker::containers(true, &["name=csis-bake-local-mods-modtest"]).is_empty());
    // again: the pass is current, the others are tested again
    let (code, out, _) = t.run(&["test-mods", "--image", "mods", "--json"]);
    assert_eq!(code, 1);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let status = |m: &str| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["mod"] == m)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("good"), "current");
    assert_eq!(status("bad"), "fail");
    assert_eq!(status("grows"), "not-idempotent");
}

#[test]
fn test_mods_records_ansible_pass_fail_and_not_idempotent_on_debian() {
    if docker::skip() {
        return;
    }
    if std::process::Command::new("ansible-playbook")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIP ansible mod tests: ansible-playbook is not installed");
        return;
    }
    let Some(_) = docker::debian_image() else {
        return;
    };
    // the image is kept (made once): nothing to remove but the containers
    let mut clean = docker::Cleanup::new("csis-modtests-none", "");
    clean
        .container_filters
        .push("name=csis-bake-local-amods-modtest".into());
    let t = csis_testkit::Tree::of("graph/basic");
    let dir = &t.root;
    std::fs::write(
        dir.join("cfg/zz-deb.yml"),
        format!(
            "os_builders:\n  - name: debpy\n    type: debian\n    family: debian\n    family_version: \"12\"\n    local_test_image: \"{}\"\n    runtimes:\n      - image_builder: sim-bake\n",
            docker::DEBIAN_TAG
        ),
    )
    .unwrap();
    let play = |name: &str, task: &str| {
        std::fs::write(
            dir.join(format!("playbooks/{name}.yml")),
            format!(
                "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: {name}\n      {task}\n"
            ),
        )
        .unwrap();
    };
    play(
        "agood",
        "copy: {dest: /opt/agood, content: \"hello\\n\", mode: \"0644\"}",
    );
    play("abad", "command: /bin/false");
    play("agrows", "shell: echo again >> /etc/agrows");
    std::fs::write(
        dir.join("images/zz-amods.yaml"),
        "images:\n  - name: amods\n    source_image: debpy\n    runtimes: [{image_builder: sim-bake}]\n    modifications:\n      - name: agood\n        type: ansible\n        playbooks: [playbooks/agood.yml]\n      - name: abad\n        type: ansible\n        playbooks: [playbooks/abad.yml]\n      - name: agrows\n        type: ansible\n        playbooks: [playbooks/agrows.yml]\n",
    )
    .unwrap();
    let (code, out, err) = t.run(&["test-mods", "--image", "amods"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("pass           amods/agood"), "{out}\n{err}");
    assert!(out.contains("FAIL           amods/abad"), "{out}\n{err}");
    assert!(out.contains("NOT IDEMPOTENT amods/agrows"), "{out}\n{err}");
    let text = std::fs::read_to_string(dir.join("meta-state/mod-tests.yaml")).unwrap();
    let y = serde_yaml_ng_or_json(&text);
    let results = y["results"].as_object().unwrap();
    assert_eq!(results.len(), 3, "{text}");
    let by = |m: &str| {
        results
            .values()
            .find(|r| r["mod"] == m)
            .unwrap_or_else(|| panic!("{m} not recorded: {text}"))
            .clone()
    };
    assert_eq!(by("agood")["status"], "pass");
    assert_eq!(by("agood")["idempotent"], true);
    assert_eq!(by("abad")["status"], "fail");
    assert_eq!(by("agrows")["status"], "pass");
    assert_eq!(by("agrows")["idempotent"], false);
    assert!(docker::containers(true, &["name=csis-bake-local-amods-modtest"]).is_empty());
    // again: the pass is current; an edited playbook is tested again
    play(
        "agood",
        "copy: {dest: /opt/agood, content: \"changed\\n\", mode: \"0644\"}",
    );
    let (code, out, _) = t.run(&["test-mods", "--image", "amods", "--json"]);
    assert_eq!(code, 1);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let status = |m: &str| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["mod"] == m)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(
        status("agood"),
        "pass",
        "a new content hash is tested: {out}"
    );
    assert_eq!(status("abad"), "fail");
    assert_eq!(status("agrows"), "not-idempotent");
    let (_, out, _) = t.run(&["test-mods", "--image", "amods", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let good = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mod"] == "agood")
        .unwrap()["status"]
        .clone();
    assert_eq!(good, "current", "{out}");
}

/// `mod-tests.yaml` as csis writes it (sorted keys, block maps): the
/// scalars of each record, two levels down (the tests' crate has no YAML
/// parser of its own).
fn serde_yaml_ng_or_json(text: &str) -> serde_json::Value {
    let mut results = serde_json::Map::new();
    let mut current: Option<(String, serde_json::Map<String, serde_json::Value>)> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("- ") {
            continue;
        }
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if indent == 2 {
            if let Some((h, m)) = current.take() {
                results.insert(h, serde_json::Value::Object(m));
            }
            current = Some((k.to_string(), serde_json::Map::new()));
        } else if indent == 4 {
            if let Some((_, m)) = current.as_mut() {
                let val = match v {
                    "true" => serde_json::Value::Bool(true),
                    "false" => serde_json::Value::Bool(false),
                    _ => serde_json::Value::String(
                        v.trim_matches('\'').trim_matches('"').to_string(),
                    ),
                };
                m.insert(k.to_string(), val);
            }
        }
    }
    if let Some((h, m)) = current.take() {
        results.insert(h, serde_json::Value::Object(m));
    }
    serde_json::json!({"results": results})
}

/// `require_mod_tests: true` (core §5.4): release refuses a build whose
/// mods have no mod-test record, in one line naming `csis test-mods`, and
/// changes nothing; once `csis test-mods` recorded an idempotent pass for
/// the content hash the build records, the release goes through. A mod
/// edited afterwards gives the next build a content hash with no record:
/// its release is refused again until the mods are tested again.
#[test]
fn release_honours_require_mod_tests() {
    if docker::skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let base = format!("csis-modtests/bb-rel:{}", std::process::id());
    docker::import_busybox_base(&base, work.path());
    let mut clean = docker::Cleanup::new("csis-modtests-none", &base);
    clean
        .container_filters
        .push("name=csis-bake-local-relmods-modtest".into());
    let t = csis_testkit::Tree::of("graph/basic");
    let dir = &t.root;
    tree(dir, &base);
    let cfg = dir.join("cfg/_config.yml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}config:\n  require_mod_tests: true\n")).unwrap();
    let mods = |line: &str| {
        format!(
            "images:\n  - name: relmods\n    source_image: bb\n    runtimes: [{{image_builder: sim-bake}}]\n    modifications:\n      - name: good\n        type: bash\n        script:\n          - mkdir -p /opt/good\n          - {line}\n"
        )
    };
    std::fs::write(
        dir.join("images/zz-mods.yaml"),
        mods("echo hello > /opt/good/f"),
    )
    .unwrap();
    t.ok(&["build", "//..."]);
    let releases = dir.join("meta-state/releases.yaml");
    let before = std::fs::read_to_string(&releases).ok();
    // no record: refused, one line naming the command, nothing written
    let (code, out, err) = t.run(&["release", "relmods"]);
    assert_ne!(code, 0, "{out}\n{err}");
    let said = format!("{out}{err}");
    let lines: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(
        lines[0].contains("good") && lines[0].contains("csis test-mods"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&releases).ok(), before);
    // tested: released
    t.ok(&["test-mods", "--image", "relmods"]);
    t.ok(&["release", "relmods"]);
    let released = std::fs::read_to_string(&releases).unwrap();
    assert!(released.contains("relmods"), "{released}");
    // the mod edited and baked again: its new content hash has no record
    std::fs::write(
        dir.join("images/zz-mods.yaml"),
        mods("echo changed > /opt/good/f"),
    )
    .unwrap();
    t.ok(&["build", "//..."]);
    let (code, out, err) = t.run(&["release", "relmods"]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("csis test-mods"),
        "{out}\n{err}"
    );
    t.ok(&["test-mods", "--image", "relmods"]);
    t.ok(&["release", "relmods"]);
}
