//! Resolve: an OS builder's image query or pin to a vendor image on the
//! daemon (pulled when absent), identified by its digest reference or, for
//! a local image with no repo digest, its image id.

use std::collections::BTreeMap;

use csis_runtime::{ResolveRequest, ResolvedImage, Result, RuntimeError};

use super::DockerRuntime;
use crate::{names, query};

impl DockerRuntime {
    pub(super) async fn resolve_image(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        let name = &self.settings.name;
        let (reference, platform) = match &req.image_id {
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
        };
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
        let image_id = img.id.clone().unwrap_or_default();
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
        Ok(ResolvedImage {
            id,
            name: Some(reference),
            owner: None,
            creation_date: img.created.clone().map(|c| c.to_string()),
            facts,
        })
    }
}
