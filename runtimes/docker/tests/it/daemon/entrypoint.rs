//! A vendor image's ENTRYPOINT does not wrap the bake container's keepalive.

use std::sync::Arc;

use csis_runtime::Runtime;

use crate::common::{self, *};
use crate::need_daemon;

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
