//! `csis runtime ...`

use std::process::ExitCode;

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum RuntimeCommand {
    /// Describe one runtime: type, address, defaults, and what is bound to it.
    Describe { name: String },
}

pub fn run(_global: &GlobalArgs, _cmd: RuntimeCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("csis runtime: not implemented yet")
}
