//! Images and tags: inspect and pull, tags and untags, the movable tags
//! facts live in, builds listed with
//! their tags (`query_images`), retags and release tags.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{ImageInspect, ImageSummary};
use bollard::query_parameters::{
    CreateImageOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
    TagImageOptionsBuilder,
};
use csis_runtime::{ImageFacts, Result, RuntimeError};
use futures_util::StreamExt;

use super::errors::{api_message, is_not_found};
use super::DockerRuntime;
use crate::labels::{self, listed_blanked, NAME_LABEL, REPOSITORY_LABEL};
use crate::{names, script};
use csis_schema::tags;

/// An image no tag names (`<none>:<none>` is how older daemons list none).
pub(super) fn is_untagged(i: &ImageSummary) -> bool {
    i.repo_tags
        .iter()
        .all(|t| t.is_empty() || t == "<none>:<none>")
}

/// Unix seconds as RFC 3339 (UTC).
pub fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl DockerRuntime {
    pub(crate) async fn inspect_image_opt(&self, reference: &str) -> Result<Option<ImageInspect>> {
        let d = self.docker().await?;
        match d.inspect_image(reference).await {
            Ok(i) => Ok(Some(i)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.map_err(&format!("inspect image {reference}"), e)),
        }
    }

    /// Pull `reference`; `Err` names it.
    pub(crate) async fn pull(&self, reference: &str, platform: Option<&str>) -> Result<()> {
        let d = self.docker().await?;
        let mut b = CreateImageOptionsBuilder::default().from_image(reference);
        if let Some(p) = platform {
            b = b.platform(p);
        }
        let mut s = d.create_image(Some(b.build()), None, None);
        while let Some(item) = s.next().await {
            if let Err(e) = item {
                return Err(RuntimeError::Refused(format!(
                    "docker runtime {}: image '{reference}' is not on the daemon and cannot be pulled: {}",
                    self.settings.name,
                    api_message(&e)
                )));
            }
        }
        Ok(())
    }

    pub(crate) fn tag_ref(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository)
    }

    pub(crate) async fn tag(&self, image: &str, tag: &str) -> Result<()> {
        let d = self.docker().await?;
        let opts = TagImageOptionsBuilder::default()
            .repo(&self.repository)
            .tag(tag)
            .build();
        d.tag_image(image, Some(opts))
            .await
            .map_err(|e| self.map_err(&format!("tag {image} as {}", self.tag_ref(tag)), e))
    }

    /// Untag one `repo:tag` (never deletes an image that has other tags).
    pub(crate) async fn untag(&self, repo_tag: &str) -> Result<()> {
        let d = self.docker().await?;
        let opts = RemoveImageOptionsBuilder::default().noprune(true).build();
        match d.remove_image(repo_tag, Some(opts), None).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.map_err(&format!("untag {repo_tag}"), e)),
        }
    }

    /// The image id of a build id or reference, `None` when absent.
    pub(crate) async fn image_id_of(&self, build: &str) -> Result<Option<(String, Vec<String>)>> {
        Ok(self.inspect_image_opt(build).await?.map(|i| {
            (
                i.id.unwrap_or_else(|| build.to_string()),
                i.repo_tags.unwrap_or_default(),
            )
        }))
    }

    /// The movable tags of an image (by short id) in this repository: key -> (value, repo tag).
    pub(crate) fn movable_of(
        &self,
        tags: &[String],
        image_id: &str,
    ) -> BTreeMap<String, (String, String)> {
        let short = names::short_id(image_id);
        let mut out = BTreeMap::new();
        for rt in tags {
            if let Some(tag) = names::tag_in_repository(rt, &self.repository) {
                if let Some((s, k, v)) = names::parse_movable_tag(tag) {
                    if s == short {
                        out.insert(k, (v, rt.clone()));
                    }
                }
            }
        }
        out
    }

    pub(super) async fn retag(
        &self,
        build_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<()> {
        let img = self.inspect_image_opt(build_id).await?.ok_or_else(|| {
            RuntimeError::Refused(format!("image {build_id} is not on the daemon"))
        })?;
        let id = img.id.clone().unwrap_or_else(|| build_id.to_string());
        let repo_tags = img.repo_tags.clone().unwrap_or_default();
        let mut labels = img.config.and_then(|c| c.labels).unwrap_or_default();
        for k in listed_blanked(&labels) {
            labels.remove(&k);
        }
        for k in tags.keys() {
            if let Some(p) = names::label_key_problem(k) {
                return Err(RuntimeError::Refused(p));
            }
        }
        let current = self.movable_of(&repo_tags, &id);
        for (k, v) in tags {
            let movable = current.get(k);
            let label = labels.get(k);
            let effective = movable.map(|(m, _)| m).or(label);
            if effective == Some(v) || (v.is_empty() && effective.is_none()) {
                continue;
            }
            if v.is_empty() || label == Some(v) {
                // the label (or nothing) shows through once the movable tag goes
                if let Some((_, rt)) = movable {
                    self.untag(rt).await?;
                }
                continue;
            }
            let tag = names::movable_tag(&id, k, v).map_err(RuntimeError::Refused)?;
            // add the new tag first, so the image never loses its last tag
            self.tag(&id, &tag).await?;
            if let Some((_, rt)) = movable {
                self.untag(rt).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn builds(&self) -> Result<Vec<ImageFacts>> {
        let d = self.docker().await?;
        let filters = HashMap::from([("label".to_string(), vec![tags::SERIES.to_string()])]);
        let opts = ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let list = d
            .list_images(Some(opts))
            .await
            .map_err(|e| self.map_err("list images", e))?;
        let mut out = Vec::new();
        let parents: std::collections::HashSet<&str> =
            list.iter().map(|i| i.parent_id.as_str()).collect();
        for img in &list {
            let ours: Vec<&str> = img
                .repo_tags
                .iter()
                .filter_map(|rt| names::tag_in_repository(rt, &self.repository))
                .collect();
            // A build committed and never tagged (csis was killed between
            // `docker commit` and the tag): it is this repository's by its
            // label, and no child stands on it (a disposed build kept for a
            // child's layers is untagged too, and no build any more).
            let untagged_build = is_untagged(img)
                && img.labels.get(REPOSITORY_LABEL) == Some(&self.repository)
                && !parents.contains(img.id.as_str());
            if ours.is_empty() && !untagged_build {
                continue;
            }
            let blanked = listed_blanked(&img.labels);
            let mut tags: BTreeMap<String, String> = img
                .labels
                .iter()
                .filter(|(k, _)| {
                    k.starts_with(tags::PREFIX) && !blanked.contains(k) && !labels::is_bake_mark(k)
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (k, (v, _)) in self.movable_of(&img.repo_tags, &img.id) {
                tags.insert(k, v);
            }
            // release tags `<series>--<model>` on this image: csis_release (as AWS and dummy say it)
            if let Some(series) = img.labels.get(tags::SERIES) {
                let prefix = names::release_tag(series, "");
                let mut models: Vec<&str> = ours
                    .iter()
                    .filter(|t| names::parse_movable_tag(t).is_none())
                    .filter_map(|t| t.strip_prefix(prefix.as_str()))
                    .filter(|m| !m.is_empty())
                    .collect();
                models.sort();
                if !models.is_empty() {
                    tags.insert(format!("{}release", tags::PREFIX), models.join(","));
                }
            }
            let name = img
                .labels
                .get(NAME_LABEL)
                .filter(|n| !n.is_empty())
                .cloned()
                .or_else(|| {
                    ours.iter()
                        .filter(|t| {
                            names::parse_movable_tag(t).is_none() && !t.contains(names::SEP)
                        })
                        .max_by_key(|t| t.len())
                        .map(|t| t.to_string())
                });
            let series_tags = match img.labels.get(tags::SERIES) {
                Some(series) => series_tags_of(&ours, series)
                    .into_iter()
                    .map(|t| self.tag_ref(t))
                    .collect(),
                None => Vec::new(),
            };
            out.push(ImageFacts {
                build_id: img.id.clone(),
                name,
                created: Some(rfc3339(img.created)),
                tags,
                unnamed: untagged_build,
                series_tags,
            });
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.build_id.cmp(&b.build_id)));
        Ok(out)
    }

    pub(crate) fn docker_cli_prefix(&self) -> String {
        let mut s = script::sq(&self.settings.docker_binary);
        if let Some(h) = &self.settings.host {
            s.push_str(&format!(" -H {}", script::sq(h)));
            if self.settings.tls.verify {
                s.push_str(" --tlsverify");
            }
            if let Some(p) = &self.settings.tls.cert_path {
                let p = p.display();
                s.push_str(&format!(
                    " --tlscacert {0}/ca.pem --tlscert {0}/cert.pem --tlskey {0}/key.pem",
                    script::sq(&p.to_string())
                ));
            }
        } else if let Some(c) = &self.settings.context {
            s.push_str(&format!(" --context {}", script::sq(c)));
        }
        s
    }

    pub(super) fn release_command_lines(
        &self,
        build_id: &str,
        series: &str,
        model: &str,
    ) -> Vec<String> {
        vec![format!(
            "{} tag {} {}",
            self.docker_cli_prefix(),
            script::sq(build_id),
            script::sq(&self.tag_ref(&names::release_tag(series, model)))
        )]
    }

    pub(super) async fn tag_release(
        &self,
        build_id: &str,
        series: &str,
        model: &str,
    ) -> Result<()> {
        let (id, _) = self.image_id_of(build_id).await?.ok_or_else(|| {
            RuntimeError::Refused(format!("image {build_id} is not on the daemon"))
        })?;
        self.tag(&id, &names::release_tag(series, model)).await
    }
}

/// Among an image's tags in the repository, those naming its `series`
/// rather than itself: `<series>` and the release tags `<series>--<model>`.
fn series_tags_of<'a>(ours: &[&'a str], series: &str) -> Vec<&'a str> {
    let made = names::image_name_as_made(series);
    let release = names::release_tag(series, "");
    ours.iter()
        .copied()
        .filter(|t| {
            *t == made
                || (names::parse_movable_tag(t).is_none()
                    && t.strip_prefix(release.as_str())
                        .is_some_and(|m| !m.is_empty()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use csis_runtime::Runtime;

    use super::*;
    use crate::settings::DockerSettings;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn series_tags_are_the_series_and_its_releases() {
        let ours = [
            "web",
            "web--prod",
            "web-native-2026_01_01t00_00_00",
            "webx",
            "0123456789ab--release--prod",
        ];
        assert_eq!(series_tags_of(&ours, "web"), vec!["web", "web--prod"]);
        assert!(series_tags_of(&ours, "base").is_empty());
    }

    #[test]
    fn release_commands_name_the_daemon() {
        let mut s = DockerSettings::new("docker-local");
        s.context = Some("orbstack".into());
        let r = DockerRuntime::new(s).unwrap();
        assert_eq!(
            r.release_commands("sha256:abc", "web", "prod"),
            vec![
                "docker --context orbstack tag sha256:abc csis/docker-local:web--prod".to_string()
            ]
        );
    }
}
