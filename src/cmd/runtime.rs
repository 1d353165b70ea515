//! `csis runtime describe NAME [--json]` and `csis runtime verify-instance
//! RT NAME [--expect BUILD] [--mounts N] [--timeout S] [--json]`.

use std::process::ExitCode;

use csis_ops::{exit, Access};

use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum RuntimeCommand {
    /// Describe one runtime: type, address, defaults, and what is bound to it.
    Describe {
        /// The runtime's name or one of its aliases.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The same as `csis verify instance` (which see): verify a launched
    /// instance and record the verdict in meta-state/verifications.yaml.
    /// Exit 0 verified, 1 a check failed, 2 the runtime cannot answer.
    VerifyInstance {
        /// The runtime's name or one of its aliases.
        runtime: String,
        /// The instance's name (its `Name` tag on AWS).
        instance: String,
        /// The build it must run (default: its pin in meta-state/pins.yaml).
        #[arg(long, value_name = "BUILD")]
        expect: Option<String>,
        /// Data disks that must be mounted under /mnt (its declared storages).
        #[arg(long, default_value_t = 0)]
        mounts: usize,
        /// Seconds to wait for the launch completion marker.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(global: &GlobalArgs, cmd: RuntimeCommand) -> anyhow::Result<ExitCode> {
    let cx = match super::open(global, Access::Read) {
        Ok(cx) => cx,
        Err(e) if matches!(cmd, RuntimeCommand::Describe { .. }) => {
            let Some(nl) = e.downcast_ref::<csis_ops::NotLoaded>() else {
                return Err(e);
            };
            crate::render::print_human(&nl.diagnostics);
            return Ok(ExitCode::from(exit::FAILURE));
        }
        Err(e) => return Err(e),
    };
    let (name, json) = match cmd {
        RuntimeCommand::Describe { name, json } => (name, json),
        RuntimeCommand::VerifyInstance { .. } => {
            unreachable!("the binary routes `runtime verify-instance` to `verify instance`")
        }
    };
    let d = match csis_ops::inspect::describe(cx.tree(), &name)? {
        Ok(d) => d,
        Err(unknown) => {
            eprintln!(
                "error: {}",
                crate::render::inspect::unknown_runtime(&unknown)
            );
            return Ok(ExitCode::from(exit::FAILURE));
        }
    };
    if json {
        crate::render::json(&d)?;
    } else {
        print!("{}", crate::render::description_text(&d));
    }
    Ok(ExitCode::SUCCESS)
}
