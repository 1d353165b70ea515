//! `csis decrypt MARKER|-`, `csis decrypt --json` (Terraform's
//! `data "external"` program) and `csis decrypt --file F --field NAME` (in
//! place, the inverse of `encrypt --file`): open markers with the identity in
//! `CSIS_CONFIG_IDENTITY`. Loads no tree. The plaintext goes to stdout:
//! this is for the operator, or for Terraform, never for a script that logs.

use std::io::Read;
use std::process::ExitCode;

use csis_ops::secrets::{self, markers};

use crate::GlobalArgs;

/// The most stdin is read (a query, a marker): input is bounded.
const STDIN_LIMIT: u64 = 16 << 20;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An ENC[age:...] marker, or `-` to read it from stdin.
    #[arg(
        value_name = "MARKER",
        conflicts_with_all = ["json", "files"],
        required_unless_present_any = ["json", "files"]
    )]
    pub value: Option<String>,
    /// A YAML file to DECRYPT in place (repeatable), the inverse of `encrypt
    /// --file`: the markers of each --field are written in clear.
    #[arg(
        long = "file",
        value_name = "FILE",
        requires = "fields",
        conflicts_with = "json"
    )]
    pub files: Vec<std::path::PathBuf>,
    /// A field NAME whose markers are written in clear in each --file (repeatable).
    #[arg(long = "field", value_name = "NAME", requires = "files")]
    pub fields: Vec<String>,
    /// Terraform's external data source protocol: read a JSON object of
    /// strings on stdin, print it as a flat JSON object of strings with every
    /// marker opened; values without a marker pass through. Errors go to
    /// stderr with exit 1.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let ids = match secrets::identities(std::env::var("CSIS_CONFIG_IDENTITY").ok().as_deref()) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if !args.files.is_empty() {
        // every file opened before any is written
        for f in &args.files {
            if let Err(e) = markers::decrypt_fields(f, &global.dir, &args.fields, &ids, false) {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(1));
            }
        }
        for f in &args.files {
            let r = markers::decrypt_fields(f, &global.dir, &args.fields, &ids, true)
                .map_err(anyhow::Error::msg)?;
            for at in &r.decrypted {
                println!("{at}: written in clear");
            }
            for at in &r.not_encrypted {
                println!("{at}: was not encrypted");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let mut input = String::new();
        std::io::stdin()
            .take(STDIN_LIMIT + 1)
            .read_to_string(&mut input)?;
        if input.len() as u64 > STDIN_LIMIT {
            eprintln!("error: the query on stdin is larger than 16 MiB: refused");
            return Ok(ExitCode::from(1));
        }
        let query: serde_json::Value = match serde_json::from_str(if input.trim().is_empty() {
            "{}"
        } else {
            &input
        }) {
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
            std::io::stdin().take(STDIN_LIMIT).read_to_string(&mut s)?;
            s
        }
        Some(v) => v.to_string(),
    };
    let v = v.trim();
    if !csis_ops::secrets::is_marker(v) {
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
