//! `csis encrypt VALUE|-` and `csis encrypt --file F --field NAME`: encrypt
//! to the tree's `encryption.recipients` (read raw from `cfg/`; no identity
//! needed). The logic is `csis_rules::secrets` (reached as `csis_ops::secrets`).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use csis_ops::secrets::{self, markers, Recipients};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A value to encrypt, or `-` to read it from stdin (one trailing newline
    /// dropped; prefer `-`: an argument shows in the process list and the
    /// shell's history). Omit with --file.
    #[arg(
        value_name = "VALUE",
        conflicts_with = "files",
        required_unless_present = "files"
    )]
    pub value: Option<String>,
    /// A YAML file to encrypt in place (repeatable); everything but the
    /// encrypted values stays byte for byte.
    #[arg(long = "file", value_name = "FILE", requires = "fields")]
    pub files: Vec<PathBuf>,
    /// A field NAME whose scalar values and list elements are encrypted,
    /// each to its own marker, in each --file (repeatable).
    #[arg(long = "field", value_name = "NAME", requires = "files")]
    pub fields: Vec<String>,
    /// Print the result as JSON: `{marker, recipients}`, or with --file
    /// `{recipients, files: [{file, encrypted, already_encrypted, skipped, written}]}`.
    #[arg(long)]
    pub json: bool,
}

/// A value from the argument or stdin (`-`), one trailing newline dropped.
fn value_or_stdin(v: &str) -> anyhow::Result<String> {
    if v != "-" {
        return Ok(v.to_string());
    }
    let mut s = String::new();
    // a value is bounded: 16 MiB
    const LIMIT: u64 = 16 << 20;
    std::io::stdin().take(LIMIT + 1).read_to_string(&mut s)?;
    if s.len() as u64 > LIMIT {
        anyhow::bail!("the value on stdin is larger than 16 MiB: refused");
    }
    Ok(secrets::strip_one_newline(s))
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let settings = secrets::raw_settings(&global.dir).map_err(anyhow::Error::msg)?;
    let to = Recipients::parse(&settings.recipients).map_err(anyhow::Error::msg)?;
    if let Some(v) = &args.value {
        let plain = value_or_stdin(v)?;
        if plain.is_empty() {
            eprintln!("error: the value is empty: nothing to encrypt");
            return Ok(ExitCode::from(2));
        }
        let marker = to.encrypt(&plain).map_err(anyhow::Error::msg)?;
        if args.json {
            let j = serde_json::json!({ "marker": marker, "recipients": to.len() });
            println!("{}", serde_json::to_string_pretty(&j)?);
        } else {
            println!("{marker}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // every file checked before any is written
    for f in &args.files {
        markers::encrypt_fields(f, &global.dir, &args.fields, &to, false)
            .map_err(anyhow::Error::msg)?;
    }
    let mut reports = Vec::new();
    for f in &args.files {
        reports.push(
            markers::encrypt_fields(f, &global.dir, &args.fields, &to, true)
                .map_err(anyhow::Error::msg)?,
        );
    }
    if args.json {
        let j = serde_json::json!({ "recipients": to.len(), "files": reports });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        for r in &reports {
            for at in &r.encrypted {
                println!("{at}: encrypted");
            }
            for at in &r.already_encrypted {
                println!("{at}: already encrypted");
            }
            for s in &r.skipped {
                println!("{}: left in clear: {}", s.at, s.reason);
            }
        }
        let n: usize = reports.iter().map(|r| r.encrypted.len()).sum();
        eprintln!(
            "{n} value(s) encrypted to {} recipient(s) in {} file(s)",
            to.len(),
            reports.iter().filter(|r| r.written).count()
        );
    }
    Ok(ExitCode::SUCCESS)
}
