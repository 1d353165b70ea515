//! The online checks of `csis validate`: executables on PATH with their
//! version floors, then each runtime's `check_online` hook; and, for
//! `--offline`, the list of what they would ask.

use csis_rules::Tree;
use csis_schema::Diagnostic;

/// A version checker of the original: the name it is registered under, its
/// class (named by its parse failure), and how it reads `--version`.
pub struct VersionChecker {
    pub name: &'static str,
    /// The original's class, when its messages name it.
    pub class: Option<&'static str>,
    pub read: fn(&str) -> Option<csis_rules::tools::Version>,
}

fn first_dotted(text: &str) -> Option<csis_rules::tools::Version> {
    csis_rules::tools::Version::find(text)
}

#[cfg(feature = "aws")]
fn aws_cli(text: &str) -> Option<csis_rules::tools::Version> {
    csis_runtime_aws::aws_cli_version(text).and_then(|v| csis_rules::tools::Version::parse(&v))
}

/// Without the aws runtime built in: the same reading (`aws-cli/X.Y.Z`,
/// the first word of the first line), without its crate.
#[cfg(not(feature = "aws"))]
fn aws_cli(text: &str) -> Option<csis_rules::tools::Version> {
    let word = text.lines().next()?.split_whitespace().next()?;
    csis_rules::tools::Version::parse(word.strip_prefix("aws-cli/")?)
}

#[cfg(not(feature = "docker"))]
fn docker_cli(text: &str) -> Option<csis_rules::tools::Version> {
    first_dotted(text)
}

#[cfg(feature = "docker")]
fn docker_cli(text: &str) -> Option<csis_rules::tools::Version> {
    csis_runtime_docker::version::parse_docker_version(text)
        .map(|v| csis_rules::tools::Version(vec![v.major, v.minor, v.patch]))
}

/// The checkers with a name of their own (config.md B.2: packer, tofu,
/// gcloud, aws-cli, ansible-playbook, bash; the docker plugin's docker).
/// Any other type is the generic reader, the first dotted number.
pub const VERSION_CHECKERS: &[VersionChecker] = &[
    VersionChecker {
        name: "aws-cli",
        class: Some("AwsCLIVersionChecker"),
        read: aws_cli,
    },
    VersionChecker {
        name: "docker",
        class: Some("DockerCLIVersionChecker"),
        read: docker_cli,
    },
    VersionChecker {
        name: "packer",
        class: None,
        read: first_dotted,
    },
    VersionChecker {
        name: "tofu",
        class: None,
        read: first_dotted,
    },
    VersionChecker {
        name: "gcloud",
        class: None,
        read: first_dotted,
    },
    VersionChecker {
        name: "ansible-playbook",
        class: None,
        read: first_dotted,
    },
    VersionChecker {
        name: "bash",
        class: None,
        read: first_dotted,
    },
];

/// The checker of an executable, as the original looks it up: by the
/// entry's `name` first, then by its `type` (`default`: the name); the
/// generic reader when neither has one.
/// Load the tree at `dir` (what `csis validate` reports on): the tree and
/// its warnings, or every diagnostic that stops it.
pub fn load(
    dir: &std::path::Path,
    opts: &csis_rules::LoadOptions,
) -> std::result::Result<Tree, Vec<Diagnostic>> {
    csis_rules::load(dir, opts)
}

pub fn checker_of(x: &csis_schema::model::Executable) -> Option<&'static VersionChecker> {
    let by = |n: &str| VERSION_CHECKERS.iter().find(|c| c.name == n);
    by(&x.name).or_else(|| by(x.checker()))
}

/// Check one declared executable with its checker: found, its version
/// read, the declared specifier satisfied. The error is the line
/// `validate` prints at the entry.
pub fn check_executable(
    x: &csis_schema::model::Executable,
) -> Result<csis_rules::tools::Version, String> {
    let probe =
        |bin: &str| csis_runtime::probe::run(bin, &["--version"]).map(|o| o.text().to_string());
    match checker_of(x) {
        Some(c) => csis_rules::tools::check_executable_with(x, c.class, &c.read, &probe),
        None => csis_rules::tools::check_executable_with(x, None, &first_dotted, &probe),
    }
}

/// Every declared executable, checked at its entry (the original checks
/// each one, whether a builder csis runs names it or not).
/// The probes run in parallel, once per process, and are cached under the
/// tree's `.csis/cache/` (`csis_runtime::probe`).
fn executable_checks(tree: &Tree) -> Vec<Diagnostic> {
    use_probe_cache(tree);
    let results: Vec<Result<_, String>> = std::thread::scope(|s| {
        let probes: Vec<_> = tree
            .executables
            .iter()
            .map(|x| s.spawn(|| check_executable(&x.model)))
            .collect();
        probes
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("version probe panicked".into()))
            })
            .collect()
    });
    let mut out = Vec::new();
    for (x, r) in tree.executables.iter().zip(results) {
        if let Err(msg) = r {
            out.push(Diagnostic::at(&x.origin.loc, &x.origin.path, msg));
        }
    }
    out
}

/// Keep this process's version probes under the tree's `.csis/cache/`.
pub fn use_probe_cache(tree: &Tree) {
    csis_runtime::probe::set_cache_dir(&tree.root.join(".csis").join("cache"));
}

/// What `--offline` skips.
pub fn online_checks_list(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for x in &tree.executables {
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
/// (`runtimes`, constructed by the build): every declared executable with
/// its version floor (as the original checks at every run), then each runtime's `check_online` (AWS: the network verdicts).
/// `csis build` runs them before anything bakes, so a subnet typo is
/// refused before packer starts.
pub async fn online_checks_of(
    tree: &Tree,
    runtimes: &std::collections::BTreeMap<String, csis_runtime::DynRuntime>,
) -> Vec<Diagnostic> {
    let mut out = executable_checks(tree);
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
    let mut out = executable_checks(tree);
    let made = crate::wiring::Runtimes::default();
    for r in &tree.runtimes {
        match made.get(tree, &r.name) {
            Err(e) => skipped.push(format!("runtime {} ({}): {e}", r.display, r.type_name())),
            Ok(hooks) => out.extend(findings(r, made.block_on(hooks.check_online()))),
        }
    }
    out
}
