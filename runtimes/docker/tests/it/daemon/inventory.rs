//! The inventory of the daemon: volumes with their labels.

use std::collections::{BTreeMap, HashMap};

use csis_runtime::Runtime;

use crate::common::{self, *};
use crate::need_daemon;

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
