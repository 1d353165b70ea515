//! The fleet's model (docs/fleet.md section 1): instances, storages, users,
//! instance and user builders load into strict models and resolve with
//! their defaults; each refusal is one error at its file, line and field,
//! on a small tree (the fleet-docker fixture, or the `valid` fixture with
//! an AWS fleet added); the original's starters load with their fleet
//! resolved and nothing "not used by csis yet" but what lives on gcloud.
//! The refusals are in `refusals`.

mod refusals;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use csis_rules::{load, Attach, ImagePolicy, LoadOptions, OnFailure, StorageState, Tree};
use csis_schema::diag::Diagnostic;

fn opts() -> LoadOptions {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("USER".into(), "tester".into());
    LoadOptions {
        env: Some(env),
        ..Default::default()
    }
}

/// A copy of `base` with `files` written over it (an empty text removes
/// the file).
fn tree_of(base: &Path, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir_with(
        base,
        dir.path(),
        &[
            ("@REPO@", "csis-fleet-test"),
            ("@BASE@", "csis-fleet-base:1"),
        ],
    );
    for (path, text) in files {
        let p = dir.path().join(path);
        if text.is_empty() {
            std::fs::remove_file(&p).unwrap();
            continue;
        }
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn docker(files: &[(&str, &str)]) -> Result<Tree, Vec<Diagnostic>> {
    let dir = tree_of(&csis_testkit::fixture("fleet-docker"), files);
    load(dir.path(), &opts())
}

/// The `valid` fixture with a fleet on its aws runtime: a posix group
/// `ops` on image `node` (baked on aws-east2), an ebs storage `vol`.
const AWS_FLEET: &str = "group_builders:
  - name: posix-local
    type: posix
    is_default: true
instance_builders:
  - name: tofu-aws
    type: tofu
    is_default: true
    runtime: aws-east2
";
const AWS_GROUPS: &str = "groups:
  - name: ops
    gid: 3000
    members: [ann]
users:
  - name: ann
    first_name: Ann
    last_name: Ops
    uid: 3001
";
const AWS_IMAGE: &str = "images:
  - name: node
    source_image: deb-12
    group: ops
    runtimes:
      - image_builder: pckr-ebs
";
const AWS_STORAGE: &str = "storages:
  - name: vol
    groups: [ops]
";

fn aws(files: &[(&str, &str)]) -> Result<Tree, Vec<Diagnostic>> {
    let mut all = vec![
        ("cfg/zz-fleet.yml", AWS_FLEET),
        ("groups/groups.yaml", AWS_GROUPS),
        ("images/zz-node.yaml", AWS_IMAGE),
        ("storages/storages.yaml", AWS_STORAGE),
    ];
    all.extend_from_slice(files);
    let dir = tree_of(&csis_testkit::fixture("config/valid"), &all);
    load(dir.path(), &opts())
}

/// The one error of a load: at `file`, `line`, `path`, saying `says`.
#[track_caller]
fn one_error(r: Result<Tree, Vec<Diagnostic>>, file: &str, line: u32, path: &str, says: &str) {
    let d = r.expect_err("the load is refused");
    let errors: Vec<&Diagnostic> = d.iter().filter(|d| d.is_error()).collect();
    let shown: Vec<String> = errors
        .iter()
        .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.path, d.message))
        .collect();
    assert_eq!(errors.len(), 1, "{shown:#?}");
    let e = errors[0];
    assert_eq!(
        (e.file.as_str(), e.line, e.path.as_str()),
        (file, line, path),
        "{shown:#?}"
    );
    assert!(e.message.contains(says), "{shown:#?}");
}

fn instances(text: &str) -> (&'static str, String) {
    ("instances/instances.yaml", format!("instances:\n{text}"))
}

#[track_caller]
fn docker_refuses(file_text: (&str, &str), line: u32, path: &str, says: &str) {
    let (file, text) = file_text;
    one_error(docker(&[(file, text)]), file, line, path, says);
}

// -- what loads -------------------------------------------------------------

#[test]
fn the_docker_fleet_resolves_with_its_defaults() {
    let t = docker(&[]).unwrap_or_else(|d| panic!("{d:#?}"));
    assert!(t.unused.is_empty(), "{:?}", t.unused);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let names: Vec<&str> = t.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["app-follow", "app-pinned", "app-proof"]);

    let f = t.instance("APP-FOLLOW").unwrap();
    assert_eq!(f.image_policy, ImagePolicy::Follow);
    assert_eq!(
        (
            f.image.as_str(),
            f.group.as_str(),
            f.builder.as_str(),
            f.builder_type.as_str(),
            f.runtime.as_str()
        ),
        ("app", "crew", "containers", "docker", "docker-fleet")
    );
    assert_eq!(f.machine_type, None);
    assert_eq!(f.on_failure, OnFailure::Teardown);
    assert!(f.mounts.is_empty() && !f.ephemeral);

    let p = t.instance("app-pinned").unwrap();
    assert_eq!(p.image_policy, ImagePolicy::Pinned);
    assert_eq!(p.machine_type.as_deref(), Some("medium"));
    assert_eq!(p.mounts.len(), 1);
    let m = &p.mounts[0];
    assert_eq!(
        (
            m.storage.as_str(),
            m.mount_point.as_str(),
            m.storage_type.as_str(),
            m.builder.as_str(),
            m.group.as_str(),
            m.share_mode.as_str(),
            m.public_read
        ),
        (
            "data",
            "/mnt/data",
            "volume",
            "volumes",
            "crew",
            "2770",
            false
        )
    );

    let e = t.instance("app-proof").unwrap();
    assert!(e.ephemeral);
    assert_eq!(e.on_failure, OnFailure::Keep);

    let s = t.storage("data").unwrap();
    assert_eq!(
        (
            s.builder.as_str(),
            s.builder_type.as_str(),
            s.storage_type.as_str(),
            s.runtime.as_str()
        ),
        ("volumes", "docker-volume", "volume", "docker-fleet")
    );
    assert_eq!(s.groups, ["crew"]);
    assert_eq!(s.requested, StorageState::Active);
    assert_eq!(s.attach, Attach::Many);
    assert!(s.posix && !s.supports_archive);
    assert_eq!(s.tags.get("purpose").map(String::as_str), Some("data"));
    assert_eq!(t.instances_mounting("data").len(), 1);

    assert_eq!(t.users.len(), 1);
    let u = &t.users[0];
    assert_eq!((u.name.as_str(), u.uid), ("pat", Some(2101)));
    assert_eq!(u.builder.as_deref(), Some("posix-users"));
    assert_eq!(t.user_builders.len(), 1);
    let b = t.instance_builder("default").unwrap();
    assert_eq!(
        (b.name.as_str(), b.type_.as_str()),
        ("containers", "docker")
    );
}

#[test]
fn defaults_fill_what_an_item_leaves_out() {
    let t = docker(&[
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n  - name: shared\n    groups: [crew]\n    share_mode: \"2775\"\n",
        ),
        (
            "cfg/runtime-builders.yml",
            "runtime_builders:\n  - name: docker-fleet\n    type: docker\n    executable: docker\n    repository: r\n    default_machine_type: small\n    on_failure: keep\n    machine_types:\n      small: { cpus: 1, memory: 256m }\n",
        ),
        instances(
            "  - name: box\n    image: app\n    type: default\n    storages:\n      - name: shared\n        mount_point: /mnt/first\n      - name: data\n      - name: shared\n        mount_point: /mnt/later\n",
        )
        .to_ref(),
    ])
    .unwrap_or_else(|d| panic!("{d:#?}"));
    let i = t.instance("box").unwrap();
    // a duplicate storage keeps the later item; no mount_point: /mnt/storage
    let m: Vec<(&str, &str, &str)> = i
        .mounts
        .iter()
        .map(|m| {
            (
                m.storage.as_str(),
                m.mount_point.as_str(),
                m.share_mode.as_str(),
            )
        })
        .collect();
    assert_eq!(
        m,
        [
            ("data", "/mnt/storage", "2770"),
            ("shared", "/mnt/later", "2775")
        ]
    );
    // on_failure: the runtime's when the instance has none (a docker
    // runtime refuses teardown_after: a_docker_runtime_refuses_teardown_after)
    assert_eq!(i.on_failure, OnFailure::Keep);
    assert_eq!(t.storage("data").unwrap().requested, StorageState::Active);
}

trait ToRef {
    fn to_ref(&self) -> (&str, &str);
}
impl ToRef for (&'static str, String) {
    fn to_ref(&self) -> (&str, &str) {
        (self.0, self.1.as_str())
    }
}

#[test]
fn an_aws_fleet_resolves_on_its_runtime() {
    let t =
        aws(&[instances("  - name: a\n    image: node\n    storages: [{name: vol}]\n").to_ref()])
            .unwrap_or_else(|d| panic!("{d:#?}"));
    let i = t.instance("a").unwrap();
    assert_eq!(
        (i.builder_type.as_str(), i.runtime.as_str()),
        ("tofu", "aws-east2")
    );
    let s = t.storage("vol").unwrap();
    assert_eq!(s.attach, Attach::Single);
    assert!(s.supports_archive);
    assert_eq!(s.size_gb, Some(100), "the builder's size");
    assert_eq!(i.mounts[0].storage_type, "ebs");
}

// -- the original's starters --------------------------------------------------

fn reference() -> Option<PathBuf> {
    let p = csis_testkit::workspace().join("../shared/reference/cs-image-system-0.1.1-starters");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipped: {} does not exist", p.display());
        None
    }
}

#[track_caller]
fn loaded(p: &Path) -> Tree {
    load(p, &opts()).unwrap_or_else(|d| {
        panic!(
            "{} did not load:\n{}",
            p.display(),
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

#[test]
fn the_aws_starters_load_their_fleet() {
    let Some(r) = reference() else { return };
    for s in ["standard-aws", "standard-aws-posix"] {
        let t = loaded(&r.join(s));
        assert!(t.unused.is_empty(), "{s}: {:?}", t.unused);
        assert!(t.warnings.is_empty(), "{s}: {:?}", t.warnings);
        let i = t.instance("team-node-1").unwrap();
        assert_eq!(
            (
                i.image.as_str(),
                i.group.as_str(),
                i.builder.as_str(),
                i.builder_type.as_str(),
                i.runtime.as_str(),
                i.machine_type.as_deref()
            ),
            (
                "team-node",
                "team",
                "tofu-aws",
                "tofu",
                "aws-main",
                Some("t3.medium")
            ),
            "{s}"
        );
        let m = &i.mounts[0];
        assert_eq!(
            (
                m.storage.as_str(),
                m.mount_point.as_str(),
                m.storage_type.as_str()
            ),
            ("data", "/mnt/data", "ebs"),
            "{s}"
        );
        let st = t.storage("data").unwrap();
        assert_eq!(
            (st.attach, st.requested),
            (Attach::Single, StorageState::Active)
        );
        assert!(!t.users.is_empty(), "{s}");
        assert_eq!(t.instance_builders.len(), 1, "{s}");
        assert_eq!(t.user_builders.len(), 1, "{s}");
    }
    let t = loaded(&r.join("standard-aws-posix"));
    let uids: Vec<Option<u32>> = t.users.iter().map(|u| u.uid).collect();
    assert_eq!(uids, [Some(3001), Some(3002), Some(3999)]);
    assert_eq!(t.users[0].public_keys.len(), 1);
}

#[test]
fn the_gce_starter_loads_its_fleet_as_unused() {
    let Some(r) = reference() else { return };
    let t = loaded(&r.join("standard-gce"));
    assert!(t.instances.is_empty() && t.storages.is_empty());
    let unused: Vec<String> = t.unused.iter().map(|u| u.message()).collect();
    for w in &t.warnings {
        assert!(w.message.starts_with("not used by csis yet: "), "{w}");
    }
    for what in [
        "1 gcloud instance builders (cfg/)",
        "1 gcloud storages (storages/)",
        "1 gcloud instances (instances/)",
    ] {
        assert!(
            unused.iter().any(|u| u.ends_with(what)),
            "{what}: {unused:?}"
        );
    }
}

/// The complete starter with its one encrypted config value in clear (it
/// needs the starter's TEST identity otherwise) and the playbooks it names
/// present.
fn complete(tree: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(tree, dir.path());
    let cfg = dir.path().join("cfg/_config.yml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let (head, rest) = text.split_once("admin_public_keys:\n").unwrap();
    let (_, tail) = rest.split_once('\n').unwrap();
    let key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHDwPZi6yX2f1mM5bRj7V7pPIbpYgkXH7B3DPd3s8AOe csis";
    std::fs::write(
        &cfg,
        format!("{head}admin_public_keys:\n    - {key}\n{tail}"),
    )
    .unwrap();
    if let Err(d) = load(dir.path(), &opts()) {
        for d in d
            .iter()
            .filter(|d| d.message.contains("does not exist in the tree"))
        {
            let f = d.message.split('`').nth(1).unwrap();
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "# placeholder\n").unwrap();
        }
    }
    dir
}

#[test]
fn the_complete_starter_loads_every_aws_instance_and_storage() {
    let Some(r) = reference() else { return };
    // the starter, and the original's example it was made from
    for tree in [
        r.join("complete"),
        r.join("../cs-image-system-3/docs/examples/complete"),
    ] {
        the_complete_fleet(&tree);
    }
}

fn the_complete_fleet(tree: &Path) {
    let dir = complete(tree);
    let t = loaded(dir.path());
    let names: Vec<&str> = t.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        ["model-node", "dask-head", "dask-proof", "east1-node"]
    );
    let model = t.instance("model").unwrap();
    assert_eq!(model.name, "model-node", "an alias finds it");
    assert_eq!(model.runtime, "aws-east2");
    assert_eq!(model.availability_zone.as_deref(), Some("us-east-2a"));
    let ms: Vec<&str> = model.mounts.iter().map(|m| m.storage.as_str()).collect();
    assert_eq!(ms, ["mnt_data", "efs-storage"]);
    let proof = t.instance("dask-proof").unwrap();
    assert!(proof.ephemeral);
    assert_eq!(proof.on_failure, OnFailure::Teardown);
    assert_eq!(proof.teardown_after.as_deref(), Some("90m"));
    assert_eq!(
        t.instance("dask-head").unwrap().image_policy,
        ImagePolicy::Follow
    );
    assert_eq!(t.instance("east1-node").unwrap().runtime, "aws-east1");
    let storages: Vec<&str> = t.storages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        storages,
        [
            "mnt_data",
            "mnt_archive",
            "efs-storage",
            "efs-adopted",
            "default-bucket",
            "old-bucket"
        ]
    );
    assert_eq!(
        t.storage("mnt_archive").unwrap().requested,
        StorageState::Archived
    );
    let efs = t.storage("efs-storage").unwrap();
    assert_eq!(
        (efs.attach, efs.share_mode.as_str()),
        (Attach::Many, "2775")
    );
    let bucket = t.storage("default-bucket").unwrap();
    assert!(bucket.public_read && !bucket.posix);
    assert_eq!(
        bucket.bucket_name.as_deref(),
        Some("complete-example-REPLACE-ME-default-bucket")
    );
    assert!(!t.users.is_empty());
    let unused: Vec<&str> = t.unused.iter().map(|u| u.what.as_str()).collect();
    for u in &unused {
        assert!(
            u.starts_with("gcloud ") || u.starts_with("packer-gce") || u.starts_with("gcs "),
            "{unused:?}"
        );
    }
    assert!(unused.contains(&"gcloud instances"), "{unused:?}");
}
