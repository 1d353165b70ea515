//! A bake leaves no container behind: on failure, on a failing test, on
//! cancellation, and after a killed csis (stale bakes).

use std::sync::Arc;
use std::time::Duration;

use csis_runtime::{Runtime, RuntimeError};

use crate::common::{self, *};
use crate::daemon::{create_container, create_labelled};
use crate::need_daemon;

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
    // (labelled as a csis of before the `csis_` marks did: still recognised)
    create_labelled(&d, &stale, &base_img, true, &[("csis.bake_owner", &dead)]).await;
    // another csis's live bake on this daemon (pid 1 is alive), and a young
    // container of the prefix with no owner: neither is removed by its name
    let live = format!("{}web-2026_01_01t00_00_00_000001", cleanup.container_prefix);
    create_labelled(
        &d,
        &live,
        &base_img,
        true,
        &[("csis_bake_owner", &format!("{host}:1"))],
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
        &[("csis_bake_owner", &dead)],
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

/// Two bakes of one series with one run id at once (two csis processes
/// started in the same microsecond, the run id's grain, on one daemon):
/// the second takes a container name of its own, both bake, and neither
/// container is left.
#[tokio::test]
async fn two_bakes_of_one_run_id_take_two_containers() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, cleanup) = runtime("samerun");
    let log = Arc::new(Lines::default());
    let mk = |n: &str| {
        let mut r = request(
            &rt,
            "same",
            vendor(&base_img),
            vec![shell("wait", &["sleep 2", &format!("echo {n} > /which")])],
            vec![test_cmd("cat /which", Some(n))],
            log.clone(),
        );
        r.final_name = format!("same-native-20260101T000000-{n}");
        r
    };
    let (a, mut b) = (mk("one"), mk("two"));
    b.tags = a.tags.clone();
    let (ra, rb) = tokio::join!(rt.bake(&a), rt.bake(&b));
    ra.unwrap_or_else(|e| panic!("{e}"));
    rb.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        log.all()
            .iter()
            .any(|l| l.contains("is another csis's (the same run id)")),
        "{:?}",
        log.all()
    );
    assert!(containers_named(&d, &cleanup.container_prefix)
        .await
        .is_empty());
}

/// A bake whose container name a live csis already holds (the same run
/// id, started in the same microsecond) takes a name of its own, bakes,
/// and leaves the other's container.
#[tokio::test]
async fn a_bake_beside_a_live_csiss_container_of_its_name_takes_another() {
    let d = need_daemon!();
    let base_img = busybox_image(&d).await;
    let (rt, _cleanup) = runtime("heldname");
    let log = Arc::new(Lines::default());
    let req = request(
        &rt,
        "held",
        vendor(&base_img),
        vec![shell("s", &["echo x > /x"])],
        vec![],
        log.clone(),
    );
    let name = csis_runtime_docker::names::bake_container_name(
        rt.name(),
        "held",
        req.tags.get("csis_run").map(String::as_str),
    );
    crate::daemon::held_by_another_csis(&d, rt.name(), &name, &base_img).await;
    rt.bake(&req).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        log.all().iter().any(|l| l.contains("is another csis's")),
        "{:?}",
        log.all()
    );
    let left = containers_named(&d, &name).await;
    assert_eq!(
        left,
        std::slice::from_ref(&name),
        "the other's container alone is left"
    );
    crate::daemon::remove_forced(&d, &name).await;
}
