//! `csis plan [PATTERNS] [--json] [--explain] [--force-bake X]
//! [--format text|json|markdown|github] [--detailed-exitcode] [--shards N]`:
//! say, for every selected node, whether it is due and why. Changes nothing.

use std::process::ExitCode;

use csis_ops::session::ForceBake;

use crate::GlobalArgs;

/// How the plan is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per bake (and per due release/dispose), for people.
    Text,
    /// The stable JSON document (as `--json`).
    Json,
    /// A Markdown table for a pull-request comment: image, runtime, due,
    /// reason, the changed fields.
    Markdown,
    /// GitHub Actions workflow commands: `::error file=..,line=..,col=..::`
    /// for each error of a tree that does not load, `::warning` for its
    /// warnings, `::notice` for each due bake.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Labels or patterns (`//...`, `//images/...`, `//images/dask@rt`, `@rt`); default `//...`.
    pub patterns: Vec<String>,
    /// Print `{"nodes":[{label, kind, series, runtime, fingerprint, due, reason, code, deps}]}`
    /// (the same as `--format json`).
    #[arg(long)]
    pub json: bool,
    /// How to print the plan.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// For a due bake, show which inputs changed, field by field.
    #[arg(long)]
    pub explain: bool,
    /// Plan as if these were forced: `SERIES`, `SERIES@RUNTIME` or `all` (repeatable).
    #[arg(long = "force-bake", value_name = "SERIES[@RT]|all")]
    pub force_bake: Vec<String>,
    /// Show every node (resolve, emit, retag...), not only bakes and due nodes.
    #[arg(long)]
    pub all: bool,
    /// Exit 0 when nothing is due, 2 when something is due, 1 on an error
    /// (as Terraform's `plan -detailed-exitcode`).
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Split the due bakes into N groups that respect the DAG, for a CI
    /// matrix: `{shards, due, groups: [{index, bakes, patterns, waits_on}]}`
    /// (JSON; `--json` or not).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub shards: Option<u16>,
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let format = if args.json { Format::Json } else { args.format };
    let s = match super::session(global) {
        Ok(s) => s,
        Err(e) => {
            if format == Format::Github {
                if let Some(nl) = e.downcast_ref::<csis_ops::NotLoaded>() {
                    print!(
                        "{}",
                        crate::render::github_annotations(
                            &nl.diagnostics,
                            &crate::render::RepoPaths::of_tree(&global.dir)
                        )
                    );
                }
            }
            return Err(e);
        }
    };
    let sel = s.select(&args.patterns)?;
    let force = ForceBake::parse(&args.force_bake);
    // Only the explanations and the markdown table show changed fields.
    let plan = if args.explain || format == Format::Markdown {
        s.plan_explained(&sel, &force)?
    } else {
        s.plan(&sel, &force)?
    };
    let behind = csis_ops::upgrade::behind(&s, &plan);
    let fleet = csis_ops::fleet::plan::fleet_actions(&s.compiled.graph, &plan);
    if let Some(n) = args.shards {
        let split = csis_ops::shards::split(&s.compiled.graph, &plan, n as usize);
        crate::render::json(&split)?;
    } else {
        match format {
            Format::Json => crate::render::write_plan_json(
                &plan,
                args.explain,
                &behind,
                &fleet,
                std::io::stdout().lock(),
            )?,
            Format::Text => {
                for w in &s.compiled.warnings {
                    eprintln!("warning: {w}");
                }
                print!(
                    "{}",
                    crate::render::plan_text(&plan, args.explain, args.all)
                );
                for b in &behind {
                    println!("note: {}", crate::render::upgrade::behind(b));
                }
                if !fleet.is_empty() {
                    let due = fleet.iter().filter(|f| f.due).count();
                    let gated = fleet.iter().filter(|f| f.gated.is_some()).count();
                    println!("{due} of {} fleet node(s) due, {gated} gated", fleet.len());
                }
            }
            Format::Markdown => print!("{}", crate::render::plan_markdown(&plan)),
            Format::Github => {
                print!(
                    "{}",
                    crate::render::github_annotations(
                        &s.tree.warnings,
                        &crate::render::RepoPaths::of_tree(&global.dir)
                    )
                );
                print!("{}", crate::render::plan_github(&plan));
            }
        }
    }
    let code = if args.detailed_exitcode && csis_ops::session::anything_due(&plan) {
        csis_ops::exit::DUE
    } else {
        csis_ops::exit::SUCCESS
    };
    // The process ends here: leave the tree and graph to the exit rather
    // than free them piece by piece.
    std::mem::forget((s, sel, plan));
    Ok(ExitCode::from(code))
}
