//! `csis empty --runtime RT [--json] [--remove]`: does the runtime hold nothing beyond
//! released builds, and does a strict state query of it agree? Exit 0
//! empty, 1 leftovers or drift, 2 the runtime cannot answer.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
    /// Print the answer as JSON (`{runtime, cannot_answer, leftovers, drift}`).
    #[arg(long)]
    pub json: bool,
    /// Remove this tree's kept failed bakes (`csis build --keep-failed`) first.
    #[arg(long)]
    pub remove: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = super::open(global, Access::Read)?;
    let r = csis_ops::inspect::empty(&cx, &args.runtime, args.remove)?;
    if args.json {
        crate::render::json(&r)?;
    } else if let Some(why) = &r.cannot_answer {
        eprintln!("empty: {why}");
    } else {
        for k in &r.removed {
            println!("removed: kept failed bake {k}");
        }
        for l in &r.leftovers {
            println!("leftover: {}", crate::render::inspect::leftover(l));
        }
        for d in &r.drift {
            println!("drift: {} {}: {}: {}", d.kind, d.name, d.drift, d.detail);
        }
        if r.empty() {
            println!("empty: {} holds nothing beyond released builds", r.runtime);
        }
    }
    Ok(ExitCode::from(r.exit_code()))
}
