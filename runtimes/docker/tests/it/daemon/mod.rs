//! Against this machine's real Docker daemon. Each test has its own runtime
//! name and test-only repository (`csis-test/<tag>-<random>`) and cleans up.
//! This file keeps the helpers the modules share (containers made by hand);
//! each module holds one idea.

mod ansible;
mod chain;
mod cleanup;
mod disk;
mod entrypoint;
mod instances;
mod inventory;
mod lineage_labels;
mod packer;
mod resolve;
mod settle;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptionsBuilder;

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

/// Whether `packer` runs here (else the test says SKIP).
fn packer_installed(what: &str) -> bool {
    let ok = std::process::Command::new("packer")
        .arg("version")
        .output()
        .is_ok();
    if !ok {
        eprintln!("SKIP {what}: packer is not installed (apt-get install -y packer)");
    }
    ok
}

/// A container named `name`, running, marked as another live csis's bake
/// on this host (pid 1 runs): what a run of the same run id, started in
/// the same microsecond, holds.
async fn held_by_another_csis(d: &bollard::Docker, runtime: &str, name: &str, image: &str) {
    let other = format!("{}:1", csis_runtime::owner::host_name());
    create_labelled(
        d,
        name,
        image,
        true,
        &[("csis_bake", runtime), ("csis_bake_owner", &other)],
    )
    .await;
}

/// Remove a container, running or not.
async fn remove_forced(d: &bollard::Docker, name: &str) {
    let opts = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    let _ = d.remove_container(name, Some(opts)).await;
}
