//! `csis inventory [--runtime RT] [--json]`: per runtime of the tree, what
//! is on it that belongs to this tree (`csis_ops::inventory`). Exit 0, 2
//! when a runtime cannot answer.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::inventory::RuntimeInventory;
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this runtime (default: every runtime of the tree).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Print the answer as JSON (`{config, runtimes: [{runtime, cannot_answer, series, machines, volumes, kept_failed}]}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = super::open(global, Access::Read)?;
    let r = csis_ops::inventory::inventory(&cx, args.runtime.as_deref())?;
    if args.json {
        crate::render::json(&r)?;
    } else {
        for rt in &r.runtimes {
            print_runtime(rt);
        }
    }
    Ok(ExitCode::from(r.exit_code()))
}

fn print_runtime(rt: &RuntimeInventory) {
    println!("{}:", rt.runtime);
    if let Some(why) = &rt.cannot_answer {
        println!("  cannot answer: {why}");
    }
    for s in &rt.series {
        for b in &s.builds {
            println!(
                "  image {} {} ({}){}{}",
                s.series,
                b.build_id,
                b.name.as_deref().unwrap_or("untagged"),
                if b.recorded {
                    " recorded"
                } else {
                    " unrecorded"
                },
                if b.head { ", head" } else { "" }
            );
        }
    }
    for m in &rt.machines {
        let role = serde_json::to_value(m.role)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            .unwrap_or_default();
        let role = if role == "instance" {
            "machine".to_string()
        } else {
            format!("{role} machine")
        };
        println!(
            "  {role} {} ({}){}",
            m.name,
            m.power,
            m.image
                .as_deref()
                .map(|i| format!(" from {i}"))
                .unwrap_or_default()
        );
    }
    for v in &rt.volumes {
        println!("  volume {v}");
    }
    for k in &rt.kept_failed {
        println!(
            "  kept failed bake {} ({} in run {}; inspect: `{}`)",
            k.name,
            k.series.as_deref().unwrap_or("?"),
            k.run.as_deref().unwrap_or("?"),
            k.inspect
        );
    }
    let nothing = rt.series.is_empty()
        && rt.machines.is_empty()
        && rt.volumes.is_empty()
        && rt.kept_failed.is_empty();
    if nothing && rt.cannot_answer.is_none() {
        println!("  nothing of this tree");
    }
}
