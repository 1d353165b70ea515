//! The daemon answers: preflight, the online checks, and resolving a base
//! image (local images, pins, missing references, unanswerable query keys).

use csis_runtime::{ResolveRequest, Runtime};
use serde_json::json;

use crate::common::{self, *};
use crate::need_daemon;

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
