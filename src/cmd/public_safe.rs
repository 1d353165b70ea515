//! `csis public-safe [--staged] [--tree DIR] [--config FILE]`: refuse
//! material that must never be public, in the tree or in what the git index
//! would commit (a pre-commit hook runs `csis public-safe --staged`). Exit 1
//! with every finding as `file:line:col: field: rule`; the flagged text is
//! never printed. The rules are `csis_rules::secrets::public_safe` (`csis_ops::secrets`).

use std::path::PathBuf;
use std::process::ExitCode;

use csis_ops::secrets::{self, public_safe, Plaintexts};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scan the git index (what a commit would publish) instead of the tree's files.
    #[arg(long)]
    pub staged: bool,
    /// The tree to scan, or whose repository's index to scan (default: -C DIR).
    #[arg(long, value_name = "DIR")]
    pub tree: Option<PathBuf>,
    /// The `_config.yml` whose `public_safe.allow` applies (default: the tree's cfg/).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the report as JSON: `{ok, source, scanned, allowed,
    /// plaintexts_checked, findings: [{file, line, column, field, rule, what}]}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.tree.clone().unwrap_or_else(|| global.dir.clone());
    let allow = match &args.config {
        Some(c) => secrets::allow_of_file(c).map_err(anyhow::Error::msg)?,
        None if dir.join("cfg").is_dir() => {
            secrets::raw_settings(&dir)
                .map_err(anyhow::Error::msg)?
                .allow
        }
        None => Vec::new(),
    };
    // the tree's own plaintexts, when the identity opens them
    let mut known = Vec::new();
    let mut checked = false;
    if let Ok(ids) = secrets::identities(std::env::var("CSIS_CONFIG_IDENTITY").ok().as_deref()) {
        if dir.join("cfg").is_dir() {
            match Plaintexts::of_tree(&dir, &ids) {
                Ok(p) => {
                    known = p.mask_values(8).0;
                    checked = true;
                }
                Err(e) => eprintln!("warning: the tree's plaintexts are not searched for: {e}"),
            }
        }
    }
    let scanner = public_safe::Scanner::new(&allow, &known).map_err(anyhow::Error::msg)?;
    let result = if args.staged {
        public_safe::scan_staged(&dir, &scanner)
    } else {
        public_safe::scan_tree(&dir, &scanner)
    };
    let mut report = match result {
        Ok(r) => r,
        Err(public_safe::SourceError::NotGit(e)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(anyhow::anyhow!("{e}")),
    };
    report.plaintexts_checked = checked;
    if args.json {
        let mut j = serde_json::to_value(&report)?;
        j["ok"] = serde_json::Value::Bool(report.ok());
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        for f in &report.findings {
            println!("{f}");
        }
        eprintln!(
            "public-safe: {} finding(s) in {} {} file(s); {} allowed by public_safe.allow{}",
            report.findings.len(),
            report.scanned,
            report.source,
            report.allowed,
            if report.ok() {
                ""
            } else {
                " (allow a value by decision there, never by bypassing the check)"
            }
        );
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
