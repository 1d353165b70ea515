//! The one lowering of a bake recipe: base and image steps in the original's
//! order, update policies, modifications, the bundle, `ensure:` twice.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::{BakeParent, Ensure, EnsureCommand, EnsureFile, NullLog, ResolvedImage, TestCommand};
use tokio_util::sync::CancellationToken;

fn target(sudo: bool) -> Target {
    Target {
        runtime: "rt".into(),
        sudo,
        systemd: sudo,
        settle: vec!["# runtime settle".into()],
        session_agent: None,
    }
}

fn req(series: &str, base: bool, steps: Vec<BakeStep>, root: &Path) -> BakeRequest {
    BakeRequest {
        label: format!("//x/{series}@rt"),
        series: series.into(),
        runtime: "rt".into(),
        image_builder: "b".into(),
        final_name: format!("{series}-1"),
        prefix: series.into(),
        parent: BakeParent::Vendor(ResolvedImage {
            id: "v".into(),
            name: None,
            owner: None,
            creation_date: None,
            facts: BTreeMap::new(),
        }),
        machine_type: None,
        disk_size_gb: None,
        bake_user: None,
        package_manager: Some("dnf".into()),
        family: Some("rhel".into()),
        architecture: None,
        steps,
        tests: vec![TestCommand {
            description: "id".into(),
            run: "id -u csisadmin".into(),
            expect_rc: 0,
            contains: None,
        }],
        recipe: Recipe {
            base: base.then(|| {
                let mut b = crate::testing::rhel10_base("ssh-ed25519 AAAAkey me@x");
                b.storage.push(StoragePrereq {
                    storage_type: "s3".into(),
                    builder: None,
                });
                b
            }),
            image: (!base).then(|| ImageRecipe {
                group: Some(GroupActivation {
                    group: "team".into(),
                    identity_type: "okta".into(),
                    posix: true,
                }),
                bundle: Vec::new(),
            }),
        },
        required_plugins: Vec::new(),
        tags: BTreeMap::from([("csis_run".to_string(), "run1".to_string())]),
        tree_root: root.to_path_buf(),
        emit_dir: root.join("gen"),
        log: Arc::new(NullLog),
        cancel: CancellationToken::new(),
        keep_failed: false,
    }
}

fn comments(l: &Lowered) -> Vec<String> {
    l.steps.iter().map(|s| s.comment.clone()).collect()
}

#[test]
fn base_image_steps_in_the_original_order() {
    let d = tempfile::tempdir().unwrap();
    let l = lower(&req("el10", true, vec![], d.path()), &target(true)).unwrap();
    assert_eq!(
        comments(&l),
        vec![
            "before anything else: the build machine settles (rt)",
            "OS update for base image el10 (policy=security, packages=[], exclude=['kernel*'], pin={}, rhel)",
            "admin user csisadmin (1 public key(s))",
            "identity type 'okta' prerequisites, dormant",
            "storage type 'ebs' prerequisites",
            "storage type 's3' declared but has no plugin on runtime rt: nothing to bake here",
            "in-bake verification for base image el10: 7 assertion(s)",
        ]
    );
    let StepKind::Shell { lines, .. } = &l.steps[1].kind else {
        panic!()
    };
    assert!(lines.contains(
        &"sudo dnf -y update --security --exclude=kernel* || { sudo dnf clean all; sudo dnf -y update --security --exclude=kernel*; }".to_string()
    ));
    assert!(lines
        .iter()
        .any(|l| l.contains("tee /var/lib/csis/packages.txt")));
    assert!(lines[1].contains("--enable='codeready-builder-for-rhel-10-x86_64-rpms'"));
    let StepKind::Verify {
        lines, assertions, ..
    } = &l.steps[6].kind
    else {
        panic!()
    };
    assert_eq!(lines[0], "set -e");
    assert_eq!(*assertions, 7);
    assert!(
        lines.contains(&"sudo grep -q -- AAAAkey /home/csisadmin/.ssh/authorized_keys".to_string())
    );
    assert_eq!(l.assertions, 7);
}

#[test]
fn policy_none_has_no_update_step_and_docker_needs_no_sudo() {
    let d = tempfile::tempdir().unwrap();
    let mut r = req("b", true, vec![], d.path());
    r.recipe.base.as_mut().unwrap().update.policy = "none".into();
    let l = lower(&r, &target(false)).unwrap();
    assert!(!comments(&l).iter().any(|c| c.starts_with("OS update")));
    for s in &l.steps {
        if let StepKind::Shell { lines, .. } | StepKind::Verify { lines, .. } = &s.kind {
            for line in lines {
                assert!(!line.contains("sudo "), "{line}");
            }
        }
    }
}

#[test]
fn apt_policies_hold_excludes_and_retry() {
    let b = BaseRecipe {
        os_type: "debian".into(),
        family: "debian".into(),
        family_version: "12".into(),
        update: UpdateRecipe {
            policy: "full".into(),
            packages: vec!["curl".into()],
            exclude: vec!["linux-image*".into()],
            pin: vec![("tzdata".into(), "2024a-0".into())],
        },
        ..Default::default()
    };
    let v = update_lines(&target(false), &b).unwrap();
    let all = v.join("\n");
    assert!(all.contains("apt-mark hold"), "{all}");
    assert!(all.contains("apt-mark unhold"), "{all}");
    assert!(all.contains("-y upgrade || {"), "{all}");
    assert!(
        all.contains("install -y --allow-downgrades tzdata=2024a-0"),
        "{all}"
    );
    assert!(all.contains("install -y curl"), "{all}");
    assert!(v.last().unwrap().contains("/var/lib/csis/packages.txt"));
}

#[test]
fn image_steps_mods_activation_bundle_verification() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("playbooks")).unwrap();
    std::fs::write(d.path().join("playbooks/p.yml"), "- hosts: all\n").unwrap();
    let mut extra = serde_json::Map::new();
    extra.insert("node_role".into(), serde_json::json!("worker"));
    let steps = vec![
        BakeStep::Ansible {
            name: "tools".into(),
            playbooks: vec![d.path().join("playbooks/p.yml")],
            extra_arguments: vec![],
            binary: "ansible-playbook".into(),
            extra_vars: extra,
        },
        BakeStep::Shell {
            name: "site".into(),
            inline: vec!["echo hi".into()],
            scripts: vec![],
            ensure: None,
            env: vec![],
            execute_command: None,
        },
    ];
    let l = lower(&req("node", false, steps, d.path()), &target(true)).unwrap();
    let c = comments(&l);
    assert_eq!(c[1], "Modifications for tools of type ansible");
    assert_eq!(c[2], "modification tools: ansible playbooks/p.yml");
    assert_eq!(c[3], "modification site");
    assert_eq!(c[4], "identity activation for owning group 'team' (okta)");
    assert!(c[5].starts_with("local modification bundle for node -> /opt/csis/mods"));
    assert!(c
        .last()
        .unwrap()
        .starts_with("in-bake verification for instance image node: 5 assertion(s)"));
    let StepKind::Ansible {
        extra_arguments, ..
    } = &l.steps[2].kind
    else {
        panic!()
    };
    assert_eq!(
        extra_arguments,
        &vec![
            "-e".to_string(),
            "ansible_python_interpreter=/usr/local/bin/csis-ansible-python".into(),
            "-e".into(),
            r#"{"node_role":"worker"}"#.into()
        ]
    );
    let rels: Vec<&str> = l.files.iter().map(|f| f.rel.as_str()).collect();
    for want in [
        "playbooks/p.yml",
        "csis-mods/node/MANIFEST.yaml",
        "csis-mods/node/csis-mods",
        "csis-mods/node/01-tools/p.yml",
        "csis-mods/node/01-tools/run.sh",
        "csis-mods/node/02-site/inline.sh",
        "csis-mods/node/02-site/MANIFEST.yaml",
    ] {
        assert!(rels.contains(&want), "{want} in {rels:?}");
    }
    let m = l
        .files
        .iter()
        .find(|f| f.rel == "csis-mods/node/MANIFEST.yaml")
        .unwrap();
    let m = String::from_utf8(m.content.clone()).unwrap();
    assert!(m.starts_with("image: node\nmods:\n- content_hash:"), "{m}");
    assert!(m.contains("  dir: 02-site\n"), "{m}");
    assert!(m.ends_with("run: run1\n"), "{m}");
}

/// `ensure:` run twice with a real shell: the second run writes nothing,
/// changes no mode and skips the guarded command.
#[test]
fn ensure_twice_changes_nothing_the_second_time() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("sub/it's.conf");
    let marker = d.path().join("ran");
    let e = Ensure {
        packages: vec![],
        files: vec![EnsureFile {
            path: f.display().to_string(),
            content: "role=worker\n$HOME ${x} %{y}\n".into(),
            mode: "0640".into(),
        }],
        services: vec!["nginx".into()],
        commands: vec![EnsureCommand {
            run: format!("echo x >> {}", sq(&marker.display().to_string())),
            unless: Some(format!("test -e {}", sq(&marker.display().to_string()))),
        }],
    };
    let script = script_of(&ensure_lines(&target(false), &e));
    let run = || {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    run();
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "role=worker\n$HOME ${x} %{y}\n"
    );
    let m1 = std::fs::metadata(&f).unwrap();
    assert_eq!(m1.mode() & 0o777, 0o640);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = run();
    let m2 = std::fs::metadata(&f).unwrap();
    assert_eq!(
        (m1.ino(), m1.mtime_nsec(), m1.ctime_nsec()),
        (m2.ino(), m2.mtime_nsec(), m2.ctime_nsec())
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n");
    assert!(out.contains("ensure: skipped (unless holds)"), "{out}");
}

#[test]
fn quoting_and_test_lines() {
    assert_eq!(sq("abc"), "abc");
    assert_eq!(sq("a b"), "'a b'");
    assert_eq!(sq("it's"), r"'it'\''s'");
    assert_eq!(sq(""), "''");
    let t = TestCommand {
        description: "python".into(),
        run: "python3 --version".into(),
        expect_rc: 0,
        contains: Some("Python 3".into()),
    };
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "set -e\n{}",
            test_line(&TestCommand {
                description: "false".into(),
                run: "false".into(),
                expect_rc: 1,
                contains: None,
            })
        ))
        .status()
        .unwrap();
    assert!(
        ok.success(),
        "an expected non-zero exit passes under set -e"
    );
    let bad = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "set -e\n{}\necho after",
            test_line(&TestCommand {
                description: "t".into(),
                run: "true".into(),
                expect_rc: 0,
                contains: Some("nothing".into()),
            })
        ))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("in-bake test failed: t: output does not contain 'nothing'"));
    assert!(!String::from_utf8_lossy(&bad.stdout).contains("after"));
    assert!(test_line(&t).contains("grep -qF -- 'Python 3'"));
}

#[test]
fn private_vars_are_created_0600_and_removed_after_the_bake() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let r = req("web", false, Vec::new(), tmp.path());
    let path = private_vars(&r, "app config", "{\"token\":\"s3cret\"}").unwrap();
    assert!(path.starts_with(tmp.path().join(".csis/bake-vars")));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"token\":\"s3cret\"}"
    );
    remove_private_vars(&r);
    assert!(!path.exists());
    assert!(!path.parent().unwrap().exists());
}

/// A mod whose inline lines, `ensure:` file content, environment or in-bake
/// test hold a secret: the lowering writes those steps and the bundle's
/// inline.sh to 0600 files under `.csis/bake-vars/`, the emitted files
/// (what lands under `generated/`) hold none of it, and the steps keep the
/// lines for a runtime that runs them from memory.
#[test]
fn secret_lines_go_to_private_files_never_to_the_emission() {
    use std::os::unix::fs::PermissionsExt;
    let key = csis_schema::secret::default_key();
    let line = "echo recipe-secret-line-5d1e";
    let content = "recipe-secret-content-0b7c";
    let env = "TOKEN=recipe-secret-env-a3f2";
    let test = "grep -q recipe-secret-test-9e41 /etc/x";
    for s in [line, content, env, test] {
        csis_schema::secret::register(s, &key).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut r = req(
        "web",
        false,
        vec![
            BakeStep::Shell {
                name: "plain".into(),
                inline: vec!["echo nothing secret".into()],
                scripts: vec![],
                ensure: None,
                env: vec![],
                execute_command: None,
            },
            BakeStep::Shell {
                name: "secret".into(),
                inline: vec![line.into()],
                scripts: vec![],
                ensure: Some(Ensure {
                    files: vec![EnsureFile {
                        path: "/etc/secret".into(),
                        content: content.into(),
                        mode: "0600".into(),
                    }],
                    ..Ensure::default()
                }),
                env: vec![env.into()],
                execute_command: None,
            },
        ],
        tmp.path(),
    );
    r.tests.push(TestCommand {
        description: format!("command `{test}`"),
        run: test.into(),
        expect_rc: 0,
        contains: None,
    });
    let l = lower(&r, &target(true)).unwrap();
    let secrets = [
        line,
        content,
        env,
        test,
        "cmVjaXBlLXNlY3JldC1jb250ZW50LTBiN2M=",
    ];
    for f in &l.files {
        let text = String::from_utf8_lossy(&f.content);
        for s in secrets {
            assert!(!text.contains(s), "{} holds {s}:\n{text}", f.rel);
        }
    }
    let private: Vec<&Path> = l
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Shell { private, .. } | StepKind::Verify { private, .. } => {
                private.as_deref()
            }
            _ => None,
        })
        .collect();
    assert_eq!(private.len(), 2, "the secret mod and the verification");
    let mod_script = std::fs::read_to_string(private[0]).unwrap();
    assert!(
        mod_script.contains(line) && mod_script.contains("export TOKEN=recipe-secret-env-a3f2\n")
    );
    assert!(std::fs::read_to_string(private[1]).unwrap().contains(test));
    for p in &private {
        assert!(p.starts_with(tmp.path().join(".csis/bake-vars")));
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // the plain mod stays inline and in the bundle; the secret mod's
    // inline.sh is uploaded from its private copy and made root-only
    assert!(l
        .files
        .iter()
        .any(|f| f.rel == "csis-mods/web/01-plain/inline.sh"));
    assert!(!l
        .files
        .iter()
        .any(|f| f.rel == "csis-mods/web/02-secret/inline.sh"));
    let bundle_private = tmp
        .path()
        .join(".csis/bake-vars/x_web_rt/csis-mods/02-secret/inline.sh");
    assert!(std::fs::read_to_string(&bundle_private)
        .unwrap()
        .contains(line));
    assert!(l.steps.iter().any(|s| matches!(&s.kind,
        StepKind::Upload { rel, .. } if rel == &format!("{}/", tmp.path().join(".csis/bake-vars/x_web_rt/csis-mods").display()))));
    assert!(l.steps.iter().any(|s| matches!(&s.kind,
        StepKind::Shell { lines, .. } if lines.iter().any(|x| x.ends_with("chmod 0600 /opt/csis/mods/02-secret/inline.sh")))));
    remove_private_vars(&r);
    assert!(!bundle_private.exists());
}
