//! `csis runtime describe NAME`: one runtime, its type, address, defaults,
//! and the builders, base images and images bound to it.

use std::process::ExitCode;

use csis_rules::model::RuntimeKind;
use serde::Serialize;

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
    /// Verify a launched instance (the runtime's `verify_instance`): the
    /// launch completion marker, the booted image against the expected
    /// build, the data disks mounted. Exit 0 verified, 1 a check failed,
    /// 2 the runtime cannot answer.
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

#[derive(Serialize)]
struct Description {
    runtime: String,
    #[serde(rename = "type")]
    type_: String,
    declared_at: String,
    aliases: Vec<String>,
    is_default: bool,
    region: Option<String>,
    host: Option<String>,
    context: Option<String>,
    repository: Option<String>,
    account_id: Option<String>,
    default_machine_type: String,
    ephemeral: bool,
    retention_keep: Option<u32>,
    max_parallel: Option<u32>,
    session_mechanism: Option<String>,
    state_backend: Option<String>,
    image_builders: Vec<String>,
    base_images: Vec<String>,
    images: Vec<String>,
}

pub fn run(global: &GlobalArgs, cmd: RuntimeCommand) -> anyhow::Result<ExitCode> {
    let (name, json) = match cmd {
        RuntimeCommand::Describe { name, json } => (name, json),
        RuntimeCommand::VerifyInstance {
            runtime,
            instance,
            expect,
            mounts,
            timeout,
            json,
        } => return verify_instance(global, &runtime, &instance, expect, mounts, timeout, json),
    };
    let tree = match csis_rules::load(&global.dir, &super::validate::load_options(global)) {
        Ok(t) => t,
        Err(diags) => {
            super::validate::print_human(&diags);
            return Ok(ExitCode::from(1));
        }
    };
    let Some(rt) = tree.runtime(&name) else {
        let names: Vec<&str> = tree.runtimes.iter().map(|r| r.display.as_str()).collect();
        eprintln!(
            "error: no runtime named `{name}` (declared: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return Ok(ExitCode::from(1));
    };
    let (region, account_id, host, context, repository) = match &rt.kind {
        RuntimeKind::Aws(a) => (
            Some(a.region.clone()),
            a.account_id.clone(),
            None,
            None,
            None,
        ),
        RuntimeKind::Docker(d) => (
            None,
            None,
            d.host.as_deref().map(|h| csis_rules::secret::redact(h).into_owned()),
            d.context.clone(),
            Some(d.repository_for(&rt.name)),
        ),
        RuntimeKind::Dummy(_) => (None, None, None, None, None),
    };
    let image_builders: Vec<String> = tree
        .image_builders
        .iter()
        .filter(|b| b.runtime == rt.name)
        .map(|b| format!("{} ({})", b.display, b.kind.as_str()))
        .collect();
    let base_images: Vec<String> = tree
        .os_builders
        .iter()
        .filter(|o| o.runtime_entry(&rt.name).is_some())
        .map(|o| o.display.clone())
        .collect();
    let images: Vec<String> = tree
        .images
        .iter()
        .filter(|i| i.runtime_entry(&rt.name).is_some())
        .map(|i| i.display.clone())
        .collect();
    let d = Description {
        runtime: rt.display.clone(),
        type_: rt.type_name().into(),
        declared_at: rt.origin.display(),
        aliases: rt.common.aliases.clone(),
        is_default: rt.common.is_default,
        region,
        host,
        context,
        repository,
        account_id,
        default_machine_type: rt.common.default_machine_type.clone(),
        ephemeral: rt.common.ephemeral,
        retention_keep: rt.common.retention_keep,
        max_parallel: rt.common.max_parallel,
        session_mechanism: rt.common.session_mechanism.clone(),
        state_backend: rt.state_backend.clone(),
        image_builders,
        base_images,
        images,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&d)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    println!(
        "runtime:              {}{}",
        d.runtime,
        if d.is_default { " (default)" } else { "" }
    );
    println!("type:                 {}", d.type_);
    println!("declared at:          {}", d.declared_at);
    if !d.aliases.is_empty() {
        println!("aliases:              {}", d.aliases.join(", "));
    }
    match rt.type_name() {
        "aws" => {
            println!("region:               {}", opt(&d.region));
            println!("account_id:           {}", opt(&d.account_id));
            println!("session_mechanism:    {}", opt(&d.session_mechanism));
        }
        "docker" => {
            println!("host/context:         {}", rt.address());
            println!("repository:           {}", opt(&d.repository));
        }
        _ => println!("address:              {}", rt.address()),
    }
    println!("default_machine_type: {}", d.default_machine_type);
    println!("ephemeral:            {}", d.ephemeral);
    println!(
        "retention_keep:       {}",
        d.retention_keep
            .map(|k| k.to_string())
            .unwrap_or_else(|| "- (keep all)".into())
    );
    println!(
        "max_parallel:         {}",
        d.max_parallel
            .map(|k| k.to_string())
            .unwrap_or_else(|| "- (no per-runtime limit)".into())
    );
    println!("state backend:        {}", opt(&d.state_backend));
    println!("image builders:       {}", list(&d.image_builders));
    println!("base images:          {}", list(&d.base_images));
    println!("images:               {}", list(&d.images));
    Ok(ExitCode::SUCCESS)
}

/// `csis runtime verify-instance RT NAME`: the runtime's `verify_instance`.
fn verify_instance(
    global: &GlobalArgs,
    runtime: &str,
    instance: &str,
    expect: Option<String>,
    mounts: usize,
    timeout: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use csis_runtime::RuntimeError;
    let tree = super::state::load_tree(global)?;
    let Some(name) = tree.runtime(runtime).map(|r| r.name.clone()) else {
        eprintln!("verify: runtime {runtime} is not declared in this tree");
        return Ok(ExitCode::from(2));
    };
    let expected = match expect {
        Some(b) => b,
        // The pins as the next build will see them (the journal merged).
        None => match super::state::records(tree.root())?
            .1
            .instances
            .get(instance)
        {
            Some(b) => b.clone(),
            None => {
                eprintln!(
                    "verify: instance {instance} has no pin in meta-state/pins.yaml; name the build with --expect"
                );
                return Ok(ExitCode::from(2));
            }
        },
    };
    let rt = crate::wiring::runtime(&tree, &name)?;
    let answer = super::state::tokio_rt()?
        .block_on(rt.verify_instance(instance, &expected, mounts, timeout));
    let checks = match answer {
        Ok(c) => c,
        Err(e @ (RuntimeError::Unsupported { .. } | RuntimeError::Unavailable(_))) => {
            eprintln!("verify: {name} cannot verify {instance}: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => {
            eprintln!("verify: {instance} on {name}: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let ok = checks.iter().all(|c| c.ok);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "runtime": name,
                "instance": instance,
                "expected_build": expected,
                "ok": ok,
                "checks": checks,
            }))?
        );
    } else {
        for c in &checks {
            println!(
                "{} {}: {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        println!(
            "verify: {instance} on {name}: {}",
            if ok { "verified" } else { "NOT verified" }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
