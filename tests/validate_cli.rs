//! `csis validate`, `csis runtime describe`, `csis init`: exit codes, JSON,
//! rendering, starters.

use std::path::PathBuf;
use std::process::Command;

use assert_cmd::prelude::*;
use csis_testkit::copy_dir;

fn fixtures() -> PathBuf {
    csis_testkit::fixture("config")
}

fn csis() -> Command {
    let mut c = csis_testkit::csis();
    c.env_remove("CSIS_CONFIG_IDENTITY")
        .env("CSIS_TEST_USER", "avery");
    c
}

#[test]
fn a_valid_tree_validates_offline() {
    let out = csis()
        .arg("-C")
        .arg(fixtures().join("valid"))
        .args(["validate", "--offline"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok (3 runtimes, 2 OS builders, 3 images; 0 warnings, offline)"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped online check: runtime aws-east2 (aws): network discovery"),
        "{stderr}"
    );
    assert!(
        stderr.contains("skipped online check: executable packer"),
        "{stderr}"
    );
}

#[test]
fn errors_exit_1_with_json_locations() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("valid"), dir.path());
    std::fs::copy(
        fixtures().join("refusals/cfg--unknown-field.yml"),
        dir.path().join("cfg/zz-unknown-field.yml"),
    )
    .unwrap();
    std::fs::copy(
        fixtures().join("refusals/images--cycle.yaml"),
        dir.path().join("images/zz-cycle.yaml"),
    )
    .unwrap();
    let out = csis()
        .arg("-C")
        .arg(dir.path())
        .args(["validate", "--offline", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2, "{v:#}");
    let first = &arr[0];
    assert_eq!(first["file"], "cfg/zz-unknown-field.yml");
    assert_eq!(first["line"], 9);
    assert_eq!(first["column"], 7);
    assert_eq!(first["path"], "runtime_builders[0].credentials.profile_nme");
    assert_eq!(first["message"], "unknown field");
    assert_eq!(first["severity"], "error");
    assert_eq!(arr[1]["file"], "images/zz-cycle.yaml");
    assert_eq!(
        arr[1]["message"],
        "source_image cycle: cyc-a -> cyc-b -> cyc-c -> cyc-a"
    );
}

#[test]
fn errors_render_with_their_span_and_hint() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("valid"), dir.path());
    std::fs::copy(
        fixtures().join("refusals/cfg--legacy-keys.yml"),
        dir.path().join("cfg/zz-legacy-keys.yml"),
    )
    .unwrap();
    let out = csis()
        .arg("-C")
        .arg(dir.path())
        .args(["validate", "--offline"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cfg/zz-legacy-keys.yml:12:7:"), "{err}");
    assert!(
        err.contains("runtime_builders[0].networking.security_group_ids: unknown field"),
        "{err}"
    );
    assert!(err.contains("addl_security_groups"), "hint shown: {err}");
    assert!(
        err.contains("security_group_ids: [sg-1]"),
        "source line shown: {err}"
    );
    assert!(err.contains("3 error(s)"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let out = csis()
        .args(["validate", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn not_a_tree_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = csis()
        .arg("-C")
        .arg(dir.path())
        .args(["validate", "--offline"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no cfg/ directory"));
}

#[test]
fn overlay_and_undeclare_flags_reach_the_load() {
    let valid = fixtures().join("valid");
    let out = csis()
        .arg("-C")
        .arg(&valid)
        .arg("--overlay")
        .arg(fixtures().join("overlays/add-and-change.yaml"))
        .args([
            "--undeclare",
            "image:rh-app",
            "validate",
            "--offline",
            "--json",
        ])
        .output()
        .unwrap();
    // `extra` is built from rh-app, which the flag removes
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v.as_array().unwrap().iter().any(|d| d["message"]
            .as_str()
            .unwrap()
            .contains("source_image `rh-app`")),
        "{v:#}"
    );
}

#[test]
fn runtime_describe() {
    let out = csis()
        .arg("-C")
        .arg(fixtures().join("valid"))
        .args(["runtime", "describe", "aws-east2", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "aws");
    assert_eq!(v["region"], "us-east-2");
    assert_eq!(v["account_id"], "123456789012");
    assert_eq!(v["default_machine_type"], "t3.medium");
    assert_eq!(v["retention_keep"], 4);
    assert_eq!(v["ephemeral"], false);
    assert_eq!(
        v["image_builders"],
        serde_json::json!(["pckr-ebs (packer-ebs)"])
    );
    assert_eq!(v["base_images"], serde_json::json!(["deb-12"]));
    assert_eq!(v["images"], serde_json::json!(["base"]));

    let out = csis()
        .arg("-C")
        .arg(fixtures().join("valid"))
        .args(["runtime", "describe", "simulated"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("runtime:              sim (default)"),
        "{text}"
    );
    assert!(text.contains("max_parallel:         3"), "{text}");
    assert!(
        text.contains("images:               base, app, rh-app"),
        "{text}"
    );

    let out = csis()
        .arg("-C")
        .arg(fixtures().join("valid"))
        .args(["runtime", "describe", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("declared: sim, docker-local, aws-east2"));
}

#[test]
fn init_writes_starters_that_validate() {
    for from in ["dummy", "docker", "aws"] {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        let out = csis()
            .arg("init")
            .arg(&tree)
            .args(["--from", from])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{from}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(tree.join("cfg/_config.yml").is_file());
        assert!(
            std::fs::read_to_string(tree.join("cfg/runtime-builders.yml"))
                .unwrap()
                .contains(&format!("type: {from}"))
        );
        let out = csis()
            .arg("-C")
            .arg(&tree)
            .args(["validate", "--offline", "--json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{from}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "[]",
            "{from}: no warnings"
        );
        // never overwrites
        let out = csis().arg("init").arg(&tree).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
    }
}

#[test]
fn the_dummy_starter_has_a_chain_on_a_dummy_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    csis().arg("init").arg(&tree).assert().success();
    let t = csis_rules::load(&tree, &csis_rules::LoadOptions::default()).unwrap();
    let rt = t.default_runtime().unwrap();
    assert_eq!(rt.type_name(), "dummy");
    let app = t.image("app-server").unwrap();
    assert_eq!(
        t.chain(app).iter().map(|l| l.name()).collect::<Vec<_>>(),
        ["app-server", "base-tools", "debian-12"]
    );
    assert!(app
        .runtimes
        .iter()
        .all(|r| r.runtime.as_deref() == Some(rt.name.as_str())));
    for m in t
        .mod_inputs(app)
        .iter()
        .chain(t.mod_inputs(t.image("base-tools").unwrap()).iter())
    {
        for f in &m.files {
            assert!(f.is_file(), "the starter ships {}", f.display());
        }
    }
}
