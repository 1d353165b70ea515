//! `csis validate`

use std::process::ExitCode;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_global: &GlobalArgs, _args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("csis validate: not implemented yet")
}
