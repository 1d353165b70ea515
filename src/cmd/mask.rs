//! `csis mask [--min N]`: a GitHub Actions `::add-mask::VALUE` line for every
//! value the tree carries encrypted, so a CI log never shows one. By design
//! this prints plaintexts to stdout (the runner reads the mask commands
//! there and never echoes them); run it first in a job, never where stdout
//! is kept. Masking is a blocklist, the last line of defence: a value that
//! is wrapped, quoted or split evades it.

use std::process::ExitCode;

use csis_ops::secrets::{self, markers, Plaintexts};

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shortest plaintext (or line of one) to mask: a short common word
    /// would mask unrelated log text.
    #[arg(long, default_value_t = 8)]
    pub min: usize,
    /// Print `{values: [...], markers, shorter_than_min}` instead of the mask
    /// lines (the values in clear, for another CI's masking).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let found = markers::tree_markers(&global.dir).map_err(anyhow::Error::msg)?;
    let (values, short, count) = if found.is_empty() {
        (Vec::new(), 0, 0)
    } else {
        let ids = secrets::identities(std::env::var("CSIS_CONFIG_IDENTITY").ok().as_deref())
            .map_err(anyhow::Error::msg)?;
        let p = match Plaintexts::of_tree(&global.dir, &ids) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(1));
            }
        };
        let (v, s) = p.mask_values(args.min);
        (v, s, p.markers)
    };
    if args.json {
        let j =
            serde_json::json!({ "values": values, "markers": count, "shorter_than_min": short });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        for v in &values {
            println!("{}", markers::add_mask_line(v));
        }
        eprintln!(
            "mask: {} value(s) from {count} marker(s); {short} shorter than {} not masked",
            values.len(),
            args.min
        );
    }
    Ok(ExitCode::SUCCESS)
}
