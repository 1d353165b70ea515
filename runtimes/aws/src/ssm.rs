//! Sessions over AWS Systems Manager: `run_session_command` (the
//! `AWS-RunShellScript` document, polled to completion) and
//! `verify_instance` (launch marker, booted AMI, mounts under /mnt).

use std::time::{Duration, Instant};

use aws_sdk_ssm::types::CommandInvocationStatus;
use csis_runtime::{Result, RuntimeError, SessionResult, VerifyCheck};

use crate::client::Service;
use crate::{AwsPowerState, AwsRuntime, POWER_UNAVAILABLE};

/// The launch script's last act; verification waits for it.
pub const LAUNCH_MARKER: &str = "/var/lib/csis/launch-applied";

fn terminal(s: &CommandInvocationStatus) -> bool {
    matches!(
        s,
        CommandInvocationStatus::Success
            | CommandInvocationStatus::Failed
            | CommandInvocationStatus::Cancelled
            | CommandInvocationStatus::TimedOut
    )
}

/// `AWS-RunShellScript` on the RUNNING instance whose `Name` tag matches.
pub async fn run_session_command(
    rt: &AwsRuntime,
    instance: &str,
    script: &str,
    timeout_s: u64,
) -> Result<SessionResult> {
    let name = &rt.settings().name;
    let running = rt.running_instance(instance).await;
    let inst = match running {
        Ok(Some(i)) => i,
        Ok(None) => {
            let state = match rt.power_state(instance).await {
                Some(p) => p.describe(),
                None => POWER_UNAVAILABLE.to_string(),
            };
            return Err(RuntimeError::Refused(format!(
                "AWS runtime {name}: cannot run a command on '{instance}': it is {state}"
            )));
        }
        Err(_) => {
            return Err(RuntimeError::Unavailable(format!(
            "AWS runtime {name}: cannot run a command on '{instance}': it is {POWER_UNAVAILABLE}"
        )))
        }
    };
    let id = inst.instance_id.clone().unwrap_or_default();
    send_and_poll(rt, &id, script, timeout_s).await
}

/// Send one script to one instance id and poll its invocation until it ends
/// or the deadline passes (`InvocationDoesNotExist` tolerated until then).
pub async fn send_and_poll(
    rt: &AwsRuntime,
    instance_id: &str,
    script: &str,
    timeout_s: u64,
) -> Result<SessionResult> {
    let ssm = rt.clients().ssm().await;
    let sent = ssm
        .send_command()
        .document_name("AWS-RunShellScript")
        .instance_ids(instance_id)
        .parameters("commands", vec![script.to_string()])
        .timeout_seconds(timeout_s.clamp(30, 2_592_000) as i32)
        .comment(format!("csis {}", rt.settings().name))
        .send()
        .await
        .map_err(|e| {
            RuntimeError::Failed(format!(
                "ssm send_command to {instance_id}: {}",
                rt.clients().cause(Service::Ssm, &e)
            ))
        })?;
    let command_id = sent
        .command
        .and_then(|c| c.command_id)
        .ok_or_else(|| RuntimeError::Failed("ssm send_command returned no command id".into()))?;
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let mut last = "Pending".to_string();
    loop {
        let r = ssm
            .get_command_invocation()
            .command_id(&command_id)
            .instance_id(instance_id)
            .send()
            .await;
        match r {
            Ok(inv) => {
                let status = inv.status.clone();
                if let Some(s) = &status {
                    last = s.as_str().to_string();
                    if terminal(s) {
                        let ok = *s == CommandInvocationStatus::Success;
                        let rc = inv.response_code;
                        let exit_code = if ok {
                            if rc < 0 {
                                0
                            } else {
                                rc
                            }
                        } else if rc > 0 {
                            rc
                        } else {
                            1
                        };
                        let mut stderr = inv.standard_error_content.clone().unwrap_or_default();
                        if !ok && stderr.is_empty() {
                            stderr = format!("ssm command {command_id} ended {last}");
                        }
                        return Ok(SessionResult {
                            exit_code,
                            stdout: inv.standard_output_content.clone().unwrap_or_default(),
                            stderr,
                        });
                    }
                }
            }
            Err(e) => {
                let dne = e
                    .as_service_error()
                    .map(|se| se.is_invocation_does_not_exist())
                    .unwrap_or(false);
                if !dne {
                    return Err(RuntimeError::Failed(format!(
                        "ssm get_command_invocation {command_id}: {}",
                        rt.clients().cause(Service::Ssm, &e)
                    )));
                }
            }
        }
        if Instant::now() >= deadline {
            return Ok(SessionResult {
                exit_code: 1,
                stdout: String::new(),
                stderr: format!("ssm command {command_id} still {last} after {timeout_s}s"),
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(rt.ssm_poll.min(left).max(Duration::from_millis(10))).await;
    }
}

fn tail20(s: &str) -> Vec<String> {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// The script that says whether the launch marker is there.
pub fn marker_script() -> String {
    format!("if [ -e {LAUNCH_MARKER} ]; then echo csis-marker: present; else echo csis-marker: absent; fi")
}

/// The script that lists the mount targets under /mnt.
pub const MOUNTS_SCRIPT: &str = "findmnt -rn -o TARGET | grep -E '^/mnt/' || true";

/// `verify_instance(name, expected_build, expect_mounts, timeout)` (the
/// trait's hook): the checks `startup scripts`, `booted image` and, when
/// storages are declared, `data disks mounted`.
pub async fn verify_instance(
    rt: &AwsRuntime,
    instance: &str,
    expected_build: &str,
    expect_mounts: usize,
    timeout_s: u64,
) -> Result<Vec<VerifyCheck>> {
    let name = &rt.settings().name;
    let Some(inst) = rt.running_instance(instance).await? else {
        let state = match rt.power_state(instance).await {
            Some(p) => p.describe(),
            None => POWER_UNAVAILABLE.to_string(),
        };
        return Err(RuntimeError::Refused(format!(
            "AWS runtime {name}: cannot run a command on '{instance}': it is {state}"
        )));
    };
    let id = inst.instance_id.clone().unwrap_or_default();
    let mut checks = Vec::new();

    // startup scripts: the marker within the timeout, polled
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let mut evidence;
    let mut present;
    loop {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs()
            .max(1);
        let r = send_and_poll(rt, &id, &marker_script(), left).await?;
        evidence = format!("{}{}", r.stdout, r.stderr);
        present = r.exit_code == 0 && r.stdout.contains("csis-marker: present");
        if present || Instant::now() >= deadline {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(rt.verify_poll.min(left)).await;
        if Instant::now() >= deadline {
            break;
        }
    }
    checks.push(VerifyCheck {
        name: "startup scripts".into(),
        ok: present,
        detail: if present {
            format!("{LAUNCH_MARKER} present")
        } else {
            format!("no completion marker within {timeout_s}s")
        },
        evidence: tail20(&evidence),
    });

    // booted image
    let booted = inst.image_id.clone().unwrap_or_default();
    checks.push(VerifyCheck {
        name: "booted image".into(),
        ok: booted == expected_build,
        detail: if booted == expected_build {
            format!("booted {booted}")
        } else {
            format!("booted {booted}, expected {expected_build}")
        },
        evidence: Vec::new(),
    });

    if expect_mounts > 0 {
        let r = send_and_poll(rt, &id, MOUNTS_SCRIPT, timeout_s.max(30)).await?;
        let n = r.stdout.lines().filter(|l| l.starts_with("/mnt/")).count();
        checks.push(VerifyCheck {
            name: "data disks mounted".into(),
            ok: r.exit_code == 0 && n >= expect_mounts,
            detail: format!("{n} mount(s) under /mnt, {expect_mounts} declared"),
            evidence: tail20(&format!("{}{}", r.stdout, r.stderr)),
        });
    }
    Ok(checks)
}

impl AwsRuntime {
    /// The power state a stopped/absent machine is reported with (`note`s).
    pub async fn power_note(&self, instance: &str) -> Option<String> {
        match self.power_state(instance).await? {
            AwsPowerState::Stopped => Some("STOPPED (switched off; not drift)".into()),
            AwsPowerState::Absent => Some("absent (no such machine)".into()),
            _ => None,
        }
    }
}
