//! Without a daemon: settings from the rules model, and the packer-docker root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use csis_runtime::{
    BakeParent, BakeRequest, BakeStep, CancellationToken, NullLog, ResolvedImage, Runtime,
    TestCommand,
};
use csis_runtime_docker::{DockerRuntime, DockerSettings, MachineType};

fn fixture() -> PathBuf {
    csis_testkit::fixture("config/valid")
}

#[test]
fn settings_from_the_rules_model() {
    let root = fixture();
    if !root.exists() {
        eprintln!("SKIP: no fixture tree at {}", root.display());
        return;
    }
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default()).unwrap_or_else(|d| {
        panic!(
            "{}",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let rt = tree.runtime("docker-local").unwrap();
    let s = DockerSettings::from_model(
        rt,
        tree.root(),
        |n| tree.executable(n),
        &tree.image_builders,
    )
    .unwrap();
    assert_eq!(s.name, "docker-local");
    assert_eq!(s.host, None);
    assert_eq!(s.context, None);
    assert_eq!(s.repository().unwrap(), "csis/docker-local");
    assert_eq!(s.network, "bridge");
    assert_eq!(
        s.machine_types.get("small"),
        Some(&MachineType {
            cpus: Some(1.0),
            memory: Some("1g".into())
        })
    );
    assert_eq!(s.default_machine_type.as_deref(), Some("small"));
    assert_eq!(s.docker_binary, "docker");
    assert_eq!(s.docker_version.as_deref(), Some(">=20"));
    assert!(
        s.packer_builders.is_empty(),
        "the fixture's docker builder is native"
    );
    let p = csis_runtime_docker::settings::entry_problems(&rt.common, rt.docker().unwrap());
    assert!(p.is_empty(), "{p:?}");
    let r = DockerRuntime::new(s).unwrap();
    assert_eq!(r.kind(), "docker");
    // not a docker runtime
    let sim = tree.runtime("sim").unwrap();
    assert!(DockerSettings::from_model(
        sim,
        tree.root(),
        |n| tree.executable(n),
        &tree.image_builders
    )
    .unwrap_err()
    .contains("not docker"));
}

fn request(emit_dir: &Path, steps: Vec<BakeStep>, tests: Vec<TestCommand>) -> BakeRequest {
    BakeRequest {
        label: "//images/web@docker-local:bake".into(),
        series: "web".into(),
        runtime: "docker-local".into(),
        image_builder: "pckr-docker-ans".into(),
        final_name: "web-pckr-docker-ans-20260101-120000".into(),
        prefix: "web-pckr-docker-ans".into(),
        parent: BakeParent::Vendor(ResolvedImage {
            id: format!("debian@sha256:{}", "a".repeat(64)),
            name: Some("debian:12".into()),
            owner: None,
            creation_date: None,
            facts: BTreeMap::new(),
        }),
        machine_type: None,
        disk_size_gb: None,
        bake_user: None,
        package_manager: Some("apt".into()),
        family: None,
        architecture: None,
        steps,
        tests,
        recipe: Default::default(),
        required_plugins: Vec::new(),
        tags: BTreeMap::from([
            ("csis_series".to_string(), "web".to_string()),
            ("csis_parent".to_string(), "vendor".to_string()),
            (
                "csis_fingerprint".to_string(),
                "0123456789abcdef".to_string(),
            ),
            ("note".to_string(), "say \"hi\"".to_string()),
        ]),
        tree_root: emit_dir.to_path_buf(),
        emit_dir: emit_dir.to_path_buf(),
        log: Arc::new(NullLog),
        cancel: CancellationToken::new(),
        keep_failed: false,
    }
}

#[tokio::test]
async fn packer_docker_root() {
    let mut s = DockerSettings::new("docker-local");
    s.context = Some("orbstack".into());
    s.repository = Some("csis/local".into());
    s.machine_types.insert(
        "small".into(),
        MachineType {
            cpus: Some(2.0),
            memory: Some("4g".into()),
        },
    );
    s.default_machine_type = Some("small".into());
    s.packer_builders = BTreeMap::from([("pckr-docker-ans".to_string(), "packer".to_string())]);
    let rt = DockerRuntime::new(s).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let req = request(
        dir.path(),
        vec![
            BakeStep::Shell {
                name: "sh".into(),
                inline: vec!["echo hi".into()],
                scripts: vec![],
                ensure: Some(Default::default()),
                env: vec!["A=1".into()],
                execute_command: None,
            },
            BakeStep::Ansible {
                name: "site".into(),
                playbooks: vec![dir.path().join("site.yml")],
                extra_arguments: vec!["-v".into()],
                binary: "ansible-playbook".into(),
                extra_vars: Default::default(),
            },
        ],
        vec![TestCommand {
            description: "motd".into(),
            run: "cat /etc/motd".into(),
            expect_rc: 0,
            contains: Some("hi".into()),
        }],
    );
    std::fs::write(dir.path().join("site.yml"), "- hosts: all\n").unwrap();
    let files = rt.emit(&req).await.unwrap();
    let main = dir.path().join("pckr-docker-ans-web.pkr.hcl");
    assert_eq!(files[0], main);
    // the playbook and the local modification bundle sit beside the root
    assert!(dir.path().join("csis-mods/web/MANIFEST.yaml").exists());
    assert!(dir.path().join("csis-mods/web/02-site/site.yml").exists());
    let text = std::fs::read_to_string(&main).unwrap();
    // the lowered steps, in order, as provisioners
    for want in [
        "# before anything else: the build machine settles (docker-local)",
        "# modification sh",
        "# modification site: ansible site.yml",
        "# local modification bundle for web -> /opt/csis/mods",
        "# in-bake verification for instance image web: 1 assertion(s)",
        "ansible_python_interpreter=/usr/local/bin/csis-ansible-python",
        "destination = \"/tmp/csis-mods\"",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    let body: hcl::Body = hcl::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let v: serde_json::Value = hcl::from_str(&text).unwrap();
    let src = &v["source"]["docker"]["web"];
    assert_eq!(src["image"], format!("debian@sha256:{}", "a".repeat(64)));
    assert_eq!(src["pull"], false);
    assert_eq!(src["commit"], true);
    let changes: Vec<String> = serde_json::from_value(src["changes"].clone()).unwrap();
    assert!(
        changes.contains(&"LABEL csis_series=\"web\"".to_string()),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"LABEL note=\"say \\\"hi\\\"\"".to_string()),
        "{changes:?}"
    );
    assert_eq!(changes.last().unwrap(), r#"CMD ["sleep","infinity"]"#);
    let run: Vec<String> = serde_json::from_value(src["run_command"].clone()).unwrap();
    for want in [
        "--init",
        "csis-bake-docker-local-web",
        "bridge",
        "--cpus",
        "2",
        "--memory",
        "4g",
        "{{.Image}}",
    ] {
        assert!(run.iter().any(|r| r == want), "{want} in {run:?}");
    }
    assert!(run.iter().any(|r| r.starts_with("/run:")), "{run:?}");
    assert!(
        text.contains("ansible_connection=docker ansible_host=csis-bake-docker-local-web"),
        "{text}"
    );
    assert!(text.contains("DOCKER_CONTEXT=orbstack"), "{text}");
    assert!(text.contains("post-processor \"docker-tag\""), "{text}");
    assert!(text.contains("repository = \"csis/local\""), "{text}");
    assert!(
        text.contains("\"web-pckr-docker-ans-20260101-120000\""),
        "{text}"
    );
    assert!(text.contains("post-processor \"manifest\""), "{text}");
    assert!(body.blocks().any(|b| b.identifier() == "packer"));
    if let Ok(d) = std::env::var("CSIS_DUMP_PACKER") {
        for f in &files {
            std::fs::copy(f, Path::new(&d).join(f.file_name().unwrap())).unwrap();
        }
    }
    // a second emit leaves the files as they are
    let before = std::fs::metadata(&main).unwrap().modified().unwrap();
    rt.emit(&req).await.unwrap();
    assert_eq!(
        std::fs::metadata(&main).unwrap().modified().unwrap(),
        before
    );
    // a native builder emits nothing
    let mut native = req.clone();
    native.image_builder = "native".into();
    assert!(rt.emit(&native).await.unwrap().is_empty());
}

#[test]
fn packer_root_blanks_the_parents_lineage_labels_and_applies_the_disk_size() {
    let mut s = DockerSettings::new("docker-local");
    s.packer_builders = BTreeMap::from([("pckr-docker-ans".to_string(), "packer".to_string())]);
    let rt = DockerRuntime::new(s).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), vec![], vec![]);
    let changes_of = |ctx: &csis_runtime_docker::packer::EmitContext| {
        let (text, _) = rt.packer_root(&req, ctx).unwrap();
        let v: serde_json::Value = hcl::from_str(&text).unwrap();
        let src = &v["source"]["docker"]["web"];
        let changes: Vec<String> = serde_json::from_value(src["changes"].clone()).unwrap();
        let run: Vec<String> = serde_json::from_value(src["run_command"].clone()).unwrap();
        (text, changes, run)
    };
    // what the parent carried and this bake does not set is blanked, and listed
    let ctx = csis_runtime_docker::packer::EmitContext {
        blank: vec!["csis_config".into(), "csis_release".into()],
        storage_size: Some("40G".into()),
        parent_read: true,
    };
    let (text, changes, run) = changes_of(&ctx);
    for want in [
        r#"LABEL csis_config="""#,
        r#"LABEL csis_release="""#,
        r#"LABEL csis.blanked="csis_config,csis_release""#,
        r#"LABEL csis_series="web""#,
    ] {
        assert!(changes.iter().any(|c| c == want), "{want} in {changes:?}");
    }
    let pos = |c: &str| changes.iter().position(|x| x == c).unwrap();
    assert!(pos(r#"LABEL csis_config="""#) < pos(r#"CMD ["sleep","infinity"]"#));
    // the disk size, for a daemon whose driver applies it
    let i = run.iter().position(|r| r == "--storage-opt").unwrap();
    assert_eq!(run[i + 1], "size=40G");
    assert!(i < run.iter().position(|r| r == "{{.Image}}").unwrap());
    assert!(!text.contains("was not read from the daemon"), "{text}");
    // nothing read: nothing to blank, but the inherited list is still overwritten; no size
    let (text, changes, run) = changes_of(&Default::default());
    assert!(
        changes.iter().any(|c| c == r#"LABEL csis.blanked="""#),
        "{changes:?}"
    );
    assert!(!changes.iter().any(|c| c == r#"LABEL csis_config="""#));
    assert!(!run.iter().any(|r| r == "--storage-opt"), "{run:?}");
    assert!(
        text.contains("# the parent image was not read from the daemon"),
        "{text}"
    );
}
