//! `csis runtime describe NAME [--json]` and `csis runtime verify-instance
//! RT NAME [--expect BUILD] [--mounts N] [--timeout S] [--json]`.

use std::process::ExitCode;

use csis_ops::inspect::Description;
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
        Err(names) => {
            let declared = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            eprintln!("error: no runtime named `{name}` (declared: {declared})");
            return Ok(ExitCode::from(exit::FAILURE));
        }
    };
    if json {
        crate::render::json(&d)?;
    } else {
        print_description(&d);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_description(d: &Description) {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    let default = if d.is_default { " (default)" } else { "" };
    println!("runtime:              {}{default}", d.runtime);
    println!("type:                 {}", d.type_);
    println!("declared at:          {}", d.declared_at);
    if !d.aliases.is_empty() {
        println!("aliases:              {}", d.aliases.join(", "));
    }
    match d.type_.as_str() {
        "aws" => {
            println!("region:               {}", opt(&d.region));
            println!("account_id:           {}", opt(&d.account_id));
            println!("session_mechanism:    {}", opt(&d.session_mechanism));
        }
        "docker" => {
            println!("host/context:         {}", d.address);
            println!("repository:           {}", opt(&d.repository));
        }
        _ => println!("address:              {}", d.address),
    }
    println!("default_machine_type: {}", d.default_machine_type);
    println!("ephemeral:            {}", d.ephemeral);
    let keep = d.retention_keep.map(|k| k.to_string());
    println!(
        "retention_keep:       {}",
        keep.unwrap_or_else(|| "- (keep all)".into())
    );
    let par = d.max_parallel.map(|k| k.to_string());
    println!(
        "max_parallel:         {}",
        par.unwrap_or_else(|| "- (no per-runtime limit)".into())
    );
    println!("state backend:        {}", opt(&d.state_backend));
    println!("image builders:       {}", list(&d.image_builders));
    println!("base images:          {}", list(&d.base_images));
    println!("images:               {}", list(&d.images));
}
