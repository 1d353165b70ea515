//! `csis graph [PATTERNS] --format html|svg|dot|mermaid|json [--all-nodes]`:
//! gather the plan and the records (lineage heads, releases, revocations,
//! pins, post-bake tests) into the [`csis_graph`] model and render it. By
//! default one node per series x runtime, its steps folded in.

use std::process::ExitCode;

use csis_graph as g;
use csis_ops::session::ForceBake;

use crate::GlobalArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
    Json,
    Html,
    Svg,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns; default `//...`.
    pub patterns: Vec<String>,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: Format,
    /// Draw every step (resolve, emit, bake, retag, release, dispose) as
    /// its own node, not folded into its series x runtime.
    #[arg(long, conflicts_with = "bakes_only")]
    pub all_nodes: bool,
    /// The default view (one node per series x runtime); kept for scripts.
    #[arg(long, hide = true)]
    pub bakes_only: bool,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let s = super::session(global)?;
    let sel = s.select(&args.patterns)?;
    let plan = s.plan_explained(&sel, &ForceBake::default())?;
    let model = csis_ops::graph::picture(&s, &plan, !args.all_nodes)?;
    let text = match args.format {
        Format::Dot => g::dot(&model),
        Format::Mermaid => g::mermaid(&model),
        Format::Json => g::json(&model),
        Format::Html => g::html(&model),
        Format::Svg => g::svg(&model),
    };
    match &args.output {
        Some(p) => std::fs::write(p, text)?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
