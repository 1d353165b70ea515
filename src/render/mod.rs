//! Rendering shared by several commands: diagnostics, the plan, a runtime's
//! description; one module per operation's report or notice
//! (`src/render/<operation>.rs`): the English of what ops reports as data.

pub mod dispose;
pub mod init;
pub mod inspect;
pub mod lineage;
pub mod notice;
mod plan_json;
pub mod release;
pub mod upgrade;

use csis_ops::build::{NodeKind, Plan, PlannedNode};
use csis_ops::wiring::Shown;
use csis_schema::Diagnostic;
use serde::Serialize;

pub use plan_json::write_plan_json;

/// A report as pretty JSON on stdout (one document, newline-terminated).
pub fn json<T: Serialize>(report: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(report)?);
    Ok(())
}

/// Print diagnostics for people (miette, with source spans).
pub fn print_human(diags: &[Diagnostic]) {
    for d in diags {
        eprintln!("{:?}", d.to_report());
    }
}

fn shown(n: &PlannedNode, all: bool) -> bool {
    all || n.kind == NodeKind::Bake
        || n.kind == NodeKind::Instance
        || n.kind == NodeKind::Storage
        || (n.due && n.kind != NodeKind::Emit && n.kind != NodeKind::Retag)
}

/// The plan for people: one line per bake (and per due release/dispose).
pub fn plan_text(plan: &Plan, explain: bool, all: bool) -> String {
    let mut out = String::new();
    let width = plan
        .nodes
        .iter()
        .filter(|n| shown(n, all))
        .map(|n| n.label.to_string().len())
        .max()
        .unwrap_or(0);
    for n in plan.nodes.iter().filter(|n| shown(n, all)) {
        let mark = if n.due { "bake" } else { "skip" };
        let mark = if n.kind == NodeKind::Bake {
            mark.to_string()
        } else if n.due {
            "run ".into()
        } else {
            "-   ".into()
        };
        out.push_str(&format!(
            "{mark}  {:width$}  {}  {}\n",
            n.label.to_string(),
            n.fingerprint.prefix(12),
            n.reason
        ));
        if explain && n.due && n.kind == NodeKind::Bake {
            if n.changes.is_empty() {
                if n.code == "inputs-changed" {
                    out.push_str(
                        "        (the head record holds no canonical inputs to compare)\n",
                    );
                }
            } else {
                for c in &n.changes {
                    out.push_str(&format!("        {c}\n"));
                }
            }
        }
    }
    let bakes = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Bake)
        .count();
    let due = plan.due_count(NodeKind::Bake.as_str());
    out.push_str(&format!("{due} of {bakes} bake(s) due\n"));
    out
}

/// A Markdown table cell: one line, `|` escaped, at most `max` characters.
fn md_cell(s: &str, max: usize) -> String {
    let one: String = s
        .replace('\r', "")
        .replace('\n', " ")
        .replace('|', "\\|")
        .replace('`', "'");
    if one.chars().count() > max {
        let cut: String = one.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        one
    }
}

/// The plan as a Markdown table for a pull-request comment: one row per
/// bake (image, runtime, due, reason, the fields that changed), due ones
/// first, then a count line.
pub fn plan_markdown(plan: &Plan) -> String {
    let bakes: Vec<&PlannedNode> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Bake)
        .collect();
    let due = bakes.iter().filter(|n| n.due).count();
    let mut out = String::from("### csis plan\n\n");
    out.push_str(&format!("{due} of {} bake(s) due\n\n", bakes.len()));
    if bakes.is_empty() {
        return out;
    }
    out.push_str("| image | runtime | due | reason | change |\n");
    out.push_str("|---|---|---|---|---|\n");
    let rows = bakes
        .iter()
        .filter(|n| n.due)
        .chain(bakes.iter().filter(|n| !n.due));
    for n in rows {
        let changes = if n.changes.is_empty() {
            String::new()
        } else {
            let shown: Vec<String> = n.changes.iter().take(5).map(|c| c.to_string()).collect();
            let more = n.changes.len().saturating_sub(5);
            let mut s = shown
                .iter()
                .map(|c| format!("`{}`", md_cell(c, 120)))
                .collect::<Vec<_>>()
                .join("<br>");
            if more > 0 {
                s.push_str(&format!("<br>(+{more} more)"));
            }
            s
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            md_cell(n.series.as_deref().unwrap_or(n.label.name()), 80),
            md_cell(n.runtime.as_deref().unwrap_or(""), 60),
            if n.due { "**yes**" } else { "no" },
            md_cell(&n.reason, 160),
            changes
        ));
    }
    out
}

/// A GitHub Actions workflow command's data (`%`, CR, LF escaped).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value (also `:` and `,`).
fn gh_prop(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Where annotation paths start: GitHub reads `file=` from the top of the
/// repository, while diagnostics name files from the tree's root. Outside a
/// git work tree paths stay relative to the tree.
pub struct RepoPaths {
    /// The top of the work tree holding the tree (the nearest ancestor with a
    /// `.git` directory or file), canonical.
    top: Option<std::path::PathBuf>,
    /// The tree's root, canonical.
    tree: std::path::PathBuf,
}

impl RepoPaths {
    pub fn of_tree(tree: &std::path::Path) -> RepoPaths {
        let tree = std::fs::canonicalize(tree).unwrap_or_else(|_| tree.to_path_buf());
        let top = tree
            .ancestors()
            .find(|a| a.join(".git").exists())
            .map(|a| a.to_path_buf());
        RepoPaths { top, tree }
    }

    /// A diagnostic's file (relative to the tree, or absolute) as the
    /// repository names it: relative to the top of the work tree when it
    /// lies inside it, else as it was.
    pub fn file(&self, file: &str) -> String {
        use std::path::{Component, Path, PathBuf};
        let Some(top) = &self.top else {
            return file.to_string();
        };
        let joined = self.tree.join(file);
        // `..` resolved by its words (an overlay beside the tree)
        let mut abs = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::ParentDir => {
                    abs.pop();
                }
                Component::CurDir => {}
                c => abs.push(c),
            }
        }
        match Path::new(&abs).strip_prefix(top) {
            Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
            Err(_) => file.to_string(),
        }
    }
}

/// Diagnostics as GitHub Actions annotations, one line each:
/// `::error file=F,line=L,col=C,title=PATH::MESSAGE` (`::warning` for a
/// warning; the message redacted as everywhere), F relative to the top of
/// the repository ([`RepoPaths`]).
pub fn github_annotations(diags: &[Diagnostic], paths: &RepoPaths) -> String {
    let mut out = String::new();
    for d in diags {
        let level = if d.is_error() { "error" } else { "warning" };
        let mut props = Vec::new();
        if !d.file.is_empty() {
            props.push(format!("file={}", gh_prop(&paths.file(&d.file))));
        }
        if d.line > 0 {
            props.push(format!("line={}", d.line));
            if d.column > 0 {
                props.push(format!("col={}", d.column));
            }
        }
        if !d.path.is_empty() {
            props.push(format!("title={}", gh_prop(&d.path)));
        }
        let props = if props.is_empty() {
            String::new()
        } else {
            format!(" {}", props.join(","))
        };
        out.push_str(&format!(
            "::{level}{props}::{}\n",
            gh_data(&csis_schema::secret::redact(&d.message))
        ));
    }
    out
}

/// The due bakes as `::notice` workflow commands (one line each).
pub fn plan_github(plan: &Plan) -> String {
    let mut out = String::new();
    for n in plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Bake && n.due)
    {
        out.push_str(&format!(
            "::notice title={}::{} due: {}\n",
            gh_prop(&n.label.to_string()),
            gh_data(&n.label.to_string()),
            gh_data(&n.reason)
        ));
    }
    out
}

/// `csis runtime describe` for people: one aligned line per field.
pub fn description_text(d: &csis_ops::inspect::Description) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    let default = if d.is_default { " (default)" } else { "" };
    let _ = writeln!(out, "runtime:              {}{default}", d.runtime);
    let _ = writeln!(out, "type:                 {}", d.type_);
    let _ = writeln!(out, "declared at:          {}", d.declared_at);
    if !d.aliases.is_empty() {
        let _ = writeln!(out, "aliases:              {}", d.aliases.join(", "));
    }
    for line in d.shown {
        let _ = match line {
            Shown::Region => writeln!(out, "region:               {}", opt(&d.region)),
            Shown::AccountId => writeln!(out, "account_id:           {}", opt(&d.account_id)),
            Shown::SessionMechanism => {
                writeln!(out, "session_mechanism:    {}", opt(&d.session_mechanism))
            }
            Shown::HostOrContext => writeln!(out, "host/context:         {}", d.address),
            Shown::Repository => writeln!(out, "repository:           {}", opt(&d.repository)),
            Shown::Address => writeln!(out, "address:              {}", d.address),
        };
    }
    let _ = writeln!(out, "default_machine_type: {}", d.default_machine_type);
    let _ = writeln!(out, "ephemeral:            {}", d.ephemeral);
    let keep = d.retention_keep.map(|k| k.to_string());
    let _ = writeln!(
        out,
        "retention_keep:       {}",
        keep.unwrap_or_else(|| "- (keep all)".into())
    );
    let par = d.max_parallel.map(|k| k.to_string());
    let _ = writeln!(
        out,
        "max_parallel:         {}",
        par.unwrap_or_else(|| "- (no per-runtime limit)".into())
    );
    let _ = writeln!(out, "state backend:        {}", opt(&d.state_backend));
    let _ = writeln!(out, "image builders:       {}", list(&d.image_builders));
    let _ = writeln!(out, "base images:          {}", list(&d.base_images));
    let _ = writeln!(out, "images:               {}", list(&d.images));
    out
}
