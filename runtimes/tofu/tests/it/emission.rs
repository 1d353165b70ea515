//! The roots of the standard-aws starter, written from plain data equal to
//! what the original passed, against the original 0.1.1's own emission on
//! moto (../shared/reference/cs-image-system-0.1.1-emission/standard-aws-on-moto):
//! every tofu file byte for byte; every `.tf` parses; secrets stay out;
//! state locations as the original records them; refusals before any write.

use crate::common;

use csis_tofu::*;

const ROOT_DIRS: [&str; 4] = [
    "identity/opa-groups/group-generation",
    "identity/okta-users/user-generation",
    "storage/aws-ebs/storage-generation",
    "instance-image/tofu-aws/instance-generation",
];

fn emit_into(input: &RootsInput) -> (tempfile::TempDir, std::path::PathBuf, Emission) {
    let work = tempfile::tempdir().unwrap();
    let generated = work.path().join("generated");
    let e = emit(input, work.path(), &generated).unwrap();
    (work, generated, e)
}

#[test]
fn the_standard_aws_roots_equal_the_originals_files() {
    let Some(reference) = common::reference() else {
        return;
    };
    let (_work, generated, e) = emit_into(&common::standard_aws());
    assert_eq!(e.roots.len(), 4);
    let mut compared = 0;
    for dir in ROOT_DIRS {
        let ours = common::files_under(&generated.join(dir));
        let theirs = common::files_under(&reference.join("generated").join(dir));
        assert_eq!(ours, theirs, "the files of {dir}");
        for f in &theirs {
            let want =
                std::fs::read_to_string(reference.join("generated").join(dir).join(f)).unwrap();
            let got = std::fs::read_to_string(generated.join(dir).join(f)).unwrap();
            assert_eq!(got, want, "{dir}/{}", f.display());
            compared += 1;
        }
    }
    assert_eq!(compared, 15, "every tofu file of the reference compared");
}

#[test]
fn every_emitted_tf_parses_and_a_second_emission_writes_nothing() {
    let input = common::standard_aws();
    let (work, generated, first) = emit_into(&input);
    assert!(first.roots.iter().all(|r| r.files.iter().all(|(_, w)| *w)));
    for dir in ROOT_DIRS {
        for f in common::files_under(&generated.join(dir)) {
            if f.extension().is_some_and(|x| x == "tf" || x == "hcl") {
                let text = std::fs::read_to_string(generated.join(dir).join(&f)).unwrap();
                hcl::parse(&text).unwrap_or_else(|e| panic!("{dir}/{}: {e}", f.display()));
            }
        }
    }
    let again = emit(&input, work.path(), &generated).unwrap();
    assert!(
        again.roots.iter().all(|r| r.files.iter().all(|(_, w)| !*w)),
        "write-if-changed"
    );
}

#[test]
fn the_user_data_ends_with_the_launch_marker_and_reads_gids_by_reference() {
    let (_work, generated, e) = emit_into(&common::standard_aws());
    let dir = generated.join(ROOT_DIRS[3]);
    let ud = std::fs::read_to_string(dir.join("user-data-team_node_1.sh.tftpl")).unwrap();
    assert!(ud.ends_with("date -u +%FT%TZ > /var/lib/csis/launch-applied"));
    let call =
        std::fs::read_to_string(dir.join("tofu-aws-instance-generation-instance-team_node_1.tf"))
            .unwrap();
    assert!(call.contains(
        r#""group_gid" = data.terraform_remote_state.opa_groups.outputs.group_gids["team"]"#
    ));
    assert!(call.contains("data.terraform_remote_state.aws_ebs.outputs.storage_data.volume_id"));
    let sums = &e.roots[3].user_data_sha256;
    assert_eq!(
        sums,
        &vec![("team_node_1".to_string(), csis_tofu::sha256(&ud))]
    );
}

#[test]
fn a_pinned_image_is_written_as_its_build_and_the_module_ignores_later_changes() {
    let mut input = common::standard_aws();
    let mut inst = common::instance_call();
    inst.image_ref = ImageRef::Pinned {
        build: "ami-0123456789abcdef0".into(),
    };
    input.roots[3] = common::instances_root(vec![inst]);
    let (_work, generated, _) = emit_into(&input);
    let dir = generated.join(ROOT_DIRS[3]);
    let call =
        std::fs::read_to_string(dir.join("tofu-aws-instance-generation-instance-team_node_1.tf"))
            .unwrap();
    assert!(
        call.contains("  ami_id = \"ami-0123456789abcdef0\"\n"),
        "{call}"
    );
    assert!(!call.contains("ami_name_pattern"));
    let main = std::fs::read_to_string(dir.join("tofu-aws-instance-generation.tf")).unwrap();
    assert!(
        !main.contains("team_node_1_ami_id"),
        "no image variable for a pinned instance"
    );
    // the image and the user data are immutable after launch: the team's
    // module (referenced, not rewritten) ignores their changes
    if let Some(r) = common::reference() {
        let module = r.join(
            "../../cs-image-system-0.1.1-starters/standard-aws/tfmodules/aws_instance/main.tf",
        );
        let text = std::fs::read_to_string(module).unwrap();
        assert!(text.contains("ignore_changes = [ami, user_data]"));
        assert!(call.contains("source = \"../../../../tfmodules/aws_instance\""));
    }
}

#[test]
fn image_vars_come_from_the_record_or_the_bake() {
    let work = tempfile::tempdir().unwrap();
    assert!(
        write_image_vars(work.path(), &[("team-node-1".into(), "ami-1".into())], None).unwrap()
    );
    let text = std::fs::read_to_string(work.path().join("instances.auto.tfvars")).unwrap();
    assert_eq!(text, "team_node_1_ami_id = \"ami-1\"\n");
    assert!(
        !write_image_vars(work.path(), &[("team-node-1".into(), "ami-1".into())], None).unwrap()
    );
    // a root with ephemerals says whether they stand
    assert!(write_image_vars(work.path(), &[], Some(false)).unwrap());
    let text = std::fs::read_to_string(work.path().join("instances.auto.tfvars")).unwrap();
    assert_eq!(text, "ephemeral_present = false\n");
}

#[test]
fn state_locations_are_recorded_as_the_original_does() {
    let Some(reference) = common::reference() else {
        return;
    };
    let input = common::standard_aws();
    let (work, _generated, e) = emit_into(&input);
    let meta = work.path().join("meta-state");
    let entries: Vec<(String, Location)> = e
        .roots
        .iter()
        .map(|r| (r.builder.clone(), r.location.clone()))
        .collect();
    assert!(backend::record_locations(&meta, &entries).unwrap());
    let got = std::fs::read_to_string(meta.join("state-locations.yaml")).unwrap();
    let want = std::fs::read_to_string(reference.join("meta-state/state-locations.yaml")).unwrap();
    assert_eq!(got, want);
    // the same again changes nothing; a moved root is refused, the file kept
    assert!(!backend::record_locations(&meta, &entries).unwrap());
    let mut moved = entries.clone();
    moved[0].1.location = "s3://elsewhere/x.tfstate".into();
    let err = backend::record_locations(&meta, &moved)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("opa-groups") && err.contains("migration"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(meta.join("state-locations.yaml")).unwrap(),
        want
    );
}

#[test]
fn two_roots_at_one_state_location_are_refused_before_any_write() {
    let mut input = common::standard_aws();
    // a second storage builder whose name labels like aws-ebs: same key
    let mut twin = common::storage_root();
    twin.builder = "aws.ebs".into();
    input.roots.push(twin);
    let work = tempfile::tempdir().unwrap();
    let err = emit(&input, work.path(), &work.path().join("generated"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("aws-ebs") && err.contains("aws.ebs") && err.contains("aws_ebs.tfstate"),
        "{err}"
    );
    assert!(!work.path().join("generated").exists(), "nothing written");
}

#[test]
fn a_hostile_mount_point_or_builder_name_is_refused() {
    let mut input = common::standard_aws();
    let mut inst = common::instance_call();
    inst.mounts[0].mount_point = "/mnt/x' ; rm -rf / #".into();
    input.roots[3] = common::instances_root(vec![inst]);
    let work = tempfile::tempdir().unwrap();
    let err = emit(&input, work.path(), &work.path().join("generated"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mount point"), "{err}");
    let mut input = common::standard_aws();
    input.roots[2].builder = "../escape".into();
    let err = emit(&input, work.path(), &work.path().join("generated"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a plain name"), "{err}");
    assert!(!work.path().join("generated").exists());
}

#[test]
fn a_local_backend_writes_its_path_relative_to_the_root() {
    let mut input = common::standard_aws();
    input.roots[0].backend = StateBackend {
        name: "local-dev".into(),
        kind: BackendKind::Local {
            dir: "state".into(),
        },
    };
    let (_work, generated, e) = emit_into(&input);
    let file = generated
        .join(ROOT_DIRS[0])
        .join("opa-groups-group-generation.tfbackend.hcl");
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        "# Backend 'local-dev' (local) partial configuration for workspace opa-groups\npath = \"../../../../state/opa_groups.tfstate\""
    );
    assert_eq!(
        e.roots[0].location.location,
        "local://state/opa_groups.tfstate"
    );
    let main = std::fs::read_to_string(
        generated
            .join(ROOT_DIRS[0])
            .join("opa-groups-group-generation.tf"),
    )
    .unwrap();
    assert!(main.contains("    backend \"local\" {\n    }"));
}

#[test]
fn an_instance_no_longer_declared_loses_its_files_and_others_stay() {
    let mut input = common::standard_aws();
    let (work, generated, _) = emit_into(&input);
    let dir = generated.join(ROOT_DIRS[3]);
    std::fs::write(dir.join(".terraform.lock.hcl"), "# the team's lock\n").unwrap();
    input.roots[3] = common::instances_root(vec![]);
    let e = emit(&input, work.path(), &generated).unwrap();
    assert_eq!(
        e.roots[3].removed,
        vec![
            "tofu-aws-instance-generation-instance-team_node_1.tf".to_string(),
            "user-data-team_node_1.sh.tftpl".to_string()
        ]
    );
    assert!(dir.join("tofu-aws-instance-generation.tf").is_file());
    assert!(
        dir.join(".terraform.lock.hcl").is_file(),
        "a file not of the emission stays"
    );
}
