//! The gated sequence of one root (core.md §3.6), run in-process with the
//! builder's executable: `init` (dry run: `-backend=false`, then
//! `validate`), `plan -out=tfplan [-replace=...]`, the gate on `show -json
//! tfplan` (every planned delete must be one an operation asked for; a plan
//! older than the root's files is stale), the apply flag read again, and
//! only then `apply tfplan`. Every call is logged (output redacted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::SystemTime;

use serde::Serialize;

use crate::{Result, TofuError};

/// Lines of output an error keeps.
const TAIL: usize = 20;

/// The builder's executable, its environment and the log every call goes to.
#[derive(Debug, Clone)]
pub struct Tofu {
    pub binary: String,
    pub env: BTreeMap<String, String>,
    /// Appended with each call and its output; `None`: not logged.
    pub log: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `init -backend=false`, `validate`: no state touched, nothing planned.
    Dry,
    Real,
}

/// The addresses an operation allows to be destroyed (a replacement, a
/// decommission, a storage archived/destroyed/undeclared, a detach).
#[derive(Debug, Clone, Default)]
pub struct Gate {
    pub allowed_destroys: Vec<String>,
}

/// One root's sequence.
pub struct Sequence<'a> {
    pub dir: &'a Path,
    /// The partial backend file (`<stem>.tfbackend.hcl`).
    pub backend_file: &'a str,
    pub mode: Mode,
    /// `-replace=<address>` for each (an upgrade, a follow head).
    pub replace: &'a [String],
    pub gate: &'a Gate,
    /// Read again right before `apply`: the flag of now, not of the emission.
    pub apply_flag: &'a (dyn Fn() -> bool + Sync),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Dry run: initialised without a backend and validated.
    Validated,
    /// Planned and passed the gate; the apply flag is off: nothing applied.
    Gated,
    Applied,
    /// The gate refused the plan: each address and why; nothing applied.
    Refused {
        reasons: Vec<String>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct SequenceReport {
    /// Each call's arguments, in order.
    pub calls: Vec<Vec<String>>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Tofu {
    pub fn new(binary: &str) -> Tofu {
        Tofu {
            binary: binary.to_string(),
            env: BTreeMap::new(),
            log: None,
        }
    }

    /// One call in `dir`; its stdout on success, else an error with the tail.
    pub async fn call(&self, dir: &Path, args: &[String]) -> Result<String> {
        let out = tokio::process::Command::new(&self.binary)
            .args(args)
            .current_dir(dir)
            .envs(&self.env)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| {
                TofuError::Failed(format!(
                    "`{}` cannot run in {}: {e} (install OpenTofu, or name its path in the executable's `binary:`)",
                    self.binary,
                    dir.display()
                ))
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        self.log_call(args, &stdout, &stderr);
        if out.status.success() {
            return Ok(stdout);
        }
        let all = format!("{stdout}{stderr}");
        let lines: Vec<&str> = all.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL)..].join("\n");
        Err(TofuError::Failed(format!(
            "{} {} in {} exited {}:\n{}",
            self.binary,
            args.first().map(String::as_str).unwrap_or(""),
            dir.display(),
            out.status.code().unwrap_or(-1),
            csis_schema::secret::redact_printed(&tail)
        )))
    }

    fn log_call(&self, args: &[String], stdout: &str, stderr: &str) {
        let Some(path) = &self.log else { return };
        use std::io::Write;
        if let Some(p) = path.parent() {
            let _ = std::fs::create_dir_all(p);
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let text = format!("$ {} {}\n{stdout}{stderr}", self.binary, args.join(" "));
            let _ = f.write_all(csis_schema::secret::redact_printed(&text).as_bytes());
        }
    }

    /// The sequence of one root; see the module's description.
    pub async fn sequence(&self, s: &Sequence<'_>) -> Result<SequenceReport> {
        let mut calls = Vec::new();
        let plan = s.dir.join("tfplan");
        match std::fs::remove_file(&plan) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(TofuError::Failed(format!(
                    "cannot remove {}: {e}",
                    plan.display()
                )))
            }
        }
        if s.mode == Mode::Dry {
            for args in [
                args(&["init", "-input=false", "-backend=false"]),
                args(&["validate"]),
            ] {
                self.call(s.dir, &args).await?;
                calls.push(args);
            }
            return Ok(SequenceReport {
                calls,
                outcome: Outcome::Validated,
            });
        }
        let init = args(&[
            "init",
            "-input=false",
            "-reconfigure",
            &format!("-backend-config={}", s.backend_file),
        ]);
        let mut plan_args = args(&["plan", "-input=false", "-out=tfplan"]);
        plan_args.extend(s.replace.iter().map(|a| format!("-replace={a}")));
        for a in [init, plan_args] {
            self.call(s.dir, &a).await?;
            calls.push(a);
        }
        let show = args(&["show", "-json", "tfplan"]);
        let json = self.call(s.dir, &show).await?;
        calls.push(show);
        let mut reasons = stale(s.dir)?;
        reasons.extend(refusals(&json, s.gate)?);
        if !reasons.is_empty() {
            return Ok(SequenceReport {
                calls,
                outcome: Outcome::Refused { reasons },
            });
        }
        if !(s.apply_flag)() {
            return Ok(SequenceReport {
                calls,
                outcome: Outcome::Gated,
            });
        }
        let apply = args(&["apply", "-input=false", "tfplan"]);
        self.call(s.dir, &apply).await?;
        calls.push(apply);
        Ok(SequenceReport {
            calls,
            outcome: Outcome::Applied,
        })
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The plan is stale when missing or older than the newest `.tf` of the root.
fn stale(dir: &Path) -> Result<Vec<String>> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(plan) = mtime(&dir.join("tfplan")) else {
        return Ok(vec!["tfplan: no plan was written: refused".into()]);
    };
    let entries = std::fs::read_dir(dir)
        .map_err(|e| TofuError::Failed(format!("cannot read {}: {e}", dir.display())))?;
    let newest: Option<SystemTime> = entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "tf"))
        .filter_map(|e| mtime(&e.path()))
        .max();
    Ok(match newest {
        Some(t) if t > plan => vec!["tfplan: older than the root's files (stale): refused".into()],
        _ => Vec::new(),
    })
}

/// Whether `address` is allowed: exactly, or as a prefix followed by `.` or `[`.
pub fn allowed(address: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|a| {
        address == a
            || address
                .strip_prefix(a.as_str())
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// Every planned delete of `show -json` that the gate does not allow.
pub fn refusals(plan_json: &str, gate: &Gate) -> Result<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(plan_json).map_err(|e| {
        TofuError::Failed(format!("`show -json tfplan` is not a plan document: {e}"))
    })?;
    let changes = v
        .get("resource_changes")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for c in &changes {
        let address = c.get("address").and_then(|a| a.as_str()).unwrap_or("?");
        let actions: Vec<&str> = c
            .pointer("/change/actions")
            .and_then(|a| a.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        if actions.contains(&"delete") && !allowed(address, &gate.allowed_destroys) {
            let what = if actions.contains(&"create") {
                "replace"
            } else {
                "delete"
            };
            out.push(format!(
                "{address}: planned {what} ({}) that no operation asked for: refused",
                actions.join(", ")
            ));
        }
    }
    Ok(out)
}
