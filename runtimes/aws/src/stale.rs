//! `clean_stale_bakes`: what a killed bake leaves in the runtime's region,
//! found by the marks csis gives every bake, and removed.
//!
//! Every `amazon-ebs` source csis emits carries `run_tags` and
//! `run_volume_tags` (see [`run_tags`]): `csis_bake = <runtime>`,
//! `csis_bake_owner = <host>:<pid>` of the csis process that runs packer
//! (through `PKR_VAR_csis_bake_owner`, so the emitted root does not change
//! from one process to the next), `csis_run` and `csis_series`. Packer puts
//! them on the builder instance and its volumes, and (packer-plugin-amazon
//! 1.x) on the temporary key pair and security group. A packer that is
//! killed (SIGKILL, a lost machine) leaves them standing.
//!
//! A marked resource is stale when its mark names this runtime and
//! - its owner is a process of this host that is gone, or
//! - its owner is on another host (or unknown) and it is older than
//!   [`AwsRuntime::stale_bake_after`] (24 h: a bake still running after
//!   that is not one to keep waiting on).
//!
//! A live owner (this process, or another csis baking on the same runtime
//! right now) keeps its resources. What is removed: stale builder
//! instances (terminated, then waited for), stale marked volumes that are
//! not attached, and stale marked security groups and key pairs, with the
//! `packer_*` security groups and key pair of a stale builder instance
//! (the temporary ones older packers create untagged). Nothing without
//! the mark of this runtime is touched.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use aws_sdk_ec2::types::Filter;
use csis_runtime::Result;

use crate::client::{code, tag_map};
use crate::AwsRuntime;

/// The packer variable (and `PKR_VAR_` environment variable) that carries the owner.
pub const BAKE_OWNER_VAR: &str = tags::BAKE_OWNER;

/// The `run_tags` / `run_volume_tags` of a bake, without the owner (which
/// the source reads from `var.csis_bake_owner`): `csis_bake`, then
/// `csis_config`, `csis_series` and `csis_run` when the bake has them.
pub fn run_tags(runtime: &str, tags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out = vec![(tags::BAKE.to_string(), runtime.to_string())];
    for k in [tags::CONFIG, tags::SERIES, tags::RUN] {
        if let Some(v) = tags.get(k) {
            out.push((k.to_string(), v.clone()));
        }
    }
    out
}

pub use csis_runtime::owner::{bake_owner, host_name, owner_alive, run_time};
use csis_schema::tags;

/// The verdict on one resource's tags (and creation time, when EC2 gives one).
pub fn is_stale(
    tags: &BTreeMap<String, String>,
    runtime: &str,
    created: Option<SystemTime>,
    now: SystemTime,
    stale_after: Duration,
    this_host: &str,
) -> bool {
    if tags.get(tags::BAKE).map(String::as_str) != Some(runtime) {
        return false;
    }
    // a failed bake kept for inspection (`csis build --keep-failed`) goes
    // only by `csis empty --remove`
    if tags.contains_key(tags::KEPT_FAILED) {
        return false;
    }
    // the rule docker's bake containers follow too (csis_runtime::owner)
    let created = created.or_else(|| tags.get(tags::RUN).and_then(|r| run_time(r)));
    csis_runtime::owner::is_left_behind(
        tags.get(tags::BAKE_OWNER).map(String::as_str),
        created,
        now,
        stale_after,
        this_host,
    )
}

fn sys_time(t: Option<&aws_sdk_ec2::primitives::DateTime>) -> Option<SystemTime> {
    t.and_then(|t| SystemTime::try_from(*t).ok())
}

fn mark_filter(runtime: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{}", tags::BAKE))
        .values(runtime)
        .build()
}

fn what(tags: &BTreeMap<String, String>) -> String {
    let mut parts = Vec::new();
    if let Some(s) = tags.get(tags::SERIES) {
        parts.push(format!("series {s}"));
    }
    if let Some(r) = tags.get(tags::RUN) {
        parts.push(format!("run {r}"));
    }
    if let Some(o) = tags.get(tags::BAKE_OWNER) {
        parts.push(format!("owner {o}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

impl AwsRuntime {
    /// Find and remove what killed bakes of this runtime left (see the module).
    pub async fn clean_stale(&self) -> Result<Vec<String>> {
        let mut sweep = Sweep {
            aws: self,
            ec2: self.clients().ec2().await,
            rt: self.settings().name.clone(),
            host: host_name(),
            now: SystemTime::now(),
            removed: Vec::new(),
        };
        let instances = sweep.instances().await?;
        sweep.volumes().await?;
        sweep.security_groups(&instances).await?;
        sweep.key_pairs(&instances).await?;
        Ok(sweep.removed)
    }
}

impl AwsRuntime {
    /// After a failed bake run with `-on-error=abort`: mark the builder
    /// instance this process's packer left for this bake (`csis_bake` of
    /// this runtime, this process's owner mark, the bake's run and series)
    /// `csis_kept_failed = <run>`, so `clean_stale` leaves it and
    /// `inventory` lists it. Returns the instances marked.
    pub async fn mark_kept_bake(&self, lineage: &BTreeMap<String, String>) -> Result<Vec<String>> {
        let rt = self.settings().name.clone();
        let mut filters = vec![
            mark_filter(&rt),
            crate::not_terminated(),
            Filter::builder()
                .name(format!("tag:{}", tags::BAKE_OWNER))
                .values(bake_owner())
                .build(),
        ];
        for k in [tags::RUN, tags::SERIES] {
            if let Some(v) = lineage.get(k) {
                filters.push(Filter::builder().name(format!("tag:{k}")).values(v).build());
            }
        }
        let found = self
            .instances_where(filters, "describe_instances: ")
            .await?;
        let ids: Vec<String> = found.iter().filter_map(|i| i.instance_id.clone()).collect();
        if ids.is_empty() {
            return Ok(ids);
        }
        let run = lineage
            .get(tags::RUN)
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        self.clients()
            .ec2()
            .await
            .create_tags()
            .set_resources(Some(ids.clone()))
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key(tags::KEPT_FAILED)
                    .value(run)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| self.sdk_err("create_tags (keeping a failed bake): ", &e))?;
        Ok(ids)
    }

    /// Terminate a kept failed bake's builder instance (`csis empty
    /// --remove`); `Ok(false)`: it is gone already. An instance without the
    /// kept mark of this runtime is refused.
    pub async fn remove_kept(&self, id: &str) -> Result<bool> {
        let rt = self.settings().name.clone();
        let found = self
            .instances_where(
                vec![
                    Filter::builder().name("instance-id").values(id).build(),
                    crate::not_terminated(),
                ],
                "describe_instances: ",
            )
            .await?;
        let Some(i) = found.first() else {
            return Ok(false);
        };
        let t = tag_map(i.tags());
        if !t.contains_key(tags::KEPT_FAILED) || t.get(tags::BAKE) != Some(&rt) {
            return Err(csis_runtime::RuntimeError::Refused(format!(
                "AWS runtime {rt}: {id} is not a failed bake this runtime kept (no {} mark): not removed",
                tags::KEPT_FAILED
            )));
        }
        self.clients()
            .ec2()
            .await
            .terminate_instances()
            .instance_ids(id)
            .send()
            .await
            .map_err(|e| self.sdk_err("terminate_instances (a kept failed bake): ", &e))?;
        Ok(true)
    }
}

/// One pass of [`AwsRuntime::clean_stale`]: the runtime, its client, the
/// verdict's inputs, and what it removed so far.
struct Sweep<'a> {
    aws: &'a AwsRuntime,
    ec2: &'a aws_sdk_ec2::Client,
    rt: String,
    host: String,
    now: SystemTime,
    removed: Vec<String>,
}

/// What the builder instances say of the groups and key pairs: a stale
/// instance's `packer_*` ones go with it, a kept one's stay.
#[derive(Default)]
struct Instances {
    their_groups: BTreeSet<String>,
    their_keys: BTreeSet<String>,
    kept_groups: BTreeSet<String>,
    kept_keys: BTreeSet<String>,
}

impl Sweep<'_> {
    fn stale(&self, tags: &BTreeMap<String, String>, created: Option<SystemTime>) -> bool {
        is_stale(
            tags,
            &self.rt,
            created,
            self.now,
            self.aws.stale_bake_after,
            &self.host,
        )
    }

    /// Builder instances: the stale ones terminated, then waited for.
    async fn instances(&mut self) -> Result<Instances> {
        let (aws, rt) = (self.aws, self.rt.clone());
        let mut doomed: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        let mut seen = Instances::default();
        let marked = aws
            .instances_where(
                vec![mark_filter(&rt), crate::not_terminated()],
                "describe_instances: ",
            )
            .await?;
        for i in marked {
            let tags = tag_map(i.tags());
            if tags.contains_key(tags::KEPT_FAILED) {
                seen.kept_groups.extend(
                    i.security_groups()
                        .iter()
                        .filter_map(|g| g.group_id.clone()),
                );
                seen.kept_keys.extend(i.key_name.clone());
                continue;
            }
            if !self.stale(&tags, sys_time(i.launch_time.as_ref())) {
                continue;
            }
            for g in i.security_groups() {
                if g.group_name().is_some_and(|n| n.starts_with("packer_")) {
                    if let Some(id) = g.group_id() {
                        seen.their_groups.insert(id.to_string());
                    }
                }
            }
            if let Some(k) = i.key_name().filter(|k| k.starts_with("packer_")) {
                seen.their_keys.insert(k.to_string());
            }
            doomed.push((i.instance_id.clone().unwrap_or_default(), tags));
        }
        if doomed.is_empty() {
            return Ok(seen);
        }
        let ids: Vec<String> = doomed.iter().map(|(i, _)| i.clone()).collect();
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(ids.clone()))
            .send()
            .await
            .map_err(|e| aws.sdk_err("terminating stale builder instances: ", &e))?;
        for (id, tags) in &doomed {
            if let Err(e) = aws
                .wait_for(id, "terminated", &[], aws.stale_terminate_timeout_s)
                .await
            {
                aws.warn(format!(
                    "AWS runtime {rt}: stale builder instance {id} is terminating but not gone yet: {e}"
                ));
            }
            self.removed
                .push(format!("builder instance {id}{}", what(tags)));
        }
        Ok(seen)
    }

    /// Volumes: marked, stale, not attached.
    async fn volumes(&mut self) -> Result<()> {
        let (aws, rt) = (self.aws, self.rt.clone());
        let mut pages = self
            .ec2
            .describe_volumes()
            .filters(mark_filter(&rt))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| aws.sdk_err("describe_volumes: ", &e))?;
            for v in page.volumes.unwrap_or_default() {
                let tags = tag_map(v.tags());
                let attached = v.state.as_ref().is_some_and(|s| s.as_str() != "available");
                if attached || !self.stale(&tags, sys_time(v.create_time.as_ref())) {
                    continue;
                }
                let id = v.volume_id.clone().unwrap_or_default();
                match self.ec2.delete_volume().volume_id(&id).send().await {
                    Ok(_) => self.removed.push(format!("volume {id}{}", what(&tags))),
                    Err(e) if code(&e).as_deref() == Some("InvalidVolume.NotFound") => {}
                    Err(e) => aws.warn(format!(
                        "AWS runtime {rt}: could not delete stale volume {id}: {}",
                        aws.clients().cause(crate::client::Service::Ec2, &e)
                    )),
                }
            }
        }
        Ok(())
    }

    /// Security groups: marked and stale, or a stale instance's `packer_*`
    /// group; a kept instance's stay.
    async fn security_groups(&mut self, seen: &Instances) -> Result<()> {
        let (aws, rt) = (self.aws, self.rt.clone());
        let mut groups: BTreeMap<String, (String, BTreeMap<String, String>)> = BTreeMap::new();
        let mut pages = self
            .ec2
            .describe_security_groups()
            .filters(mark_filter(&rt))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| aws.sdk_err("describe_security_groups: ", &e))?;
            for g in page.security_groups.unwrap_or_default() {
                let tags = tag_map(g.tags());
                if self.stale(&tags, None) {
                    groups.insert(
                        g.group_id.clone().unwrap_or_default(),
                        (g.group_name.clone().unwrap_or_default(), tags),
                    );
                }
            }
        }
        for id in &seen.their_groups {
            groups
                .entry(id.clone())
                .or_insert_with(|| (String::new(), BTreeMap::new()));
        }
        groups.retain(|id, _| !seen.kept_groups.contains(id));
        for (id, (name, tags)) in &groups {
            match self.ec2.delete_security_group().group_id(id).send().await {
                Ok(_) => {
                    let name = if name.is_empty() {
                        String::new()
                    } else {
                        format!(" {name}")
                    };
                    self.removed
                        .push(format!("security group {id}{name}{}", what(tags)));
                }
                Err(e) if code(&e).as_deref() == Some("InvalidGroup.NotFound") => {}
                Err(e) => aws.warn(format!(
                    "AWS runtime {rt}: could not delete stale security group {id} (the next build tries again): {}",
                    aws.clients().cause(crate::client::Service::Ec2, &e)
                )),
            }
        }
        Ok(())
    }

    /// Key pairs: marked and stale, or a stale instance's `packer_*` key;
    /// a kept instance's stay.
    async fn key_pairs(&mut self, seen: &Instances) -> Result<()> {
        let (aws, rt) = (self.aws, self.rt.clone());
        let out = self
            .ec2
            .describe_key_pairs()
            .filters(mark_filter(&rt))
            .send()
            .await
            .map_err(|e| aws.sdk_err("describe_key_pairs: ", &e))?;
        let mut keys: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for k in out.key_pairs.unwrap_or_default() {
            let tags = tag_map(k.tags());
            if self.stale(&tags, sys_time(k.create_time.as_ref())) {
                if let Some(n) = k.key_name.clone() {
                    keys.insert(n, tags);
                }
            }
        }
        for k in &seen.their_keys {
            keys.entry(k.clone()).or_default();
        }
        keys.retain(|name, _| !seen.kept_keys.contains(name));
        for (name, tags) in &keys {
            match self.ec2.delete_key_pair().key_name(name).send().await {
                Ok(_) => self.removed.push(format!("key pair {name}{}", what(tags))),
                Err(e) => aws.warn(format!(
                    "AWS runtime {rt}: could not delete stale key pair {name}: {}",
                    aws.clients().cause(crate::client::Service::Ec2, &e)
                )),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(p: &[(&str, &str)]) -> BTreeMap<String, String> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn run_ids_are_times() {
        let t = run_time("2026_11_30t06_26_25_779098").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_796_019_985);
        assert!(run_time("vendor").is_none());
    }

    #[test]
    fn the_verdict() {
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let me = format!("h1:{}", std::process::id());
        // not this runtime's mark, or no mark: never
        assert!(!is_stale(
            &tags(&[("csis_bake", "other")]),
            "rt",
            None,
            now,
            day,
            "h1"
        ));
        assert!(!is_stale(
            &tags(&[("csis_series", "x")]),
            "rt",
            Some(SystemTime::UNIX_EPOCH),
            now,
            day,
            "h1"
        ));
        // this process: alive
        let t = tags(&[("csis_bake", "rt"), ("csis_bake_owner", &me)]);
        assert!(!is_stale(
            &t,
            "rt",
            Some(SystemTime::UNIX_EPOCH),
            now,
            day,
            "h1"
        ));
        // a pid that is gone on this host
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let t = tags(&[
            ("csis_bake", "rt"),
            ("csis_bake_owner", &format!("h1:{pid}")),
        ]);
        assert!(is_stale(&t, "rt", Some(now), now, day, "h1"));
        // another host: by age only
        let t = tags(&[("csis_bake", "rt"), ("csis_bake_owner", "h2:1")]);
        assert!(!is_stale(&t, "rt", Some(now), now, day, "h1"));
        assert!(is_stale(&t, "rt", Some(now - 2 * day), now, day, "h1"));
        assert!(!is_stale(&t, "rt", None, now, day, "h1"), "no age: kept");
        let t = tags(&[
            ("csis_bake", "rt"),
            ("csis_run", "2020_01_01t00_00_00_000000"),
        ]);
        assert!(
            is_stale(&t, "rt", None, now, day, "h1"),
            "the run id dates it"
        );
    }
}
