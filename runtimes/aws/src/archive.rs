//! A storage's archive (the original's tf-aws-ebs `archived` state, core.md
//! §9.1): before the storage root's apply destroys an EBS volume requested
//! `archived`, its data is kept in a snapshot named `csis-<label>-archive`
//! (its `Name` tag; `csis_storage` names the storage); a restore makes the
//! volume from that snapshot, which is deleted after the apply, as is an
//! archive whose storage is destroyed.

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    Filter, ResourceType, Snapshot, SnapshotState, Tag, TagSpecification, VolumeState,
};
use csis_runtime::{ArchiveRequest, Result, RuntimeError};
use csis_schema::tags;

use crate::AwsRuntime;

fn name_is(value: &str) -> Filter {
    Filter::builder().name("tag:Name").values(value).build()
}

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

/// Not another tree's: no `csis_config` tag (the original's archive carries
/// none), or this tree's.
fn of_tree(tags: &[Tag], config: &str) -> bool {
    tags.iter()
        .find(|t| t.key() == Some(tags::CONFIG))
        .and_then(|t| t.value())
        .is_none_or(|c| tags::is_config_of(c, config))
}

impl AwsRuntime {
    /// This account's snapshots named `req.archive`, but another tree's or
    /// another storage's (two storage names can make one archive name:
    /// `data_1` and `data-1`).
    async fn archives(&self, req: &ArchiveRequest) -> Result<Vec<Snapshot>> {
        let ec2 = self.clients.ec2().await;
        let out = ec2
            .describe_snapshots()
            .owner_ids("self")
            .filters(name_is(&req.archive))
            .send()
            .await
            .map_err(|e| self.sdk_err("describe_snapshots: ", &e))?;
        let mut ours = out.snapshots.unwrap_or_default();
        ours.retain(|s| of_tree(s.tags(), &req.config));
        ours.retain(|s| {
            s.tags()
                .iter()
                .find(|t| t.key() == Some(tags::STORAGE))
                .and_then(|t| t.value())
                .is_none_or(|v| v == req.storage)
        });
        Ok(ours)
    }

    /// Snapshot the volume of `req.storage` as `req.archive`, or answer the
    /// archive of that volume still being taken (a run stopped while it
    /// waited); wait until it is complete. A completed archive of the
    /// volume may be older than its data (taken for a plan that was then
    /// refused, the volume written since), and an archive of another volume
    /// (an earlier one's, left behind) is not this volume's data: a new one
    /// is taken (a restore reads the newest). With no volume, an archive
    /// already there is the data (a run stopped after the apply).
    pub(crate) async fn archive(&self, req: &ArchiveRequest) -> Result<String> {
        let mut existing = self.archives(req).await?;
        existing.sort_by_key(|s| s.start_time().map(|t| (t.secs(), t.subsec_nanos())));
        let id = match self.volume_of(req).await? {
            Some(vol) => match existing
                .iter()
                .rev()
                .find(|s| {
                    s.volume_id() == Some(vol.as_str())
                        && s.state() == Some(&SnapshotState::Pending)
                })
                .and_then(|s| s.snapshot_id.clone())
            {
                Some(id) => id,
                None => self.snapshot_volume(req, &vol).await?,
            },
            None => existing
                .last()
                .and_then(|s| s.snapshot_id.clone())
                .ok_or_else(|| {
                    RuntimeError::Failed(format!("no volume named {} to archive", req.storage))
                })?,
        };
        self.wait_complete(&id, req.timeout_s).await?;
        Ok(id)
    }

    /// The one volume of this tree named `req.storage`; None when there is
    /// none; refused when several are.
    async fn volume_of(&self, req: &ArchiveRequest) -> Result<Option<String>> {
        let ec2 = self.clients.ec2().await;
        let vols = ec2
            .describe_volumes()
            .filters(name_is(&req.storage))
            .send()
            .await
            .map_err(|e| self.sdk_err("describe_volumes: ", &e))?
            .volumes
            .unwrap_or_default();
        // a volume of another tree is not this storage's
        let ours: Vec<_> = vols
            .iter()
            .filter(|v| of_tree(v.tags(), &req.config))
            .filter(|v| {
                !matches!(
                    v.state(),
                    Some(VolumeState::Deleting | VolumeState::Deleted)
                )
            })
            .collect();
        match ours.as_slice() {
            [] => Ok(None),
            [v] => Ok(v.volume_id().map(str::to_string)),
            _ => Err(RuntimeError::Refused(format!(
                "{} volumes are named {}: which one to archive is not clear",
                ours.len(),
                req.storage
            ))),
        }
    }

    async fn snapshot_volume(&self, req: &ArchiveRequest, vol: &str) -> Result<String> {
        let ec2 = self.clients.ec2().await;
        let spec = TagSpecification::builder()
            .resource_type(ResourceType::Snapshot)
            .tags(tag("Name", &req.archive))
            .tags(tag(tags::STORAGE, &req.storage))
            .tags(tag(tags::CONFIG, &tags::config_value(&req.config)))
            .build();
        let out = ec2
            .create_snapshot()
            .volume_id(vol)
            .description(format!("csis archive of {}", req.storage))
            .tag_specifications(spec)
            .send()
            .await
            .map_err(|e| self.sdk_err("create_snapshot: ", &e))?;
        out.snapshot_id.ok_or_else(|| {
            RuntimeError::Failed(format!("create_snapshot of {vol} answered no snapshot id"))
        })
    }

    async fn wait_complete(&self, id: &str, timeout_s: u64) -> Result<()> {
        let ec2 = self.clients.ec2().await;
        let deadline = Instant::now() + Duration::from_secs(timeout_s);
        loop {
            let out = ec2
                .describe_snapshots()
                .snapshot_ids(id)
                .send()
                .await
                .map_err(|e| self.sdk_err("describe_snapshots: ", &e))?;
            let state = out.snapshots().first().and_then(|s| s.state().cloned());
            match state {
                Some(SnapshotState::Completed) => return Ok(()),
                Some(SnapshotState::Error) => {
                    return Err(RuntimeError::Failed(format!(
                        "archive snapshot {id} failed (state error)"
                    )))
                }
                _ if Instant::now() >= deadline => {
                    return Err(RuntimeError::Failed(format!(
                        "archive snapshot {id} not complete after {timeout_s} s"
                    )))
                }
                _ => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
    }

    /// Delete every snapshot named `req.archive` (but another tree's); their ids.
    pub(crate) async fn delete_archives(&self, req: &ArchiveRequest) -> Result<Vec<String>> {
        let ec2 = self.clients.ec2().await;
        let mut gone = Vec::new();
        for id in self
            .archives(req)
            .await?
            .into_iter()
            .filter_map(|s| s.snapshot_id)
        {
            ec2.delete_snapshot()
                .snapshot_id(&id)
                .send()
                .await
                .map_err(|e| self.sdk_err("delete_snapshot: ", &e))?;
            gone.push(id);
        }
        Ok(gone)
    }
}
