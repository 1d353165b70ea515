//! Resolve: an OS builder's image query or pin to a vendor image on the
//! daemon (pulled when absent), identified by its digest reference or, for
//! a local image with no repo digest, its image id. A reference by tag can
//! move (`docker tag`, a pull of a newer image): [`DockerRuntime::vendor_tag_now`]
//! reads what it names today, with one inspect and no pull.

use std::collections::BTreeMap;

use bollard::models::ImageInspect;
use csis_runtime::{ResolveRequest, ResolvedImage, Result, RuntimeError, FACT_MOVABLE};

use super::DockerRuntime;
use crate::{names, query};

impl DockerRuntime {
    /// The reference (and platform) an OS builder's entry names.
    fn vendor_reference(req: &ResolveRequest) -> Result<(String, Option<String>)> {
        Ok(match &req.image_id {
            Some(pin) => {
                names::check_image_id_pin(pin).map_err(RuntimeError::Refused)?;
                (pin.clone(), None)
            }
            None => {
                let q = query::image_query(
                    &req.query,
                    &req.family,
                    &req.family_version,
                    &req.architecture,
                )
                .map_err(|e| RuntimeError::Refused(format!("{}: {e}", req.label)))?;
                (q.reference, q.platform)
            }
        })
    }

    /// What the tag an OS builder names is on the daemon now (one inspect,
    /// no pull): `None` for a digest reference (it never moves) and for a
    /// tag the daemon lacks (the resolve pulls it when the base bakes).
    pub(super) async fn vendor_tag_now(
        &self,
        req: &ResolveRequest,
    ) -> Result<Option<ResolvedImage>> {
        let (reference, platform) = Self::vendor_reference(req)?;
        if reference.contains("@sha256:") {
            return Ok(None);
        }
        Ok(self
            .inspect_image_opt(&reference)
            .await?
            .map(|img| resolved(reference, platform, &img)))
    }

    pub(super) async fn resolve_image(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        let name = &self.settings.name;
        let (reference, platform) = Self::vendor_reference(req)?;
        let img = match self.inspect_image_opt(&reference).await? {
            Some(i) => i,
            None => {
                self.pull(&reference, platform.as_deref()).await?;
                self.inspect_image_opt(&reference).await?.ok_or_else(|| {
                    RuntimeError::Refused(format!(
                        "docker runtime {name}: image '{reference}' is not on the daemon after a pull"
                    ))
                })?
            }
        };
        if let (Some(p), Some(arch)) = (&platform, &img.architecture) {
            let want = p.split('/').nth(1).unwrap_or(p);
            let have = query::platform_of(arch);
            if have.split('/').nth(1) != Some(want) {
                return Err(RuntimeError::Refused(format!(
                    "{}: image '{reference}' is {have}, the query asks {p}",
                    req.label
                )));
            }
        }
        Ok(resolved(reference, platform, &img))
    }
}

/// A vendor image as a resolve records it: its digest reference (for
/// `reference`'s repository, else the first), or its image id for a local
/// image with no repo digest; a reference by tag is [`FACT_MOVABLE`].
fn resolved(reference: String, platform: Option<String>, img: &ImageInspect) -> ResolvedImage {
    let image_id = img.id.clone().unwrap_or_default();
    let repo_of = |r: &str| -> String {
        let r = r.split('@').next().unwrap_or(r);
        let r = names::split_repo_tag(r).map(|(a, _)| a).unwrap_or(r);
        names::normalize_repo_tag(r).to_string()
    };
    let digests = img.repo_digests.clone().unwrap_or_default();
    let want_repo = repo_of(&reference);
    let mut facts = BTreeMap::new();
    facts.insert("image_id".to_string(), image_id.clone());
    facts.insert("reference".to_string(), reference.clone());
    if let Some(p) = &platform {
        facts.insert("platform".to_string(), p.clone());
    }
    if let Some(a) = &img.architecture {
        facts.insert("architecture".to_string(), a.clone());
    }
    let id = if reference.contains("@sha256:") {
        reference.clone()
    } else if let Some(d) = digests
        .iter()
        .find(|d| repo_of(d) == want_repo)
        .or_else(|| digests.first())
    {
        d.clone()
    } else {
        facts.insert(
            "identifier".to_string(),
            "image id (a local image with no repo digest)".to_string(),
        );
        image_id.clone()
    };
    if !reference.contains("@sha256:") {
        facts.insert(FACT_MOVABLE.to_string(), "true".to_string());
    }
    ResolvedImage {
        id,
        name: Some(reference),
        owner: None,
        creation_date: img.created.clone().map(|c| c.to_string()),
        facts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(id: &str, digests: &[&str]) -> ImageInspect {
        ImageInspect {
            id: Some(id.to_string()),
            repo_digests: Some(digests.iter().map(|d| d.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn a_tag_is_movable_and_a_digest_is_not() {
        // a local image by tag: its image id, movable
        let r = resolved("local/bb:1".into(), None, &img("sha256:aa", &[]));
        assert_eq!(r.id, "sha256:aa");
        assert_eq!(r.facts.get(FACT_MOVABLE).map(String::as_str), Some("true"));
        // a pulled tag: its repository's digest reference, movable
        let r = resolved(
            "busybox:1".into(),
            None,
            &img("sha256:bb", &["other@sha256:01", "busybox@sha256:02"]),
        );
        assert_eq!(r.id, "busybox@sha256:02");
        assert!(r.facts.contains_key(FACT_MOVABLE));
        // a digest never moves: never read again
        let r = resolved(
            "busybox@sha256:02".into(),
            None,
            &img("sha256:bb", &["busybox@sha256:02"]),
        );
        assert_eq!(r.id, "busybox@sha256:02");
        assert!(!r.facts.contains_key(FACT_MOVABLE));
    }
}
