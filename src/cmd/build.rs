//! `csis build`

use std::process::ExitCode;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_global: &GlobalArgs, _args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("csis build: not implemented yet")
}
