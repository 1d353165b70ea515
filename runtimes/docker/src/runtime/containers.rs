//! Bake containers: their labels, the ones a gone csis left behind
//! (`clean_stale_bakes`); a container as the hook surface lists it
//! (`instance_facts`). The guard that removes one when a bake is dropped
//! mid-way, and forced removal, are [`crate::daemon`]'s.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::ListContainersOptionsBuilder;
use csis_runtime::{BakeRequest, InstanceFacts, PowerState, Result, RuntimeError};

use super::DockerRuntime;
pub(crate) use crate::daemon::{remove_container_forced, ContainerGuard};
use crate::labels::{self, BAKE_LABEL, BAKE_OWNER_LABEL};
use crate::names;
use csis_schema::tags;

/// What held a bake container's name ([`DockerRuntime::clear_bake_name`]).
pub(crate) enum Held {
    /// No container of that name.
    Free,
    /// One left behind, now removed.
    Removed,
    /// A live csis's: kept (why, for a message).
    Live(String),
}

/// Is this bake container left behind by a csis that is gone? Its owner
/// label names a process of this host that is not running, or (another
/// host's, or a container without an owner label) it was created more than
/// [`csis_runtime::owner::STALE_AFTER`] ago. Never by its name alone.
fn left_behind(c: &bollard::models::ContainerSummary) -> bool {
    let owner = c.labels.as_ref().and_then(labels::bake_owner);
    let created = c
        .created
        .and_then(|t| u64::try_from(t).ok())
        .map(|t| std::time::UNIX_EPOCH + Duration::from_secs(t));
    csis_runtime::owner::is_left_behind(
        owner.map(String::as_str),
        created,
        std::time::SystemTime::now(),
        csis_runtime::owner::STALE_AFTER,
        &csis_runtime::owner::host_name(),
    )
}

/// A container as the hook surface lists it: its name, the image it was
/// created from, its power state and labels (`csis_config` among them).
pub(super) fn instance_facts(c: bollard::models::ContainerSummary) -> InstanceFacts {
    use bollard::models::ContainerSummaryStateEnum as S;
    let labels: std::collections::BTreeMap<String, String> =
        c.labels.clone().unwrap_or_default().into_iter().collect();
    InstanceFacts {
        id: c.id.unwrap_or_default(),
        name: c
            .names
            .and_then(|n| n.first().map(|n| n.trim_start_matches('/').to_string())),
        image: c.image_id,
        power: match c.state {
            Some(S::RUNNING) | Some(S::PAUSED) | Some(S::RESTARTING) => PowerState::Running,
            Some(S::CREATED) | Some(S::EXITED) | Some(S::DEAD) => PowerState::Stopped,
            _ => PowerState::Unknown,
        },
        config: c.labels.as_ref().and_then(|l| l.get(tags::CONFIG).cloned()),
        role: csis_runtime::MachineRole::of(&labels, &tags::BAKE_MARKS),
        labels,
    }
}

impl DockerRuntime {
    /// The labels of a bake container: this runtime's bake mark, the owner
    /// (`<host>:<pid>`), and the bake's config id, series and run.
    pub(crate) fn bake_labels(&self, req: Option<&BakeRequest>) -> HashMap<String, String> {
        let mut l = HashMap::from([
            (BAKE_LABEL.to_string(), self.settings.name.clone()),
            (
                BAKE_OWNER_LABEL.to_string(),
                csis_runtime::owner::bake_owner(),
            ),
        ]);
        if let Some(req) = req {
            for k in [tags::CONFIG, tags::SERIES, tags::RUN] {
                if let Some(v) = req.tags.get(k) {
                    l.insert(k.to_string(), v.clone());
                }
            }
            // (a label cannot be added later: the mark is set now, and the
            // container is kept only when it is renamed out of the bake prefix)
            if req.keep_failed {
                let run = req.tags.get(tags::RUN).cloned().unwrap_or_default();
                l.insert(tags::KEPT_FAILED.to_string(), run);
            }
        }
        l
    }

    /// Keep a failed bake's container for inspection: renamed out of the
    /// bake prefix ([`names::kept_container_name`]), so no clean-up of
    /// stale bakes removes it; it keeps running (`sleep infinity`) for
    /// `docker exec`. Returns its name.
    pub(crate) async fn keep_failed(&self, container: &str) -> Result<String> {
        let d = self.docker().await?;
        let kept = names::kept_container_name(container);
        let opts = bollard::query_parameters::RenameContainerOptionsBuilder::default()
            .name(&kept)
            .build();
        d.rename_container(container, opts)
            .await
            .map_err(|e| self.map_err(&format!("keep bake container {container} as {kept}"), e))?;
        Ok(kept)
    }

    /// The command that opens a shell in a kept container.
    pub(crate) fn inspect_command(&self, container: &str) -> String {
        let host = self
            .settings
            .host
            .as_deref()
            .map(|h| format!(" -H {h}"))
            .unwrap_or_default();
        format!("docker{host} exec -it {container} sh")
    }

    /// [`csis_runtime::Runtime::remove_kept_bake`]: only a container that
    /// carries the mark and the kept name.
    pub(crate) async fn remove_kept(&self, name: &str) -> Result<bool> {
        let d = self.docker().await?;
        let list = self.kept_containers().await?;
        if !list.iter().any(|k| k.name == name) {
            return Ok(false);
        }
        remove_container_forced(d, name)
            .await
            .map_err(|e| RuntimeError::Failed(format!("removing kept bake container {name}: {e}")))
    }

    /// The kept failed bakes' containers of this runtime: marked
    /// [`tags::KEPT_FAILED`] and named [`names::KEPT_CONTAINER_PREFIX`]`<runtime>-`.
    pub(crate) async fn kept_containers(&self) -> Result<Vec<csis_runtime::KeptBake>> {
        let list = self
            .containers(HashMap::from([(
                "label".to_string(),
                vec![tags::KEPT_FAILED.to_string()],
            )]))
            .await?;
        let prefix = names::kept_container_name(&names::bake_container_prefix(&self.settings.name));
        let mut kept: Vec<csis_runtime::KeptBake> = list
            .into_iter()
            .filter_map(|c| {
                let name = c
                    .names
                    .iter()
                    .flatten()
                    .map(|n| n.trim_start_matches('/').to_string())
                    .find(|n| n.starts_with(&prefix))?;
                let labels = c.labels.unwrap_or_default();
                // a machine of an image whose bake ran under --keep-failed
                // carries the blanked mark: not a kept bake
                labels.get(tags::KEPT_FAILED).filter(|v| !v.is_empty())?;
                Some(csis_runtime::KeptBake {
                    inspect: self.inspect_command(&name),
                    name,
                    series: labels.get(tags::SERIES).cloned(),
                    run: labels.get(tags::KEPT_FAILED).cloned(),
                    config: labels.get(tags::CONFIG).cloned(),
                })
            })
            .collect();
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(kept)
    }

    /// Remove the bake container `name` when it is left behind (its owner
    /// is gone on this host, or it is another host's and older than a
    /// day); `Ok(false)` when there is none. A live owner's container is
    /// never removed: that is an error naming its owner.
    pub(crate) async fn remove_left_behind(&self, name: &str) -> Result<bool> {
        match self.clear_bake_name(name).await? {
            Held::Free => Ok(false),
            Held::Removed => Ok(true),
            Held::Live(why) => Err(RuntimeError::Failed(why)),
        }
    }

    /// [`Self::remove_left_behind`], answering a live owner's container as
    /// [`Held::Live`] (a bake that can take another name goes on: another
    /// csis's run of the same run id, `create_bake_container`).
    pub(crate) async fn clear_bake_name(&self, name: &str) -> Result<Held> {
        let d = self.docker().await?;
        let list = self
            .containers(HashMap::from([(
                "name".to_string(),
                vec![name.to_string()],
            )]))
            .await?;
        let Some(c) = list.into_iter().find(|c| {
            c.names
                .iter()
                .flatten()
                .any(|n| n.trim_start_matches('/') == name)
        }) else {
            return Ok(Held::Free);
        };
        if !left_behind(&c) {
            return Ok(Held::Live(format!(
                "bake container {name} belongs to a running csis ({}): not removed",
                c.labels
                    .as_ref()
                    .and_then(labels::bake_owner)
                    .map(String::as_str)
                    .unwrap_or("owner unknown")
            )));
        }
        remove_container_forced(d, name)
            .await
            .map(|_| Held::Removed)
            .map_err(|e| RuntimeError::Failed(format!("removing stale bake container {name}: {e}")))
    }

    pub(crate) async fn containers(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<bollard::models::ContainerSummary>> {
        let d = self.docker().await?;
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        d.list_containers(Some(opts))
            .await
            .map_err(|e| self.map_err("list containers", e))
    }

    pub(super) async fn clean_stale(&self) -> Result<Vec<String>> {
        let d = self.docker().await?;
        let prefix = names::bake_container_prefix(&self.settings.name);
        let list = self
            .containers(HashMap::from([("name".to_string(), vec![prefix.clone()])]))
            .await?;
        let mut removed = Vec::new();
        for c in list {
            let Some(name) = c
                .names
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.trim_start_matches('/').to_string())
                .find(|n| n.starts_with(&prefix))
            else {
                continue;
            };
            // Another csis's live bake (another checkout, another CI job on
            // this daemon) keeps its container.
            if !left_behind(&c) {
                continue;
            }
            remove_container_forced(d, &name).await.map_err(|e| {
                RuntimeError::Failed(format!("removing stale bake container {name}: {e}"))
            })?;
            removed.push(name);
        }
        // Post-bake test containers whose csis is gone (killed before it
        // removed them): marked, and owned by a process that no longer runs.
        let marked = self
            .containers(HashMap::from([(
                "label".to_string(),
                vec![format!("{}={}", tags::TEST_MACHINE, self.settings.name)],
            )]))
            .await?;
        for c in marked {
            let labels = c.labels.clone().unwrap_or_default();
            let gone = labels
                .get(tags::TEST_MACHINE_OWNER)
                .is_some_and(|o| csis_runtime::owner_gone(o));
            if !gone {
                continue;
            }
            let Some(name) = c
                .names
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.trim_start_matches('/').to_string())
                .next()
            else {
                continue;
            };
            match remove_container_forced(d, &name).await {
                Ok(_) => removed.push(format!("test machine {name}")),
                Err(e) => {
                    return Err(RuntimeError::Failed(format!(
                        "removing stale test container {name}: {e}"
                    )))
                }
            }
        }
        removed.sort();
        Ok(removed)
    }
}
