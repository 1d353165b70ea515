//! The standard-aws starter (../shared/reference/cs-image-system-0.1.1-starters/standard-aws),
//! loaded as csis loads it, with the ids the original ran with on moto
//! (the emission's `runtime-builders.yml`, its state bucket), mapped by
//! `csis_ops::tofu_roots` and written: the original's tofu roots, file for
//! file, but for csis's deliberate differences (docs/migrating.md), each
//! asserted here: the group's members and admins, declared `ENC[...]`, are
//! sealed by reference (the original writes them in clear), and the gid
//! shim runs `csis` rather than `cs-image-system`.

use std::path::{Path, PathBuf};

use csis_ops::tofu_roots::{emit, roots_input, FleetRecords};

const RUN: &str = "2026_11_30t06_26_25_779098";

fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("*** SKIPPED: {} is not there ***", p.display());
        None
    }
}

/// A copy of the starter with the moto ids of the reference run.
fn starter(reference: &Path, work: &Path) -> PathBuf {
    let tree = work.join("standard-aws");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(reference.join("cs-image-system-0.1.1-starters/standard-aws"))
        .arg(&tree)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let emission = reference.join("cs-image-system-0.1.1-emission/standard-aws-on-moto");
    std::fs::copy(
        emission.join("runtime-builders.yml"),
        tree.join("cfg/runtime-builders.yml"),
    )
    .unwrap();
    let sb = tree.join("cfg/state-backends.yml");
    let text = std::fs::read_to_string(&sb).unwrap();
    std::fs::write(&sb, text.replace("tfstate-REPLACE-ME", "tfstate-peer")).unwrap();
    tree
}

/// The starter's storage `data` requested `state` (it starts `active`),
/// and unmounted from its instance (a storage leaves `active` unattached).
fn retire_data(root: &Path, state: &str) {
    let edit = |path: &str, from: &str, to: &str| {
        let p = root.join(path);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{path}: {from}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
    };
    edit(
        "storages/storages.yaml",
        "state: active",
        &format!("state: {state}"),
    );
    let mount = "    storages:\n      - name: data\n        mount_point: /mnt/data\n";
    edit("instances/instances.yaml", mount, "");
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Our file with csis's deliberate differences turned back into the
/// original's form, each difference asserted first.
fn as_the_original(rel: &str, ours: &str, groups_yaml: &str) -> String {
    if rel.ends_with("opa-groups-group-generation-group-team.tf") {
        assert!(
            ours.contains(
                r#"members                   = [nonsensitive(local.sensitive["member_team_0"])]"#
            ),
            "{ours}"
        );
        assert!(
            ours.contains(
                r#"admins                    = [nonsensitive(local.sensitive["admin_team_0"])]"#
            ),
            "{ours}"
        );
        return ours
            .replace(
                r#"[nonsensitive(local.sensitive["member_team_0"])]"#,
                r#"["casey.charlie"]"#,
            )
            .replace(
                r#"[nonsensitive(local.sensitive["admin_team_0"])]"#,
                r#"["avery.alpha"]"#,
            );
    }
    if rel.ends_with("opa-groups-group-generation.tf") {
        let (head, sealed) = ours
            .split_once("\n\n# Sensitive values")
            .expect("a sensitive block");
        // the ciphertext as declared, by reference, opened at plan time
        for key in ["admin_team_0", "member_team_0"] {
            let line = sealed
                .lines()
                .find(|l| l.trim_start().starts_with(key))
                .unwrap();
            let marker = line.split('"').nth(1).unwrap();
            assert!(
                marker.starts_with("ENC[age:") && groups_yaml.contains(marker),
                "{line}"
            );
        }
        assert!(sealed.contains("\"csis\",\n        \"decrypt\",\n        \"--json\","));
        return format!("{head}\n");
    }
    if rel.ends_with("opa-groups-group-generation-outputs.tf") {
        assert!(ours.contains("        \"csis\",\n        \"identity\",\n"));
        return ours.replace("        \"csis\",\n", "        \"cs-image-system\",\n");
    }
    ours.to_string()
}

#[test]
fn the_standard_aws_starter_maps_to_the_originals_roots() {
    let Some(reference) = shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = starter(&reference, work.path());
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default())
        .unwrap_or_else(|d| panic!("the starter does not load: {d:#?}"));
    let records = FleetRecords {
        run: RUN.into(),
        ..Default::default()
    };
    let input = roots_input(&tree, &records).unwrap();
    let names: Vec<&str> = input.roots.iter().map(|r| r.builder.as_str()).collect();
    assert_eq!(names, ["opa-groups", "okta-users", "aws-ebs", "tofu-aws"]);
    let meta = root.join("meta-state");
    let e = emit(&tree, &records, &meta).unwrap();
    assert_eq!(e.roots.len(), 4);
    // `executable: open-tofu`, whose binary is `tofu`
    assert!(
        e.roots.iter().all(|r| r.executable == "tofu"),
        "{:?}",
        e.roots
    );

    let theirs = reference.join("cs-image-system-0.1.1-emission/standard-aws-on-moto");
    let groups_yaml = std::fs::read_to_string(root.join("groups/groups.yaml")).unwrap();
    let mut compared = 0;
    for r in &e.roots {
        let ours_dir = root.join("generated").join(&r.dir);
        let their_dir = theirs.join("generated").join(&r.dir);
        assert_eq!(
            files_under(&ours_dir),
            files_under(&their_dir),
            "{}",
            r.dir.display()
        );
        for f in files_under(&their_dir) {
            let rel = format!("{}/{}", r.dir.display(), f.display());
            let want = std::fs::read_to_string(their_dir.join(&f)).unwrap();
            let got = std::fs::read_to_string(ours_dir.join(&f)).unwrap();
            assert_eq!(as_the_original(&rel, &got, &groups_yaml), want, "{rel}");
            compared += 1;
        }
    }
    assert_eq!(compared, 15);
    assert_eq!(
        std::fs::read_to_string(meta.join("state-locations.yaml")).unwrap(),
        std::fs::read_to_string(theirs.join("meta-state/state-locations.yaml")).unwrap()
    );
}

#[test]
fn a_pinned_instance_boots_its_build_and_a_destroyed_storage_loses_its_module_call() {
    let Some(reference) = shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = starter(&reference, work.path());
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default()).unwrap();
    let mut records = FleetRecords {
        run: RUN.into(),
        ..Default::default()
    };
    records.pins.insert("team-node-1".into(), "ami-0abc".into());
    records
        .hostnames
        .insert("team-node-1".into(), "team-node-1-002".into());
    emit(&tree, &records, &root.join("meta-state")).unwrap();
    let dir = root.join("generated/instance-image/tofu-aws/instance-generation");
    let call =
        std::fs::read_to_string(dir.join("tofu-aws-instance-generation-instance-team_node_1.tf"))
            .unwrap();
    assert!(call.contains("  ami_id = \"ami-0abc\"\n"), "{call}");
    let ud = std::fs::read_to_string(dir.join("user-data-team_node_1.sh.tftpl")).unwrap();
    assert!(ud.contains("hostnamectl set-hostname 'team-node-1-002'"));

    // a destroyed storage is detached first: the instance no longer mounts it
    retire_data(&root, "destroyed");
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default())
        .unwrap_or_else(|d| panic!("{d:#?}"));
    let e = emit(&tree, &records, &root.join("meta-state")).unwrap();
    let names: Vec<&str> = e.roots.iter().map(|r| r.builder.as_str()).collect();
    assert_eq!(
        names,
        ["opa-groups", "okta-users", "aws-ebs", "tofu-aws"],
        "the storage root stays, to plan the destroy"
    );
    let storage = root.join("generated/storage/aws-ebs/storage-generation");
    assert!(storage.join("aws-ebs-storage-generation.tf").is_file());
    assert!(
        !storage
            .join("aws-ebs-storage-generation-storage-data.tf")
            .exists(),
        "the module call is gone"
    );
    assert_eq!(
        e.roots[2].removed,
        vec!["aws-ebs-storage-generation-storage-data.tf".to_string()]
    );
}

/// A data lifecycle reaches its module call: an s3 storage's as the
/// original's one `lifecycle_rules` rule (id `csis`, 0 days = none), an
/// efs storage's as `transition_to_ia` / `transition_to_archive`.
#[test]
fn a_data_lifecycle_reaches_the_module_call() {
    let Some(reference) = shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = starter(&reference, work.path());
    std::fs::write(
        root.join("cfg/zz-more-storage-builders.yml"),
        "storage_builders:\n  - name: aws-s3\n    type: tf-aws-s3\n    runtime: aws-main\n    executable: open-tofu\n    bucket_name: b\n  - name: aws-efs\n    type: tf-aws-efs\n    runtime: aws-main\n    executable: open-tofu\n",
    )
    .unwrap();
    std::fs::write(
        root.join("storages/zz-more.yaml"),
        "storages:\n  - name: logs\n    type: aws-s3\n    groups: [team]\n    bucket_name: team-logs\n    lifecycle:\n      transition_days: 30\n      storage_class: GLACIER\n  - name: shared\n    type: aws-efs\n    groups: [team]\n    lifecycle:\n      ia_days: 30\n      archive_days: 90\n",
    )
    .unwrap();
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default())
        .unwrap_or_else(|d| panic!("{d:#?}"));
    let records = FleetRecords {
        run: RUN.into(),
        ..Default::default()
    };
    emit(&tree, &records, &root.join("meta-state")).unwrap();
    let read = |dir: &str, file: &str| {
        std::fs::read_to_string(
            root.join("generated/storage")
                .join(dir)
                .join("storage-generation")
                .join(file),
        )
        .unwrap()
    };
    let s3 = read("aws-s3", "aws-s3-storage-generation-storage-logs.tf");
    let rule = s3
        .split_once("lifecycle_rules = ")
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no lifecycle_rules in\n{s3}"));
    for part in [
        r#""expire_days" = 0"#,
        r#""id" = "csis""#,
        r#""prefix" = """#,
        r#""storage_class" = "GLACIER""#,
        r#""transition_days" = 30"#,
    ] {
        assert!(rule.contains(part), "{part} in\n{s3}");
    }
    let efs = read("aws-efs", "aws-efs-storage-generation-storage-shared.tf");
    assert!(
        efs.contains(r#"transition_to_ia = "AFTER_30_DAYS""#),
        "{efs}"
    );
    assert!(
        efs.contains(r#"transition_to_archive = "AFTER_90_DAYS""#),
        "{efs}"
    );
}

/// A storage requested `archived` loses its module call, as a destroyed one
/// does (its volume goes once its archive is taken, `fleet::tofu`); one
/// recorded archived and declared active again is made from its archive:
/// `snapshot_name` names the original's `csis-<label>-archive`.
#[test]
fn an_archived_storage_loses_its_module_call_and_a_restore_names_its_archive() {
    let Some(reference) = shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = starter(&reference, work.path());
    retire_data(&root, "archived");
    let st = root.join("storages/storages.yaml");
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default())
        .unwrap_or_else(|d| panic!("{d:#?}"));
    let records = FleetRecords {
        run: RUN.into(),
        ..Default::default()
    };
    emit(&tree, &records, &root.join("meta-state")).unwrap();
    let storage = root.join("generated/storage/aws-ebs/storage-generation");
    let call = storage.join("aws-ebs-storage-generation-storage-data.tf");
    assert!(storage.join("aws-ebs-storage-generation.tf").is_file());
    assert!(!call.exists(), "an archived storage has no module call");

    let text = std::fs::read_to_string(&st).unwrap();
    std::fs::write(&st, text.replace("state: archived", "state: active")).unwrap();
    let tree = csis_rules::load(&root, &csis_rules::LoadOptions::default()).unwrap();
    emit(&tree, &records, &root.join("meta-state")).unwrap();
    let text = std::fs::read_to_string(&call).unwrap();
    assert!(
        !text.contains("snapshot_name"),
        "a new volume is blank: {text}"
    );
    let mut records = records;
    records.archived.insert("data".into());
    emit(&tree, &records, &root.join("meta-state")).unwrap();
    let text = std::fs::read_to_string(&call).unwrap();
    assert!(
        text.contains("  snapshot_name = \"csis-data-archive\"\n"),
        "a restore is made from the archive: {text}"
    );
}
