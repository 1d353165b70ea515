//! The chain of builds on the daemon: bake, query, retag, release and
//! dispose, and what disposing a parent with children leaves behind.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use csis_runtime::{
    BakeParent, BakeStep, Ensure, EnsureCommand, EnsureFile, PowerState, Runtime, RuntimeError,
};

use crate::common::{self, *};
use crate::daemon::create_container;
use crate::need_daemon;

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
