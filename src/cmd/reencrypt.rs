//! `csis reencrypt [--dry-run]`: every marker of the tree's files decrypted
//! with `CSIS_CONFIG_IDENTITY` and encrypted again to the CURRENT
//! `encryption.recipients`, in place, atomically per file. Nothing is written
//! unless every marker opens. Never prints a plaintext.

use std::process::ExitCode;

use csis_ops::secrets::{self, markers, Recipients};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Report the files and fields that would be rewritten; write nothing
    /// (every marker is still opened, to check).
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON: `{dry_run, recipients, markers, files:
    /// [{file, markers: [{file, line, column, field, stanzas_before}]}]}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let settings = secrets::raw_settings(&global.dir).map_err(anyhow::Error::msg)?;
    let to = Recipients::parse(&settings.recipients).map_err(anyhow::Error::msg)?;
    let ids = secrets::identities(std::env::var("CSIS_CONFIG_IDENTITY").ok().as_deref())
        .map_err(anyhow::Error::msg)?;
    let report = match markers::reencrypt(&global.dir, &ids, &to, args.dry_run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if report.dry_run {
        "would re-encrypt"
    } else {
        "re-encrypted"
    };
    for f in &report.files {
        for m in &f.markers {
            let before = m
                .stanzas_before
                .map(|n| format!(" (was {n} recipient(s))"))
                .unwrap_or_default();
            println!("{}: {verb}{before}", m.at);
        }
    }
    eprintln!(
        "{} {} marker(s) in {} file(s) to {} recipient(s)",
        verb,
        report.markers,
        report.files.len(),
        report.recipients
    );
    Ok(ExitCode::SUCCESS)
}
