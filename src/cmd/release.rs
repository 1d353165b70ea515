//! `csis release IMAGE [--build ID] [--model M] [--note T] [--runtime RT]`
//! and `csis release --declared`.

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::release::ReleaseArgs;
use csis_ops::{exit, Access};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image (series) to release.
    pub image: Option<String>,
    /// The build to release (default: the series head on the runtime).
    #[arg(long, value_name = "ID")]
    pub build: Option<String>,
    /// The release model (default: the image's declared `release: {model}`, else `default`).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// A note kept with the release.
    #[arg(long, value_name = "T")]
    pub note: Option<String>,
    /// The runtime (needed when the image bakes on several).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Release, per image with `release: {model}` and runtime, the head that qualifies.
    #[arg(long, conflicts_with_all = ["image", "build"])]
    pub declared: bool,
    /// Print what would be released; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{dry_run, events: [{event, ...}]}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    if args.image.is_none() && !args.declared {
        eprintln!("error: name an IMAGE, or use --declared");
        return Ok(ExitCode::from(exit::CANNOT_ANSWER));
    }
    let cx = super::open(global, Access::writing_unless(args.dry_run))?;
    let build = match &args.build {
        Some(b) => match super::build_id(&cx, b, args.runtime.as_deref())? {
            Ok(id) => Some(id),
            Err(code) => return Ok(code),
        },
        None => None,
    };
    let report = csis_ops::release::release(
        &cx,
        &ReleaseArgs {
            image: args.image,
            build,
            model: args.model,
            note: args.note,
            runtime: args.runtime,
            declared: args.declared,
            dry_run: args.dry_run,
        },
    )?;
    if args.json {
        crate::render::json(&report)?;
    } else {
        for e in &report.events {
            for l in crate::render::release::lines(e) {
                if e.is_problem() {
                    eprintln!("{l}");
                } else {
                    println!("{l}");
                }
            }
        }
    }
    Ok(ExitCode::from(report.exit_code()))
}
