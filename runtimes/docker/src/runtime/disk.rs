//! Disk sizes: whether the daemon's storage driver applies
//! `--storage-opt size=` to a bake container (from `docker info`, and by a
//! probe container once per size), and the limit a bake gets.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::CreateContainerOptionsBuilder;
use csis_runtime::{LogSink, Result, RuntimeError};

use super::containers::remove_container_forced;
use super::errors::api_message;
use super::DockerRuntime;
use crate::names;

/// Why a storage driver cannot limit a container's disk (`--storage-opt
/// size=`), when that is known from `docker info` alone: fuse-overlayfs,
/// aufs and overlay have no size option; overlay2 has one only on xfs
/// mounted with `pquota`. `None`: the driver may apply it (a bake finds out).
pub fn driver_disk_problem(driver: &str, status: &[Vec<String>]) -> Option<String> {
    let backing = status
        .iter()
        .find(|kv| kv.first().map(String::as_str) == Some("Backing Filesystem"))
        .and_then(|kv| kv.get(1))
        .map(String::as_str);
    match driver {
        "fuse-overlayfs" | "aufs" | "overlay" => Some(format!(
            "storage driver {driver} has no per-container size option (--storage-opt size=)"
        )),
        "overlay2" => match backing {
            Some(fs) if fs != "xfs" => Some(format!(
                "storage driver overlay2 on {fs} has no per-container size limit (--storage-opt size= needs overlay2 on xfs mounted with pquota)"
            )),
            _ => None,
        },
        _ => None,
    }
}

impl DockerRuntime {
    /// Does the daemon limit a container's writable layer to `gb` GB
    /// (`--storage-opt size=<gb>G`)? `Err` says why not: the storage driver
    /// refuses the option (overlay2 unless on xfs with `pquota`,
    /// fuse-overlayfs, aufs, ...). Found once per size by creating (never
    /// starting) a container from `image` with the option, and again without
    /// it when refused, so that only the option is blamed.
    pub async fn disk_size_support(
        &self,
        image: &str,
        gb: u32,
    ) -> Result<std::result::Result<(), String>> {
        let mut known = self.disk_limits.lock().await;
        if let Some(r) = known.get(&gb) {
            return Ok(r.clone());
        }
        let d = self.docker().await?;
        let driver = d
            .info()
            .await
            .map_err(|e| self.map_err("daemon info", e))?
            .driver
            .unwrap_or_default();
        let body = |size: Option<String>| ContainerCreateBody {
            image: Some(image.to_string()),
            labels: Some(self.bake_labels(None)),
            entrypoint: Some(vec![]),
            cmd: Some(vec!["true".into()]),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                storage_opt: size.map(|s| HashMap::from([("size".to_string(), s)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Named like a bake container, per process and marked with its owner:
        // one a killed csis leaves is removed by the next clean_stale_bakes.
        let probe = format!(
            "{}.disk-probe-{}",
            names::bake_container_prefix(&self.settings.name),
            std::process::id()
        );
        let create = |size: Option<String>| {
            let opts = CreateContainerOptionsBuilder::default()
                .name(&probe)
                .build();
            d.create_container(Some(opts), body(size))
        };
        let gone = |r: std::result::Result<bool, String>| {
            r.map(drop).map_err(|e| {
                RuntimeError::Failed(format!(
                    "docker runtime {}: probe container {probe} cannot be removed: {e}",
                    self.settings.name
                ))
            })
        };
        gone(remove_container_forced(d, &probe).await)?;
        let verdict = match create(Some(format!("{gb}G"))).await {
            Ok(_) => {
                gone(remove_container_forced(d, &probe).await)?;
                Ok(())
            }
            Err(with) => {
                create(None)
                    .await
                    .map_err(|e| self.map_err(&format!("create a container from {image}"), e))?;
                gone(remove_container_forced(d, &probe).await)?;
                Err(format!(
                    "the daemon's storage driver {driver} refuses --storage-opt size={gb}G ({})",
                    api_message(&with).trim()
                ))
            }
        };
        known.insert(gb, verdict.clone());
        Ok(verdict)
    }

    /// The `--storage-opt size=` value a bake's container gets (`None`: no
    /// disk size, or the daemon cannot apply it; the bake log says which).
    pub(crate) async fn bake_disk_limit(
        &self,
        disk_size_gb: Option<u32>,
        image: &str,
        log: &dyn LogSink,
    ) -> Result<Option<String>> {
        let Some(gb) = disk_size_gb else {
            return Ok(None);
        };
        Ok(match self.disk_size_support(image, gb).await? {
            Ok(()) => {
                log.line(&format!(
                    "==> disk: the bake container's writable layer is limited to {gb} GB (--storage-opt size={gb}G)"
                ));
                Some(format!("{gb}G"))
            }
            Err(why) => {
                log.line(&format!(
                    "warning: disk size {gb} GB is not applied on docker runtime {}: {why}; the bake container's writable layer is bounded only by the daemon's free space",
                    self.settings.name
                ));
                None
            }
        })
    }
}
