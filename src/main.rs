//! The `csis` command line: parses arguments, loads the tree, and hands each
//! command to its module under `cmd/`. Rendering for people (miette,
//! indicatif) and for machines (`--json`) lives here, not in the libraries.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod interrupt;
mod progress;
mod render;
mod say;

/// mimalloc: a no-op build of a large tree is mostly small allocations
/// (parsed YAML, models, graph, fingerprints); glibc malloc spent a fifth of it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// csis: a declarative build-graph engine for machine images.
#[derive(Debug, Parser)]
#[command(name = "csis", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// Work on the tree in DIR (default: the current directory).
    #[arg(
        short = 'C',
        long = "directory",
        global = true,
        value_name = "DIR",
        default_value = "."
    )]
    pub dir: PathBuf,
    /// Apply an overlay file to the loaded tree for this invocation (repeatable).
    #[arg(long = "overlay", global = true, value_name = "FILE")]
    pub overlays: Vec<PathBuf>,
    /// Remove a declaration for this invocation: `kind:name` (repeatable).
    #[arg(long = "undeclare", global = true, value_name = "KIND:NAME")]
    pub undeclare: Vec<String>,
    /// Where the records live, overriding `meta_state:` in cfg/_config.yml:
    /// `local` (meta-state/), `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///path`.
    #[arg(long = "meta-state", global = true, value_name = "URL", value_parser = parse_meta_state)]
    pub meta_state: Option<csis_schema::model::MetaStateSpec>,
}

fn parse_meta_state(s: &str) -> Result<csis_schema::model::MetaStateSpec, String> {
    csis_schema::model::MetaStateSpec::parse(s)
}

impl GlobalArgs {
    /// The tree these options name, as the operations take it.
    pub fn tree(&self) -> csis_ops::TreeArgs {
        csis_ops::TreeArgs {
            dir: self.dir.clone(),
            overlays: self.overlays.clone(),
            undeclare: self.undeclare.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load and validate the configuration tree.
    Validate(cmd::validate::Args),
    /// Inspect runtimes.
    #[command(subcommand)]
    Runtime(cmd::runtime::RuntimeCommand),
    /// Verify a launched instance and record the verdict (`verify instance`).
    #[command(subcommand)]
    Verify(cmd::verify::VerifyCommand),
    /// Write a small working tree to start from.
    Init(cmd::init::Args),
    /// Say, for every selected node, whether it is due and why.
    Plan(cmd::plan::Args),
    /// Bake what is due, in parallel, and record the builds.
    Build(cmd::build::Args),
    /// Draw the build graph.
    Graph(cmd::graph::Args),
    /// Keep the tree loaded and print the plan's changes as files change.
    Watch(cmd::watch::Args),
    /// Compare records with reality (`query`), adopt foreign images (`import`).
    #[command(subcommand)]
    State(cmd::state::StateCommand),
    /// Delete recorded builds (`dispose image`), children before parents.
    #[command(subcommand)]
    Dispose(cmd::dispose::DisposeCommand),
    /// Release a build for a model (or `--declared`).
    Release(cmd::release::Args),
    /// Revoke a build (and with --descendants what descends from it).
    Revoke(cmd::revoke::Args),
    /// List the recorded builds per series and runtime, newest first, with their marks.
    Builds(cmd::builds::Args),
    /// Each instance: runtime, build, generation, hostname, state, behind.
    Instances(cmd::instances::Args),
    /// Move one pin: an image's parent pin, or an instance's.
    #[command(subcommand)]
    Upgrade(cmd::upgrade::UpgradeCommand),
    /// Run an image's post-bake tests on one build (default: its head) and record them.
    Test(cmd::test::Args),
    /// Apply every modification twice in a throwaway container of its OS family (apply, then idempotence); results in meta-state/mod-tests.yaml.
    TestMods(cmd::test_mods::Args),
    /// Repair tags from records (`relabel`) or records from the tree (`restamp`).
    #[command(subcommand)]
    Lineage(cmd::lineage::LineageCommand),
    /// Exit 0 when a runtime holds nothing beyond released builds.
    Empty(cmd::empty::Args),
    /// What each runtime holds of this tree (images by series and build, machines, volumes, kept failed bakes), never another tree's.
    Inventory(cmd::inventory::Args),
    /// Does every runtime answer; is every executable on PATH.
    Preflight(cmd::preflight::Args),
    /// Encrypt a value (or fields of YAML files, in place) to `encryption.recipients`.
    Encrypt(cmd::encrypt::Args),
    /// Decrypt one marker with CSIS_CONFIG_IDENTITY (`--json`: Terraform's external program).
    Decrypt(cmd::decrypt::Args),
    /// Identity utilities: `export-gids`, the opa-groups root's gid query (its `data "external"` program).
    #[command(subcommand)]
    Identity(cmd::identity::IdentityCommand),
    /// Re-encrypt every marker of the tree to the current `encryption.recipients`.
    Reencrypt(cmd::reencrypt::Args),
    /// Print a `::add-mask::` line for every value the tree carries encrypted (CI).
    Mask(cmd::mask::Args),
    /// Refuse material that must never be public, in the tree or the git index.
    PublicSafe(cmd::public_safe::Args),
    /// Is the committed generated/ current with the declarations? (the original's `config-drift`)
    ConfigDrift(cmd::drift::DriftArgs),
    /// Has a runtime's emission under generated/ changed since a git ref? (the original's `runtime-unchanged`)
    RuntimeUnchanged(cmd::drift::UnchangedArgs),
    /// Print a shell completion script.
    Completions(cmd::completions::Args),
    /// Print (or write with --dir) the man pages.
    Man(cmd::completions::ManArgs),
}

/// The arguments; `--version` names the runtime types, the meta-state
/// stores and the Okta PAM client this binary carries (its cargo features).
fn parse_cli() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let version = format!(
        "{} (runtimes: {}; stores: {}{})",
        env!("CARGO_PKG_VERSION"),
        csis_ops::wiring::built_in_types().join(", "),
        csis_ops::wiring::built_in_stores().join(", "),
        if csis_ops::wiring::OPA { "; opa" } else { "" }
    );
    let matches = Cli::command()
        .version(&*Box::leak(version.into_boxed_str()))
        .try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// Whether an error is stdout's reader having gone (`csis plan | head`).
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A closed stdout ends the command quietly, as it does cargo's and
/// ripgrep's: `print!` panics when its reader has gone (Rust ignores
/// SIGPIPE, so the write fails with EPIPE instead of killing the process),
/// and that panic becomes a quiet exit 0 (stderr's too: `2>&1 | head`). Every other panic is reported as
/// before.
fn exit_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // std's words: "failed printing to stdout: Broken pipe (os error 32)"
        if msg.starts_with("failed printing to std")
            && msg.to_ascii_lowercase().contains("broken pipe")
        {
            std::process::exit(0);
        }
        default(info)
    }));
}

fn main() -> ExitCode {
    say::install();
    exit_quietly_on_closed_stdout();
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(e) => {
            // A command line of the original (cs-image-system 0.1.1) that
            // csis does not parse: one line naming what to run instead.
            use clap::error::ErrorKind;
            if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let args: Vec<String> = std::env::args().skip(1).collect();
                if let Some(line) = cmd::migrate::pointer(&args) {
                    eprintln!("{line}");
                    return ExitCode::from(cmd::migrate::EXIT);
                }
            }
            e.exit()
        }
    };
    let global = cli.global;
    csis_ops::context::use_meta_state(global.meta_state.clone());
    let result = match cli.command {
        Command::Validate(args) => cmd::validate::run(&global, args),
        // `runtime verify-instance` is an alias of `verify instance`.
        Command::Runtime(cmd::runtime::RuntimeCommand::VerifyInstance {
            runtime,
            instance,
            expect,
            mounts,
            timeout,
            json,
        }) => cmd::verify::instance(
            &global,
            cmd::verify::InstanceArgs {
                runtime,
                instance: Some(instance),
                expect,
                mounts,
                timeout,
                record_only: false,
                json,
            },
        ),
        Command::Runtime(c) => cmd::runtime::run(&global, c),
        Command::Verify(c) => cmd::verify::run(&global, c),
        Command::Init(args) => cmd::init::run(&global, args),
        Command::Plan(args) => cmd::plan::run(&global, args),
        Command::Build(args) => cmd::build::run(&global, args),
        Command::Graph(args) => cmd::graph::run(&global, args),
        Command::Watch(args) => cmd::watch::run(&global, args),
        Command::State(c) => cmd::state::run(&global, c),
        Command::Dispose(c) => cmd::dispose::run(&global, c),
        Command::Release(args) => cmd::release::run(&global, args),
        Command::Revoke(args) => cmd::revoke::run(&global, args),
        Command::Builds(args) => cmd::builds::run(&global, args),
        Command::Instances(args) => cmd::instances::run(&global, args),
        Command::Test(args) => cmd::test::run(&global, args),
        Command::TestMods(args) => cmd::test_mods::run(&global, args),
        Command::Upgrade(c) => cmd::upgrade::run(&global, c),
        Command::Lineage(c) => cmd::lineage::run(&global, c),
        Command::Empty(args) => cmd::empty::run(&global, args),
        Command::Inventory(args) => cmd::inventory::run(&global, args),
        Command::Preflight(args) => cmd::preflight::run(&global, args),
        Command::Encrypt(args) => cmd::encrypt::run(&global, args),
        Command::Decrypt(args) => cmd::decrypt::run(&global, args),
        Command::Identity(c) => cmd::identity::run(c),
        Command::Reencrypt(args) => cmd::reencrypt::run(&global, args),
        Command::Mask(args) => cmd::mask::run(&global, args),
        Command::PublicSafe(args) => cmd::public_safe::run(&global, args),
        Command::ConfigDrift(args) => cmd::drift::config_drift(&global, args),
        Command::RuntimeUnchanged(args) => cmd::drift::runtime_unchanged(&global, args),
        Command::Completions(args) => cmd::completions::run(&global, args),
        Command::Man(args) => cmd::completions::man(&global, args),
    };
    match result {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            if let Some(nl) = err.downcast_ref::<csis_ops::NotLoaded>() {
                render::print_human(&nl.diagnostics);
            }
            eprintln!("error: {err:#}");
            ExitCode::from(csis_ops::exit::FAILURE)
        }
    }
}
