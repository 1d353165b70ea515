//! Resolve: an OS builder's image query or pin to one AMI, each
//! `DescribeImages` question asked once per run whoever asks it, and the
//! resolved image with the facts csis keeps.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Image;
use csis_runtime::{ResolveRequest, ResolvedImage, Result, RuntimeError};

use crate::client::code;
use crate::errors::{cache_to_err, err_to_cache, is_not_found_ami};
use crate::resolve::{self, ImageQuery};
use crate::AwsRuntime;

pub(crate) type CachedLookup = std::result::Result<Option<Image>, (u8, String)>;

/// The question a resolve asks EC2 (the cache key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Lookup {
    ById(String),
    Query(ImageQuery),
}

impl AwsRuntime {
    /// One `DescribeImages` question (by id, or the query with its post
    /// filter and newest pick), asked once per run whoever asks it.
    async fn lookup(&self, key: &Lookup) -> Result<Option<Image>> {
        let cell = {
            let mut m = self.resolves.lock().unwrap();
            m.entry(key.clone()).or_default().clone()
        };
        cell.get_or_init(|| async { self.lookup_uncached(key).await.map_err(err_to_cache) })
            .await
            .clone()
            .map_err(|(k, m)| cache_to_err(k, m))
    }

    /// DescribeImages by id through the run's cache (emission of a pinned parent).
    pub async fn image_by_id_cached(&self, id: &str) -> Result<Option<Image>> {
        self.lookup(&Lookup::ById(id.to_string())).await
    }

    async fn lookup_uncached(&self, key: &Lookup) -> Result<Option<Image>> {
        let ec2 = self.clients.ec2().await;
        match key {
            Lookup::ById(id) => {
                let out = ec2.describe_images().image_ids(id).send().await;
                match out {
                    Ok(o) => Ok(o
                        .images
                        .unwrap_or_default()
                        .into_iter()
                        .find(|i| i.image_id.as_deref() == Some(id.as_str()))),
                    Err(e) if is_not_found_ami(code(&e).as_deref()) => Ok(None),
                    Err(e) => Err(self.sdk_err("Failed to query AMI by ID: ", &e)),
                }
            }
            Lookup::Query(q) => {
                let mut found: Vec<Image> = Vec::new();
                let mut call = ec2.describe_images().set_filters(Some(q.ec2_filters()));
                if !q.owners.is_empty() {
                    call = call.set_owners(Some(q.owners.clone()));
                }
                let mut pages = call.into_paginator().send();
                while let Some(page) = pages.next().await {
                    let page =
                        page.map_err(|e| self.sdk_err("Failed to query AMI with filters: ", &e))?;
                    found.extend(
                        page.images
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|i| q.post_match(i)),
                    );
                }
                Ok(resolve::newest(found))
            }
        }
    }

    pub(crate) async fn resolve_request(&self, req: &ResolveRequest) -> Result<ResolvedImage> {
        if self.settings.region.trim().is_empty() {
            return Err(RuntimeError::Refused(
                "Region must be specified in builder config to resolve image identifier, but got None"
                    .into(),
            ));
        }
        let region = &self.settings.region;
        if let Some(id) = req.image_id.as_deref() {
            let Some(img) = self.lookup(&Lookup::ById(id.to_string())).await? else {
                return Err(RuntimeError::Refused(format!(
                    "OS builder {}: image_id '{id}' on runtime {} is not known to the provider",
                    req.series, self.settings.name
                )));
            };
            let owner = resolve::owner_of(&img).unwrap_or_else(|| "self".into());
            return Ok(self.resolved(img, owner, req));
        }
        let q = ImageQuery::from_declaration(&req.owners, &req.query);
        let Some(img) = self.lookup(&Lookup::Query(q.clone())).await? else {
            return Err(RuntimeError::Refused(format!(
                "No resolved Image identifiers for OS {} in predefined_resolve (runtime {}: owners {:?}, filters {:?}{})",
                req.series,
                self.settings.name,
                q.owners,
                q.filters,
                if q.post_filters.is_empty() {
                    String::new()
                } else {
                    format!(", post-query filters {:?}", q.post_filters)
                }
            )));
        };
        let Some(owner) = resolve::owner_of(&img) else {
            return Err(RuntimeError::Refused(format!(
                "Could not get owner alias or owner id for image {} in region {region}, got {}",
                img.image_id.clone().unwrap_or_default(),
                resolve::describe(&img)
            )));
        };
        Ok(self.resolved(img, owner, req))
    }

    fn resolved(&self, img: Image, owner: String, req: &ResolveRequest) -> ResolvedImage {
        let mut facts = BTreeMap::new();
        for (k, v) in resolve::image_fields(&img) {
            if matches!(
                k.as_str(),
                "root_device_name"
                    | "root_device_type"
                    | "architecture"
                    | "virtualization_type"
                    | "owner_id"
                    | "image_owner_alias"
            ) {
                facts.insert(k, v);
            }
        }
        if !req.family.is_empty() {
            facts.insert("family".into(), req.family.clone());
        }
        ResolvedImage {
            id: img.image_id.clone().unwrap_or_default(),
            name: img.name.clone(),
            owner: Some(owner),
            creation_date: img.creation_date.clone(),
            facts,
        }
    }
}
