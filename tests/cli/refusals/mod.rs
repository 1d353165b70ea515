//! Every refusal the loader makes, each asserted with its message and its
//! location (file, line, column, field path). A case is the valid fixture
//! tree plus one file from tests/fixtures/config/refusals/ (`cfg--x.yml`
//! goes to `cfg/zz-x.yml`, `images--x.yaml` to `images/zz-x.yaml`). The
//! refusals of secrets are in `secrets`.

mod secrets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use csis_rules::{load, LoadOptions};
use csis_schema::Diagnostic;
use csis_testkit::copy_dir;

fn fixtures() -> PathBuf {
    csis_testkit::fixture("config")
}

/// The valid tree plus `case`, in a temp dir.
fn tree_with(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("valid"), dir.path());
    let (place, rest) = case.split_once("--").unwrap();
    std::fs::copy(
        fixtures().join("refusals").join(case),
        dir.path().join(place).join(format!("zz-{rest}")),
    )
    .unwrap();
    dir
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([("CSIS_TEST_USER".to_string(), "avery".to_string())])
}

fn errors_of(dir: &Path, opts: LoadOptions) -> Vec<Diagnostic> {
    match load(dir, &opts) {
        Ok(_) => panic!("the tree loaded; expected refusals"),
        Err(d) => d.into_iter().filter(|d| d.is_error()).collect(),
    }
}

fn errors(case: &str) -> Vec<Diagnostic> {
    let dir = tree_with(case);
    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(env()),
            runtime_checks: csis_ops::wiring::offline_checks(),
            ..Default::default()
        },
    );
    if std::env::var("DUMP").is_ok() {
        for x in &d {
            eprintln!("{case}: {x}");
        }
    }
    d
}

/// Assert one diagnostic at `file:line:col`, with `path`, whose message
/// contains `msg` (and whose hint contains `hint`, when given).
#[track_caller]
fn expect(diags: &[Diagnostic], loc: &str, path: &str, msg: &str, hint: Option<&str>) {
    let found = diags
        .iter()
        .find(|d| d.location() == loc && d.path == path && d.message.contains(msg));
    match found {
        None => panic!(
            "no diagnostic {loc}: {path}: ..{msg}..; got:\n{}",
            diags
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
        Some(d) => {
            if let Some(h) = hint {
                let got = d.hint.as_deref().unwrap_or("");
                assert!(
                    got.contains(h),
                    "hint of {d}: expected ..{h}.., got {got:?}"
                );
            }
        }
    }
}

#[test]
fn unknown_field_names_its_path() {
    let d = errors("cfg--unknown-field.yml");
    expect(
        &d,
        "cfg/zz-unknown-field.yml:9:7",
        "runtime_builders[0].credentials.profile_nme",
        "unknown field",
        Some("profile_name"),
    );
    assert_eq!(d.len(), 1, "{d:?}");
}

#[test]
fn legacy_keys_are_refused_with_their_replacement() {
    let d = errors("cfg--legacy-keys.yml");
    expect(
        &d,
        "cfg/zz-legacy-keys.yml:7:5",
        "runtime_builders[0].profile",
        "unknown field",
        Some("credentials.profile_name"),
    );
    expect(
        &d,
        "cfg/zz-legacy-keys.yml:12:7",
        "runtime_builders[0].networking.security_group_ids",
        "unknown field",
        Some("addl_security_groups"),
    );
    expect(
        &d,
        "cfg/zz-legacy-keys.yml:17:5",
        "image_builders[0].parameters",
        "unknown field",
        Some("variables"),
    );
}

#[test]
fn duplicate_names_and_aliases_name_the_first_declaration() {
    let d = errors("cfg--duplicate-names.yml");
    expect(
        &d,
        "cfg/zz-duplicate-names.yml:3:5",
        "runtime_builders[0].name",
        "duplicate runtime name `sim`",
        Some("already declared at cfg/runtime-builders.yml:3:5"),
    );
    expect(
        &d,
        "cfg/zz-duplicate-names.yml:6:5",
        "runtime_builders[1].aliases[0]",
        "duplicate runtime alias `simulated`",
        Some("cfg/runtime-builders.yml:3:5"),
    );
}

#[test]
fn reserved_names_and_templates_in_name_or_type() {
    let d = errors("cfg--reserved-names.yml");
    expect(
        &d,
        "cfg/zz-reserved-names.yml:3:11",
        "runtime_builders[0].name",
        "`default` is a reserved name",
        None,
    );
    expect(
        &d,
        "cfg/zz-reserved-names.yml:6:11",
        "runtime_builders[1].name",
        "may not contain `{{`",
        None,
    );
    expect(
        &d,
        "cfg/zz-reserved-names.yml:10:11",
        "runtime_builders[2].type",
        "may not contain `{{`",
        None,
    );
    expect(
        &d,
        "cfg/zz-reserved-names.yml:13:11",
        "image_builders[0].name",
        "may not contain `/`",
        None,
    );
    assert_eq!(d.len(), 4, "{d:?}");
}

#[test]
fn a_second_default_in_a_class() {
    let d = errors("cfg--two-defaults.yml");
    expect(
        &d,
        "cfg/zz-two-defaults.yml:3:5",
        "runtime_builders[0].is_default",
        "a second default runtime: `second-sim`",
        Some("at most one"),
    );
    assert_eq!(d.len(), 1, "{d:?}");
}

#[test]
fn foreign_keys_of_builders() {
    let d = errors("cfg--foreign-keys.yml");
    expect(
        &d,
        "cfg/zz-foreign-keys.yml:5:14",
        "image_builders[0].runtime",
        "runtime `nowhere` is not declared",
        Some("declared runtimes: sim, docker-local, aws-east2"),
    );
    expect(
        &d,
        "cfg/zz-foreign-keys.yml:8:14",
        "image_builders[1].runtime",
        "packer-ebs cannot bake on runtime `sim` of type dummy",
        Some("aws"),
    );
    expect(
        &d,
        "cfg/zz-foreign-keys.yml:11:11",
        "runtime_builders[0].type",
        "unknown runtime type `azure`",
        Some("aws, docker and dummy"),
    );
}

#[test]
fn foreign_keys_of_images() {
    let d = errors("images--foreign-keys.yaml");
    expect(
        &d,
        "images/zz-foreign-keys.yaml:4:19",
        "images[0].source_image",
        "source_image `no-such-base` names no OS builder or image",
        Some("deb-12"),
    );
    expect(
        &d,
        "images/zz-foreign-keys.yaml:10:24",
        "images[1].runtimes[0].image_builder",
        "image builder `no-such-builder` is not declared",
        Some("sim-builder"),
    );
    expect(
        &d,
        "images/zz-foreign-keys.yaml:17:15",
        "images[2].modifications[0].type",
        "mod builder `no-such-mod` is not declared",
        Some("bash-remote"),
    );
    assert_eq!(d.len(), 3, "{d:?}");
}

#[test]
fn a_source_image_cycle_is_printed_as_the_cycle() {
    let d = errors("images--cycle.yaml");
    expect(
        &d,
        "images/zz-cycle.yaml:4:19",
        "images[0].source_image",
        "source_image cycle: cyc-a -> cyc-b -> cyc-c -> cyc-a",
        None,
    );
    assert_eq!(d.len(), 1, "reported once: {d:?}");
}

#[test]
fn networking_subnets_and_security_groups() {
    let d = errors("cfg--networking.yml");
    expect(
        &d,
        "cfg/zz-networking.yml:10:9",
        "runtime_builders[0].networking.subnets",
        "exactly one subnet must have `is_default: true` (found 2)",
        None,
    );
    expect(
        &d,
        "cfg/zz-networking.yml:21:9",
        "runtime_builders[1].networking.subnets",
        "(found 0)",
        None,
    );
    expect(
        &d,
        "cfg/zz-networking.yml:28:29",
        "runtime_builders[2].networking.addl_security_groups",
        "is 6, more than the limit of 5",
        None,
    );
    expect(
        &d,
        "cfg/zz-networking.yml:26:24",
        "runtime_builders[2].session_mechanism",
        "unknown session mechanism 'iap' (supported: ssm)",
        None,
    );
}

#[test]
fn docker_host_and_context_and_machine_types() {
    let d = errors("cfg--docker.yml");
    expect(
        &d,
        "cfg/zz-docker.yml:6:14",
        "runtime_builders[0].context",
        "declare `host` or `context`, not both",
        None,
    );
    expect(
        &d,
        "cfg/zz-docker.yml:10:27",
        "runtime_builders[1].default_machine_type",
        "`huge` names no declared machine type",
        Some("small, medium"),
    );
    assert_eq!(d.len(), 2, "{d:?}");
}

#[test]
fn docker_tag_length_and_label_keys() {
    let d = errors("images--docker-names.yaml");
    expect(
        &d,
        "images/zz-docker-names.yaml:3:11",
        "images[0].name",
        "a docker tag is at most 128 characters",
        None,
    );
    expect(
        &d,
        "images/zz-docker-names.yaml:10:7",
        "images[1].tags.bad key",
        "docker label key `bad key` carries whitespace or `=`",
        None,
    );
    assert_eq!(d.len(), 2, "{d:?}");
}

#[test]
fn n9_and_private_keys() {
    let d = errors("cfg--n9.yml");
    expect(
        &d,
        "cfg/zz-n9.yml:21:9",
        "os_builders[0].runtimes[0]",
        "no admin public key and runtime `aws-no-session` has no session mechanism",
        Some("session_mechanism: ssm"),
    );
    expect(
        &d,
        "cfg/zz-n9.yml:27:9",
        "os_builders[1].admin_public_keys[0]",
        "looks like private key material",
        None,
    );
    assert_eq!(d.len(), 2, "{d:?}");
    let d = errors("cfg--zz-config-private-key.yml");
    expect(
        &d,
        "cfg/zz-zz-config-private-key.yml:3:22",
        "config.admin_public_keys[0]",
        "looks like private key material",
        None,
    );
}

#[test]
fn os_builder_fields() {
    let d = errors("cfg--os-fields.yml");
    expect(
        &d,
        "cfg/zz-os-fields.yml:7:13",
        "os_builders[0].update",
        "a bare update policy name is refused",
        Some("{policy: security}"),
    );
    expect(
        &d,
        "cfg/zz-os-fields.yml:13:21",
        "os_builders[1].family_version",
        "rhel accepts family_version 8, 9 or 10",
        None,
    );
    expect(
        &d,
        "cfg/zz-os-fields.yml:16:5",
        "os_builders[2].runtimes",
        "at least one runtime entry",
        None,
    );
}

#[test]
fn modifications_and_parent_policy() {
    let d = errors("images--mods.yaml");
    expect(
        &d,
        "images/zz-mods.yaml:9:9",
        "images[0].modifications[0].playbooks",
        "ansible modification `nothing` has no playbooks",
        None,
    );
    expect(
        &d,
        "images/zz-mods.yaml:12:9",
        "images[0].modifications[1]",
        "has no script, scripts or ensure",
        None,
    );
    expect(
        &d,
        "images/zz-mods.yaml:16:17",
        "images[0].modifications[2].ensure",
        "every list empty",
        None,
    );
    expect(
        &d,
        "images/zz-mods.yaml:19:20",
        "images[1].parent_policy",
        "unknown parent_policy `sometimes`",
        Some("pinned"),
    );
    expect(
        &d,
        "images/zz-mods.yaml:22:5",
        "images[2].runtimes",
        "at least one runtime entry",
        None,
    );
}

#[test]
fn references_backends_and_mod_builders() {
    let d = errors("cfg--references.yml");
    expect(
        &d,
        "cfg/zz-references.yml:6:17",
        "runtime_builders[0].executable",
        "executable 'no-such-exe' is not declared in cfg/executables.yml",
        Some("- name: no-such-exe"),
    );
    expect(
        &d,
        "cfg/zz-references.yml:7:26",
        "runtime_builders[0].state_configuration",
        "`no-such-backend` names no declared state backend",
        Some("local-state"),
    );
    expect(
        &d,
        "cfg/zz-references.yml:8:21",
        "runtime_builders[0].teardown_after",
        "`soon` is not a duration",
        None,
    );
    expect(
        &d,
        "cfg/zz-references.yml:13:10",
        "state_backends[0].key",
        "key may not be empty",
        None,
    );
    expect(
        &d,
        "cfg/zz-references.yml:16:11",
        "state_backends[1].path",
        "`../elsewhere` is refused",
        None,
    );
    expect(
        &d,
        "cfg/zz-references.yml:21:5",
        "state_backends[2].access_key",
        "unknown field",
        Some("no credential belongs in the tree"),
    );
    expect(
        &d,
        "cfg/zz-references.yml:25:22",
        "mod_builders[0].execute_command",
        "does not apply to mod builders of type ansible",
        None,
    );
    expect(
        &d,
        "cfg/zz-references.yml:28:22",
        "mod_builders[1].execute_command",
        "a packer `{{ .Path }}` cannot be written in cfg/",
        None,
    );
}

#[test]
fn docker_os_entries_pin_digests_and_query_what_a_daemon_answers() {
    let d = errors("cfg--docker-os.yml");
    expect(
        &d,
        "cfg/zz-docker-os.yml:9:19",
        "os_builders[0].runtimes[0].image_id",
        "image_id 'debian:12' is not a digest reference",
        Some("@sha256:"),
    );
    expect(
        &d,
        "cfg/zz-docker-os.yml:11:11",
        "os_builders[0].runtimes[0].query",
        "query key `root_device_type` cannot be answered by a docker daemon",
        None,
    );
    assert_eq!(d.len(), 2, "{d:?}");
}

#[test]
fn image_names_runtimes_and_mod_items() {
    let d = errors("images--more.yaml");
    expect(
        &d,
        "images/zz-more.yaml:3:11",
        "images[0].name",
        "image `deb-12` has the name of an OS builder",
        Some("cfg/os-builders.yml:3:5"),
    );
    expect(
        &d,
        "images/zz-more.yaml:11:24",
        "images[1].runtimes[1].image_builder",
        "image builder `sim-builder` appears twice",
        None,
    );
    expect(
        &d,
        "images/zz-more.yaml:15:18",
        "images[1].modifications[0].scripts",
        "`scripts` belongs to a bash-remote modification",
        None,
    );
    expect(
        &d,
        "images/zz-more.yaml:16:15",
        "images[1].modifications[1].name",
        "duplicate modification name `both`",
        None,
    );
    expect(
        &d,
        "images/zz-more.yaml:20:11",
        "images[1].modifications[1].ensure.files[0].mode",
        "mode 644 is not an octal mode",
        Some("\"0644\""),
    );
}

#[test]
fn all_errors_of_a_load_are_reported_together() {
    let dir = tree_with("cfg--docker.yml");
    std::fs::copy(
        fixtures().join("refusals/images--cycle.yaml"),
        dir.path().join("images/zz-cycle.yaml"),
    )
    .unwrap();
    std::fs::copy(
        fixtures().join("refusals/cfg--unknown-field.yml"),
        dir.path().join("cfg/zz-unknown-field.yml"),
    )
    .unwrap();
    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(env()),
            runtime_checks: csis_ops::wiring::offline_checks(),
            ..Default::default()
        },
    );
    expect(
        &d,
        "cfg/zz-docker.yml:6:14",
        "runtime_builders[0].context",
        "not both",
        None,
    );
    expect(
        &d,
        "cfg/zz-unknown-field.yml:9:7",
        "runtime_builders[0].credentials.profile_nme",
        "unknown field",
        None,
    );
    expect(
        &d,
        "images/zz-cycle.yaml:4:19",
        "images[0].source_image",
        "cycle",
        None,
    );
}

#[test]
fn invalid_yaml_names_its_place() {
    let dir = tree_with("cfg--two-defaults.yml");
    std::fs::write(
        dir.path().join("cfg/zz-two-defaults.yml"),
        "runtime_builders:\n  - name: x\n    type: [dummy\n",
    )
    .unwrap();
    let d = errors_of(
        dir.path(),
        LoadOptions {
            env: Some(env()),
            ..Default::default()
        },
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].file, "cfg/zz-two-defaults.yml");
    assert!(d[0].line >= 3, "{}", d[0]);
    assert!(d[0].message.starts_with("invalid YAML"), "{}", d[0]);
}

#[test]
#[ignore]
fn dump_all() {
    for e in std::fs::read_dir(fixtures().join("refusals")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        let dir = tree_with(&name);
        match load(
            dir.path(),
            &LoadOptions {
                env: Some(env()),
                ..Default::default()
            },
        ) {
            Ok(_) => eprintln!("{name}: LOADED"),
            Err(d) => d.iter().for_each(|x| eprintln!("{name}: {x}")),
        }
    }
}

#[test]
fn a_missing_playbook_or_script_is_an_error_at_its_field() {
    let dir = tree_with("images--missing-files.yaml");
    let diags = load(
        dir.path(),
        &LoadOptions {
            env: Some(env()),
            ..Default::default()
        },
    )
    .map(|_| ())
    .expect_err("a missing mod file refuses the tree (mod files must exist)");
    let d: Vec<Diagnostic> = diags
        .into_iter()
        .filter(|d| d.message.contains("does not exist"))
        .collect();
    assert!(d.iter().all(|d| d.is_error()));
    expect(
        &d,
        "images/zz-missing-files.yaml:9:20",
        "images[0].modifications[0].playbooks[1]",
        "`playbooks/nope.yml` does not exist in the tree: a bake of `lost` would fail",
        Some("relative to the tree's root"),
    );
    expect(
        &d,
        "images/zz-missing-files.yaml:13:11",
        "images[0].modifications[1].scripts[1]",
        "`scripts/gone.sh` does not exist in the tree",
        None,
    );
    assert_eq!(d.len(), 2, "{d:?}");
}
