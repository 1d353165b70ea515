//! AMIs: described by id, tagged (retag, release marks), listed with their
//! tags (`query_images`), their users (instances, launch template
//! versions), deregistered with their snapshots.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image, Tag};
use csis_runtime::{ImageFacts, Result};

use crate::client::code;
use crate::errors::is_not_found_ami;
use crate::{not_terminated, shell_quote, AwsRuntime};
use csis_schema::tags;

fn tag_value(tags: &[Tag], key: &str) -> Option<String> {
    tags.iter()
        .find(|t| t.key.as_deref() == Some(key))
        .and_then(|t| t.value.clone())
}

impl AwsRuntime {
    /// The block-device snapshots of an AMI record.
    pub(crate) fn snapshots_of(img: &Image) -> Vec<String> {
        img.block_device_mappings()
            .iter()
            .filter_map(|b| b.ebs.as_ref()?.snapshot_id.clone())
            .collect()
    }

    /// DescribeImages by id: `None` when AWS does not know it.
    pub async fn describe_image(&self, id: &str) -> Result<Option<Image>> {
        let ec2 = self.clients.ec2().await;
        match ec2.describe_images().image_ids(id).send().await {
            Ok(o) => Ok(o
                .images
                .unwrap_or_default()
                .into_iter()
                .find(|i| i.image_id.as_deref() == Some(id))),
            Err(e) if is_not_found_ami(code(&e).as_deref()) => Ok(None),
            Err(e) => Err(self.sdk_err("", &e)),
        }
    }

    /// `create-tags` on one AMI.
    pub(crate) async fn create_tags(
        &self,
        id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<()> {
        let ec2 = self.clients.ec2().await;
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        ec2.create_tags()
            .resources(id)
            .set_tags(Some(tags))
            .send()
            .await
            .map_err(|e| self.sdk_err(&format!("could not retag {id}: "), &e))?;
        Ok(())
    }

    pub(crate) async fn builds(&self) -> Result<Vec<ImageFacts>> {
        let ec2 = self.clients.ec2().await;
        let mut out = Vec::new();
        let mut pages = ec2
            .describe_images()
            .owners("self")
            .filters(
                Filter::builder()
                    .name("tag-key")
                    .values(tags::SERIES)
                    .build(),
            )
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("", &e))?;
            for i in page.images.unwrap_or_default() {
                out.push(ImageFacts {
                    build_id: i.image_id.clone().unwrap_or_default(),
                    name: i.name.clone(),
                    created: i.creation_date.clone(),
                    tags: i
                        .tags()
                        .iter()
                        .filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default())))
                        .collect(),
                    unnamed: false,
                    series_tags: Vec::new(),
                });
            }
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.build_id.cmp(&b.build_id)));
        Ok(out)
    }

    pub(crate) async fn users_of(&self, build_id: &str) -> Result<Vec<String>> {
        let mut users = Vec::new();
        let filters = vec![
            Filter::builder().name("image-id").values(build_id).build(),
            not_terminated(),
        ];
        for i in self.instances_where(filters, "").await? {
            let id = i.instance_id.clone().unwrap_or_default();
            match tag_value(i.tags(), "Name") {
                Some(n) => users.push(format!("instance {id} ({n})")),
                None => users.push(format!("instance {id}")),
            }
        }
        let ec2 = self.clients.ec2().await;
        // launch templates: every version that names the AMI
        let mut templates = Vec::new();
        let mut pages = ec2.describe_launch_templates().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("", &e))?;
            templates.extend(page.launch_templates.unwrap_or_default());
        }
        for t in templates {
            let Some(tid) = t.launch_template_id.clone() else {
                continue;
            };
            let mut vpages = ec2
                .describe_launch_template_versions()
                .launch_template_id(&tid)
                .into_paginator()
                .send();
            while let Some(page) = vpages.next().await {
                let page = page.map_err(|e| self.sdk_err("", &e))?;
                for v in page.launch_template_versions.unwrap_or_default() {
                    let uses = v
                        .launch_template_data
                        .as_ref()
                        .and_then(|d| d.image_id.as_deref())
                        == Some(build_id);
                    if uses {
                        users.push(format!(
                            "launch template {tid} ({}) version {}",
                            t.launch_template_name.clone().unwrap_or_default(),
                            v.version_number.unwrap_or_default()
                        ));
                    }
                }
            }
        }
        Ok(users)
    }

    pub(crate) async fn deregister(&self, build_id: &str) -> Result<bool> {
        let Some(img) = self.describe_image(build_id).await? else {
            self.warn(format!("AMI {build_id} not found; nothing to deregister"));
            return Ok(false);
        };
        let snapshots = Self::snapshots_of(&img);
        let ec2 = self.clients.ec2().await;
        ec2.deregister_image()
            .image_id(build_id)
            .send()
            .await
            .map_err(|e| self.sdk_err(&format!("could not deregister {build_id}: "), &e))?;
        for s in snapshots {
            ec2.delete_snapshot()
                .snapshot_id(&s)
                .send()
                .await
                .map_err(|e| {
                    self.sdk_err(
                        &format!("could not delete snapshot {s} of {build_id}: "),
                        &e,
                    )
                })?;
        }
        Ok(true)
    }

    pub(crate) fn release_command_lines(
        &self,
        build_id: &str,
        series: &str,
        model: &str,
    ) -> Vec<String> {
        let mut cmd = format!(
            "aws ec2 create-tags --region {} --resources {} --tags {} {}",
            shell_quote(&self.settings.region),
            shell_quote(build_id),
            shell_quote(&format!("Key=csis_release,Value={model}")),
            shell_quote(&format!("Key=csis_series,Value={series}")),
        );
        if let Some(p) = self
            .settings
            .credentials
            .profile_name
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            cmd.push_str(&format!(" --profile {}", shell_quote(p)));
        }
        vec![cmd]
    }

    pub(crate) async fn tag_release(
        &self,
        build_id: &str,
        series: &str,
        model: &str,
    ) -> Result<()> {
        let tags = BTreeMap::from([
            (tags::RELEASE.to_string(), model.to_string()),
            (tags::SERIES.to_string(), series.to_string()),
        ]);
        self.create_tags(build_id, &tags).await
    }
}
