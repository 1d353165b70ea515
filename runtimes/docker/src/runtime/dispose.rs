//! Dispose: a build's users (containers created from it), its tags and
//! image removed, the daemon's refusal while a child image stands on it
//! said as a note, and the untagged parents kept for it freed with it.

use std::collections::HashMap;

use bollard::models::ImageSummary;
use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use csis_runtime::{DisposeOutcome, Result, Runtime, RuntimeError};

use super::errors::{api_message, is_conflict, is_not_found};
use super::images::is_untagged;
use super::DockerRuntime;
use crate::labels::NAME_LABEL;

/// The images whose parent is `id`, sorted.
fn children_of(graph: &HashMap<String, ImageSummary>, id: &str) -> Vec<String> {
    let mut out: Vec<String> = graph
        .values()
        .filter(|i| i.parent_id == id)
        .map(|i| i.id.clone())
        .collect();
    out.sort();
    out
}

/// The ancestors of `id` that are csis builds without a tag (disposed while
/// a child stood on them), nearest first, up to the first one that is not.
fn untagged_builds_above(graph: &HashMap<String, ImageSummary>, id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = graph.get(id).map(|i| i.parent_id.clone());
    while let Some(p) = cur.filter(|p| !p.is_empty()) {
        match graph.get(&p) {
            Some(i) if is_untagged(i) && i.labels.contains_key(NAME_LABEL) => {
                out.push(p.clone());
                cur = Some(i.parent_id.clone());
            }
            _ => break,
        }
    }
    out
}

impl DockerRuntime {
    /// Every image on the daemon (intermediate ones included), by id.
    pub(crate) async fn image_graph(&self) -> Result<HashMap<String, ImageSummary>> {
        let d = self.docker().await?;
        let opts = ListImagesOptionsBuilder::default().all(true).build();
        let list = d
            .list_images(Some(opts))
            .await
            .map_err(|e| self.map_err("list images", e))?;
        Ok(list.into_iter().map(|i| (i.id.clone(), i)).collect())
    }

    pub(super) async fn users_of(&self, build_id: &str) -> Result<Vec<String>> {
        let Some((id, _)) = self.image_id_of(build_id).await? else {
            return Ok(Vec::new());
        };
        let list = self
            .containers(HashMap::from([("ancestor".to_string(), vec![id.clone()])]))
            .await?;
        let mut users: Vec<String> = list
            .into_iter()
            .filter(|c| c.image_id.as_deref() == Some(id.as_str()))
            .map(|c| {
                let name = c
                    .names
                    .and_then(|n| n.first().map(|n| n.trim_start_matches('/').to_string()))
                    .unwrap_or_default();
                let short: String = c.id.unwrap_or_default().chars().take(12).collect();
                format!("{name} ({short})")
            })
            .collect();
        users.sort();
        Ok(users)
    }

    pub(super) async fn dispose(&self, build_id: &str) -> Result<DisposeOutcome> {
        let Some((id, repo_tags)) = self.image_id_of(build_id).await? else {
            return Ok(DisposeOutcome::default());
        };
        let users = self.image_users(&id).await?;
        if !users.is_empty() {
            return Err(RuntimeError::Refused(format!(
                "image {id} is in use by container(s) {}: decommission them first; the image is never pulled from under a container",
                users.join(", ")
            )));
        }
        // Parents disposed earlier and kept (untagged) for this build: they may go with it.
        // (the graph's parent links do not change when tags go)
        let graph = self.image_graph().await?;
        let held_parents = untagged_builds_above(&graph, &id);
        let d = self.docker().await?;
        // Every tag goes (movable, release, final, floating); the last removal deletes the image.
        for rt in &repo_tags {
            let opts = RemoveImageOptionsBuilder::default().build();
            match d.remove_image(rt, Some(opts), None).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(self.map_err(&format!("remove tag {rt} of {id}"), e)),
            }
        }
        let mut notes = Vec::new();
        let opts = RemoveImageOptionsBuilder::default().build();
        match d.remove_image(&id, Some(opts), None).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) if is_conflict(&e) && api_message(&e).contains("child") => {
                // The daemon keeps the layers a child image stands on: say so.
                let children = children_of(&graph, &id);
                notes.push(format!(
                    "its tags are removed, but the daemon keeps the image {id} untagged (its layers) while child image(s) {} stand on it; it goes with the last of them",
                    if children.is_empty() {
                        "(not listed)".to_string()
                    } else {
                        children.join(", ")
                    }
                ));
                return Ok(DisposeOutcome {
                    existed: true,
                    notes,
                });
            }
            Err(e) if is_conflict(&e) => {
                return Err(RuntimeError::Refused(format!(
                    "image {id} cannot be removed: {}",
                    api_message(&e)
                )))
            }
            Err(e) => return Err(self.map_err(&format!("remove image {id}"), e)),
        }
        // The build is gone: free the parents that were kept only for it
        // (the graph listed once, each parent dropped from it as it goes).
        let mut graph = self.image_graph().await?;
        for p in held_parents {
            if graph.contains_key(&p) {
                let children = children_of(&graph, &p);
                let users = self.image_users(&p).await?;
                if !children.is_empty() || !users.is_empty() {
                    notes.push(format!(
                        "the image {p} (a build disposed earlier, kept untagged for its children) stays: {} still stand(s) on it",
                        children
                            .iter()
                            .map(|c| format!("child image {c}"))
                            .chain(users.iter().map(|u| format!("container {u}")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    break;
                }
                match d
                    .remove_image(&p, Some(RemoveImageOptionsBuilder::default().build()), None)
                    .await
                {
                    Err(e) if !is_not_found(&e) => {
                        notes.push(format!(
                            "the image {p} (a build disposed earlier, kept untagged for its children) stays: {}",
                            api_message(&e)
                        ));
                        break;
                    }
                    _ => {
                        graph.remove(&p);
                    }
                }
            }
            notes.push(format!(
                "freed the image {p} too: a build disposed earlier, kept untagged until this last child went"
            ));
        }
        Ok(DisposeOutcome {
            existed: true,
            notes,
        })
    }
}
