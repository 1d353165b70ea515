//! Post-bake test machines: an instance from the AMI in the runtime's
//! default subnet, wearing the session instance profile, tagged `Name`,
//! `csis_test_machine = <runtime>` and, as every bake leftover, `csis_bake
//! = <runtime>` and `csis_bake_owner = <host>:<pid>` (so `clean_stale`
//! terminates one whose csis is gone). Its user data shuts it down after
//! its lifetime, and it terminates on shutdown: bounded even if csis is
//! killed. It answers when an SSM `true` succeeds.

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    IamInstanceProfileSpecification, InstanceType, ResourceType, ShutdownBehavior, Tag,
    TagSpecification,
};
use csis_runtime::{Result, RuntimeError, TestMachine, TestMachineRequest};

use crate::client::code;
use crate::AwsRuntime;
use csis_schema::tags;

/// Standard base64 (user data).
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].iter().enumerate() {
            if i <= c.len() {
                out.push(A[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The user data of a test machine: power off after `lifetime_s`.
pub fn user_data(lifetime_s: u64) -> String {
    let minutes = lifetime_s.div_ceil(60).max(1);
    format!("#!/bin/sh\n# csis test machine: bounded lifetime\nshutdown -h +{minutes} || (sleep {lifetime_s}; poweroff) &\n")
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

impl AwsRuntime {
    pub(crate) async fn launch_test(&self, req: &TestMachineRequest) -> Result<TestMachine> {
        let rt = self.settings().name.clone();
        let subnet = self
            .settings()
            .networking
            .as_ref()
            .and_then(|n| n.default_subnet())
            .ok_or_else(|| {
                RuntimeError::Refused(format!(
                    "AWS runtime {rt}: no default subnet (networking.subnets[].is_default) to launch a test machine in"
                ))
            })?
            .subnet_id
            .clone();
        let ec2 = self.clients().ec2().await;
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::Instance)
            .tags(tag("Name", &req.name))
            .tags(tag(tags::TEST_MACHINE, &rt))
            .tags(tag(tags::BAKE, &rt))
            .tags(tag(tags::BAKE_OWNER, &req.owner))
            .tags(tag(tags::SERIES, &req.series))
            .build();
        let mut call = ec2
            .run_instances()
            .image_id(&req.build_id)
            .min_count(1)
            .max_count(1)
            .instance_type(InstanceType::from(
                self.settings().default_machine_type.as_str(),
            ))
            .subnet_id(&subnet)
            .tag_specifications(tags)
            .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
            .user_data(base64(user_data(req.lifetime_s).as_bytes()));
        if let Some(p) = self.session_instance_profile() {
            call = call
                .iam_instance_profile(IamInstanceProfileSpecification::builder().name(p).build());
        }
        let out = call
            .send()
            .await
            .map_err(|e| self.sdk_err(&format!("run_instances from {}: ", req.build_id), &e))?;
        let id = out
            .instances()
            .first()
            .and_then(|i| i.instance_id.clone())
            .ok_or_else(|| RuntimeError::Failed("run_instances returned no instance".into()))?;
        match self.until_it_answers(&id, req.ready_timeout_s).await {
            Ok(()) => {}
            Err(e) => {
                let _ = self.remove_test(&id).await;
                return Err(e);
            }
        }
        let booted = ec2
            .describe_instances()
            .instance_ids(&id)
            .send()
            .await
            .ok()
            .and_then(|o| {
                o.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .find_map(|i| i.image_id.clone())
            });
        Ok(TestMachine { id, booted })
    }

    async fn until_it_answers(&self, id: &str, timeout_s: u64) -> Result<()> {
        self.wait_for(
            id,
            "running",
            &["shutting-down", "terminated", "stopping"],
            timeout_s,
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(timeout_s.max(1));
        loop {
            let last = match crate::ssm::send_and_poll(self, id, "true", 30).await {
                Ok(r) if r.exit_code == 0 => return Ok(()),
                Ok(r) => r.stderr,
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(RuntimeError::Failed(format!(
                    "test machine {id} does not answer over SSM within {timeout_s}s: {last}"
                )));
            }
            tokio::time::sleep(self.waiter_delay).await;
        }
    }

    pub(crate) async fn remove_test(&self, id: &str) -> Result<bool> {
        let ec2 = self.clients().ec2().await;
        match ec2.terminate_instances().instance_ids(id).send().await {
            Ok(_) => Ok(true),
            Err(e) if code(&e).as_deref() == Some("InvalidInstanceID.NotFound") => Ok(false),
            Err(e) => Err(self.sdk_err(&format!("terminating test machine {id}: "), &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn user_data_bounds_the_lifetime() {
        assert!(user_data(3600).contains("shutdown -h +60"));
        assert!(user_data(1).contains("shutdown -h +1"));
    }
}
