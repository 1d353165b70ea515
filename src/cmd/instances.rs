//! `csis instances [--json]`: each instance the tree declares (and each the
//! records hold that it declares no more), with its runtime, build,
//! generation, hostname, state and whether it is behind its image's head
//! (csis_ops::fleet::instances). Read-only; asks no runtime.

use std::process::ExitCode;

use csis_ops::{exit, Access};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print `{instances: [{name, runtime, image, policy, ephemeral, build,
    /// generation, hostname, state, pending, behind}]}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let cx = super::open(global, Access::Read)?;
    let report = csis_ops::fleet::instances(cx.tree(), &cx.meta)?;
    if args.json {
        crate::render::json(&report)?;
        return Ok(ExitCode::from(exit::SUCCESS));
    }
    if report.instances.is_empty() {
        println!("no instances declared or recorded");
    }
    for i in &report.instances {
        let mut line = format!(
            "{}  {}  {}  {}  {}",
            i.name,
            i.runtime,
            i.hostname.as_deref().unwrap_or("-"),
            i.build.as_deref().unwrap_or("-"),
            i.state
        );
        if let Some(g) = i.generation {
            line.push_str(&format!("  generation {g}"));
        }
        if let Some(p) = &i.pending {
            line.push_str(&format!("  (replacement pending: {p})"));
        }
        if let Some(h) = &i.behind {
            line.push_str(&format!("  behind: head {h}"));
        }
        println!("{line}");
    }
    Ok(ExitCode::from(exit::SUCCESS))
}
