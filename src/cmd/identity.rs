//! `csis identity export-gids`: Terraform's `data "external"` program of the
//! opa-groups root (the query on stdin, `{group: gid}` on stdout, an error on
//! stderr with exit 1). Loads no tree; credentials from the environment.

use std::io::Read;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCommand {
    /// The gid query of the opa-groups root (its `data "external"` program): reads the query
    /// (identity_type, org, team, api_host, groups) on stdin, asks OPA for each group's unix gid
    /// and prints {group: gid}. The service user's key comes from TF_VAR_<team>_key and
    /// TF_VAR_<team>_secret (or OKTAPAM_KEY and OKTAPAM_SECRET), never from the query.
    ExportGids,
}

pub fn run(cmd: IdentityCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        IdentityCommand::ExportGids => {
            let mut text = String::new();
            let limit = csis_ops::identity::QUERY_LIMIT as u64 + 1;
            if let Err(e) = std::io::stdin().take(limit).read_to_string(&mut text) {
                eprintln!("error: the query on stdin: {e}");
                return Ok(ExitCode::from(1));
            }
            match csis_ops::identity::export_gids(&text, |v| std::env::var(v).ok()) {
                Ok(json) => {
                    println!("{json}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}
