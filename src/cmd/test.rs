//! `csis test IMAGE [--build ID] [--runtime RT] [--json]`: the post-bake
//! tests of one build (default: the series head), outside a build,
//! recorded in `meta-state/image-tests.yaml` (csis_ops::image_test).

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::image_test::{TestArgs, TestReport};
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image whose `tests.post_bake` run.
    pub image: String,
    /// The build to test: full id, hash prefix (>= 8) or name (default: the series head).
    #[arg(long, value_name = "ID")]
    pub build: Option<String>,
    /// The runtime (needed when the image bakes on several).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Print the report as JSON (`{event: tested|refused|failed, ...}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = super::open(global, Access::Write)?;
    let quiet = args.json;
    let report = csis_ops::image_test::test(
        &cx,
        &TestArgs {
            image: args.image,
            build: args.build,
            runtime: args.runtime,
        },
        &move |line: &str| {
            if !quiet {
                eprintln!("  {line}");
            }
        },
    )?;
    if args.json {
        crate::render::json(&report)?;
    } else {
        match &report {
            TestReport::Tested(o) => {
                for c in &o.checks {
                    let mark = if c.ok { "ok  " } else { "FAIL" };
                    println!("{mark} {}: {}", c.name, c.detail);
                    if !c.ok {
                        for l in &c.evidence {
                            println!("       {l}");
                        }
                    }
                }
                println!("{}", o.summary());
            }
            TestReport::Refused { reason } => eprintln!("refused: {reason}"),
            TestReport::Failed { reason } => eprintln!("error: {reason}"),
        }
    }
    Ok(ExitCode::from(report.exit_code()))
}
