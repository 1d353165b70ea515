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
