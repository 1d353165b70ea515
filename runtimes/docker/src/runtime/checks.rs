//! Online checks and preflight: the daemon answers, its storage driver can
//! apply disk sizes, the network exists, the docker CLI meets its floor.

use csis_runtime::{OnlineFinding, PreflightLine, Result};

use super::disk::driver_disk_problem;
use super::errors::api_message;
use super::DockerRuntime;
use crate::version;

impl DockerRuntime {
    pub(super) async fn online_findings(&self) -> Result<Vec<OnlineFinding>> {
        let mut out = Vec::new();
        let field = if self.settings.context.is_some() {
            "context"
        } else {
            "host"
        };
        match self.docker().await {
            Ok(d) => {
                if let Err(e) = d.ping().await {
                    out.push(OnlineFinding {
                        path: field.into(),
                        message: self.unreachable(&e.to_string()).to_string(),
                        error: true,
                    });
                } else {
                    if let Ok(info) = d.info().await {
                        let driver = info.driver.clone().unwrap_or_default();
                        let status = info.driver_status.clone().unwrap_or_default();
                        if let Some(why) = driver_disk_problem(&driver, &status) {
                            out.push(OnlineFinding {
                                path: String::new(),
                                message: format!(
                                    "docker runtime {}: disk sizes (primary_disk_size, default_primary_disk_size) are not applied to bake containers on this daemon: {why}",
                                    self.settings.name
                                ),
                                error: false,
                            });
                        }
                    }
                    if self.settings.network != "host" && self.settings.network != "none" {
                        if let Err(e) = d
                            .inspect_network(
                                &self.settings.network,
                                None::<bollard::query_parameters::InspectNetworkOptions>,
                            )
                            .await
                        {
                            out.push(OnlineFinding {
                            path: "networking.network".into(),
                            message: format!(
                                "docker runtime {}: network '{}' does not exist on the daemon (it is referenced, never created): {}",
                                self.settings.name,
                                self.settings.network,
                                api_message(&e)
                            ),
                            error: true,
                        });
                        }
                    }
                }
            }
            Err(e) => out.push(OnlineFinding {
                path: field.into(),
                message: e.to_string(),
                error: true,
            }),
        }
        if let Some(req) = &self.settings.docker_version {
            match version::check_docker_cli(&self.settings.docker_binary, req).await {
                Ok(_) => {}
                Err(m) if m.contains("cannot run") => out.push(OnlineFinding {
                    path: "executable".into(),
                    message: format!(
                        "docker runtime {}: {m} (native bakes do not need it; ansible's docker connection does)",
                        self.settings.name
                    ),
                    error: false,
                }),
                Err(m) => out.push(OnlineFinding {
                    path: "executable".into(),
                    message: format!("docker runtime {}: {m}", self.settings.name),
                    error: true,
                }),
            }
        }
        Ok(out)
    }

    pub(super) async fn preflight_lines(&self) -> Result<Vec<PreflightLine>> {
        let what = format!("docker runtime {} ({})", self.settings.name, self.address());
        let line = match self.docker().await {
            Ok(d) => match d.version().await {
                Ok(v) => PreflightLine {
                    ok: true,
                    what,
                    detail: format!(
                        "the daemon answers: {} {} (API {}, {}/{})",
                        v.platform
                            .map(|p| p.name)
                            .filter(|n| !n.trim().is_empty())
                            .unwrap_or_else(|| "Docker Engine".into()),
                        v.version.unwrap_or_default(),
                        v.api_version.unwrap_or_default(),
                        v.os.unwrap_or_default(),
                        v.arch.unwrap_or_default()
                    ),
                },
                Err(e) => PreflightLine {
                    ok: false,
                    what,
                    detail: self.unreachable(&e.to_string()).to_string(),
                },
            },
            Err(e) => PreflightLine {
                ok: false,
                what,
                detail: e.to_string(),
            },
        };
        Ok(vec![line])
    }
}
