//! The instance hooks (power state, identity, ...) on containers.

use csis_runtime::{PowerState, Runtime};

use crate::common::{self, *};
use crate::daemon::create_container;
use crate::need_daemon;

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
