//! `csis completions SHELL` (clap_complete) and `csis man [--dir DIR]`
//! (clap_mangen): the command line describing itself.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
    /// Print `{shell, script}` instead of the script.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write `csis.1` and one `csis-<command>.1` per command into DIR
    /// (default: print the top page, in roff, to stdout).
    #[arg(long = "dir", value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// Print `{page}` or, with --dir, `{written: [...]}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "csis", &mut out);
    if args.json {
        let j = serde_json::json!({ "shell": args.shell.to_string(), "script": String::from_utf8(out)? });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        use std::io::Write;
        std::io::stdout().write_all(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn man(_global: &GlobalArgs, args: ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = crate::Cli::command();
    match &args.into {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            clap_mangen::generate_to(cmd, dir)?;
            let mut written: Vec<String> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "1"))
                .map(|p| p.display().to_string())
                .collect();
            written.sort();
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({ "written": written }))?
                );
            } else {
                for w in &written {
                    println!("{w}");
                }
            }
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({ "page": String::from_utf8(out)? })
                    )?
                );
            } else {
                use std::io::Write;
                std::io::stdout().write_all(&out)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
