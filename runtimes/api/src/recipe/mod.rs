//! The recipe of a bake and its one lowering.
//!
//! A bake's recipe is what the tree declares for it: the base image's OS
//! update policy, admin user, identity and storage prerequisites (a base
//! image), or the modifications, group activation and local modification
//! bundle (an instance image), and the in-bake verification of both.
//! [`lower`] turns it into an ordered list of [`Step`]s, each with its POSIX
//! sh text. Every runtime and image builder consumes these steps: the docker
//! runtime executes them in its bake container, the packer builders
//! (`packer-docker`, `packer-ebs`) render them as provisioners. No runtime
//! writes a bake step of its own except what its [`Target`] supplies (the
//! settle lines of its machines, its session agent).
//!
//! Quoting: [`sq`] is the one shell quoting function. Lines land in HCL as
//! string literals written by hcl-rs, whose formatter escapes `${` to `$${`
//! and `%{` to `%%{` (packer's template markers), so the lines here are
//! plain shell and stay so.

use std::collections::BTreeMap;

use crate::{BakeRequest, BakeStep};

mod base;
mod bundle;
mod files;
mod instance;
mod settle;
mod shell;
mod types;
mod verify;

pub use base::{admin_user_lines, identity_lines, package_manager_of, storage_step, update_lines};
use base::{admin_verify_lines, identity_verify_lines};
use bundle::{bundle_files, read, rel_of};
pub use files::{private_vars, remove_private_vars, write_if_changed};
use instance::activation_verify_lines;
pub use instance::{activation_lines, ansible_python_lines, ensure_lines, ANSIBLE_PYTHON};
pub use settle::{install_sudo_python_lines, settle_lines};
pub use shell::{execute_command, script_of, sq, STEP_EXECUTE_COMMAND};
use shell::{py_list, py_map};
pub use types::{
    BaseRecipe, BundleMod, EmittedFile, GroupActivation, IdentityPrereq, ImageRecipe, Lowered,
    Recipe, RequiredPlugin, SessionAgent, Step, StepKind, StoragePrereq, Target, UpdateRecipe,
};
pub use verify::test_line;
use verify::verify_step;

fn shell(lines: Vec<String>) -> StepKind {
    StepKind::Shell {
        lines,
        runner: true,
        env: Vec::new(),
        execute_command: None,
        private: None,
    }
}

/// The first step of a bake or a mod test: the machine settles.
fn settle_step(t: &Target, machine: &str) -> Step {
    Step {
        comment: format!(
            "before anything else: the {machine} settles ({})",
            t.runtime
        ),
        kind: StepKind::Shell {
            lines: settle_lines(t),
            runner: false,
            env: Vec::new(),
            execute_command: None,
            private: None,
        },
    }
}

/// The ordered steps of a bake (emission.md §2.1), for one runtime: the
/// machine settles, then a base's steps ([`base_steps`]) or an image's
/// ([`image_steps`]); a step holding a secret gets its private file.
pub fn lower(req: &BakeRequest, t: &Target) -> std::io::Result<Lowered> {
    let mut steps = vec![settle_step(t, "build machine")];
    let mut files = Vec::new();
    // steps whose lines hold a secret the registry cannot see in them
    let mut forced = std::collections::BTreeSet::new();
    match &req.recipe.base {
        Some(b) => base_steps(req, t, b, &mut steps),
        None => image_steps(req, t, &mut steps, &mut files, &mut forced)?,
    }
    privatize(req, &mut steps, &forced)?;
    let assertions = steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Verify { assertions, .. } => *assertions,
            _ => 0,
        })
        .sum();
    // one copy of each file (two mods may name the same script)
    let mut seen = BTreeMap::new();
    files.retain(|f| seen.insert(f.rel.clone(), ()).is_none());
    Ok(Lowered {
        steps,
        files,
        assertions,
    })
}

/// A base's steps: the OS update, the admin user, each identity's and
/// storage's prerequisites, the session agent, the verification.
fn base_steps(req: &BakeRequest, t: &Target, b: &BaseRecipe, steps: &mut Vec<Step>) {
    let image = &req.series;
    if let Some(lines) = update_lines(t, b) {
        steps.push(Step {
            comment: format!(
                "OS update for base image {image} (policy={}, packages={}, exclude={}, pin={}, {})",
                b.update.policy,
                py_list(&b.update.packages),
                py_list(&b.update.exclude),
                py_map(&b.update.pin),
                b.family
            ),
            kind: shell(lines),
        });
    }
    steps.push(Step {
        comment: format!(
            "admin user {} ({} public key(s))",
            b.admin_user,
            b.admin_public_keys.len()
        ),
        kind: shell(admin_user_lines(t, b)),
    });
    for p in &b.identity {
        steps.push(Step {
            comment: format!("identity type '{}' prerequisites, dormant", p.identity_type),
            kind: shell(identity_lines(t, b, p)),
        });
    }
    for p in &b.storage {
        steps.push(storage_step(t, b, p));
    }
    let mut verify = admin_verify_lines(t, b);
    for p in &b.identity {
        verify.extend(identity_verify_lines(p));
    }
    if let Some(a) = &t.session_agent {
        steps.push(Step {
            comment: format!("debug session mechanism ({})", a.mechanism),
            kind: shell(a.install.clone()),
        });
        verify.extend(a.verify.iter().cloned());
    }
    if let Some(v) = verify_step("base image", image, verify, &req.tests) {
        steps.push(v);
    }
}

/// An image's steps: its modifications, its group's activation, the local
/// modification bundle, the verification.
fn image_steps(
    req: &BakeRequest,
    t: &Target,
    steps: &mut Vec<Step>,
    files: &mut Vec<EmittedFile>,
    forced: &mut std::collections::BTreeSet<usize>,
) -> std::io::Result<()> {
    let image = &req.series;
    mod_steps(req, t, steps, files, forced)?;
    let img = req.recipe.image.clone().unwrap_or_default();
    let mut verify = Vec::new();
    if let Some(g) = &img.group {
        steps.push(Step {
            comment: format!(
                "identity activation for owning group '{}' ({})",
                g.group, g.identity_type
            ),
            kind: shell(activation_lines(t, image, g)),
        });
        verify.extend(activation_verify_lines(g));
    }
    bundle_steps(req, t, &img, steps, files)?;
    if let Some(v) = verify_step("instance image", image, verify, &req.tests) {
        steps.push(v);
    }
    Ok(())
}

/// The local modification bundle (`/opt/csis/mods`, `csis-mods`): its files
/// uploaded, those holding a secret line on their own, readable by root
/// only.
fn bundle_steps(
    req: &BakeRequest,
    t: &Target,
    img: &ImageRecipe,
    steps: &mut Vec<Step>,
    files: &mut Vec<EmittedFile>,
) -> std::io::Result<()> {
    let image = &req.series;
    let (bundle, private) = bundle_files(t, req, img)?;
    files.extend(bundle);
    steps.push(Step {
        comment: format!(
            "local modification bundle for {image} -> /opt/csis/mods (re-run with `csis-mods rerun`)"
        ),
        kind: StepKind::Shell {
            lines: vec!["mkdir -p /tmp/csis-mods".into()],
            runner: false,
            env: Vec::new(),
            execute_command: None,
            private: None,
        },
    });
    steps.push(Step {
        comment: String::new(),
        kind: StepKind::Upload {
            rel: format!("csis-mods/{image}/"),
            destination: "/tmp/csis-mods".into(),
        },
    });
    // The bundle's files that hold a secret line (a mod's inline.sh)
    // are written outside the emission, uploaded on their own, and
    // readable by root only on the image.
    let mut only_root = Vec::new();
    if !private.is_empty() {
        let _ = std::fs::remove_dir_all(files::private_path(req, "csis-mods"));
        for f in &private {
            files::private_file(req, &format!("csis-mods/{}", f.rel), &f.content)?;
            let on_image = format!("/opt/csis/mods/{}", f.rel);
            // the upload carries its directories' 0700: the bundle's stay 0755
            let dir = on_image
                .rsplit_once('/')
                .map_or("/opt/csis/mods", |(d, _)| d);
            only_root.push(t.su(&format!(
                "chmod 0755 /opt/csis/mods {} && {}",
                sq(dir),
                t.su(&format!("chmod 0600 {}", sq(&on_image)))
            )));
        }
        steps.push(Step {
            comment: String::new(),
            kind: StepKind::Upload {
                rel: format!("{}/", files::private_path(req, "csis-mods").display()),
                destination: "/tmp/csis-mods".into(),
            },
        });
    }
    let mut install = vec![
        format!(
            "{} && {}",
            t.su("rm -rf /opt/csis/mods"),
            t.su("mkdir -p /opt/csis")
        ),
        t.su("mv /tmp/csis-mods /opt/csis/mods"),
        format!(
            "{} && {} && {}",
            t.su("mkdir -p /usr/local/bin"),
            t.su("cp /opt/csis/mods/csis-mods /usr/local/bin/csis-mods"),
            t.su("chmod 0755 /usr/local/bin/csis-mods")
        ),
        t.su("chmod -R go-w /opt/csis/mods"),
    ];
    install.extend(only_root);
    steps.push(Step {
        comment: String::new(),
        kind: StepKind::Shell {
            lines: install,
            runner: false,
            env: Vec::new(),
            execute_command: None,
            private: None,
        },
    });
    Ok(())
}

/// Does an `ensure:` hold a secret (a file's path or content)?
fn ensure_has_secret(e: &crate::Ensure) -> bool {
    use csis_schema::secret::contains;
    e.files
        .iter()
        .any(|f| contains(&f.content) || contains(&f.path))
        || e.packages.iter().any(|p| contains(p))
        || e.services.iter().any(|x| contains(x))
        || e.commands
            .iter()
            .any(|c| contains(&c.run) || c.unless.as_deref().is_some_and(contains))
}

/// A step whose lines (or `env`) hold a secret, or whose index is in
/// `forced`, gets its `private` file: `.csis/bake-vars/<bake>/step-NN.sh`,
/// mode 0600, the step's script with its `env` as `export` lines first (a
/// [`StepKind::Scripts`] whose `env` holds a secret becomes the shell
/// lines that run each script file, [`run_script_line`]). A
/// packer root names that file (`scripts`) instead of writing the lines
/// in its HCL; the bake container runs the lines from memory.
fn privatize(
    req: &BakeRequest,
    steps: &mut [Step],
    forced: &std::collections::BTreeSet<usize>,
) -> std::io::Result<()> {
    use csis_schema::secret::contains;
    for (i, step) in steps.iter_mut().enumerate() {
        if let StepKind::Scripts {
            scripts,
            runner,
            env,
            execute_command,
        } = &step.kind
        {
            if env.iter().any(|e| contains(e)) {
                // packer would write `env` in the HCL beside `scripts`: the
                // step becomes the lines that run each script, in order,
                // and so gets its private file like any other
                let mut lines = Vec::new();
                for (_, abs) in scripts {
                    lines.push(run_script_line(&read(abs)?));
                }
                step.kind = StepKind::Shell {
                    lines,
                    runner: *runner,
                    env: env.clone(),
                    execute_command: execute_command.clone(),
                    private: None,
                };
            }
        }
        let (lines, env, private) = match &mut step.kind {
            StepKind::Shell {
                lines,
                env,
                private,
                ..
            } => (lines, env.as_slice(), private),
            StepKind::Verify { lines, private, .. } => (lines, &[][..], private),
            _ => continue,
        };
        let secret = forced.contains(&i)
            || lines.iter().any(|l| contains(l))
            || env.iter().any(|e| contains(e));
        if !secret {
            continue;
        }
        let mut script = Vec::new();
        for kv in env {
            match kv.split_once('=') {
                Some((k, v)) => script.push(format!("export {k}={}", sq(v))),
                None => script.push(format!("export {kv}")),
            }
        }
        script.extend(lines.iter().cloned());
        let path = files::private_file(
            req,
            &format!("step-{:02}.sh", i + 1),
            script_of(&script).as_bytes(),
        )?;
        *private = Some(path);
    }
    Ok(())
}

/// The mod builder's `extra_arguments`, each `-e`/`--extra-vars` value
/// that holds a secret replaced by `@<file>`: the vars as JSON in a 0600
/// file under `.csis/bake-vars/<bake>/` (as a secret `config:` is). The
/// loader refuses a secret anywhere else among them.
fn private_extra_arguments(
    req: &BakeRequest,
    module: &str,
    args: &[String],
) -> std::io::Result<Vec<String>> {
    use csis_schema::secret::contains;
    let mut out = Vec::with_capacity(args.len());
    let mut n = 0;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (flag, value) = if (a == "-e" || a == "--extra-vars") && i + 1 < args.len() {
            i += 1;
            (Some(a.as_str()), args[i].as_str())
        } else if let Some(v) = a.strip_prefix("--extra-vars=") {
            (None, v)
        } else {
            (None, a.as_str())
        };
        i += 1;
        let vars = (value.len() != a.len() || flag.is_some()) && contains(value);
        if !vars {
            out.extend(flag.map(str::to_string));
            out.push(value.to_string());
            continue;
        }
        n += 1;
        let text = if value.trim_start().starts_with(['{', '[']) {
            // JSON or YAML, as ansible reads it
            value.to_string()
        } else {
            let mut map = serde_json::Map::new();
            for w in kv_words(value) {
                let Some((k, v)) = w.split_once('=') else {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("mod {module}: an extra_arguments `-e` value holding a secret is not key=value words"),
                    ));
                };
                map.insert(k.to_string(), serde_json::Value::String(v.to_string()));
            }
            serde_json::Value::Object(map).to_string()
        };
        let path = private_vars(req, &format!("{module}-extra-vars-{n}"), &text)?;
        out.push("-e".into());
        out.push(format!("@{}", path.display()));
    }
    Ok(out)
}

/// The words of an ansible `key=value` string: split at white space
/// outside quotes, each quote pair removed (`msg='a b'` is `msg=a b`).
fn kv_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One line that runs a script file as packer's `scripts` does (written
/// out, made executable, run by its own `#!`), its exit status the step's.
fn run_script_line(content: &[u8]) -> String {
    format!(
        "f=$(mktemp) && printf '%s' {} | base64 -d > \"$f\" && chmod +x \"$f\" && \"$f\"; rc=$?; rm -f \"$f\"; [ \"$rc\" = 0 ] || exit \"$rc\"",
        sq(&shell::base64(content))
    )
}

/// The steps of the request's modifications, in declared order (what
/// [`lower`] runs between the settle step and the bundle).
fn mod_steps(
    req: &BakeRequest,
    t: &Target,
    steps: &mut Vec<Step>,
    files: &mut Vec<EmittedFile>,
    forced: &mut std::collections::BTreeSet<usize>,
) -> std::io::Result<()> {
    let pm = req.package_manager.as_deref().unwrap_or("dnf");
    for step in &req.steps {
        match step {
            BakeStep::Ansible {
                name,
                playbooks,
                extra_arguments,
                binary,
                extra_vars,
            } => {
                steps.push(Step {
                    comment: format!(
                        "Modifications for {name} of type {}",
                        step.kind().row().comment
                    ),
                    kind: shell(ansible_python_lines(t, pm)),
                });
                let mut args = vec![
                    "-e".to_string(),
                    format!("ansible_python_interpreter={ANSIBLE_PYTHON}"),
                ];
                args.extend(private_extra_arguments(req, name, extra_arguments)?);
                if !extra_vars.is_empty() {
                    let json =
                        serde_json::to_string(&serde_json::Value::Object(extra_vars.clone()))
                            .unwrap_or_default();
                    args.push("-e".into());
                    args.push(if csis_schema::secret::contains(&json) {
                        // a secret never lands in the emission: ansible
                        // reads the config from a 0600 file under .csis/
                        format!("@{}", private_vars(req, name, &json)?.display())
                    } else {
                        json
                    });
                }
                for pb in playbooks {
                    let rel = rel_of(&req.tree_root, pb, "playbooks");
                    files.push(EmittedFile {
                        rel: rel.clone(),
                        content: read(pb)?,
                        mode: 0o644,
                    });
                    steps.push(Step {
                        comment: format!("modification {name}: ansible {rel}"),
                        kind: StepKind::Ansible {
                            playbook: (rel, pb.clone()),
                            extra_arguments: args.clone(),
                            binary: binary.clone(),
                        },
                    });
                }
            }
            BakeStep::Shell {
                name,
                inline,
                scripts,
                ensure,
                env,
                execute_command,
            } => {
                if !scripts.is_empty() {
                    let mut list = Vec::new();
                    for p in scripts {
                        let rel = rel_of(&req.tree_root, p, "scripts");
                        files.push(EmittedFile {
                            rel: rel.clone(),
                            content: read(p)?,
                            mode: 0o755,
                        });
                        list.push((rel, p.clone()));
                    }
                    steps.push(Step {
                        comment: format!(
                            "Modifications for {name} of type {}",
                            step.kind().row().comment
                        ),
                        kind: StepKind::Scripts {
                            scripts: list,
                            runner: execute_command.is_none(),
                            env: env.clone(),
                            execute_command: execute_command.clone(),
                        },
                    });
                }
                let mut lines = Vec::new();
                if let Some(e) = ensure {
                    lines.extend(ensure_lines(t, e));
                }
                lines.extend(inline.iter().cloned());
                if !lines.is_empty() {
                    if ensure.as_ref().is_some_and(ensure_has_secret) {
                        // a file's content reaches the lines as base64,
                        // which the registry does not know
                        forced.insert(steps.len());
                    }
                    steps.push(Step {
                        comment: format!("modification {name}"),
                        kind: StepKind::Shell {
                            lines,
                            runner: execute_command.is_none(),
                            env: env.clone(),
                            execute_command: execute_command.clone(),
                            private: None,
                        },
                    });
                }
            }
        }
    }
    Ok(())
}

/// The steps of a mod test (`csis test-mods`): the settle step, then the
/// request's modifications lowered as a bake lowers them, and nothing
/// else (no bundle, no activation, no verification).
pub fn lower_mods(req: &BakeRequest, t: &Target) -> std::io::Result<Lowered> {
    let mut steps = vec![settle_step(t, "test container")];
    let mut files = Vec::new();
    // run from memory in the test container: no step needs a private file
    mod_steps(req, t, &mut steps, &mut files, &mut Default::default())?;
    let mut seen = BTreeMap::new();
    files.retain(|f| seen.insert(f.rel.clone(), ()).is_none());
    Ok(Lowered {
        steps,
        files,
        assertions: 0,
    })
}

#[cfg(test)]
mod tests;
