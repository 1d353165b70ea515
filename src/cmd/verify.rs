//! `csis verify instance RT NAME [--expect BUILD] [--mounts N] [--timeout S]
//! [--record-only] [--json]` (also reached as `csis runtime
//! verify-instance`): the runtime's `verify_instance` checks, recorded in
//! `meta-state/verifications.yaml` with their last 20 lines of evidence.

use std::process::ExitCode;

use csis_ops::inspect::VerifyRefusal;
use csis_ops::{exit, Access};

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum VerifyCommand {
    /// Verify a launched instance: it runs, it booted the expected build,
    /// its data disks are mounted; the verdict is recorded. Exit 0
    /// verified, 1 a check failed (0 with --record-only), 2 cannot answer.
    Instance(InstanceArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstanceArgs {
    /// The runtime's name or one of its aliases. Given alone, the instance's
    /// name (the original's `verify instance NAME`): its runtime is read from
    /// its declaration in instances/.
    #[arg(value_name = "RT")]
    pub runtime: String,
    /// The instance's name (its `Name` tag on AWS, the container on docker).
    #[arg(value_name = "NAME")]
    pub instance: Option<String>,
    /// The build it must run: full id, hash prefix (>= 8) or name (default: its pin).
    #[arg(long, value_name = "BUILD", alias = "expect-build")]
    pub expect: Option<String>,
    /// Data disks that must be mounted under /mnt (its declared storages).
    #[arg(long, default_value_t = 0)]
    pub mounts: usize,
    /// Seconds to wait for the launch completion marker.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Record the verdict without failing on it (exit 0 when it was recorded).
    #[arg(long)]
    pub record_only: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, cmd: VerifyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        VerifyCommand::Instance(a) => instance(global, a),
    }
}

pub fn instance(global: &GlobalArgs, a: InstanceArgs) -> anyhow::Result<ExitCode> {
    let cx = super::open(global, Access::Write)?;
    let (runtime, instance) = match &a.instance {
        Some(i) => (a.runtime.clone(), i.clone()),
        None => match csis_ops::inspect::instance_runtime(cx.tree(), &a.runtime) {
            Ok(rt) => (rt, a.runtime.clone()),
            Err(why) => {
                eprintln!(
                    "verify: {why}; name it: `csis verify instance RT {}`",
                    a.runtime
                );
                return Ok(ExitCode::from(exit::CANNOT_ANSWER));
            }
        },
    };
    let runtime_name = cx.runtime_name(&runtime);
    let expect = match &a.expect {
        Some(b) => match super::build_id(&cx, b, runtime_name.as_deref())? {
            Ok(id) => Some(id),
            Err(code) => return Ok(code),
        },
        None => None,
    };
    let answer =
        csis_ops::inspect::verify_instance(&cx, &runtime, &instance, expect, a.mounts, a.timeout)?;
    let r = match answer {
        Ok(r) => r,
        Err(refusal) => {
            if a.json {
                crate::render::json(&refusal)?;
            }
            let (why, code) = match refusal {
                VerifyRefusal::CannotAnswer { reason } => (reason, exit::CANNOT_ANSWER),
                VerifyRefusal::Failed { reason } => (reason, exit::FAILURE),
            };
            eprintln!("verify: {why}");
            return Ok(ExitCode::from(code));
        }
    };
    if a.json {
        crate::render::json(&r)?;
    } else {
        for c in &r.checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            println!("{mark} {}: {}", c.name, c.detail);
        }
        let verdict = if r.ok { "verified" } else { "NOT verified" };
        let recorded = if r.recorded {
            " (recorded in meta-state/verifications.yaml)"
        } else {
            ""
        };
        println!(
            "verify: {} on {}: {verdict}{recorded}",
            r.instance, r.runtime
        );
    }
    Ok(ExitCode::from(if r.ok || a.record_only {
        exit::SUCCESS
    } else {
        exit::FAILURE
    }))
}
