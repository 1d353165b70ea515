//! `inventory`: what csis owns or tagged on this runtime (the account as the
//! runtime's credentials see it, in the runtime's region), with the tags
//! each resource carries. Every list is read with the SDK's paginators.
//!
//! What counts as csis's:
//! - images: AMIs owned by `self` that carry a `csis_*` tag;
//! - instances (any state but `terminated`): a `csis_*` tag, or launched
//!   from one of those images;
//! - volumes: a `csis_*` tag, or attached to one of those instances;
//! - snapshots: a `csis_*` tag, or behind one of those images (its block
//!   device mappings). A snapshot behind no listed image is an orphan: a
//!   disposal that deregistered the AMI and did not get to the snapshot.
//!
//! Nothing else in the account is listed: an account shared with other
//! workloads still proves a runtime empty.

use std::collections::{BTreeMap, BTreeSet};

use csis_runtime::{InstanceFacts, Inventory, KeptBake, Result, VolumeFacts};
use serde::{Deserialize, Serialize};

use crate::client::tag_map;
use crate::{AwsPowerState, AwsRuntime};
use csis_schema::tags;

/// One EC2 resource of the inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsResource {
    /// `ami-…`, `i-…`, `vol-…`, `snap-…`.
    pub id: String,
    /// An AMI's name; the `Name` tag of the others.
    pub name: Option<String>,
    /// EC2's raw state (`available`, `running`, `in-use`, `completed`, ...).
    pub state: Option<String>,
    /// Creation (AMI, snapshot, volume) or launch (instance) time.
    pub created: Option<String>,
    /// An instance's AMI; a volume's instance; a snapshot's AMI.
    pub of: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// Everything csis owns or tagged on one AWS runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsInventory {
    pub images: Vec<AwsResource>,
    pub snapshots: Vec<AwsResource>,
    pub instances: Vec<AwsResource>,
    pub volumes: Vec<AwsResource>,
}

impl AwsInventory {
    /// Snapshots behind no listed image (leftovers of a disposal). A
    /// storage's archive (tagged with its storage) is no leftover: it holds
    /// an archived storage's data.
    pub fn orphan_snapshots(&self) -> impl Iterator<Item = &AwsResource> {
        let images: BTreeSet<&str> = self.images.iter().map(|i| i.id.as_str()).collect();
        self.snapshots
            .iter()
            .filter(move |s| s.of.as_deref().is_none_or(|a| !images.contains(a)))
            .filter(|s| !s.tags.contains_key(tags::STORAGE))
    }

    /// Onto the hook surface: instances with their power state and
    /// `csis_config`; volumes with their tags, and orphan snapshots among
    /// them (a disk copy nothing uses is a leftover too). Images are
    /// `query_images`' answer.
    pub fn to_api(&self) -> Inventory {
        let (kept, machines): (Vec<&AwsResource>, Vec<&AwsResource>) = self
            .instances
            .iter()
            .partition(|i| i.tags.contains_key(tags::KEPT_FAILED));
        let kept_failed = kept
            .into_iter()
            .map(|i| KeptBake {
                name: i.id.clone(),
                series: i.tags.get(tags::SERIES).cloned(),
                run: i.tags.get(tags::KEPT_FAILED).cloned(),
                config: i.tags.get(tags::CONFIG).cloned(),
                inspect: format!("aws ssm start-session --target {}", i.id),
            })
            .collect();
        let instances = machines
            .into_iter()
            .map(|i| InstanceFacts {
                id: i.id.clone(),
                name: i.name.clone(),
                image: i.of.clone(),
                power: AwsPowerState::from_ec2(i.state.as_deref().unwrap_or_default()).to_api(),
                config: i.tags.get(tags::CONFIG).cloned(),
                labels: i.tags.clone(),
                role: csis_runtime::MachineRole::of(&i.tags, &[tags::BAKE]),
            })
            .collect();
        let volumes = self
            .volumes
            .iter()
            .chain(self.orphan_snapshots())
            .map(|v| VolumeFacts::new(v.id.clone(), v.tags.clone()))
            .collect();
        Inventory {
            instances,
            volumes,
            kept_failed,
        }
    }
}

/// An EC2 instance as the inventory lists it (`tags`: its [`tag_map`]).
pub(crate) fn instance_resource(
    i: &aws_sdk_ec2::types::Instance,
    tags: BTreeMap<String, String>,
) -> AwsResource {
    AwsResource {
        id: i.instance_id.clone().unwrap_or_default(),
        name: tags.get("Name").cloned(),
        state: i
            .state
            .as_ref()
            .and_then(|s| s.name.as_ref())
            .map(|n| n.as_str().to_string()),
        created: time(i.launch_time.as_ref()),
        of: i.image_id.clone(),
        tags,
    }
}

pub(crate) fn csis_tagged(tags: &BTreeMap<String, String>) -> bool {
    tags.keys().any(|k| k.starts_with(tags::PREFIX))
}

fn time(t: Option<&aws_sdk_ec2::primitives::DateTime>) -> Option<String> {
    t.and_then(|t| {
        t.fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime)
            .ok()
    })
}

/// The AMI a `CreateImage` snapshot names in its description
/// (`Created by CreateImage(i-…) for ami-…`).
fn ami_in_description(d: &str) -> Option<String> {
    let at = d.find(" for ami-")?;
    let rest = &d[at + 5..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

impl AwsRuntime {
    /// Everything csis owns or tagged on this runtime, with tags (paged).
    pub async fn aws_inventory(&self) -> Result<AwsInventory> {
        let ec2 = self.clients().ec2().await;
        let mut inv = AwsInventory::default();

        // images: owned by self, carrying a csis_* tag
        let mut image_snapshots: BTreeMap<String, String> = BTreeMap::new();
        let mut pages = ec2.describe_images().owners("self").into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("describe_images: ", &e))?;
            for i in page.images.unwrap_or_default() {
                let tags = tag_map(i.tags());
                if !csis_tagged(&tags) {
                    continue;
                }
                let id = i.image_id.clone().unwrap_or_default();
                for s in Self::snapshots_of(&i) {
                    image_snapshots.insert(s, id.clone());
                }
                inv.images.push(AwsResource {
                    id,
                    name: i.name.clone(),
                    state: i.state.as_ref().map(|s| s.as_str().to_string()),
                    created: i.creation_date.clone(),
                    of: None,
                    tags,
                });
            }
        }
        let images: BTreeSet<String> = inv.images.iter().map(|i| i.id.clone()).collect();

        // instances: not terminated; csis_* tagged or from one of the images
        let all = self
            .instances_where(vec![crate::not_terminated()], "describe_instances: ")
            .await?;
        for i in all {
            let tags = tag_map(i.tags());
            let from_ours = i.image_id.as_ref().is_some_and(|a| images.contains(a));
            if !csis_tagged(&tags) && !from_ours {
                continue;
            }
            inv.instances.push(instance_resource(&i, tags));
        }
        let instances: BTreeSet<String> = inv.instances.iter().map(|i| i.id.clone()).collect();

        // volumes: csis_* tagged or attached to one of the instances
        let mut pages = ec2.describe_volumes().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("describe_volumes: ", &e))?;
            for v in page.volumes.unwrap_or_default() {
                let tags = tag_map(v.tags());
                let attached_to = v
                    .attachments()
                    .iter()
                    .filter_map(|a| a.instance_id.clone())
                    .find(|i| instances.contains(i));
                if !csis_tagged(&tags) && attached_to.is_none() {
                    continue;
                }
                let of = attached_to
                    .or_else(|| v.attachments().iter().find_map(|a| a.instance_id.clone()));
                inv.volumes.push(AwsResource {
                    id: v.volume_id.clone().unwrap_or_default(),
                    name: tags.get("Name").cloned(),
                    state: v.state.as_ref().map(|s| s.as_str().to_string()),
                    created: time(v.create_time.as_ref()),
                    of,
                    tags,
                });
            }
        }

        // snapshots: owned by self, csis_* tagged or behind one of the images
        let mut pages = ec2
            .describe_snapshots()
            .owner_ids("self")
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("describe_snapshots: ", &e))?;
            for s in page.snapshots.unwrap_or_default() {
                let id = s.snapshot_id.clone().unwrap_or_default();
                let tags = tag_map(s.tags());
                let behind = image_snapshots.get(&id).cloned();
                if !csis_tagged(&tags) && behind.is_none() {
                    continue;
                }
                let of = behind.or_else(|| s.description.as_deref().and_then(ami_in_description));
                inv.snapshots.push(AwsResource {
                    id,
                    name: tags.get("Name").cloned(),
                    state: s.state.as_ref().map(|x| x.as_str().to_string()),
                    created: time(s.start_time.as_ref()),
                    of,
                    tags,
                });
            }
        }
        for list in [
            &mut inv.images,
            &mut inv.snapshots,
            &mut inv.instances,
            &mut inv.volumes,
        ] {
            list.sort_by(|a, b| a.id.cmp(&b.id));
            list.dedup_by(|a, b| a.id == b.id);
        }
        Ok(inv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_archive_is_no_orphan_snapshot() {
        let snap = |id: &str, of: Option<&str>, storage: Option<&str>| AwsResource {
            id: id.into(),
            of: of.map(str::to_string),
            tags: storage
                .map(|s| (tags::STORAGE.to_string(), s.to_string()))
                .into_iter()
                .collect(),
            ..AwsResource::default()
        };
        let inv = AwsInventory {
            images: vec![AwsResource {
                id: "ami-1".into(),
                ..AwsResource::default()
            }],
            snapshots: vec![
                snap("snap-img", Some("ami-1"), None),
                snap("snap-left", Some("ami-gone"), None),
                snap("snap-archive", None, Some("data")),
            ],
            ..AwsInventory::default()
        };
        let ids: Vec<&str> = inv.orphan_snapshots().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["snap-left"]);
    }

    #[test]
    fn the_ami_a_create_image_snapshot_names() {
        assert_eq!(
            ami_in_description("Created by CreateImage(i-0abc) for ami-0123abcd").as_deref(),
            Some("ami-0123abcd")
        );
        assert_eq!(
            ami_in_description("Created by CreateImage(i-1) for ami-09 from vol-1").as_deref(),
            Some("ami-09")
        );
        assert_eq!(ami_in_description("a copy"), None);
    }
}
