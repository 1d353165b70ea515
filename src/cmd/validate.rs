//! `csis validate [--offline] [--json] [--format text|json|github]`: load the tree, report every error
//! and warning together (miette with spans, or JSON), then run the online
//! checks (executables and their version floors, each runtime's
//! `check_online` hook) unless `--offline`.

use std::process::ExitCode;

use csis_schema::{Diagnostic, Severity};
use serde::Serialize;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Skip the checks that need the outside world (executables, daemons, clouds).
    #[arg(long)]
    pub offline: bool,
    /// Print the diagnostics as JSON: `[{file, line, column, path, message, severity}]`.
    #[arg(long)]
    pub json: bool,
    /// How to print the diagnostics: `text` (miette, with spans), `json`
    /// (as `--json`), or `github` (Actions annotations,
    /// `::error file=F,line=L,col=C,title=FIELD::MESSAGE`, on stdout).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// How validate prints its diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Github,
}

#[derive(Serialize)]
struct JsonDiag<'a> {
    file: &'a str,
    line: u32,
    column: u32,
    path: &'a str,
    message: String,
    severity: Severity,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<&'a str>,
}

fn to_json(d: &Diagnostic) -> JsonDiag<'_> {
    JsonDiag {
        file: &d.file,
        line: d.line,
        column: d.column,
        path: &d.path,
        message: d.message.clone(),
        severity: d.severity,
        hint: d.hint.as_deref(),
    }
}

pub fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let opts = global.tree().load_options();
    let (tree, mut diags) = match csis_ops::validate::load(&global.dir, &opts) {
        Ok(t) => {
            let w = t.warnings.clone();
            (Some(t), w)
        }
        Err(d) => (None, d),
    };
    let mut skipped: Vec<String> = Vec::new();
    if let Some(tree) = &tree {
        // launch parameters changed without a replacement (the records)
        diags.extend(csis_ops::fleet::checks::validate_checks(tree)?);
        if args.offline {
            skipped = csis_ops::validate::online_checks_list(tree);
        } else {
            diags.extend(csis_ops::validate::online_checks(tree, &mut skipped));
        }
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    if args.format == Format::Github && !args.json {
        print!(
            "{}",
            crate::render::github_annotations(
                &diags,
                &crate::render::RepoPaths::of_tree(&global.dir)
            )
        );
        for s in &skipped {
            println!("::notice title=skipped online check::{s}");
        }
    } else if args.json || args.format == Format::Json {
        let v: Vec<JsonDiag> = diags.iter().map(to_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        crate::render::print_human(&diags);
        for s in &skipped {
            eprintln!("skipped online check: {s}");
        }
        if errors == 0 {
            if let Some(t) = &tree {
                println!(
                    "{}: ok ({} runtimes, {} OS builders, {} images, {} instances, {} storages; {warnings} warnings{})",
                    global.dir.display(),
                    t.runtimes.len(),
                    t.os_builders.len(),
                    t.images.len(),
                    t.instances.len(),
                    t.storages.len(),
                    if args.offline { ", offline" } else { "" }
                );
            }
        } else {
            eprintln!("{errors} error(s), {warnings} warning(s)");
        }
    }
    Ok(ExitCode::from(if errors > 0 {
        csis_ops::exit::FAILURE
    } else {
        csis_ops::exit::SUCCESS
    }))
}
