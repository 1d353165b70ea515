//! Instances: found by `Name` tag or filters, their power state, EC2's
//! waiter, start and stop, identity and boot image.

use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use csis_runtime::{PowerState, Result, RuntimeError};

use crate::client::code;
use crate::{AwsPowerState, AwsRuntime, POWER_UNAVAILABLE};

impl AwsRuntime {
    /// Every instance `describe_instances` answers for `filters`, all pages
    /// (an error is prefixed with `what`).
    pub(crate) async fn instances_where(
        &self,
        filters: Vec<Filter>,
        what: &str,
    ) -> Result<Vec<Instance>> {
        let ec2 = self.clients.ec2().await;
        let mut out = Vec::new();
        let mut pages = ec2
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.sdk_err(what, &e))?;
            for r in page.reservations.unwrap_or_default() {
                out.extend(r.instances.unwrap_or_default());
            }
        }
        Ok(out)
    }

    async fn describe_named(&self, name: &str, states: &[&str]) -> Result<Vec<Instance>> {
        let mut filters = vec![Filter::builder().name("tag:Name").values(name).build()];
        if !states.is_empty() {
            filters.push(state_filter(states));
        }
        self.instances_where(filters, "").await
    }

    /// `_running_instance`: the pending or running instance whose `Name` tag matches.
    pub async fn running_instance(&self, name: &str) -> Result<Option<Instance>> {
        Ok(self
            .describe_named(name, &["pending", "running"])
            .await?
            .into_iter()
            .next())
    }

    /// `_named_instance`: any state, preferring a record that is not `terminated`.
    pub async fn named_instance(&self, name: &str) -> Result<Option<Instance>> {
        let all = self.describe_named(name, &[]).await?;
        let terminated = |i: &Instance| {
            i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated)
        };
        let live = all.iter().find(|i| !terminated(i)).cloned();
        Ok(live.or_else(|| all.into_iter().next()))
    }

    /// The fine-grained power state (`None`: the cloud could not be asked).
    pub async fn power_state(&self, name: &str) -> Option<AwsPowerState> {
        match self.named_instance(name).await {
            Ok(None) => Some(AwsPowerState::Absent),
            Ok(Some(i)) => {
                let raw = i
                    .state
                    .as_ref()
                    .and_then(|s| s.name.as_ref())
                    .map(|n| n.as_str().to_string())
                    .unwrap_or_default();
                let p = AwsPowerState::from_ec2(&raw);
                if p == AwsPowerState::Unknown {
                    self.warn(format!(
                        "AWS runtime {}: instance '{name}' reports unrecognised state '{raw}'; treating it as unknown",
                        self.settings.name
                    ));
                }
                Some(p)
            }
            Err(_) => None,
        }
    }

    /// Poll `describe_instances` like the EC2 waiter: every `waiter_delay`,
    /// `timeout / 5` attempts (at least one); success when every state is
    /// `want`, failure on a state the waiter treats as terminal.
    pub(crate) async fn wait_for(
        &self,
        id: &str,
        want: &str,
        fail_on: &[&str],
        timeout_s: u64,
    ) -> Result<()> {
        let ec2 = self.clients.ec2().await;
        let attempts = (timeout_s / 5).max(1);
        let waiter = format!("instance_{want}");
        for n in 0..attempts {
            let out = ec2.describe_instances().instance_ids(id).send().await;
            match out {
                Ok(o) => {
                    let states: Vec<String> = o
                        .reservations()
                        .iter()
                        .flat_map(|r| r.instances())
                        .filter_map(|i| {
                            i.state
                                .as_ref()?
                                .name
                                .as_ref()
                                .map(|s| s.as_str().to_string())
                        })
                        .collect();
                    if !states.is_empty() && states.iter().all(|s| s == want) {
                        return Ok(());
                    }
                    if let Some(bad) = states.iter().find(|s| fail_on.contains(&s.as_str())) {
                        return Err(RuntimeError::Failed(format!(
                            "AWS runtime {}: waiter {waiter} failed for {id}: it reached '{bad}'",
                            self.settings.name
                        )));
                    }
                }
                Err(e) if code(&e).as_deref() == Some("InvalidInstanceID.NotFound") => {}
                Err(e) => return Err(self.sdk_err("", &e)),
            }
            if n + 1 < attempts {
                tokio::time::sleep(self.waiter_delay).await;
            }
        }
        Err(RuntimeError::Failed(format!(
            "AWS runtime {}: waiter {waiter} for {id}: max attempts exceeded ({attempts} x {}s, timeout {timeout_s}s)",
            self.settings.name,
            self.waiter_delay.as_secs()
        )))
    }

    pub(crate) async fn api_power_state(&self, instance: &str) -> Result<PowerState> {
        match self.power_state(instance).await {
            Some(p) => Ok(p.to_api()),
            None => Err(RuntimeError::Unavailable(format!(
                "AWS runtime {}: {POWER_UNAVAILABLE}",
                self.settings.name
            ))),
        }
    }

    pub(crate) async fn start(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let Some(i) = self.named_instance(instance).await? else {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to start",
                self.settings.name
            )));
        };
        if i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated) {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to start",
                self.settings.name
            )));
        }
        let id = i.instance_id.clone().unwrap_or_default();
        let ec2 = self.clients.ec2().await;
        ec2.start_instances()
            .instance_ids(&id)
            .send()
            .await
            .map_err(|e| self.sdk_err("", &e))?;
        self.wait_for(
            &id,
            "running",
            &["shutting-down", "terminated", "stopping"],
            timeout_s,
        )
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!(
                "{e}; '{instance}' was started but is not reachable"
            ))
        })
    }

    pub(crate) async fn stop(&self, instance: &str, timeout_s: u64) -> Result<()> {
        let Some(i) = self.named_instance(instance).await? else {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to stop",
                self.settings.name
            )));
        };
        if i.state.as_ref().and_then(|s| s.name.clone()) == Some(InstanceStateName::Terminated) {
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}' to stop",
                self.settings.name
            )));
        }
        let id = i.instance_id.clone().unwrap_or_default();
        let ec2 = self.clients.ec2().await;
        ec2.stop_instances()
            .instance_ids(&id)
            .send()
            .await
            .map_err(|e| self.sdk_err("", &e))?;
        self.wait_for(&id, "stopped", &["pending", "terminated"], timeout_s)
            .await
            .map_err(|e| RuntimeError::Failed(format!("{e}; stop '{instance}' ({id}) by hand")))
    }

    pub(crate) async fn identity(&self, instance: &str) -> Result<(String, Option<String>)> {
        match self.named_instance(instance).await? {
            Some(i) => Ok((
                i.instance_id.clone().unwrap_or_default(),
                i.private_dns_name.clone().filter(|s| !s.is_empty()),
            )),
            None => Err(RuntimeError::Refused(format!(
                "AWS runtime {}: no instance named '{instance}'",
                self.settings.name
            ))),
        }
    }

    pub(crate) async fn boot_image(&self, instance: &str) -> Result<Option<String>> {
        Ok(self
            .running_instance(instance)
            .await?
            .and_then(|i| i.image_id.clone()))
    }
}

/// The `describe_instances` filter for machines that are not terminated
/// (pending, running, stopping, stopped, shutting-down).
pub(crate) fn not_terminated() -> Filter {
    state_filter(&["pending", "running", "stopping", "stopped", "shutting-down"])
}

/// The `describe_instances` filter for machines in one of `states`.
fn state_filter(states: &[&str]) -> Filter {
    Filter::builder()
        .name("instance-state-name")
        .set_values(Some(states.iter().map(|s| s.to_string()).collect()))
        .build()
}
