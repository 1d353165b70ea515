//! Below the runtime and the `packer-docker` bake alike: what the daemon's
//! answers mean (not there, in use, a message, causes on one line), a
//! container's forced removal, and the guard that removes a bake container
//! when its bake is dropped mid-way.

use bollard::query_parameters::RemoveContainerOptionsBuilder;
use bollard::Docker;

pub(crate) fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

pub(crate) fn is_conflict(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            ..
        }
    )
}

/// An error with its causes (`client error (Connect): Connection refused (os error 111)`).
pub(crate) fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = c.source();
    }
    out.replace('\n', " ")
}

pub(crate) fn api_message(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Removes the bake container when dropped without [`ContainerGuard::disarm`]
/// (a bake future dropped mid-way), as a spawned task.
pub(crate) struct ContainerGuard {
    docker: Docker,
    name: String,
    armed: bool,
    /// A bake container: removed only when no other csis owns it.
    bake: bool,
}

impl ContainerGuard {
    pub(crate) fn new(docker: Docker, name: String) -> Self {
        ContainerGuard {
            docker,
            name,
            armed: true,
            bake: false,
        }
    }

    /// The guard of a bake container, which removes it only when its
    /// owner mark is this process's (or it has none): another csis whose
    /// run has the same run id (the same microsecond) may hold a container
    /// of that name, and its bake goes on ([`remove_own_container`]).
    pub(crate) fn bake(docker: Docker, name: String) -> Self {
        ContainerGuard {
            docker,
            name,
            armed: true,
            bake: true,
        }
    }

    /// Keep the container: the caller owns it from now on.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    pub(crate) async fn remove(mut self) -> std::result::Result<(), String> {
        self.armed = false;
        if self.bake {
            remove_own_container(&self.docker, &self.name).await
        } else {
            remove_container_forced(&self.docker, &self.name).await
        }
        .map(drop)
    }
}

/// Remove the bake container `name` unless another process's owner mark
/// is on it; `true` when there was one to remove.
pub(crate) async fn remove_own_container(
    docker: &Docker,
    name: &str,
) -> std::result::Result<bool, String> {
    let c = match docker
        .inspect_container(
            name,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
    {
        Ok(c) => c,
        Err(e) if is_not_found(&e) => return Ok(false),
        Err(e) => return Err(api_message(&e)),
    };
    let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
    if crate::labels::bake_owner(&labels).is_some_and(|o| *o != csis_runtime::owner::bake_owner()) {
        return Ok(false);
    }
    remove_container_forced(docker, name).await
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                let docker = self.docker.clone();
                let name = self.name.clone();
                let bake = self.bake;
                h.spawn(async move {
                    let _ = if bake {
                        remove_own_container(&docker, &name).await
                    } else {
                        remove_container_forced(&docker, &name).await
                    };
                });
            }
        }
    }
}

/// Remove a container, running or not, with its anonymous volumes; `true`
/// when there was one to remove.
pub(crate) async fn remove_container_forced(
    docker: &Docker,
    name: &str,
) -> std::result::Result<bool, String> {
    let opts = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(name, Some(opts)).await {
        Ok(()) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(api_message(&e)),
    }
}
