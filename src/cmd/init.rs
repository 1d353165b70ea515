//! `csis init DIR [--from dummy|docker|aws] [--json]`: write a small,
//! commented, working tree to start from (`csis_ops::init`).

use std::process::ExitCode;

use csis_ops::exit;
use csis_ops::init::Starter;

use crate::GlobalArgs;

/// `--from`: which starter tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StarterArg {
    /// Simulated bakes on this machine: needs nothing installed.
    Dummy,
    /// Bakes on a Docker daemon (native, through the Docker API).
    Docker,
    /// Bakes AMIs on AWS with packer (placeholders to replace).
    Aws,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The directory to write (created; must not already hold a cfg/).
    pub dir: std::path::PathBuf,
    /// Which starter tree.
    #[arg(long = "from", value_enum, default_value = "dummy")]
    pub from: StarterArg,
    /// Print `{starter, dir, files}` as JSON instead of the next steps.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let starter = match args.from {
        StarterArg::Dummy => Starter::Dummy,
        StarterArg::Docker => Starter::Docker,
        StarterArg::Aws => Starter::Aws,
    };
    let r = match csis_ops::init::init(&args.dir, starter)? {
        Ok(r) => r,
        Err(refusal) => {
            eprintln!("error: {}", crate::render::init::refusal(&refusal));
            return Ok(ExitCode::from(exit::FAILURE));
        }
    };
    if args.json {
        crate::render::json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let dir = r.dir.display();
    println!(
        "wrote the {} starter tree to {dir}\n  csis -C {dir} validate --offline\n  csis -C {dir} plan //images/...",
        r.starter.name(),
    );
    Ok(ExitCode::SUCCESS)
}
