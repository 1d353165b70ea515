//! The online checks of `csis validate`: executables on PATH with their
//! version floors, then each runtime's `check_online` hook; and, for
//! `--offline`, the list of what they would ask.

use std::collections::BTreeSet;

use csis_rules::Tree;
use csis_schema::Diagnostic;

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
pub fn online_checks_list(tree: &Tree) -> Vec<String> {
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
        let what = crate::wiring::runtime_type(r)
            .map(|t| t.online_checks)
            .unwrap_or("its online hook");
        out.push(format!("runtime {} ({}): {what}", r.display, r.type_name()));
    }
    out
}

/// What a runtime's `check_online` found, as diagnostics at its entry.
fn findings(
    r: &csis_schema::RuntimeEntry,
    res: csis_runtime::Result<Vec<csis_runtime::OnlineFinding>>,
) -> Vec<Diagnostic> {
    match res {
        Ok(findings) => findings
            .into_iter()
            .map(|f| {
                let path = if f.path.is_empty() {
                    r.origin.path.clone()
                } else {
                    format!("{}.{}", r.origin.path, f.path)
                };
                let d = Diagnostic::at(&r.origin.loc, &path, f.message);
                if f.error {
                    d
                } else {
                    d.warning()
                }
            })
            .collect(),
        Err(e) => vec![Diagnostic::at(
            &r.origin.loc,
            &r.origin.path,
            format!("runtime {}: online check failed: {e}", r.display),
        )],
    }
}

/// The online checks `validate` runs, for the runtimes a build touches
/// (`runtimes`, constructed by the build): the executables those runtimes,
/// the image builders and the mod builders name, with their version
/// floors, then each runtime's `check_online` (AWS: the network verdicts).
/// `csis build` runs them before anything bakes, so a subnet typo is
/// refused before packer starts.
pub async fn online_checks_of(
    tree: &Tree,
    runtimes: &std::collections::BTreeMap<String, csis_runtime::DynRuntime>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut used: BTreeSet<String> = tree
        .runtimes
        .iter()
        .filter(|r| runtimes.contains_key(&r.name))
        .filter_map(|r| r.executable.clone())
        .collect();
    used.extend(
        tree.image_builders
            .iter()
            .filter(|b| runtimes.contains_key(&b.runtime))
            .filter_map(|b| b.executable.clone()),
    );
    used.extend(
        tree.mod_builders
            .iter()
            .filter_map(|b| b.executable.clone()),
    );
    for x in &tree.executables {
        if !used.contains(&x.name) {
            continue;
        }
        if let Err(msg) = csis_rules::tools::check_executable(&x.model) {
            out.push(Diagnostic::at(&x.origin.loc, &x.origin.path, msg));
        }
    }
    for r in &tree.runtimes {
        if let Some(hooks) = runtimes.get(&r.name) {
            out.extend(findings(r, hooks.check_online().await));
        }
    }
    out
}

/// Executables on PATH with their version floors, then each runtime's
/// `check_online` hook.
pub fn online_checks(tree: &Tree, skipped: &mut Vec<String>) -> Vec<Diagnostic> {
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
        match crate::wiring::runtime(tree, &r.name) {
            Err(e) => skipped.push(format!("runtime {} ({}): {e}", r.display, r.type_name())),
            Ok(hooks) => out.extend(findings(r, rt.block_on(hooks.check_online()))),
        }
    }
    out
}
