//! `csis upgrade image NAME [--to BUILD] [--runtime RT] [--dry-run] [--json]`
//! and `csis upgrade instance NAME ...`: move exactly one pin
//! (csis_ops::upgrade).

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::upgrade::{UpgradeArgs, UpgradeKind, UpgradeReport};
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum UpgradeCommand {
    /// Move a pinned image's parent pin to its parent's head (or --to a
    /// build of the parent series); the next `csis build` bakes it.
    Image(Args),
    /// Move an instance's pin to its image's head (or --to a build of it);
    /// the replacement waits in meta-state/pins.yaml.
    Instance(Args),
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image (or instance) name.
    pub name: String,
    /// The build to pin: full id, hash prefix (>= 8) or name (default: the series head).
    #[arg(long, value_name = "BUILD")]
    pub to: Option<String>,
    /// The runtime (needed when the image bakes on several).
    #[arg(long, value_name = "RT")]
    pub runtime: Option<String>,
    /// Say what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{event: moved|already_pinned|refused, ...}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, cmd: UpgradeCommand) -> Result<ExitCode> {
    let (kind, a) = match cmd {
        UpgradeCommand::Image(a) => (UpgradeKind::Image, a),
        UpgradeCommand::Instance(a) => (UpgradeKind::Instance, a),
    };
    let cx = super::open(global, Access::writing_unless(a.dry_run))?;
    let report = csis_ops::upgrade::upgrade(
        &cx,
        &UpgradeArgs {
            kind,
            name: a.name,
            to: a.to,
            runtime: a.runtime,
            dry_run: a.dry_run,
        },
    )?;
    if a.json {
        crate::render::json(&report)?;
    } else if matches!(report, UpgradeReport::Moved { .. }) {
        println!("{}", crate::render::upgrade::message(&report));
    } else {
        eprintln!("{}", crate::render::upgrade::message(&report));
    }
    Ok(ExitCode::from(report.exit_code()))
}
