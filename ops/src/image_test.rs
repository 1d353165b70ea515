//! Post-bake image tests (core.md §5.4, config.md C.4 `tests.post_bake`):
//! the `test` node of `csis build` and `csis test IMAGE`.
//!
//! A test launches the build as a test machine for a bounded time
//! (`Runtime::launch_test_machine`: docker, a container under `--init`;
//! AWS, an instance in the default subnet), waits until it answers, runs
//! each declared command through `run_session_command`, and records the
//! outcome in `meta-state/image-tests.yaml` (`builds {build_id: {ok, run,
//! instance, runtime, time, checks[]}}`, the latest per build). The machine
//! is removed whatever happens (a failure, a cancellation); one left by a
//! killed csis carries its mark and owner and is removed by the next build
//! (`Runtime::clean_stale_bakes`). A failed test is a record with `ok:
//! false`: it fails the node and keeps the build from release, and the
//! bake's record stays.

use anyhow::Result;
use csis_cache::build_ref::{resolve_build, BuildScope};
use csis_cache::release_rules::{ImageTestRecord, ImageTests};
use csis_cache::{head_unrevoked, MetaState, Revocations};
use csis_rules::tree::InBakeTest;
use csis_runtime::{CancellationToken, DynRuntime, RuntimeError, TestMachineRequest};
use serde::Serialize;
use serde_json::json;

use crate::Context;

/// A test machine stops by itself after this long (seconds), even when the
/// csis that launched it was killed.
pub const TEST_LIFETIME_S: u64 = 3600;
/// How long a test machine has to answer (seconds).
pub const READY_TIMEOUT_S: u64 = 600;
/// How long one test command may run (seconds).
pub const COMMAND_TIMEOUT_S: u64 = 600;
/// How many of a command's last output lines a record keeps.
pub const EVIDENCE_LINES: usize = 20;

/// One check of a post-bake test: a declared command, or `booted image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// The command run (none for `booted image`).
    pub command: Option<String>,
    pub exit_code: Option<i32>,
    /// The last lines of its output (stdout, then stderr), secrets redacted.
    pub evidence: Vec<String>,
}

/// What one post-bake test of a build found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageTestOutcome {
    pub series: String,
    pub runtime: String,
    pub build_id: String,
    pub ok: bool,
    pub run: String,
    /// The test machine (container name, instance id).
    pub instance: String,
    /// When the tests ran (RFC 3339, UTC).
    pub time: String,
    pub checks: Vec<TestCheck>,
}

impl ImageTestOutcome {
    /// The line a person reads.
    pub fn summary(&self) -> String {
        let failed: Vec<&str> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        if failed.is_empty() {
            format!(
                "post-bake tests of {} ({} on {}) passed: {} check(s)",
                self.build_id,
                self.series,
                self.runtime,
                self.checks.len()
            )
        } else {
            format!(
                "post-bake tests of {} ({} on {}) FAILED: {}",
                self.build_id,
                self.series,
                self.runtime,
                failed.join("; ")
            )
        }
    }

    /// The record `image-tests.yaml` keeps.
    pub fn record(&self) -> ImageTestRecord {
        ImageTestRecord {
            ok: self.ok,
            run: Some(self.run.clone()),
            instance: Some(self.instance.clone()),
            runtime: Some(self.runtime.clone()),
            time: Some(self.time.clone()),
            checks: self
                .checks
                .iter()
                .map(|c| serde_json::to_value(c).unwrap_or_default())
                .collect(),
            extra: [("series".to_string(), json!(self.series))].into(),
        }
    }
}

/// Now as RFC 3339 (UTC, whole seconds).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The last `n` lines of a command's output, stdout then stderr, redacted
/// (a secret and what a command prints of one: a word, a line).
pub fn evidence(stdout: &str, stderr: &str, n: usize) -> Vec<String> {
    let lines: Vec<String> = stdout
        .lines()
        .chain(stderr.lines())
        .map(|l| csis_schema::secret::redact_printed(l).into_owned())
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

impl TestCheck {
    /// The check with every secret replaced by its token: a command from
    /// `ENC[...]` or `{{ ENV }}` names the check (`command `...``), its
    /// `contains` the detail; what the record, the report and the log get.
    fn redacted(mut self) -> TestCheck {
        use csis_schema::secret::{redact, redact_printed};
        self.name = redact(&self.name).into_owned();
        self.detail = redact_printed(&self.detail).into_owned();
        self.command = self.command.map(|c| redact(&c).into_owned());
        self
    }
}

/// The test machine's name: `csis-test-<runtime>-<series>-<pid>`, only
/// characters every runtime accepts.
fn machine_name(runtime: &str, series: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    format!(
        "csis-test-{}-{}-{}",
        clean(runtime),
        clean(series),
        std::process::id()
    )
}

/// Judge one command's result against its test.
pub(crate) fn judge(t: &InBakeTest, exit_code: i32, stdout: &str, stderr: &str) -> TestCheck {
    let rc_ok = exit_code == t.expect_rc;
    let contains_ok = t
        .contains
        .as_deref()
        .is_none_or(|c| stdout.contains(c) || stderr.contains(c));
    let detail = match (rc_ok, contains_ok) {
        (true, true) => format!("exit {exit_code}"),
        (false, _) => format!("exit {exit_code}, expected {}", t.expect_rc),
        // redacted before it is quoted (quoting escapes what redaction matches)
        (true, false) => format!(
            "exit {exit_code}, but the output does not contain {:?}",
            csis_schema::secret::redact(t.contains.as_deref().unwrap_or_default())
        ),
    };
    TestCheck {
        name: t.description.clone(),
        ok: rc_ok && contains_ok,
        detail,
        command: Some(t.run.clone()),
        exit_code: Some(exit_code),
        evidence: evidence(stdout, stderr, EVIDENCE_LINES),
    }
    .redacted()
}

/// The check of a command that could not run.
pub(crate) fn could_not_run(t: &InBakeTest, e: &RuntimeError) -> TestCheck {
    TestCheck {
        name: t.description.clone(),
        ok: false,
        detail: format!("the command could not run: {e}"),
        command: Some(t.run.clone()),
        exit_code: None,
        evidence: Vec::new(),
    }
    .redacted()
}

/// What a post-bake test runs, and where.
pub struct PostBake<'a> {
    pub rt: &'a DynRuntime,
    pub runtime: &'a str,
    pub series: &'a str,
    pub build_id: &'a str,
    pub tests: &'a [InBakeTest],
    pub run: &'a str,
    pub cancel: CancellationToken,
}

/// Launch the build, run the tests, remove the machine (always). `log`
/// gets one line per step. `Err` when no verdict could be had (the machine
/// did not launch or answer, the runtime cannot launch one, a cancellation,
/// or the machine could not be removed); a failed check is an `Ok` with
/// `ok: false`.
pub async fn run_post_bake(
    p: PostBake<'_>,
    log: &(dyn Fn(&str) + Send + Sync),
) -> Result<ImageTestOutcome, RuntimeError> {
    let req = TestMachineRequest {
        build_id: p.build_id.to_string(),
        series: p.series.to_string(),
        name: machine_name(p.runtime, p.series),
        owner: csis_runtime::owner_here(),
        lifetime_s: TEST_LIFETIME_S,
        ready_timeout_s: READY_TIMEOUT_S,
    };
    log(&format!(
        "launching {} as test machine {}",
        p.build_id, req.name
    ));
    let machine = tokio::select! {
        m = p.rt.launch_test_machine(&req) => m?,
        _ = p.cancel.cancelled() => return Err(RuntimeError::Cancelled),
    };
    log(&format!("test machine {} answers", machine.id));
    let time = now_rfc3339();
    let mut checks = Vec::new();
    if let Some(booted) = &machine.booted {
        let ok = booted == p.build_id;
        checks.push(TestCheck {
            name: "booted image".into(),
            ok,
            detail: if ok {
                format!("booted {booted}")
            } else {
                format!("booted {booted}, expected {}", p.build_id)
            },
            command: None,
            exit_code: None,
            evidence: Vec::new(),
        });
    }
    let mut stopped: Option<RuntimeError> = None;
    for t in p.tests {
        let r = tokio::select! {
            r = p.rt.run_session_command(&machine.id, &t.run, COMMAND_TIMEOUT_S) => r,
            _ = p.cancel.cancelled() => Err(RuntimeError::Cancelled),
        };
        let check = match r {
            Ok(r) => judge(t, r.exit_code, &r.stdout, &r.stderr),
            Err(RuntimeError::Cancelled) => {
                stopped = Some(RuntimeError::Cancelled);
                break;
            }
            Err(e) => could_not_run(t, &e),
        };
        log(&format!(
            "{} {}: {}",
            if check.ok { "ok  " } else { "FAIL" },
            check.name,
            check.detail
        ));
        checks.push(check);
    }
    // Removed whatever happened, also after a cancellation.
    match p.rt.remove_test_machine(&machine.id).await {
        Ok(_) => log(&format!("removed test machine {}", machine.id)),
        Err(e) => {
            return Err(RuntimeError::Failed(format!(
                "the test machine {} could not be removed: {e} (the next build removes it)",
                machine.id
            )))
        }
    }
    if let Some(e) = stopped {
        return Err(e);
    }
    Ok(ImageTestOutcome {
        series: p.series.to_string(),
        runtime: p.runtime.to_string(),
        build_id: p.build_id.to_string(),
        ok: checks.iter().all(|c| c.ok),
        run: p.run.to_string(),
        instance: machine.id,
        time,
        checks,
    })
}

/// Record an outcome in `meta-state/image-tests.yaml` (the caller holds
/// the tree lock).
pub fn record(meta: &MetaState, outcome: &ImageTestOutcome) -> Result<()> {
    ImageTests::record(meta, &outcome.build_id, outcome.record())?;
    Ok(())
}

/// What `csis test` was asked.
#[derive(Debug, Clone, Default)]
pub struct TestArgs {
    pub image: String,
    /// A build as a person names it (default: the series head).
    pub build: Option<String>,
    pub runtime: Option<String>,
}

/// The answer of `csis test`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TestReport {
    /// The tests ran (and were recorded).
    Tested(ImageTestOutcome),
    /// Nothing ran, nothing recorded: why, in one line.
    Refused { reason: String },
    /// The machine did not launch, answer, or go: nothing recorded.
    Failed { reason: String },
}

impl TestReport {
    pub fn exit_code(&self) -> u8 {
        match self {
            TestReport::Tested(o) if o.ok => crate::exit::SUCCESS,
            TestReport::Tested(_) | TestReport::Failed { .. } => crate::exit::FAILURE,
            TestReport::Refused { .. } => crate::exit::FAILURE,
        }
    }
}

/// `csis test IMAGE [--build ID] [--runtime RT]`: the post-bake tests of one
/// build, outside a build. The context is opened for writing.
pub fn test(
    cx: &Context,
    args: &TestArgs,
    log: &(dyn Fn(&str) + Send + Sync),
) -> Result<TestReport> {
    let refuse = |reason: String| Ok(TestReport::Refused { reason });
    let tree = cx.tree();
    let Some(image) = tree.image(&args.image) else {
        return refuse(format!("{} is not an image of this tree", args.image));
    };
    let Some(tests) = tree.post_bake_commands(image) else {
        return refuse(format!(
            "image {} declares no tests.post_bake ({})",
            image.name,
            image.origin.display()
        ));
    };
    let runtime = match &args.runtime {
        Some(rt) => match cx.runtime_name(rt) {
            Some(r) => Some(r),
            None => return refuse(format!("runtime {rt} is not declared in this tree")),
        },
        None => None,
    };
    let (lineage, _) = cx.records()?;
    let revs = Revocations::load(&cx.meta)?;
    let rec = match &args.build {
        Some(b) => {
            let scope = BuildScope {
                series: Some(&image.name),
                runtime: runtime.as_deref(),
            };
            match resolve_build(&lineage, b, scope) {
                Ok(r) => r.clone(),
                Err(e) => return refuse(e.to_string()),
            }
        }
        None => {
            let rts: Vec<String> = match &runtime {
                Some(r) => vec![r.clone()],
                None => image
                    .active_runtimes()
                    .filter_map(|r| r.runtime.clone())
                    .collect(),
            };
            let rt = match rts.as_slice() {
                [one] => one.clone(),
                [] => return refuse(format!("{} bakes on no runtime", image.name)),
                _ => {
                    return refuse(format!(
                        "{} bakes on several runtimes ({}); name one with --runtime",
                        image.name,
                        rts.join(", ")
                    ))
                }
            };
            match head_unrevoked(&lineage, &revs, &image.name, &rt) {
                Some(h) => h.clone(),
                None => {
                    return refuse(format!(
                        "{} has no (unrevoked) build on {rt} to test",
                        image.name
                    ))
                }
            }
        }
    };
    let Some(rt_name) = rec.runtime.clone() else {
        return refuse(format!("build {} names no runtime", rec.build_id));
    };
    let rt = cx.runtime(&rt_name)?;
    let run = csis_cache::run_id_now();
    // Leftovers of a killed test go first (marked, owner gone).
    let _ = cx.block_on(rt.clean_stale_bakes());
    // Ctrl-C stops the tests and still removes the machine.
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let outcome = cx.block_on(async {
        let watch = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_interrupt.cancel();
            }
        });
        let r = run_post_bake(
            PostBake {
                rt: &rt,
                runtime: &rt_name,
                series: &image.name,
                build_id: &rec.build_id,
                tests: &tests,
                run: &run,
                cancel,
            },
            log,
        )
        .await;
        watch.abort();
        r
    });
    match outcome {
        Ok(o) => {
            record(&cx.meta, &o)?;
            Ok(TestReport::Tested(o))
        }
        Err(e) => Ok(TestReport::Failed {
            reason: csis_schema::secret::redact_printed(&format!(
                "{} on {rt_name}: {e}",
                rec.build_id
            ))
            .into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(run: &str, rc: i32, contains: Option<&str>) -> InBakeTest {
        InBakeTest {
            description: format!("command `{run}`"),
            run: run.into(),
            expect_rc: rc,
            contains: contains.map(str::to_string),
        }
    }

    #[test]
    fn judging_exit_code_and_output() {
        assert!(judge(&t("x", 0, None), 0, "", "").ok);
        let c = judge(&t("x", 0, None), 3, "a\nb", "err");
        assert!(!c.ok);
        assert_eq!(c.detail, "exit 3, expected 0");
        assert_eq!(c.evidence, vec!["a", "b", "err"]);
        assert!(judge(&t("x", 1, None), 1, "", "").ok);
        let c = judge(&t("x", 0, Some("dask")), 0, "numpy", "");
        assert!(!c.ok && c.detail.contains("does not contain \"dask\""));
        assert!(judge(&t("x", 0, Some("dask")), 0, "import dask ok", "").ok);
    }

    #[test]
    fn a_secret_command_names_its_check_by_token() {
        let key = csis_schema::secret::default_key();
        let cmd = "grep -q unit-test-secret-cmd-3f9a /etc/x";
        let want = "unit-test-secret-contains-77b1";
        let tc = csis_schema::secret::register(cmd, &key).unwrap();
        csis_schema::secret::register(want, &key).unwrap();
        let c = judge(
            &t(cmd, 0, Some(want)),
            0,
            "printed unit-test-secret-cmd-3f9a",
            "",
        );
        let j = serde_json::to_string(&c).unwrap();
        assert!(!j.contains("unit-test-secret"), "{j}");
        assert_eq!(c.name, format!("command `{tc}`"));
        assert_eq!(c.command.as_deref(), Some(tc.as_str()));
        assert!(c.detail.contains("<secret:"), "{}", c.detail);
        assert!(
            c.evidence[0].starts_with("printed <secret:"),
            "{:?}",
            c.evidence
        );
    }

    #[test]
    fn evidence_keeps_the_last_lines() {
        let out: String = (0..30).map(|i| format!("l{i}\n")).collect();
        let e = evidence(&out, "", EVIDENCE_LINES);
        assert_eq!(e.len(), 20);
        assert_eq!(e[0], "l10");
        assert_eq!(e[19], "l29");
    }

    #[test]
    fn machine_names_are_plain() {
        assert!(
            machine_name("docker.local", "web/app").starts_with("csis-test-docker-local-web-app-")
        );
    }
}
