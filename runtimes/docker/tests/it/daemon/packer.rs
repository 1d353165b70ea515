//! The packer docker builder: a bake by running packer, and ansible through
//! its docker connection.

use std::sync::Arc;
use std::time::Duration;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptionsBuilder;
use csis_runtime::{BakeStep, PowerState, Runtime};

use crate::common::{self, *};
use crate::need_daemon;

#[tokio::test]
async fn packer_docker_builder_bakes_by_running_packer() {
    let d = need_daemon!();
    if !crate::daemon::packer_installed("packer-docker") {
        return;
    }
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime_with("pk", |s| {
        s.packer_builders
            .insert("pckr-docker".into(), "packer".into());
    });
    let repo = rt.repository().to_string();
    let log = Arc::new(Lines::default());
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        &rt,
        "pk",
        vendor(&base_img),
        vec![shell("s", &["echo from packer > /pk"])],
        vec![test_cmd("cat /pk", Some("from packer"))],
        log.clone(),
    );
    req.image_builder = "pckr-docker".into();
    req.emit_dir = dir.path().to_path_buf();
    let out = rt
        .bake(&req)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    assert!(out.build_id.starts_with("sha256:"), "{out:?}");
    assert_eq!(out.assertions, 1);
    assert!(dir.path().join("pckr-docker-pk.pkr.hcl").exists());
    let img = d.inspect_image(&out.build_id).await.unwrap();
    let cfg = img.config.unwrap();
    assert_eq!(cfg.labels.unwrap()["csis_series"], "pk");
    let ep = cfg.entrypoint.unwrap_or_default();
    assert!(ep.is_empty() || ep == vec![String::new()], "{ep:?}");
    assert_eq!(
        cfg.cmd,
        Some(vec!["sleep".to_string(), "infinity".to_string()])
    );
    let tags = img.repo_tags.unwrap();
    assert!(tags.contains(&format!("{repo}:{}", out.name)), "{tags:?}");
    assert!(tags.contains(&format!("{repo}:pk-native")), "{tags:?}");
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
    let q = rt.query_images().await.unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].build_id, out.build_id);
    // an instance of it keeps running on the keepalive
    let inst = format!("csis-test-pkinst-{}", rand_suffix());
    cleanup.extra_containers.lock().unwrap().push(inst.clone());
    let opts = CreateContainerOptionsBuilder::default().name(&inst).build();
    d.create_container(
        Some(opts),
        ContainerCreateBody {
            image: Some(out.build_id.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    rt.start_instance(&inst, 20).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        rt.query_instance_power_state(&inst).await.unwrap(),
        PowerState::Running
    );
    let r = rt.run_session_command(&inst, "cat /pk", 10).await.unwrap();
    assert_eq!(r.stdout, "from packer\n");
    // a failing step fails the bake, and the bake container still goes
    let mut bad = request(
        &rt,
        "pkbad",
        vendor(&base_img),
        vec![shell("s", &["exit 3"])],
        vec![],
        log.clone(),
    );
    bad.image_builder = "pckr-docker".into();
    bad.emit_dir = dir.path().to_path_buf();
    let e = rt.bake(&bad).await.unwrap_err();
    assert!(e.to_string().contains("packer build exited"), "{e}");
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
}

#[tokio::test]
async fn packer_docker_builder_runs_ansible_through_the_docker_connection() {
    let d = need_daemon!();
    for tool in ["packer", "ansible-playbook"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
            && std::process::Command::new(tool)
                .arg("version")
                .output()
                .is_err()
        {
            eprintln!("SKIP packer ansible: {tool} is not installed");
            return;
        }
    }
    let Some(img) = debian_image(&d).await else {
        eprintln!("SKIP packer ansible: no Debian base image (see above)");
        return;
    };
    let (rt, _cleanup) = runtime_with("pkans", |s| {
        s.packer_builders
            .insert("pckr-docker-ans".into(), "packer".into());
    });
    let log = Arc::new(Lines::default());
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("site.yml");
    std::fs::write(
        &pb,
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write a file\n      ansible.builtin.copy:\n        dest: /etc/csis-packer-ansible\n        content: \"via packer\\n\"\n",
    )
    .unwrap();
    let mut req = request(
        &rt,
        "pkans",
        vendor(&img),
        vec![BakeStep::Ansible {
            name: "site".into(),
            playbooks: vec![pb],
            extra_arguments: vec![],
            binary: "ansible-playbook".into(),
            extra_vars: Default::default(),
        }],
        vec![test_cmd("cat /etc/csis-packer-ansible", Some("via packer"))],
        log.clone(),
    );
    req.image_builder = "pckr-docker-ans".into();
    req.emit_dir = dir.path().join("emit");
    let out = rt
        .bake(&req)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", log.all().join("\n")));
    assert!(out.build_id.starts_with("sha256:"));
}

/// A packer bake whose container name another live csis holds (one run
/// id: two runs started in the same microsecond) fails, and leaves that
/// container to its owner: the guard removes only its own bake container.
#[tokio::test]
async fn a_packer_bake_leaves_another_csiss_container_of_its_name() {
    let d = need_daemon!();
    if !crate::daemon::packer_installed("packer-docker") {
        return;
    }
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime_with("pkown", |s| {
        s.packer_builders
            .insert("pckr-docker".into(), "packer".into());
    });
    let log = Arc::new(Lines::default());
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        &rt,
        "pko",
        vendor(&base_img),
        vec![shell("s", &["echo x > /x"])],
        vec![],
        log.clone(),
    );
    req.image_builder = "pckr-docker".into();
    req.emit_dir = dir.path().to_path_buf();
    let name = csis_runtime_docker::names::bake_container_name(
        rt.name(),
        "pko",
        req.tags.get("csis_run").map(String::as_str),
    );
    crate::daemon::held_by_another_csis(&d, rt.name(), &name, &base_img).await;
    let e = rt.bake(&req).await.expect_err("the name is taken");
    assert!(e.to_string().contains("belongs to a running csis"), "{e}");
    assert!(
        d.inspect_container(
            &name,
            None::<bollard::query_parameters::InspectContainerOptions>
        )
        .await
        .is_ok(),
        "the other csis's container is left: {e}"
    );
    crate::daemon::remove_forced(&d, &name).await;
}
