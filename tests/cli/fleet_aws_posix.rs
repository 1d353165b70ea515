//! The standard-aws-posix starter's fleet on AWS (issue 22): its roots
//! as a dry run writes them (the AWS starter's own fleet, through its
//! gated sequence, is `fleet_aws.rs`).

use crate::aws_support;
use aws_support::*;

/// The standard-aws-posix starter (posix groups and users, no identity
/// provider): a dry run writes its storage and instance roots and no
/// identity root, and the instance's user data reads no gid from an
/// identity root it does not have: it gets the group's declared gid (the
/// bake of its images makes the group with it) and no enrollment token.
/// (tests/cli/emission_aws/tofu.rs compares these roots with the
/// original's.)
#[test]
fn the_posix_starter_emits_its_roots_without_an_identity_root() {
    let Some(reference) = reference() else {
        eprintln!("\n*** SKIPPED: ../shared/reference is not there ***\n");
        return;
    };
    let Some(t) = Starter::named(&reference, "standard-aws-posix") else {
        return;
    };
    let (code, out, err) = t.csis(&["build", "--dry-run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let generated = t.root.join("generated");
    assert!(generated.join("storage").is_dir(), "{out}\n{err}");
    assert!(generated.join("instance-image").is_dir(), "{out}\n{err}");
    assert!(
        !generated.join("identity").exists(),
        "no identity provider, no identity root"
    );
    let mut tf = String::new();
    let mut stack = vec![generated.join("instance-image")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(s) = std::fs::read_to_string(&p) {
                tf.push_str(&s);
            }
        }
    }
    assert!(tf.contains("module \"instance_"), "{tf}");
    assert!(
        !tf.contains("opa_groups"),
        "no reference to an identity root: {tf}"
    );
    // a posix group exists on the machines of its images (the bake makes it
    // with its declared gid): the user data gets that gid, read from nowhere
    // else, and no token (an undeclared `var.` would not plan)
    assert!(tf.contains("\"group_gid\" = 3000"), "{tf}");
    assert!(tf.contains("\"sft_enrollment_token\" = \"\""), "{tf}");
}

/// A dry run checks each root it wrote as the original's dry run does
/// (core.md §3.7): `tofu init -input=false -backend=false` and `tofu
/// validate` in the root, nothing planned or applied; a root that does not
/// validate is said and the dry run goes on. Without the executable (as on
/// this machine) the roots are written unchecked (`validate` names it).
#[test]
fn a_dry_run_validates_each_root_with_its_executable() {
    let Some(reference) = reference() else {
        eprintln!("\n*** SKIPPED: ../shared/reference is not there ***\n");
        return;
    };
    let Some(t) = Starter::named(&reference, "standard-aws-posix") else {
        return;
    };
    let bin = t.root.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = bin.join("record");
    // the storage root's validate fails; the others pass
    csis_testkit::write_executable(
        &bin.join("tofu"),
        r#"#!/bin/sh
printf '%s|%s\n' "$PWD" "$*" >> "$TOFU_RECORD"
case "$1" in
  version|-version|--version) echo "OpenTofu v1.8.5" ;;
  validate) case "$PWD" in */storage/*) echo "Error: Unsupported argument" >&2; exit 1 ;; esac ;;
esac
exit 0
"#,
    )
    .unwrap();
    // old enough for csis to trust it stays as it is (the racy-file rule)
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let f = std::fs::File::options().write(true).open(bin.join("tofu"));
    f.unwrap().set_modified(old).unwrap();
    let env = vec![
        path_with(&bin),
        ("TOFU_RECORD", record.display().to_string()),
    ];
    let (code, out, err) = t.csis_with(&["build", "--dry-run"], &env);
    assert_eq!(code, 0, "a dry run goes on: {out}\n{err}");
    let calls = recorded_calls(&record);
    for root in ["storage/", "instance-image/"] {
        let seq: Vec<&str> = (calls.iter())
            .filter(|(d, _)| d.starts_with(root))
            .map(|(_, a)| a.as_str())
            .collect();
        assert_eq!(
            seq,
            ["init -input=false -backend=false", "validate"],
            "{root}: {calls:?}"
        );
    }
    assert!(
        err.contains("not validated") && err.contains("storage/"),
        "the storage root's failure is said: {err}"
    );
    assert!(
        !err.contains("instance-image/tofu-aws/instance-generation not validated"),
        "{err}"
    );

    // the next dry run checks only what did not pass: a root, its module
    // sources and its executable as they were are not checked again
    let checked = |from: usize| -> Vec<String> {
        let calls = recorded_calls(&record);
        let v = calls[from..].iter().filter(|(_, a)| a == "validate");
        let mut roots: Vec<String> = v
            .map(|(d, _)| d.split('/').next().unwrap().into())
            .collect();
        roots.dedup();
        roots
    };
    let before = recorded_calls(&record).len();
    let (code, out, err) = t.csis_with(&["build", "--dry-run"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(checked(before), ["storage"], "{err}");
    assert!(
        err.contains("not validated") && err.contains("storage/"),
        "{err}"
    );
    // a module source changed: every root is checked again
    let module = t.root.join("tfmodules/aws_instance/main.tf");
    let text = std::fs::read_to_string(&module).unwrap();
    std::fs::write(&module, format!("{text}\n# changed\n")).unwrap();
    let before = recorded_calls(&record).len();
    let (code, out, err) = t.csis_with(&["build", "--dry-run"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(checked(before), ["storage", "instance-image"], "{err}");
}
