//! This tree's fleet as EC2 holds it (`query_instances`, `query_storages`):
//! the machines and volumes tagged with the tree's `csis_config` (the
//! original's form or the id as written), one filtered listing each (a
//! fleet node asks before it acts: not the whole inventory). What
//! the state query compares with the fleet's records: a launched instance
//! or an active storage gone, a machine booting another build.

use aws_sdk_ec2::types::Filter;
use csis_runtime::{InstanceFacts, MachineRole, Result, RuntimeError, StorageFacts};
use csis_schema::tags;

use crate::client::tag_map;
use crate::inventory::{instance_resource, AwsInventory};
use crate::AwsRuntime;

/// The `csis_config` tag in both forms this tree's resources carry.
fn config_filter(config: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{}", tags::CONFIG))
        .values(tags::config_value(config))
        .values(config)
        .build()
}

impl AwsRuntime {
    fn tree_config(&self) -> Result<&str> {
        self.settings().config.as_deref().ok_or_else(|| {
            RuntimeError::Refused(format!(
                "aws runtime {}: it was made without its tree's config id: which machines and volumes are this tree's is unknown",
                self.settings().name
            ))
        })
    }

    /// This tree's machines: not terminated, tagged with its config, not a
    /// bake's or a test's machine.
    pub(crate) async fn fleet_instances(&self) -> Result<Vec<InstanceFacts>> {
        let config = self.tree_config()?.to_string();
        let found = self
            .instances_where(
                vec![crate::not_terminated(), config_filter(&config)],
                "describe_instances: ",
            )
            .await?;
        let inv = AwsInventory {
            instances: found
                .iter()
                .map(|i| instance_resource(i, tag_map(i.tags())))
                .collect(),
            ..AwsInventory::default()
        };
        let mut out: Vec<InstanceFacts> = inv
            .to_api()
            .instances
            .into_iter()
            .filter(|i| i.role == MachineRole::Instance)
            .filter(|i| {
                i.config
                    .as_deref()
                    .is_some_and(|c| tags::is_config_of(c, &config))
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// This tree's volumes, each named by its `csis_storage` tag (else its
    /// `Name`, as a tofu root's module tags it), with the machine it is
    /// attached to.
    pub(crate) async fn fleet_storages(&self) -> Result<Vec<StorageFacts>> {
        let config = self.tree_config()?.to_string();
        let ec2 = self.clients().ec2().await;
        let mut pages = ec2
            .describe_volumes()
            .filters(config_filter(&config))
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err("describe_volumes: ", &e))?;
            for v in page.volumes.unwrap_or_default() {
                let labels = tag_map(v.tags());
                let gone = matches!(
                    v.state.as_ref().map(|s| s.as_str()),
                    Some("deleting" | "deleted")
                );
                let ours =
                    (labels.get(tags::CONFIG)).is_some_and(|c| tags::is_config_of(c, &config));
                let Some(storage) = labels.get(tags::STORAGE).or(labels.get("Name")).cloned()
                else {
                    continue;
                };
                if gone || !ours {
                    continue;
                }
                out.push(StorageFacts {
                    storage,
                    id: v.volume_id.clone().unwrap_or_default(),
                    users: v
                        .attachments()
                        .iter()
                        .filter_map(|a| a.instance_id.clone())
                        .collect(),
                    labels,
                });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
