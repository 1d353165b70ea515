//! The gated sequence of a root through a recording stand-in for tofu (a
//! shell script writing its cwd and argv to a file, writing `tfplan` on
//! `plan`, answering `show -json` with a given plan document): the calls
//! and their order, nothing applied without the flag, the flag read at
//! apply time, the gate's refusals and allowed destroys, a stale plan, a
//! failing step stopping the sequence.

use std::path::{Path, PathBuf};

use csis_tofu::runner::*;

struct StandIn {
    _dir: tempfile::TempDir,
    root: PathBuf,
    record: PathBuf,
    tofu: Tofu,
}

const SCRIPT: &str = r#"#!/bin/sh
printf '%s|%s\n' "$PWD" "$*" >> "$RECORD"
case "$1" in
  init) [ -n "$FAIL_INIT" ] && { echo "Error: backend bucket unreachable" >&2; exit 1; } ;;
  plan) echo plan > tfplan; [ -n "$STALE" ] && { sleep 0.05; touch main.tf; } ;;
  show) cat "$PLAN_JSON" ;;
esac
exit 0
"#;

fn stand_in(plan_json: &str) -> StandIn {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("tofu");
    csis_testkit::write_executable(&bin, SCRIPT).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("main.tf"), "# root\n").unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, plan_json).unwrap();
    let record = dir.path().join("record");
    let mut tofu = Tofu::new(bin.to_str().unwrap());
    tofu.env
        .insert("RECORD".into(), record.display().to_string());
    tofu.env
        .insert("PLAN_JSON".into(), plan.display().to_string());
    tofu.log = Some(dir.path().join("logs/tofu-aws.log"));
    StandIn {
        _dir: dir,
        root,
        record,
        tofu,
    }
}

fn recorded(s: &StandIn) -> Vec<String> {
    let text = std::fs::read_to_string(&s.record).unwrap_or_default();
    let root = s.root.canonicalize().unwrap();
    text.lines()
        .map(|l| {
            let (cwd, argv) = l.split_once('|').unwrap();
            assert_eq!(
                Path::new(cwd).canonicalize().unwrap(),
                root,
                "every call runs in the root"
            );
            argv.to_string()
        })
        .collect()
}

fn plan_with(changes: &[(&str, &[&str])]) -> String {
    let rc: Vec<serde_json::Value> = changes
        .iter()
        .map(|(a, acts)| serde_json::json!({"address": a, "change": {"actions": acts}}))
        .collect();
    serde_json::json!({"format_version": "1.2", "resource_changes": rc}).to_string()
}

async fn run(
    s: &StandIn,
    mode: Mode,
    gate: &Gate,
    flag: bool,
    replace: &[String],
) -> csis_tofu::Result<SequenceReport> {
    // the flag is read after the plan passed the gate, not at emission
    let record = s.record.clone();
    let f = move || {
        let calls = std::fs::read_to_string(&record).unwrap_or_default();
        assert!(
            calls.contains("show -json tfplan"),
            "the flag read before the gate"
        );
        flag
    };
    s.tofu
        .sequence(&Sequence {
            dir: &s.root,
            backend_file: "tofu-aws-instance-generation.tfbackend.hcl",
            mode,
            replace,
            gate,
            apply_flag: &f,
        })
        .await
}

const INIT: &str =
    "init -input=false -reconfigure -backend-config=tofu-aws-instance-generation.tfbackend.hcl";

#[tokio::test]
async fn without_the_apply_flag_it_plans_and_applies_nothing() {
    let s = stand_in(&plan_with(&[(
        "module.instance_a.aws_instance.this",
        &["create"],
    )]));
    std::fs::write(s.root.join("tfplan"), "an old plan").unwrap();
    let r = run(&s, Mode::Real, &Gate::default(), false, &[])
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Gated);
    assert_eq!(
        recorded(&s),
        vec![INIT, "plan -input=false -out=tfplan", "show -json tfplan"]
    );
    assert_eq!(
        std::fs::read_to_string(s.root.join("tfplan")).unwrap(),
        "plan\n",
        "the old plan was removed first"
    );
    let log = std::fs::read_to_string(s.tofu.log.as_ref().unwrap()).unwrap();
    assert!(
        log.contains("$ ") && log.contains(" show -json tfplan"),
        "{log}"
    );
}

#[tokio::test]
async fn with_the_flag_it_applies_the_saved_plan_last() {
    let s = stand_in(&plan_with(&[(
        "module.instance_a.aws_instance.this",
        &["create"],
    )]));
    let replace = vec!["module.instance_a.aws_instance.this".to_string()];
    let r = run(&s, Mode::Real, &Gate::default(), true, &replace)
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(
        recorded(&s),
        vec![
            INIT,
            "plan -input=false -out=tfplan -replace=module.instance_a.aws_instance.this",
            "show -json tfplan",
            "apply -input=false tfplan",
        ]
    );
    assert_eq!(r.calls.len(), 4);
}

#[tokio::test]
async fn an_unasked_delete_is_refused_and_nothing_is_applied_even_under_the_flag() {
    let plan = plan_with(&[
        ("module.storage_data.aws_ebs_volume.this", &["delete"]),
        ("module.instance_a.aws_instance.this", &["create", "delete"]),
        ("aws_security_group.csis_instances", &["update"]),
    ]);
    let s = stand_in(&plan);
    let r = run(&s, Mode::Real, &Gate::default(), true, &[])
        .await
        .unwrap();
    let Outcome::Refused { reasons } = &r.outcome else {
        panic!("{r:?}")
    };
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].starts_with("module.storage_data.aws_ebs_volume.this: planned delete"));
    assert!(reasons[1].starts_with("module.instance_a.aws_instance.this: planned replace"));
    assert!(!recorded(&s).iter().any(|c| c.starts_with("apply")));
}

#[tokio::test]
async fn a_destroy_an_operation_asked_for_passes_by_address_or_prefix() {
    let plan = plan_with(&[
        ("module.instance_a.aws_instance.this", &["create", "delete"]),
        (
            "module.instance_a.aws_volume_attachment.this[\"data\"]",
            &["delete", "create"],
        ),
    ]);
    let s = stand_in(&plan);
    let gate = Gate {
        allowed_destroys: vec!["module.instance_a".into()],
    };
    let r = run(&s, Mode::Real, &gate, true, &[]).await.unwrap();
    assert_eq!(r.outcome, Outcome::Applied);
    // a prefix matches only at a boundary
    assert!(!allowed(
        "module.instance_ab.aws_instance.this",
        &gate.allowed_destroys
    ));
    assert!(allowed("module.instance_a[0]", &gate.allowed_destroys));
}

#[tokio::test]
async fn a_plan_older_than_the_roots_files_is_stale() {
    let mut s = stand_in(&plan_with(&[]));
    s.tofu.env.insert("STALE".into(), "1".into());
    let r = run(&s, Mode::Real, &Gate::default(), true, &[])
        .await
        .unwrap();
    let Outcome::Refused { reasons } = &r.outcome else {
        panic!("{r:?}")
    };
    assert!(reasons[0].contains("stale"), "{reasons:?}");
    assert!(!recorded(&s).iter().any(|c| c.starts_with("apply")));
}

#[tokio::test]
async fn a_dry_run_initialises_without_a_backend_and_validates() {
    let s = stand_in(&plan_with(&[]));
    let r = run(&s, Mode::Dry, &Gate::default(), true, &[])
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Validated);
    assert_eq!(
        recorded(&s),
        vec!["init -input=false -backend=false", "validate"]
    );
}

#[tokio::test]
async fn a_failing_step_stops_the_sequence_with_its_tail() {
    let mut s = stand_in(&plan_with(&[]));
    s.tofu.env.insert("FAIL_INIT".into(), "1".into());
    let err = run(&s, Mode::Real, &Gate::default(), true, &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("init") && err.contains("backend bucket unreachable"),
        "{err}"
    );
    assert_eq!(recorded(&s).len(), 1);
}

#[tokio::test]
async fn a_missing_executable_is_named() {
    let mut s = stand_in(&plan_with(&[]));
    s.tofu.binary = "/nonexistent/tofu".into();
    let err = run(&s, Mode::Dry, &Gate::default(), true, &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nonexistent/tofu") && err.contains("cannot run"),
        "{err}"
    );
}
