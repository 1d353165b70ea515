//! The disk size of a bake: applied, or the bake says why not.

use std::sync::Arc;

use csis_runtime::Runtime;

use crate::common::{self, *};
use crate::daemon::create_labelled;
use crate::need_daemon;

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
