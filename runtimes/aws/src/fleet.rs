//! This tree's fleet as EC2 holds it (`query_instances`, `query_storages`):
//! the machines and volumes tagged with the tree's `csis_config` (the
//! original's form or the id as written), read from the inventory. What
//! the state query compares with the fleet's records: a launched instance
//! or an active storage gone, a machine booting another build.

use csis_runtime::{InstanceFacts, MachineRole, Result, RuntimeError, StorageFacts};
use csis_schema::tags;

use crate::AwsRuntime;

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
        let mut out: Vec<InstanceFacts> = self
            .aws_inventory()
            .await?
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
        let inv = self.aws_inventory().await?;
        let mut out: Vec<StorageFacts> = inv
            .volumes
            .iter()
            .filter(|v| {
                v.tags
                    .get(tags::CONFIG)
                    .is_some_and(|c| tags::is_config_of(c, &config))
            })
            .filter(|v| !matches!(v.state.as_deref(), Some("deleting" | "deleted")))
            .filter_map(|v| {
                let storage = v.tags.get(tags::STORAGE).or(v.name.as_ref())?.clone();
                Some(StorageFacts {
                    storage,
                    id: v.id.clone(),
                    labels: v.tags.clone(),
                    users: v.of.iter().cloned().collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
