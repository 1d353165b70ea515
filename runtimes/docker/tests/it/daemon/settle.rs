//! Settle: sudo installed where the package manager allows.

use std::sync::Arc;

use csis_runtime::{BakeParent, Runtime};

use crate::common::{self, *};
use crate::need_daemon;

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
