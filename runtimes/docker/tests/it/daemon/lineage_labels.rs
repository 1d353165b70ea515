//! A parent's lineage labels that a child does not set come out blank, on
//! the packer path.

use std::sync::Arc;

use csis_runtime::{BakeParent, Runtime};

use crate::common::{self, *};
use crate::need_daemon;

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
