//! The bake recipe on the real Docker daemon: a Debian base image (made
//! with debootstrap, see `common::debian_image`) baked with its OS update,
//! admin user and verification; an image on it with a playbook reading its
//! `config:`, an `ensure:` run twice, and the local modification bundle.

use crate::common;

use std::sync::Arc;

use common::*;
use csis_runtime::recipe::{BaseRecipe, BundleMod, ImageRecipe, Recipe, UpdateRecipe};
use csis_runtime::{BakeParent, BakeStep, Ensure, EnsureCommand, EnsureFile, Runtime};

async fn run_in(rt_image: &str, cmd: &str) -> (i32, String) {
    let o = std::process::Command::new("docker")
        .args([
            "run",
            "--rm",
            "--entrypoint",
            "/bin/sh",
            rt_image,
            "-c",
            cmd,
        ])
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[tokio::test]
async fn debian_base_and_child_bake_what_the_tree_declares() {
    let Some(d) = daemon().await else {
        eprintln!("SKIP: no Docker daemon");
        return;
    };
    let Some(img) = debian_image(&d).await else {
        eprintln!("SKIP: no Debian base image (see above)");
        return;
    };
    let (rt, _cleanup) = runtime("recipe");
    let log = Arc::new(Lines::default());
    let emit = tempfile::tempdir().unwrap();
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRecipeTestKeyRecipeTestKeyRecipeTestKey00 op@x";
    let mut base = request(
        &rt,
        "deb",
        vendor(&img),
        vec![],
        vec![test_cmd("id -u csisadmin", None)],
        log.clone(),
    );
    base.emit_dir = emit.path().join("base");
    base.package_manager = Some("apt".into());
    base.recipe = Recipe {
        base: Some(BaseRecipe {
            os_type: "debian".into(),
            family: "debian".into(),
            family_version: "12".into(),
            architecture: "x86_64".into(),
            update: UpdateRecipe {
                policy: "packages".into(),
                packages: vec!["tzdata".into()],
                exclude: vec!["linux-image*".into()],
                pin: vec![],
            },
            admin_user: "csisadmin".into(),
            admin_public_keys: vec![key.into()],
            identity: vec![],
            storage: vec![],
        }),
        image: None,
    };
    let b = rt
        .bake(&base)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    assert_eq!(b.assertions, 4, "admin user (3) and the declared test (1)");
    let made = format!("{}:{}", rt.repository(), b.name);
    let (rc, out) = run_in(
        &made,
        "id -u csisadmin && cat /home/csisadmin/.ssh/authorized_keys && cat /etc/sudoers.d/90-csisadmin && stat -c '%a %U' /home/csisadmin/.ssh/authorized_keys && grep -c . /var/lib/csis/packages.txt && grep '^tzdata=' /var/lib/csis/packages.txt",
    )
    .await;
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(key), "{out}");
    assert!(out.contains("csisadmin ALL=(ALL) NOPASSWD:ALL"), "{out}");
    assert!(out.contains("600 csisadmin"), "{out}");
    assert!(
        out.contains("tzdata="),
        "packages.txt lists the packages: {out}"
    );
    assert!(
        log.all().iter().any(|l| l.contains(
            "==> step 2: OS update for base image deb (policy=packages, packages=['tzdata']"
        )),
        "{:#?}",
        log.all()
    );

    // the child: a playbook reading its config, ensure (twice), the bundle
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("playbooks")).unwrap();
    std::fs::write(
        tree.path().join("playbooks/role.yml"),
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - copy:\n        dest: /etc/node-role\n        content: \"{{ node_role }}\\n\"\n",
    )
    .unwrap();
    let mut config = serde_json::Map::new();
    config.insert("node_role".into(), serde_json::json!("worker"));
    let ensure = Ensure {
        packages: vec!["less".into()],
        files: vec![EnsureFile {
            path: "/etc/team-node.conf".into(),
            content: "role=worker\n".into(),
            mode: "0640".into(),
        }],
        services: vec![],
        commands: vec![EnsureCommand {
            run: "echo ran >> /var/lib/csis/ensure-runs".into(),
            unless: Some("test -e /var/lib/csis/ensure-runs".into()),
        }],
    };
    let ensure_step = |name: &str| BakeStep::Shell {
        name: name.into(),
        inline: vec![],
        scripts: vec![],
        ensure: Some(ensure.clone()),
        env: vec![],
        execute_command: None,
    };
    let mut child = request(
        &rt,
        "node",
        BakeParent::Build {
            series: "deb".into(),
            build_id: b.build_id.clone(),
        },
        vec![
            BakeStep::Ansible {
                name: "role".into(),
                playbooks: vec![tree.path().join("playbooks/role.yml")],
                extra_arguments: vec![],
                binary: "ansible-playbook".into(),
                extra_vars: config,
            },
            ensure_step("first"),
            // the same declaration again: the second run changes nothing
            BakeStep::Shell {
                name: "second".into(),
                inline: vec!["before=$(stat -c '%Y %Z %i' /etc/team-node.conf)".into()],
                scripts: vec![],
                ensure: None,
                env: vec![],
                execute_command: None,
            },
        ],
        vec![test_cmd("cat /etc/node-role", Some("worker"))],
        log.clone(),
    );
    // run the ensure lines a second time, then compare what they touched
    if let BakeStep::Shell { inline, .. } = &mut child.steps[2] {
        let lines = csis_runtime::recipe::ensure_lines(&rt.target(true), &ensure);
        inline.extend(lines);
        inline.push("after=$(stat -c '%Y %Z %i' /etc/team-node.conf)".into());
        inline.push("[ \"$before\" = \"$after\" ] || { echo \"ensure rewrote the file: $before / $after\" >&2; exit 1; }".into());
        inline.push("[ \"$(cat /var/lib/csis/ensure-runs)\" = ran ] || { echo 'the guarded command ran twice' >&2; exit 1; }".into());
    }
    child.package_manager = Some("apt".into());
    child.tree_root = tree.path().to_path_buf();
    child.emit_dir = emit.path().join("node");
    child.recipe = Recipe {
        base: None,
        image: Some(ImageRecipe {
            group: None,
            bundle: vec![
                BundleMod {
                    name: "role".into(),
                    builder: "ansible".into(),
                    operation: "ansible".into(),
                    idempotent: "ansible".into(),
                    content_hash: "h1".into(),
                },
                BundleMod {
                    name: "first".into(),
                    builder: "bash".into(),
                    operation: "bash".into(),
                    idempotent: "declared".into(),
                    content_hash: "h2".into(),
                },
            ],
        }),
    };
    let c = rt
        .bake(&child)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    let made = format!("{}:{}", rt.repository(), c.name);
    let (rc, out) = run_in(
        &made,
        "cat /etc/node-role && stat -c '%a' /etc/team-node.conf && dpkg -s less >/dev/null && echo less-ok && cat /opt/csis/mods/MANIFEST.yaml && csis-mods list && test -x /usr/local/bin/csis-ansible-python && echo py-ok",
    )
    .await;
    assert_eq!(rc, 0, "{out}");
    assert!(out.starts_with("worker\n640\nless-ok\n"), "{out}");
    assert!(
        out.contains("image: node\nmods:\n- content_hash: h1\n  dir: 01-role\n"),
        "{out}"
    );
    assert!(out.contains("01-role\n02-first\n03-second\n"), "{out}");
    assert!(out.contains("py-ok"), "{out}");
    // the bundle was emitted beside the bake
    assert!(emit
        .path()
        .join("node/csis-mods/node/01-role/role.yml")
        .exists());
    // the config value never reaches the log in clear
    assert!(
        !log.all().iter().any(|l| l.contains("\"node_role\"")),
        "{:#?}",
        log.all()
    );
}
