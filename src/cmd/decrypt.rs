//! `csis decrypt MARKER|-` and `csis decrypt --json` (Terraform's
//! `data "external"` program): open markers with the identity in
//! `CSIS_CONFIG_IDENTITY`. Loads no tree. The plaintext goes to stdout:
//! this is for the operator, or for Terraform, never for a script that logs.

use std::io::Read;
use std::process::ExitCode;

use csis_rules::secrets;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An ENC[age:...] marker, or `-` to read it from stdin.
    #[arg(value_name = "MARKER", conflicts_with = "json", required_unless_present = "json")]
    pub value: Option<String>,
    /// Terraform's external data source protocol: read a JSON object of
    /// strings on stdin, print it as a flat JSON object of strings with every
    /// marker opened; values without a marker pass through. Errors go to
    /// stderr with exit 1.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let ids = match secrets::identities(std::env::var("CSIS_CONFIG_IDENTITY").ok().as_deref()) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if args.json {
        let mut input = String::new();
        std::io::stdin().read_to_string(&mut input)?;
        let query: serde_json::Value = match serde_json::from_str(if input.trim().is_empty() { "{}" } else { &input }) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: the query on stdin is not JSON: {e}");
                return Ok(ExitCode::from(1));
            }
        };
        let Some(obj) = query.as_object() else {
            eprintln!("error: the query on stdin must be a JSON object of strings");
            return Ok(ExitCode::from(1));
        };
        let mut out = serde_json::Map::new();
        for (k, v) in obj {
            let Some(s) = v.as_str() else {
                eprintln!("error: query key `{k}`: expected a string (Terraform's external protocol passes strings only)");
                return Ok(ExitCode::from(1));
            };
            match secrets::open_markers(&ids, s) {
                Ok(p) => out.insert(k.clone(), serde_json::Value::String(p)),
                Err(e) => {
                    eprintln!("error: query key `{k}`: {e}");
                    return Ok(ExitCode::from(1));
                }
            };
        }
        println!("{}", serde_json::Value::Object(out));
        return Ok(ExitCode::SUCCESS);
    }
    let v = match args.value.as_deref() {
        Some("-") | None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
        Some(v) => v.to_string(),
    };
    let v = v.trim();
    if !csis_rules::crypt::is_marker(v) {
        eprintln!("error: not an ENC[age:...] marker");
        return Ok(ExitCode::from(2));
    }
    match ids.decrypt(v) {
        Ok(p) => {
            println!("{p}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
