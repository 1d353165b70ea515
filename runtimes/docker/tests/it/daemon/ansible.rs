//! An ansible step of a native bake, run through the docker connection.

use std::sync::Arc;

use csis_runtime::{BakeParent, BakeStep, Ensure, Runtime};

use crate::common::{self, *};
use crate::need_daemon;

#[tokio::test]
async fn ansible_step_bakes_through_the_docker_connection() {
    let d = need_daemon!();
    if std::process::Command::new("ansible-playbook")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIP ansible: ansible-playbook is not installed (apt-get install -y ansible)");
        return;
    }
    let Some(img) = debian_image(&d).await else {
        eprintln!("SKIP ansible: no Debian base image (see above)");
        return;
    };
    let (rt, _cleanup) = runtime("ans");
    let log = Arc::new(Lines::default());
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("site.yml");
    std::fs::write(
        &pb,
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write a file\n      ansible.builtin.copy:\n        dest: /etc/csis-ansible\n        content: \"from ansible {{ greeting }}\\n\"\n        mode: '0644'\n",
    )
    .unwrap();
    let base = request(
        &rt,
        "deb",
        vendor(&img),
        vec![shell(
            "pre",
            &[
                "echo debian base > /etc/csis-base",
                "useradd -m baker",
                "echo 'baker ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/baker",
            ],
        )],
        vec![],
        log.clone(),
    );
    let b = rt
        .bake(&base)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    let mut child = request(
        &rt,
        "debans",
        BakeParent::Build {
            series: "deb".into(),
            build_id: b.build_id.clone(),
        },
        vec![
            BakeStep::Ansible {
                name: "site".into(),
                playbooks: vec![pb],
                extra_arguments: vec!["-e".into(), "greeting=hello".into()],
                binary: "ansible-playbook".into(),
                extra_vars: Default::default(),
            },
            shell("whoami", &["id -un | sudo tee /etc/csis-user"]),
            BakeStep::Shell {
                name: "pkgs".into(),
                inline: vec![],
                scripts: vec![],
                ensure: Some(Ensure {
                    packages: vec!["python3".into(), "sudo".into()],
                    ..Default::default()
                }),
                env: vec![],
                execute_command: Some("chmod +x {{ .Path }}; sudo -E {{ .Path }}".into()),
            },
        ],
        vec![test_cmd(
            "cat /etc/csis-ansible /etc/csis-base",
            Some("from ansible hello\ndebian base"),
        )],
        log.clone(),
    );
    child.tree_root = dir.path().to_path_buf();
    // the bake user exists (made by the parent): shell steps run as it, sudo for root
    child.bake_user = Some("baker".into());
    child
        .tests
        .push(test_cmd("cat /etc/csis-user", Some("baker")));
    let c = rt
        .bake(&child)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    assert_eq!(c.assertions, 2);
    assert!(
        log.all().iter().any(|l| l == "ensure: packages present"),
        "{:#?}",
        log.all()
    );
    let lines = log.all();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("settle: sudo and python3 present")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("TASK [write a file]")),
        "{lines:#?}"
    );
}
