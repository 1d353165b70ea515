//! `csis plan [PATTERNS] [--json] [--explain] [--force-bake X]`: say, for
//! every selected node, whether it is due and why. Changes nothing.

use std::process::ExitCode;

use csis_rules::compile::ForceBake;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns (`//...`, `//images/...`, `//images/dask@rt`, `@rt`); default `//...`.
    pub patterns: Vec<String>,
    /// Print `{"nodes":[{label, kind, series, runtime, fingerprint, due, reason, code, deps}]}`.
    #[arg(long)]
    pub json: bool,
    /// For a due bake, show which inputs changed, field by field.
    #[arg(long)]
    pub explain: bool,
    /// Plan as if these were forced: `SERIES`, `SERIES@RUNTIME` or `all` (repeatable).
    #[arg(long = "force-bake", value_name = "SERIES[@RT]|all")]
    pub force_bake: Vec<String>,
    /// Show every node (resolve, emit, retag...), not only bakes and due nodes.
    #[arg(long)]
    pub all: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let s = super::session(global)?;
    let sel = s.select(&args.patterns)?;
    let plan = s.plan(&sel, &ForceBake::parse(&args.force_bake))?;
    if args.json {
        crate::render::write_plan_json(&plan, args.explain, std::io::stdout().lock())?;
    } else {
        for w in &s.compiled.warnings {
            eprintln!("warning: {w}");
        }
        print!(
            "{}",
            crate::render::plan_text(&plan, args.explain, args.all)
        );
    }
    // The process ends here: leave the tree and graph to the exit rather
    // than free them piece by piece.
    std::mem::forget((s, sel, plan));
    Ok(ExitCode::SUCCESS)
}
