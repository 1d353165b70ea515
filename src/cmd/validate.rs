//! `csis validate [--offline] [--json]`: load the tree, report every error
//! and warning together (miette with spans, or JSON), then run the online
//! checks (executables and their version floors, each runtime's
//! `check_online` hook) unless `--offline`.

use std::collections::BTreeSet;
use std::process::ExitCode;

use csis_rules::{Diagnostic, Severity, Tree};
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
}

/// The load options every command uses: overlays and undeclares from the
/// global flags, the process environment (and `CSIS_CONFIG_IDENTITY`).
pub fn load_options(global: &GlobalArgs) -> csis_rules::LoadOptions {
    global.tree().load_options()
}

pub use crate::render::print_human;

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
    let opts = load_options(global);
    let (tree, mut diags) = match csis_rules::load(&global.dir, &opts) {
        Ok(t) => {
            let w = t.warnings.clone();
            (Some(t), w)
        }
        Err(d) => (None, d),
    };
    let mut skipped: Vec<String> = Vec::new();
    if let Some(tree) = &tree {
        if args.offline {
            skipped = online_checks_list(tree);
        } else {
            diags.extend(online_checks(tree, &mut skipped));
        }
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    if args.json {
        let v: Vec<JsonDiag> = diags.iter().map(to_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_human(&diags);
        for s in &skipped {
            eprintln!("skipped online check: {s}");
        }
        if errors == 0 {
            if let Some(t) = &tree {
                println!(
                    "{}: ok ({} runtimes, {} OS builders, {} images; {warnings} warnings{})",
                    global.dir.display(),
                    t.runtimes.len(),
                    t.os_builders.len(),
                    t.images.len(),
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

/// The executables the used builders reference (runtime, image, mod builders).
fn used_executables(tree: &Tree) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    s.extend(tree.runtimes.iter().filter_map(|r| r.executable.clone()));
    s.extend(
        tree.image_builders
            .iter()
            .filter_map(|b| b.executable.clone()),
    );
    s.extend(
        tree.mod_builders
            .iter()
            .filter_map(|b| b.executable.clone()),
    );
    s
}

/// What `--offline` skips.
fn online_checks_list(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for e in used_executables(tree) {
        if let Some(x) = tree.executable(&e) {
            out.push(format!(
                "executable {} (`{} --version`{})",
                x.model.name,
                x.model.binary(),
                x.model
                    .version
                    .as_deref()
                    .map(|v| format!(" against `{v}`"))
                    .unwrap_or_default()
            ));
        }
    }
    for r in &tree.runtimes {
        let what = csis_ops::wiring::runtime_type(r)
            .map(|t| t.online_checks)
            .unwrap_or("its online hook");
        out.push(format!("runtime {} ({}): {what}", r.display, r.type_name()));
    }
    out
}

/// Executables on PATH with their version floors, then each runtime's
/// `check_online` hook.
fn online_checks(tree: &Tree, skipped: &mut Vec<String>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let used = used_executables(tree);
    for x in &tree.executables {
        if !used.contains(&x.name) {
            continue;
        }
        if let Err(msg) = csis_rules::tools::check_executable(&x.model) {
            out.push(Diagnostic::at(&x.origin.loc, &x.origin.path, msg));
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            skipped.push(format!("every runtime check (no async runtime: {e})"));
            return out;
        }
    };
    for r in &tree.runtimes {
        match csis_ops::wiring::runtime(tree, &r.name) {
            Err(e) => skipped.push(format!("runtime {} ({}): {e}", r.display, r.type_name())),
            Ok(hooks) => match rt.block_on(hooks.check_online()) {
                Ok(findings) => {
                    for f in findings {
                        let path = if f.path.is_empty() {
                            r.origin.path.clone()
                        } else {
                            format!("{}.{}", r.origin.path, f.path)
                        };
                        let d = Diagnostic::at(&r.origin.loc, &path, f.message);
                        out.push(if f.error { d } else { d.warning() });
                    }
                }
                Err(e) => out.push(Diagnostic::at(
                    &r.origin.loc,
                    &r.origin.path,
                    format!("runtime {}: online check failed: {e}", r.display),
                )),
            },
        }
    }
    out
}
