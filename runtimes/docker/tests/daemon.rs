//! Against this machine's real Docker daemon. Each test has its own runtime
//! name and test-only repository (`csis-test/<tag>-<random>`) and cleans up.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptionsBuilder;
use common::*;
use csis_runtime::{
    BakeParent, BakeStep, Ensure, EnsureCommand, EnsureFile, PowerState, ResolveRequest, Runtime,
    RuntimeError,
};
use serde_json::json;

fn resolve_req(query: serde_json::Value, image_id: Option<&str>) -> ResolveRequest {
    ResolveRequest {
        label: "//os/bb@t".into(),
        series: "bb".into(),
        family: "busybox".into(),
        family_version: "1".into(),
        architecture: "x86_64".into(),
        owners: vec![],
        query,
        image_id: image_id.map(str::to_string),
    }
}

async fn create_container(d: &bollard::Docker, name: &str, image: &str, start: bool) {
    create_labelled(d, name, image, start, &[]).await
}

/// A container with labels (a bake container's owner mark, ...).
async fn create_labelled(
    d: &bollard::Docker,
    name: &str,
    image: &str,
    start: bool,
    labels: &[(&str, &str)],
) {
    let opts = CreateContainerOptionsBuilder::default().name(name).build();
    d.create_container(
        Some(opts),
        ContainerCreateBody {
            image: Some(image.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            host_config: Some(bollard::models::HostConfig {
                init: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    if start {
        d.start_container(
            name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn preflight_and_online_checks_answer() {
    let _d = need_daemon!();
    let (rt, _c) = runtime("pf");
    let p = rt.preflight().await.unwrap();
    assert_eq!(p.len(), 1);
    assert!(p[0].ok, "{p:?}");
    assert!(p[0].detail.contains("API 1."), "{p:?}");
    let f = rt.check_online().await.unwrap();
    assert!(
        f.iter().all(|f| !f.error || f.path == "executable"),
        "{f:?}"
    );
}

#[tokio::test]
async fn resolve_local_image_pins_and_missing_references() {
    let d = need_daemon!();
    let base = busybox_image(&d).await;
    let (rt, _c) = runtime("rs");
    // a locally imported image has no repo digest: its image id is recorded
    let r = rt
        .resolve(&resolve_req(
            json!({"native": {"image": BUSYBOX_TAG}}),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(r.id, base);
    assert_eq!(r.facts.get("image_id"), Some(&base));
    assert!(r.facts["identifier"].contains("no repo digest"));
    // name/version/publisher translate to the same reference
    let r2 = rt
        .resolve(&resolve_req(
            json!({"name": "busybox", "version": "1", "publisher": "csis-test-base"}),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(r2.id, base);
    // a pinned image id
    let r3 = rt
        .resolve(&resolve_req(json!({}), Some(&base)))
        .await
        .unwrap();
    assert_eq!(r3.id, base);
    // a tag pin is refused with the seed's message
    let e = rt
        .resolve(&resolve_req(json!({}), Some(BUSYBOX_TAG)))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "image_id '{BUSYBOX_TAG}' is not a digest reference"
        )),
        "{e}"
    );
    // absent and not pullable (no registry): a clear error naming the reference
    let e = rt
        .resolve(&resolve_req(
            json!({"native.image": "csis-test-absent/nothing:0"}),
            None,
        ))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "image 'csis-test-absent/nothing:0' is not on the daemon and cannot be pulled"
        ),
        "{e}"
    );
    // a query key the daemon cannot answer
    let e = rt
        .resolve(&resolve_req(json!({"owner-alias": "amazon"}), None))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot be answered by a docker runtime"),
        "{e}"
    );
}

#[tokio::test]
async fn chain_bakes_then_query_retag_release_dispose() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("chain");
    let repo = rt.repository().to_string();
    let log = Arc::new(Lines::default());

    // base: inline + ensure (file with mode, command with unless, a service)
    let mut base = request(
        &rt,
        "base",
        vendor(&base_img),
        vec![
            shell(
                "hello",
                &[
                    "echo hello from base",
                    "mkdir -p /opt/csis",
                    "echo base > /opt/csis/layer",
                ],
            ),
            BakeStep::Shell {
                name: "ensure".into(),
                inline: vec![],
                scripts: vec![],
                ensure: Some(Ensure {
                    packages: vec![],
                    files: vec![EnsureFile {
                        path: "/etc/csis/motd".into(),
                        content: "it's baked\nline2".into(),
                        mode: "0600".into(),
                    }],
                    services: vec!["nginx".into()],
                    commands: vec![
                        EnsureCommand {
                            run: "echo ran >> /opt/csis/ran".into(),
                            unless: Some("test -f /opt/csis/ran".into()),
                        },
                        EnsureCommand {
                            run: "echo never >> /opt/csis/never".into(),
                            unless: Some("true".into()),
                        },
                    ],
                }),
                env: vec![],
                execute_command: None,
            },
        ],
        vec![
            test_cmd("cat /etc/csis/motd", Some("it's baked\nline2")),
            test_cmd("stat -c %a /etc/csis/motd", Some("600")),
            test_cmd(
                "test ! -e /opt/csis/never && cat /opt/csis/ran",
                Some("ran"),
            ),
        ],
        log.clone(),
    );
    base.tags.insert("team".into(), "platform".into());
    base.tags.insert("csis_config".into(), "base-only".into());
    base.tags.insert("csis_storage_types".into(), String::new());
    let b = rt
        .bake(&base)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    assert!(b.build_id.starts_with("sha256:"));
    assert_eq!(b.assertions, 3);
    let lines = log.all();
    assert!(lines.iter().any(|l| l == "hello from base"), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("settle: no package manager")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("service nginx skipped")),
        "{lines:#?}"
    );

    // child: a script file with env vars and a custom execute_command
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("child.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nset -e\necho \"child $GREETING\" > /opt/csis/child\ncat /opt/csis/layer\n",
    )
    .unwrap();
    let child = request(
        &rt,
        "child",
        BakeParent::Build {
            series: "base".into(),
            build_id: b.build_id.clone(),
        },
        vec![BakeStep::Shell {
            name: "script".into(),
            inline: vec![],
            scripts: vec![script.clone()],
            ensure: None,
            env: vec!["GREETING=hi there".into()],
            execute_command: Some("chmod +x {{ .Path }}; env {{ .Vars }} {{ .Path }}".into()),
        }],
        vec![test_cmd("cat /opt/csis/child", Some("child hi there"))],
        log.clone(),
    );
    let c = rt
        .bake(&child)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));

    // grandchild
    let grand = request(
        &rt,
        "grand",
        BakeParent::Build {
            series: "child".into(),
            build_id: c.build_id.clone(),
        },
        vec![shell("g", &["echo grand > /opt/csis/grand"])],
        vec![test_cmd(
            "cat /opt/csis/layer /opt/csis/child /opt/csis/grand",
            Some("base\nchild hi there\ngrand"),
        )],
        log.clone(),
    );
    let g = rt
        .bake(&grand)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    assert_ne!(c.build_id, g.build_id);

    // labels and tags
    let gi = d.inspect_image(&g.build_id).await.unwrap();
    let labels = gi.config.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!(labels["csis_series"], "grand");
    assert_eq!(labels["csis_parent"], "child");
    for k in [
        "csis_run",
        "csis_fingerprint",
        "csis_identity_types",
        "csis_storage_types",
    ] {
        assert!(labels.contains_key(k), "{k} in {labels:?}");
    }
    assert_eq!(
        gi.config.as_ref().unwrap().cmd,
        Some(vec!["sleep".to_string(), "infinity".to_string()])
    );
    let tags = gi.repo_tags.clone().unwrap();
    assert!(tags.contains(&format!("{repo}:{}", g.name)), "{tags:?}");
    assert!(tags.contains(&format!("{repo}:grand-native")), "{tags:?}");
    // a label the parent had and the child does not set is blanked
    let ci = d.inspect_image(&c.build_id).await.unwrap();
    assert_eq!(
        ci.config
            .unwrap()
            .labels
            .unwrap()
            .get("team")
            .map(String::as_str),
        Some("platform")
    );

    // no bake container left
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());

    // query_images sees the three, with lineage
    let q = rt.query_images().await.unwrap();
    assert_eq!(q.len(), 3, "{q:#?}");
    let by_series: HashMap<String, _> = q
        .iter()
        .map(|f| (f.tags["csis_series"].clone(), f.clone()))
        .collect();
    assert_eq!(by_series["grand"].build_id, g.build_id);
    assert_eq!(by_series["grand"].name.as_deref(), Some(g.name.as_str()));
    assert!(!by_series["base"].tags.contains_key("team"));
    // an empty lineage label is a value; a parent's lineage label the child does not set is not inherited
    assert_eq!(
        by_series["base"]
            .tags
            .get("csis_storage_types")
            .map(String::as_str),
        Some("")
    );
    assert_eq!(
        by_series["base"]
            .tags
            .get("csis_config")
            .map(String::as_str),
        Some("base-only")
    );
    assert!(
        !by_series["child"].tags.contains_key("csis_config"),
        "{:?}",
        by_series["child"].tags
    );
    assert!(!by_series["grand"].tags.contains_key("csis_config"));

    // retag: movable tags overlay the labels in query_images
    rt.retag_image(
        &c.build_id,
        &BTreeMap::from([
            ("csis_parent".to_string(), b.build_id.clone()),
            ("csis_release".to_string(), "prod/2026".to_string()),
        ]),
    )
    .await
    .unwrap();
    let q = rt.query_images().await.unwrap();
    let cf = q.iter().find(|f| f.build_id == c.build_id).unwrap();
    assert_eq!(cf.tags["csis_parent"], b.build_id);
    assert_eq!(cf.tags["csis_release"], "prod/2026");
    // moving it again replaces the tag, it does not add a second one
    rt.retag_image(
        &c.build_id,
        &BTreeMap::from([("csis_release".to_string(), "prod/2027".to_string())]),
    )
    .await
    .unwrap();
    let ct = d
        .inspect_image(&c.build_id)
        .await
        .unwrap()
        .repo_tags
        .unwrap();
    assert_eq!(
        ct.iter().filter(|t| t.contains("--csis_release--")).count(),
        1,
        "{ct:?}"
    );
    let q = rt.query_images().await.unwrap();
    assert_eq!(
        q.iter().find(|f| f.build_id == c.build_id).unwrap().tags["csis_release"],
        "prod/2027"
    );
    // a value equal to the label needs no tag; setting the label's value back removes the movable one
    rt.retag_image(
        &g.build_id,
        &BTreeMap::from([("csis_series".to_string(), "grand".to_string())]),
    )
    .await
    .unwrap();
    let gt = d
        .inspect_image(&g.build_id)
        .await
        .unwrap()
        .repo_tags
        .unwrap();
    assert!(!gt.iter().any(|t| t.contains("--csis_series--")), "{gt:?}");
    rt.retag_image(
        &c.build_id,
        &BTreeMap::from([("csis_parent".to_string(), "base".to_string())]),
    )
    .await
    .unwrap();
    let ct = d
        .inspect_image(&c.build_id)
        .await
        .unwrap()
        .repo_tags
        .unwrap();
    assert!(!ct.iter().any(|t| t.contains("--csis_parent--")), "{ct:?}");
    let q = rt.query_images().await.unwrap();
    assert_eq!(
        q.iter().find(|f| f.build_id == c.build_id).unwrap().tags["csis_parent"],
        "base"
    );
    // an empty value removes the movable tag
    rt.retag_image(
        &c.build_id,
        &BTreeMap::from([("csis_release".to_string(), String::new())]),
    )
    .await
    .unwrap();
    let q = rt.query_images().await.unwrap();
    assert!(!q
        .iter()
        .find(|f| f.build_id == c.build_id)
        .unwrap()
        .tags
        .contains_key("csis_release"));

    // release moves <repository>:<series>--<model>
    let cmds = rt.release_commands(&b.build_id, "base", "prod");
    assert_eq!(
        cmds,
        vec![format!("docker tag {} {repo}:base--prod", b.build_id)]
    );
    rt.release(&b.build_id, "base", "prod").await.unwrap();
    assert_eq!(
        d.inspect_image(&format!("{repo}:base--prod"))
            .await
            .unwrap()
            .id
            .unwrap(),
        b.build_id
    );
    let q = rt.query_images().await.unwrap();
    let bf = q.iter().find(|f| f.build_id == b.build_id).unwrap();
    assert_eq!(
        bf.tags.get("csis_release").map(String::as_str),
        Some("prod")
    );
    rt.release(&c.build_id, "base", "prod").await.unwrap();
    assert_eq!(
        d.inspect_image(&format!("{repo}:base--prod"))
            .await
            .unwrap()
            .id
            .unwrap(),
        c.build_id
    );
    rt.release(&c.build_id, "child", "staging").await.unwrap();
    rt.release(&c.build_id, "child", "prod").await.unwrap();
    let q = rt.query_images().await.unwrap();
    let bf = q.iter().find(|f| f.build_id == b.build_id).unwrap();
    assert!(
        !bf.tags.contains_key("csis_release"),
        "moved away: {:?}",
        bf.tags
    );
    let cf = q.iter().find(|f| f.build_id == c.build_id).unwrap();
    assert_eq!(
        cf.tags["csis_release"], "prod,staging",
        "its own series' releases only"
    );

    // dispose is refused while a container (even stopped) was created from the build
    let user = format!(
        "{}user",
        cleanup.container_prefix.replace("csis-bake-", "csis-test-")
    );
    cleanup.extra_containers.lock().unwrap().push(user.clone());
    create_container(&d, &user, &g.build_id, false).await;
    let users = rt.image_users(&g.build_id).await.unwrap();
    assert_eq!(users.len(), 1);
    assert!(users[0].starts_with(&user));
    let e = rt.dispose_image(&g.build_id).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Refused(_)));
    assert!(
        e.to_string().starts_with(&format!(
            "image {} is in use by container(s) {user}",
            g.build_id
        )),
        "{e}"
    );
    // the inventory shows the container and what it was made from
    let inv = rt.inventory().await.unwrap();
    let it = inv
        .instances
        .iter()
        .find(|i| i.name.as_deref() == Some(user.as_str()))
        .unwrap();
    assert_eq!(it.image.as_deref(), Some(g.build_id.as_str()));
    assert_eq!(it.power, PowerState::Stopped);
    d.remove_container(
        &user,
        None::<bollard::query_parameters::RemoveContainerOptions>,
    )
    .await
    .unwrap();
    assert!(rt.dispose_image(&g.build_id).await.unwrap());
    assert!(d.inspect_image(&g.build_id).await.is_err());
    assert!(
        !rt.dispose_image(&g.build_id).await.unwrap(),
        "already gone"
    );
    let q = rt.query_images().await.unwrap();
    assert_eq!(q.len(), 2);
    // dispose of the child removes every tag with it (movable and release included)
    assert!(rt.dispose_image(&c.build_id).await.unwrap());
    let left = d
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .unwrap();
    assert!(
        !left.iter().any(|i| {
            i.repo_tags.iter().any(|t| {
                t.contains(&format!("{repo}:child")) || t.contains(&names_short(&c.build_id))
            })
        }),
        "tags of the child are gone"
    );
    assert!(rt.dispose_image(&b.build_id).await.unwrap());
    assert!(rt.query_images().await.unwrap().is_empty());
}

fn names_short(id: &str) -> String {
    csis_runtime_docker::names::short_id(id)
}

#[tokio::test]
async fn failure_and_failing_test_remove_the_bake_container() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("fail");
    let log = Arc::new(Lines::default());
    let req = request(
        &rt,
        "f",
        vendor(&base_img),
        vec![shell("boom", &["echo before", "exit 3", "echo after"])],
        vec![],
        log.clone(),
    );
    let e = rt.bake(&req).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Failed(_)), "{e}");
    assert!(e.to_string().contains("exited 3"), "{e}");
    let lines = log.all();
    assert!(lines.iter().any(|l| l == "before"));
    assert!(!lines.iter().any(|l| l == "after"));
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());

    // a bake user the image lacks: root, and the log says so
    let mut req = request(
        &rt,
        "u",
        vendor(&base_img),
        vec![shell("who", &["id -u > /who"])],
        vec![test_cmd("cat /who", Some("0"))],
        log.clone(),
    );
    req.bake_user = Some("ghost".into());
    rt.bake(&req).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(log
        .all()
        .iter()
        .any(|l| l.contains("bake user 'ghost' does not exist in the image: steps run as root")));

    let req = request(
        &rt,
        "t",
        vendor(&base_img),
        vec![],
        vec![test_cmd("echo nope", Some("yes"))],
        log.clone(),
    );
    let e = rt.bake(&req).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("in-bake test failed: echo nope: output does not contain 'yes'"),
        "{e}"
    );
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
    assert_eq!(
        rt.query_images().await.unwrap().len(),
        1,
        "only the bake that passed"
    );
}

#[tokio::test]
async fn cancellation_mid_bake_removes_the_bake_container() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("cancel");
    let log = Arc::new(Lines::default());
    let req = request(
        &rt,
        "c",
        vendor(&base_img),
        vec![shell("long", &["echo started", "sleep 60"])],
        vec![],
        log.clone(),
    );
    let cancel = req.cancel.clone();
    let prefix = cleanup.container_prefix.clone();
    let d2 = d.clone();
    let watcher = tokio::spawn(async move {
        // cancel once the step has started in the container
        for _ in 0..600 {
            if log.all().iter().any(|l| l == "started")
                && !containers_named(&d2, &prefix).await.is_empty()
            {
                cancel.cancel();
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    let t0 = std::time::Instant::now();
    let e = rt.bake(&req).await.unwrap_err();
    assert!(
        watcher.await.unwrap(),
        "the bake container was seen running"
    );
    assert!(matches!(e, RuntimeError::Cancelled), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(50));
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
    assert!(rt.query_images().await.unwrap().is_empty());
}

#[tokio::test]
async fn clean_stale_bakes_removes_leftovers_of_a_killed_csis() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("stale");
    let host = csis_runtime::owner::host_name();
    // an owner that cannot be alive on this host (above any pid_max)
    let dead = format!("{host}:4294967294");
    let stale = format!("{}web-2026_01_01t00_00_00_000000", cleanup.container_prefix);
    create_labelled(&d, &stale, &base_img, true, &[("csis.bake_owner", &dead)]).await;
    // another csis's live bake on this daemon (pid 1 is alive), and a young
    // container of the prefix with no owner: neither is removed by its name
    let live = format!("{}web-2026_01_01t00_00_00_000001", cleanup.container_prefix);
    create_labelled(
        &d,
        &live,
        &base_img,
        true,
        &[("csis.bake_owner", &format!("{host}:1"))],
    )
    .await;
    let unowned = format!("{}web", cleanup.container_prefix);
    create_container(&d, &unowned, &base_img, true).await;
    let other = format!("csis-test-other-{}", rand_suffix());
    cleanup.extra_containers.lock().unwrap().push(other.clone());
    create_container(&d, &other, &base_img, false).await;
    let removed = rt.clean_stale_bakes().await.unwrap();
    assert_eq!(removed, vec![stale.clone()]);
    assert!(containers_named(&d, &stale).await.is_empty());
    assert_eq!(
        containers_named(&d, &other).await,
        vec![other.clone()],
        "not ours: kept"
    );
    assert_eq!(
        containers_named(&d, &live).await,
        vec![live.clone()],
        "a live owner's: kept"
    );
    assert!(
        containers_named(&d, &unowned).await.contains(&unowned),
        "no owner, younger than a day: kept"
    );
    assert!(rt.clean_stale_bakes().await.unwrap().is_empty());
    for c in [&live, &unowned] {
        d.remove_container(
            c,
            Some(
                bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                    .force(true)
                    .build(),
            ),
        )
        .await
        .unwrap();
    }
    // a bake finding its own name taken by a dead owner's container removes it and says so
    let log = Arc::new(Lines::default());
    let req = request(
        &rt,
        "lo",
        vendor(&base_img),
        vec![shell("s", &["true"])],
        vec![],
        log.clone(),
    );
    let leftover = format!("{}lo-{}", cleanup.container_prefix, req.tags["csis_run"]);
    create_labelled(
        &d,
        &leftover,
        &base_img,
        true,
        &[("csis.bake_owner", &dead)],
    )
    .await;
    rt.bake(&req).await.unwrap();
    assert!(
        log.all()
            .iter()
            .any(|l| l.contains(&format!("removing stale bake container {leftover}"))),
        "{:#?}",
        log.all()
    );
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
}

#[tokio::test]
async fn instance_hooks_on_containers() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("inst");
    let name = format!("csis-test-inst-{}", rand_suffix());
    cleanup.extra_containers.lock().unwrap().push(name.clone());
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Absent
    );
    create_container(&d, &name, &base_img, false).await;
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Stopped
    );
    rt.start_instance(&name, 20).await.unwrap();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );
    let (id, host) = rt.query_instance_identity(&name).await.unwrap();
    assert_eq!(id.len(), 64);
    assert_eq!(host.as_deref(), Some(&id[..12]));
    assert_eq!(
        rt.query_instance_boot_image(&name).await.unwrap(),
        Some(base_img.clone())
    );
    let r = rt
        .run_session_command(&name, "echo out; echo err >&2; exit 4", 20)
        .await
        .unwrap();
    assert_eq!(
        (r.exit_code, r.stdout.as_str(), r.stderr.as_str()),
        (4, "out\n", "err\n")
    );
    let e = rt
        .run_session_command(&name, "sleep 30", 1)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("did not finish within 1s"), "{e}");
    rt.stop_instance(&name, 1).await.unwrap();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Stopped
    );
    let (id2, _) = rt.query_instance_identity(&name).await.unwrap();
    assert_eq!(id, id2);
}

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

#[tokio::test]
async fn a_vendor_entrypoint_does_not_wrap_the_keepalive() {
    let d = need_daemon!();
    let _ = busybox_image(&d).await;
    let (rt, cleanup) = runtime("ep");
    // a vendor image whose ENTRYPOINT would exit at once
    let vendor_tag = format!("{}:vendor-ep", cleanup.repository);
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker create --name {c} {BUSYBOX_TAG} true >/dev/null && \
             docker commit --change 'ENTRYPOINT [\"/bin/false\"]' {c} {vendor_tag} >/dev/null; \
             docker rm {c} >/dev/null",
            c = format!("csis-test-ep-{}", rand_suffix())
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let vi = d.inspect_image(&vendor_tag).await.unwrap();
    assert_eq!(
        vi.config.unwrap().entrypoint,
        Some(vec!["/bin/false".to_string()])
    );
    let log = Arc::new(Lines::default());
    let req = request(
        &rt,
        "ep",
        vendor(&vendor_tag),
        vec![shell("s", &["echo ok > /ep"])],
        vec![test_cmd("cat /ep", Some("ok"))],
        log.clone(),
    );
    let out = rt
        .bake(&req)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    let cfg = d
        .inspect_image(&out.build_id)
        .await
        .unwrap()
        .config
        .unwrap();
    assert!(cfg.entrypoint.unwrap_or_default().is_empty());
    assert_eq!(
        cfg.cmd,
        Some(vec!["sleep".to_string(), "infinity".to_string()])
    );
}

#[tokio::test]
async fn packer_docker_builder_bakes_by_running_packer() {
    let d = need_daemon!();
    if std::process::Command::new("packer")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("SKIP packer-docker: packer is not installed (apt-get install -y packer)");
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

#[tokio::test]
async fn settle_installs_sudo_where_the_package_manager_allows() {
    let d = need_daemon!();
    let Some(img) = debian_image(&d).await else {
        eprintln!("SKIP settle: no Debian base image (see above)");
        return;
    };
    let (rt, _cleanup) = runtime("settle");
    let log = Arc::new(Lines::default());
    // a vendor image without sudo
    let base = request(
        &rt,
        "nosudo",
        vendor(&img),
        vec![shell(
            "rm",
            &[
                "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d",
                "chmod +x /usr/sbin/policy-rc.d",
                "SUDO_FORCE_REMOVE=yes dpkg --purge sudo >/dev/null",
                "! command -v sudo",
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
        "settled",
        BakeParent::Build {
            series: "nosudo".into(),
            build_id: b.build_id,
        },
        vec![],
        vec![test_cmd("command -v sudo", Some("sudo"))],
        log.clone(),
    );
    child.package_manager = Some("apt".into());
    rt.bake(&child)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    let lines = log.all();
    assert!(
        lines
            .iter()
            .any(|l| l == "settle: installing with apt: sudo"),
        "{lines:#?}"
    );
}

/// Removes a test volume even on panic.
struct VolumeCleanup(String);
impl Drop for VolumeCleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["volume", "rm", "-f", &self.0])
            .output();
    }
}

#[tokio::test]
async fn inventory_reports_volumes_with_their_labels() {
    let d = need_daemon!();
    let (rt, _c) = runtime("vol");
    let name = format!("csis-test-vol-{}", rand_suffix());
    let bare = format!("{name}-bare");
    let _v = (VolumeCleanup(name.clone()), VolumeCleanup(bare.clone()));
    d.create_volume(bollard::models::VolumeCreateRequest {
        name: Some(name.clone()),
        labels: Some(HashMap::from([
            ("csis_config".to_string(), "web-data".to_string()),
            ("team".to_string(), "platform".to_string()),
        ])),
        ..Default::default()
    })
    .await
    .unwrap();
    d.create_volume(bollard::models::VolumeCreateRequest {
        name: Some(bare.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let inv = rt.inventory().await.unwrap();
    let v = inv
        .volumes
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} in {:?}", inv.volumes));
    assert_eq!(v.config.as_deref(), Some("web-data"));
    assert_eq!(
        v.labels,
        BTreeMap::from([
            ("csis_config".to_string(), "web-data".to_string()),
            ("team".to_string(), "platform".to_string()),
        ])
    );
    assert_eq!(v.to_string(), name, "reports print the name");
    let b = inv.volumes.iter().find(|v| v.name == bare).unwrap();
    assert_eq!(b.config, None);
    assert!(b.labels.is_empty(), "{b:?}");
    let names: Vec<&str> = inv.volumes.iter().map(|v| v.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
}

#[tokio::test]
async fn disposing_a_parent_with_children_says_what_the_daemon_keeps() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime("held");
    let repo = rt.repository().to_string();
    let log = Arc::new(Lines::default());
    let bake = |series: &str, parent: csis_runtime::BakeParent| {
        request(
            &rt,
            series,
            parent,
            vec![shell("s", &[&format!("echo {series} > /{series}")])],
            vec![],
            log.clone(),
        )
    };
    let p = rt.bake(&bake("hp", vendor(&base_img))).await.unwrap();
    let build_of = |b: &csis_runtime::BakeOutcome, s: &str| BakeParent::Build {
        series: s.into(),
        build_id: b.build_id.clone(),
    };
    let c = rt.bake(&bake("hc", build_of(&p, "hp"))).await.unwrap();
    let g = rt.bake(&bake("hg", build_of(&c, "hc"))).await.unwrap();
    rt.release(&p.build_id, "hp", "prod").await.unwrap();

    // the parent goes first: its tags go, the daemon keeps its layers, and the outcome says so
    let o = rt.dispose_image_outcome(&p.build_id).await.unwrap();
    assert!(o.existed);
    assert_eq!(o.notes.len(), 1, "{o:?}");
    assert_eq!(
        o.notes[0],
        format!(
            "its tags are removed, but the daemon keeps the image {} untagged (its layers) while child image(s) {} stand on it; it goes with the last of them",
            p.build_id, c.build_id
        )
    );
    let pi = d.inspect_image(&p.build_id).await.unwrap();
    assert!(
        pi.repo_tags.unwrap_or_default().is_empty(),
        "no tag left, release tag included"
    );
    // as a build it is gone: the read-back does not list it, a second dispose finds nothing of it to remove
    assert!(!rt
        .query_images()
        .await
        .unwrap()
        .iter()
        .any(|f| f.build_id == p.build_id));
    // the middle one goes too: kept for the grandchild, still saying so
    let o = rt.dispose_image_outcome(&c.build_id).await.unwrap();
    assert!(o.notes[0].contains(&format!(
        "keeps the image {} untagged (its layers) while child image(s) {} stand on it",
        c.build_id, g.build_id
    )));
    // a container on the last child refuses its disposal and frees nothing
    let user = format!("csis-test-held-{}", rand_suffix());
    _cleanup.extra_containers.lock().unwrap().push(user.clone());
    create_container(&d, &user, &g.build_id, false).await;
    assert!(rt.dispose_image_outcome(&g.build_id).await.is_err());
    assert!(d.inspect_image(&p.build_id).await.is_ok());
    d.remove_container(
        &user,
        None::<bollard::query_parameters::RemoveContainerOptions>,
    )
    .await
    .unwrap();
    // the last child goes: the parents kept for it go with it, and the outcome says so
    let o = rt.dispose_image_outcome(&g.build_id).await.unwrap();
    assert!(o.existed);
    assert_eq!(
        o.notes,
        vec![
            format!(
                "freed the image {} too: a build disposed earlier, kept untagged until this last child went",
                c.build_id
            ),
            format!(
                "freed the image {} too: a build disposed earlier, kept untagged until this last child went",
                p.build_id
            ),
        ]
    );
    for id in [&p.build_id, &c.build_id, &g.build_id] {
        assert!(
            d.inspect_image(id).await.is_err(),
            "{id} is still on the daemon"
        );
    }
    // the vendor base is never touched
    assert!(d.inspect_image(&base_img).await.is_ok());
    assert!(rt.query_images().await.unwrap().is_empty());
    let left = d
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .unwrap();
    assert!(!left.iter().any(|i| i
        .repo_tags
        .iter()
        .any(|t| t.starts_with(&format!("{repo}:")))));
    // already gone: nothing to say
    let o = rt.dispose_image_outcome(&g.build_id).await.unwrap();
    assert_eq!(o, csis_runtime::DisposeOutcome::default());
}

#[tokio::test]
async fn disk_size_is_applied_or_the_bake_says_why_not() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime("disk");
    let info = d.info().await.unwrap();
    let driver = info.driver.clone().unwrap_or_default();
    let log = Arc::new(Lines::default());
    let mut req = request(
        &rt,
        "disk",
        vendor(&base_img),
        vec![shell("s", &["echo ok > /disk"])],
        vec![test_cmd("cat /disk", Some("ok"))],
        log.clone(),
    );
    req.disk_size_gb = Some(5);
    let support = rt.disk_size_support(&base_img, 5).await.unwrap();
    rt.bake(&req)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()));
    let lines = log.all();
    let name = csis_runtime::Runtime::name(&rt).to_string();
    match &support {
        Ok(()) => assert!(
            lines.iter().any(|l| l
                == "==> disk: the bake container's writable layer is limited to 5 GB (--storage-opt size=5G)"),
            "{lines:#?}"
        ),
        Err(why) => {
            assert!(
                why.starts_with(&format!(
                    "the daemon's storage driver {driver} refuses --storage-opt size=5G ("
                )),
                "{why}"
            );
            let want = format!(
                "warning: disk size 5 GB is not applied on docker runtime {name}: {why}; the bake container's writable layer is bounded only by the daemon's free space"
            );
            assert!(lines.contains(&want), "{want}\n{lines:#?}");
        }
    }
    eprintln!("driver {driver}: {support:?}");
    // this machine's daemon (fuse-overlayfs) cannot: the load-time check says so too
    if driver == "fuse-overlayfs" {
        assert!(support.is_err());
        let f = rt.check_online().await.unwrap();
        let want = format!(
            "docker runtime {name}: disk sizes (primary_disk_size, default_primary_disk_size) are not applied to bake containers on this daemon: storage driver fuse-overlayfs has no per-container size option (--storage-opt size=)"
        );
        assert!(
            f.iter()
                .any(|f| !f.error && f.path.is_empty() && f.message == want),
            "{f:?}"
        );
    }
    // no probe container is left behind, and one a killed csis left is a stale bake container
    assert!(containers_named(&d, &_cleanup.container_prefix)
        .await
        .is_empty());
    // (a probe is per process, with its owner: one whose owner is gone)
    let probe = format!("{}.disk-probe-4294967294", _cleanup.container_prefix);
    let dead = format!("{}:4294967294", csis_runtime::owner::host_name());
    create_labelled(&d, &probe, &base_img, false, &[("csis.bake_owner", &dead)]).await;
    assert_eq!(rt.clean_stale_bakes().await.unwrap(), vec![probe]);
}

/// A native base with lineage labels its children do not set, for the packer path.
async fn labelled_base(
    rt: &csis_runtime_docker::DockerRuntime,
    base_img: &str,
    log: Arc<Lines>,
) -> csis_runtime::BakeOutcome {
    let mut base = request(
        rt,
        "lb",
        vendor(base_img),
        vec![shell("s", &["echo base > /lb"])],
        vec![],
        log.clone(),
    );
    base.tags.insert("csis_config".into(), "base-only".into());
    base.tags.insert("csis_extra".into(), "from-base".into());
    rt.bake(&base)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#?}", log.all()))
}

#[tokio::test]
async fn packer_root_blanks_the_parents_lineage_labels() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime_with("pkblank", |s| {
        s.packer_builders
            .insert("pckr-docker".into(), "packer".into());
    });
    let log = Arc::new(Lines::default());
    let b = labelled_base(&rt, &base_img, log.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        &rt,
        "lc",
        BakeParent::Build {
            series: "lb".into(),
            build_id: b.build_id.clone(),
        },
        vec![shell("s", &["echo child > /lc"])],
        vec![],
        log.clone(),
    );
    req.image_builder = "pckr-docker".into();
    req.emit_dir = dir.path().to_path_buf();
    let files = rt.emit(&req).await.unwrap();
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let v: serde_json::Value = hcl::from_str(&text).unwrap();
    let changes: Vec<String> =
        serde_json::from_value(v["source"]["docker"]["lc"]["changes"].clone()).unwrap();
    for want in [
        r#"LABEL csis_config="""#,
        r#"LABEL csis_extra="""#,
        r#"LABEL csis.blanked="csis_config,csis_extra""#,
    ] {
        assert!(changes.iter().any(|c| c == want), "{want} in {changes:?}");
    }
    // what the child sets itself is not blanked
    assert!(!changes.iter().any(|c| c == r#"LABEL csis_series="""#));
    assert!(!text.contains("was not read from the daemon"), "{text}");
}

#[tokio::test]
async fn packer_bake_commits_the_parents_lineage_labels_blank() {
    let d = need_daemon!();
    if std::process::Command::new("packer")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("SKIP packer blanking: packer is not installed (apt-get install -y packer)");
        return;
    }
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime_with("pkbl", |s| {
        s.packer_builders
            .insert("pckr-docker".into(), "packer".into());
    });
    let log = Arc::new(Lines::default());
    let b = labelled_base(&rt, &base_img, log.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        &rt,
        "lp",
        BakeParent::Build {
            series: "lb".into(),
            build_id: b.build_id.clone(),
        },
        vec![shell("s", &["echo child > /lp"])],
        vec![test_cmd("cat /lb /lp", Some("base\nchild"))],
        log.clone(),
    );
    req.image_builder = "pckr-docker".into();
    req.emit_dir = dir.path().to_path_buf();
    let c = rt
        .bake(&req)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", log.all().join("\n")));
    let labels = d
        .inspect_image(&c.build_id)
        .await
        .unwrap()
        .config
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(labels["csis_config"], "");
    assert_eq!(labels["csis_extra"], "");
    assert_eq!(labels["csis.blanked"], "csis_config,csis_extra");
    assert_eq!(labels["csis_series"], "lp");
    // as native children do: the parent's lineage labels are not the child's
    let q = rt.query_images().await.unwrap();
    let child = q.iter().find(|f| f.build_id == c.build_id).unwrap();
    assert!(!child.tags.contains_key("csis_config"), "{:?}", child.tags);
    assert!(!child.tags.contains_key("csis_extra"), "{:?}", child.tags);
    let parent = q.iter().find(|f| f.build_id == b.build_id).unwrap();
    assert_eq!(parent.tags["csis_config"], "base-only");
}
