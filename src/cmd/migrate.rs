//! Pointers for a team coming from the original (cs-image-system 0.1.1):
//! a command line of the original that csis cannot parse (a command csis
//! does not have, a global flag it does not take, a flag its command does
//! not know) is answered with one line naming what to run instead, and
//! exit 2. Consulted only when clap refuses the arguments, so nothing csis
//! parses is ever shadowed. docs/migrating.md holds the whole map.

/// The exit code of a pointer: usage.
pub const EXIT: u8 = 2;

/// Where the whole map is.
const DOC: &str = "see docs/migrating.md";

/// csis's global options that take a value (kept as they are).
const CSIS_GLOBAL_VALUES: &[&str] = &[
    "-C",
    "--directory",
    "--overlay",
    "--undeclare",
    "--meta-state",
];

/// csis commands that take `--dry-run` themselves.
const TAKES_DRY_RUN: &[&[&str]] = &[
    &["build"],
    &["upgrade", "image"],
    &["upgrade", "instance"],
    &["release"],
    &["dispose", "image"],
    &["lineage", "relabel"],
    &["lineage", "restamp"],
    &["reencrypt"],
    &["state", "pull"],
    &["state", "push"],
];

/// What the original's global options said.
#[derive(Debug, Clone, Default)]
struct Globals {
    /// `csis` plus the options csis shares (`-C DIR` for `--root-dir DIR`).
    prefix: Vec<String>,
    /// `--dry-run` / `--no-dry-run` (the original's default: a dry run).
    dry_run: Option<bool>,
    base_only: bool,
    /// A global of the original csis has no use for (`--locked`, `--verbose`).
    dropped: Vec<String>,
}

fn quote(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if w.is_empty()
                || w.contains(|c: char| c.is_whitespace() || "'\"$*?[]{}()<>|&;`\\".contains(c))
            {
                format!("'{}'", w.replace('\'', r"'\''"))
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The pointer for `args` (without the program name), or None when they
/// are not the original's (clap's own error is the answer then).
pub fn pointer(args: &[String]) -> Option<String> {
    let mut g = Globals {
        prefix: vec!["csis".into()],
        ..Default::default()
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let value = |i: &mut usize| -> Option<String> {
            if let Some(v) = &inline {
                return Some(v.clone());
            }
            *i += 1;
            args.get(*i).cloned()
        };
        match flag {
            "--root-dir" => {
                let v = value(&mut i)?;
                g.prefix.push("-C".into());
                g.prefix.push(v);
            }
            f if CSIS_GLOBAL_VALUES.contains(&f) => {
                let v = value(&mut i)?;
                g.prefix.push(f.into());
                g.prefix.push(v);
            }
            "--dry-run" => g.dry_run = Some(true),
            "--no-dry-run" => g.dry_run = Some(false),
            "--base-only" => g.base_only = true,
            "--locked" | "--verbose" | "--no-verbose" => g.dropped.push(flag.into()),
            "--install-completion" | "--show-completion" => {
                return Some(format!(
                    "csis has no `{flag}`: print the script with `csis completions bash|zsh|fish` and source it ({DOC})"
                ))
            }
            f if f.starts_with('-') => return None,
            _ => break,
        }
        i += 1;
    }
    let rest = &args[i.min(args.len())..];
    let Some(command) = rest.first() else {
        return globals_only(&g);
    };
    let rest = &rest[1..];
    let line = match command.as_str() {
        "run" => run(&g, rest),
        "build-all" => Some(build_line(&g, &[], &[], false, "build-all")),
        "generate" => Some(build_line(&g, &[], &[], true, "generate")),
        "init-config" => Some(init_config(rest)),
        "bootstrap" => Some(format!(
            "csis has no `bootstrap` interview (it makes no identity, federation or state bucket): write a starter tree with `csis init DIR --from aws` ({DOC})"
        )),
        "materialize" => Some(format!(
            "csis has no `materialize`: it writes no ENC[...] into generated/ (a secret reaches ansible through a 0600 file under .csis/bake-vars/), so a root runs as it is; `csis decrypt` opens one marker ({DOC})"
        )),
        "state-migration" => Some(format!(
            "csis has no `state-migration`: a root's terraform state moves with tofu itself (`tofu init -migrate-state` in its directory under generated/; meta-state/state-locations.yaml names each root's); csis's own records move with `--meta-state URL` and `csis state push` ({DOC})"
        )),
        "prune-attachments" => Some(format!(
            "csis has no `prune-attachments`: an identity root's sequence in `csis build` is init, plan, the gate, apply; prune a group's attachments with tofu in its directory under generated/identity/ ({DOC})"
        )),
        "gate-plan" => Some(format!(
            "csis has no `gate-plan`: `csis build` gates every root's plan itself (a planned delete no operation asked for is refused, naming its address); `csis plan --detailed-exitcode` says whether anything is due (exit 2) ({DOC})"
        )),
        "apply-check" => Some(format!(
            "csis has no `apply-check`: it writes no deferred apply scripts; `csis build` reads apply_<lifecycle> from the tree again right before each root's apply, and `--dry-run` is a flag of each command ({DOC})"
        )),
        "identity-attributes" => Some(format!(
            "csis has no `identity-attributes`: `csis build` runs the identity roots where apply_identity allows, and the opa-groups root asks OPA for each group's gid itself (`csis identity export-gids`, its data \"external\" program) ({DOC})"
        )),
        "unmount" => Some(format!(
            "csis has no `unmount`: a storage leaves a machine with the machine (a replacement, a decommission); `csis build` does both ({DOC})"
        )),
        "workload" => Some(format!(
            "csis has no `workload`: it needs no OPA workload login; CI's AWS credentials come from GitHub's OIDC role (examples/ci/csis.yml) ({DOC})"
        )),
        "forget" => Some(format!(
            "csis has no `forget`: an instance the tree declares no more is decommissioned by `csis build` (its pin, launch parameters and generation forgotten, journalled) where apply_instances allows ({DOC})"
        )),
        "cleanup" => Some(format!(
            "csis has no `cleanup` (retired in the original too): `csis dispose image --retention` applies the declared retention, `csis dispose image --runtime RT --all` removes every recorded build of a runtime, `csis empty --runtime RT` proves it empty ({DOC})"
        )),
        "verify" => verify(&g, rest),
        _ => existing(&g, command, rest),
    }?;
    Some(line)
}

/// Only global options were given (`csis --no-dry-run`).
fn globals_only(g: &Globals) -> Option<String> {
    if let Some(d) = g.dropped.first() {
        return Some(dropped_line(d));
    }
    match g.dry_run {
        Some(true) => Some(format!(
            "csis has no global `--dry-run`: it is a flag of each command that acts (`csis build --dry-run`, `csis dispose image --dry-run`, ...) ({DOC})"
        )),
        Some(false) => Some(format!(
            "csis has no `--no-dry-run`: its commands act by default, and `--dry-run` is a flag of each command ({DOC})"
        )),
        None if g.base_only => Some(format!(
            "csis has no `--base-only`: the base images are the OS builders, `csis build '//os/...'` ({DOC})"
        )),
        None => None,
    }
}

fn dropped_line(flag: &str) -> String {
    match flag {
        "--locked" => format!(
            "csis has no `--locked`: it runs no tofu, and takes its own tree lock (a lease per series and runtime on a shared store); drop the flag ({DOC})"
        ),
        _ => format!(
            "csis has no `{flag}`: a build shows each bake's progress and keeps its log under .csis/logs/<run>/; `--json` prints the events ({DOC})"
        ),
    }
}

/// `csis build` for the original's selection (`patterns`; none: `//...`),
/// a dry run unless `--no-dry-run` was given (the original's default),
/// `plan` when nothing would be applied.
fn build_line(
    g: &Globals,
    patterns: &[String],
    extra: &[String],
    generate_only: bool,
    what: &str,
) -> String {
    let mut words = g.prefix.clone();
    let dry = generate_only || g.dry_run != Some(false);
    words.push("build".into());
    words.extend(extra.iter().cloned());
    if dry {
        words.push("--dry-run".into());
    }
    if patterns.is_empty() {
        words.push(if g.base_only { "//os/..." } else { "//..." }.into());
    } else {
        words.extend(patterns.iter().cloned());
    }
    let mut line = format!("csis has no `{what}`: run `{}`", quote(&words));
    if dry {
        line.push_str(" (the original's default was a dry run; without --dry-run it bakes)");
    }
    line.push_str(&format!(" ({DOC})"));
    line
}

/// `run [LIFECYCLES] [--all] [--only X] [--only-runtime RT] ...`
fn run(g: &Globals, rest: &[String]) -> Option<String> {
    let mut g = g.clone();
    let g = &mut g;
    let mut patterns: Vec<String> = Vec::new();
    let mut force: Vec<String> = Vec::new();
    let mut only_runtime: Option<String> = None;
    let mut only: Vec<String> = Vec::new();
    let mut no_apply = false;
    let mut lifecycles: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = || -> Option<String> {
            if let Some(v) = &inline {
                return Some(v.clone());
            }
            i += 1;
            rest.get(i).cloned()
        };
        match flag {
            "--all" => lifecycles.push("all".into()),
            "--apply" | "--commit" | "--no-commit" | "--state-query" | "--allow-unscoped-bakes" => {}
            "--no-apply" => no_apply = true,
            // the original's globals, written after the command
            "--dry-run" => g.dry_run = Some(true),
            "--no-dry-run" => g.dry_run = Some(false),
            "--base-only" => g.base_only = true,
            "--no-state-query" => {}
            "--only" => only.push(value()?),
            "--only-runtime" => only_runtime = Some(value()?),
            "--apply-runtime" => {
                let rt = value()?;
                only_runtime.get_or_insert(rt);
            }
            "--force-bake" => force.push(value()?),
            "--migrate-state" => {
                return Some(format!(
                    "csis has no `run --migrate-state`: a root's terraform state moves with tofu itself (`tofu init -migrate-state` in its directory under generated/) ({DOC})"
                ))
            }
            "-h" | "--help" => {}
            f if f.starts_with('-') => return None,
            lc => lifecycles.push(lc.to_string()),
        }
        i += 1;
    }
    for lc in &lifecycles {
        match lc.as_str() {
            "all" | "release" | "retention" => {}
            "base-image" => patterns.push("//os/...".into()),
            "instance-image" => patterns.push("//images/...".into()),
            "identity" | "storage" => {}
            other => {
                return Some(format!(
                    "`{other}` is no lifecycle of the original (identity storage base-image instance-image release retention, or all); csis selects by pattern: `csis build //...` ({DOC})"
                ))
            }
        }
    }
    let only_names: Vec<&String> = only.iter().filter(|o| o.as_str() != "none").collect();
    if !only.is_empty() && only_names.is_empty() {
        return Some(format!(
            "csis has no `run --only none`: it has no terraform roots to run without a bake; `csis plan` shows what is due ({DOC})"
        ));
    }
    if !only_names.is_empty() {
        patterns = only_names
            .iter()
            .map(|o| match o.split_once('@') {
                Some((n, rt)) => format!("//images/{n}@{rt}"),
                None => match &only_runtime {
                    Some(rt) => format!("//images/{o}@{rt}"),
                    None => format!("//images/{o}"),
                },
            })
            .collect();
    } else if let Some(rt) = &only_runtime {
        if patterns.is_empty() {
            patterns.push(format!("@{rt}"));
        } else {
            patterns = patterns.iter().map(|p| format!("{p}@{rt}")).collect();
        }
    } else if g.base_only && patterns.is_empty() {
        patterns.push("//os/...".into());
    }
    if no_apply {
        let mut words = g.prefix.clone();
        words.push("plan".into());
        if patterns.is_empty() {
            words.push("//...".into());
        }
        words.extend(patterns.iter().cloned());
        return Some(format!(
            "csis has no `run --no-apply`: run `{}` (what is due and why; nothing written) ({DOC})",
            quote(&words)
        ));
    }
    let extra: Vec<String> = force
        .iter()
        .flat_map(|f| ["--force-bake".to_string(), f.clone()])
        .collect();
    Some(build_line(g, &patterns, &extra, false, "run"))
}

/// `init-config DEST [--from S] [--force]`
fn init_config(rest: &[String]) -> String {
    let mut dest = None;
    let mut from = "aws";
    let mut i = 0;
    while i < rest.len() {
        match rest[i].as_str() {
            "--from" => {
                i += 1;
                from = match rest.get(i).map(String::as_str) {
                    Some("standard-gce") => "gce",
                    _ => "aws",
                };
            }
            "--force" => {}
            d if !d.starts_with('-') => dest = Some(d.to_string()),
            _ => {}
        }
        i += 1;
    }
    let dest = dest.unwrap_or_else(|| "DIR".into());
    if from == "gce" {
        return format!(
            "csis has no `init-config`, and no GCE starter (its gcloud runtime cannot bake in csis yet): `csis init {} --from aws|docker|dummy` ({DOC})",
            quote(&[dest])
        );
    }
    format!(
        "csis has no `init-config`: run `csis init {} --from aws` (or `--from docker`, `--from dummy`); it writes the tree, never over an existing cfg/ ({DOC})",
        quote(&[dest])
    )
}

/// `verify login`, `verify assert` (csis has `verify instance`).
fn verify(g: &Globals, rest: &[String]) -> Option<String> {
    match rest.first().map(String::as_str) {
        Some("login") => Some(format!(
            "csis has no `verify login`: it logs into no instance over sft; `csis verify instance [RT] NAME` verifies a launched one ({DOC})"
        )),
        Some("assert") => Some(format!(
            "csis has no `verify assert`: `csis verify instance [RT] NAME` exits 1 on a failed verification itself (`--record-only` records it and exits 0) ({DOC})"
        )),
        _ => existing(g, "verify", rest),
    }
}

/// A command csis has, given a flag of the original's it does not take,
/// or the original's global options: the csis command line without them.
fn existing(g: &Globals, command: &str, rest: &[String]) -> Option<String> {
    let mut path: Vec<&str> = vec![command];
    if let Some(sub) = rest.first().filter(|s| !s.starts_with('-')) {
        path.push(sub);
    }
    let known = [
        "validate",
        "upgrade",
        "preflight",
        "encrypt",
        "decrypt",
        "mask",
        "public-safe",
        "reencrypt",
        "release",
        "empty",
        "runtime",
        "lineage",
        "verify",
        "dispose",
        "state",
        "build",
        "plan",
        "init",
        "graph",
        "watch",
        "revoke",
        "builds",
        "test",
        "completions",
        "man",
    ];
    if !known.contains(&command) {
        return None;
    }
    let mut words = g.prefix.clone();
    words.push(command.into());
    let mut why: Option<String> = None;
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        match a {
            "--commit" => {
                why.get_or_insert_with(|| {
                    "csis has no `--commit`: it records as it goes and commits nothing; commit meta-state/ (and generated/, if you keep it) with git".into()
                });
            }
            "--no-commit" => {
                why.get_or_insert_with(|| {
                    "csis has no `--no-commit`: it never commits; drop the flag".into()
                });
            }
            "--expect-build" if path == ["verify", "instance"] => {
                why.get_or_insert_with(|| "csis calls `--expect-build` `--expect`".into());
                words.push("--expect".into());
            }
            "--storages" | "--no-storages" | "--images" | "--no-images"
                if path == ["state", "import"] =>
            {
                why.get_or_insert_with(|| {
                    format!("csis has no `state import {a}`: it always adopts images, and the fleet with `--instances` / `--storages`")
                });
                if a == "--no-images" {
                    return Some(format!(
                        "csis has no `state import --no-images`: it always adopts images (`--instances` / `--storages` add the fleet) ({DOC})"
                    ));
                }
            }
            _ => words.push(a.to_string()),
        }
        i += 1;
    }
    if let Some(d) = g.dropped.first() {
        why.get_or_insert_with(|| {
            dropped_line(d)
                .trim_end_matches(&format!(" ({DOC})"))
                .to_string()
        });
    }
    let takes_dry = TAKES_DRY_RUN.iter().any(|p| path.starts_with(p));
    match g.dry_run {
        Some(true) => {
            why.get_or_insert_with(|| {
                "csis has no global `--dry-run`: it is a flag of each command".into()
            });
            if takes_dry && !words.iter().any(|w| w == "--dry-run") {
                words.push("--dry-run".into());
            }
        }
        Some(false) => {
            why.get_or_insert_with(|| {
                "csis has no `--no-dry-run`: its commands act by default".into()
            });
        }
        None => {}
    }
    if g.base_only {
        why.get_or_insert_with(|| {
            "csis has no `--base-only`: the base images are the OS builders (`//os/...`)".into()
        });
    }
    let why = why?;
    Some(format!("{why}: run `{}` ({DOC})", quote(&words)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<String> {
        pointer(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn run_maps_to_build() {
        let l = p("--root-dir . --locked --no-dry-run run base-image instance-image release retention --only-runtime aws-main --commit").unwrap();
        assert!(
            l.contains("run `csis -C . build //os/...@aws-main //images/...@aws-main`"),
            "{l}"
        );
        let l = p("run --all").unwrap();
        assert!(l.contains("`csis build --dry-run //...`"), "{l}");
        let l = p("--no-dry-run run --all --commit").unwrap();
        assert!(l.contains("`csis build //...`"), "{l}");
        let l = p("run --only team-node --no-dry-run").unwrap();
        assert!(l.contains("//images/team-node"), "{l}");
        let l = p("run --all --no-apply").unwrap();
        assert!(l.contains("`csis plan //...`"), "{l}");
    }

    #[test]
    fn globals_before_a_csis_command() {
        let l = p("--no-dry-run dispose image --runtime aws-main --all --commit").unwrap();
        assert!(
            l.contains("`csis dispose image --runtime aws-main --all`"),
            "{l}"
        );
        let l = p("--dry-run lineage relabel --runtime aws-main").unwrap();
        assert!(
            l.contains("`csis lineage relabel --runtime aws-main --dry-run`"),
            "{l}"
        );
        assert_eq!(
            p("validate --offline"),
            None,
            "not the original's: clap answers"
        );
        assert_eq!(p("frobnicate"), None);
    }
}
