//! `csis init DIR [--from dummy|docker|aws]`: write a small, commented,
//! working tree to start from. The starters are embedded in the binary.

use std::path::Path;
use std::process::ExitCode;

use crate::GlobalArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Starter {
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
    pub from: Starter,
    /// Print `{starter, dir, files}` as JSON instead of the next steps.
    #[arg(long)]
    pub json: bool,
}

const MOD_BUILDERS: &str = include_str!("starters/common-mod-builders.yml");
const STATE_BACKENDS: &str = include_str!("starters/common-state-backends.yml");
const PLAYBOOK: &str = include_str!("starters/common-playbook.yml");
const SCRIPT: &str = include_str!("starters/common-script.sh");
const GITIGNORE: &str = "generated/\n.csis/\n_private/\nstate/\n";

/// The files of a starter: (path relative to the tree root, content).
pub fn files(starter: Starter) -> Vec<(&'static str, &'static str)> {
    let mut v: Vec<(&'static str, &'static str)> = match starter {
        Starter::Dummy => vec![
            (
                "cfg/_config.yml",
                include_str!("starters/dummy/_config.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/dummy/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/dummy/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/dummy/os-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/dummy/images.yaml"),
            ),
        ],
        Starter::Docker => vec![
            (
                "cfg/_config.yml",
                include_str!("starters/docker/_config.yml"),
            ),
            (
                "cfg/executables.yml",
                include_str!("starters/docker/executables.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/docker/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/docker/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/docker/os-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/docker/images.yaml"),
            ),
        ],
        Starter::Aws => vec![
            ("cfg/_config.yml", include_str!("starters/aws/_config.yml")),
            (
                "cfg/executables.yml",
                include_str!("starters/aws/executables.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/aws/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/aws/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/aws/os-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/aws/images.yaml"),
            ),
        ],
    };
    v.extend([
        ("cfg/mod-builders.yml", MOD_BUILDERS),
        ("cfg/state-backends.yml", STATE_BACKENDS),
        ("playbooks/app.yml", PLAYBOOK),
        ("scripts/motd.sh", SCRIPT),
        (".gitignore", GITIGNORE),
    ]);
    v
}

pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    if dir.join("cfg").exists() {
        eprintln!(
            "error: {} already holds a cfg/ directory; csis init writes a new tree and overwrites nothing",
            dir.display()
        );
        return Ok(ExitCode::from(csis_ops::exit::FAILURE));
    }
    let mut written = Vec::new();
    for (rel, content) in files(args.from) {
        let p = dir.join(rel);
        if p.exists() {
            eprintln!(
                "error: {} already exists; csis init overwrites nothing",
                p.display()
            );
            return Ok(ExitCode::from(csis_ops::exit::FAILURE));
        }
        write(&p, content)?;
        written.push(rel);
    }
    let starter = match args.from {
        Starter::Dummy => "dummy",
        Starter::Docker => "docker",
        Starter::Aws => "aws",
    };
    if args.json {
        crate::render::json(&serde_json::json!({
            "starter": starter,
            "dir": dir,
            "files": written,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "wrote the {} starter tree to {}\n  csis -C {} validate --offline\n  csis -C {} plan //images/...",
        starter,
        dir.display(),
        dir.display(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write(p: &Path, content: &str) -> anyhow::Result<()> {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(p, content)?;
    #[cfg(unix)]
    if p.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}
