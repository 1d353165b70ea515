//! The fleet's model (docs/fleet.md section 1): instances, storages, users,
//! instance and user builders load into strict models and resolve with
//! their defaults; each refusal is one error at its file, line and field,
//! on a small tree (the fleet-docker fixture, or the `valid` fixture with
//! an AWS fleet added); the original's starters load with their fleet
//! resolved and nothing "not used by csis yet" but what lives on gcloud.

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

// -- refusals: one located error each ----------------------------------------

#[test]
fn an_unknown_image_is_refused() {
    docker_refuses(
        instances("  - name: x\n    image: nope\n").to_ref(),
        3,
        "instances[0].image",
        "unknown image `nope`",
    );
}

#[test]
fn groups_on_an_instance_are_refused() {
    docker_refuses(
        instances("  - name: x\n    image: app\n    groups: [crew]\n").to_ref(),
        4,
        "instances[0].groups",
        "`groups` is refused on an instance",
    );
}

#[test]
fn an_image_without_a_group_is_refused_for_an_instance() {
    one_error(
        docker(&[
            (
                "images/bare.yaml",
                "images:\n  - name: bare\n    source_image: base\n    runtimes: [{image_builder: native}]\n",
            ),
            instances("  - name: x\n    image: bare\n").to_ref(),
        ]),
        "instances/instances.yaml",
        3,
        "instances[0].image",
        "has no `group`",
    );
}

#[test]
fn a_mount_of_an_undeclared_storage_is_refused() {
    docker_refuses(
        instances("  - name: x\n    image: app\n    storages:\n      - name: nowhere\n").to_ref(),
        5,
        "instances[0].storages[0].name",
        "which storages/ does not declare",
    );
}

#[test]
fn a_storage_that_does_not_allow_the_image_group_is_refused() {
    one_error(
        docker(&[
            (
                "groups/groups.yaml",
                "groups:\n  - name: crew\n    is_root: true\n    gid: 2100\n  - name: other\n    gid: 2200\nusers:\n  - name: pat\n    first_name: P\n    last_name: C\n    uid: 2101\n",
            ),
            (
                "storages/storages.yaml",
                "storages:\n  - name: data\n    groups: [other]\n",
            ),
        ]),
        "instances/instances.yaml",
        9,
        "instances[1].storages[0].name",
        "allows groups [other], not `crew`",
    );
    // public_read: any group may mount it
    docker(&[(
        "storages/storages.yaml",
        "storages:\n  - name: data\n    public_read: true\n",
    )])
    .unwrap_or_else(|d| panic!("{d:#?}"));
}

#[test]
fn a_storage_type_the_base_does_not_declare_is_refused() {
    let os = std::fs::read_to_string(csis_testkit::fixture("fleet-docker/cfg/os-builders.yml"))
        .unwrap()
        .replace("storage_types: [volume]", "storage_types: []");
    one_error(
        docker(&[("cfg/os-builders.yml", &os)]),
        "instances/instances.yaml",
        9,
        "instances[1].storages[0].name",
        "declares storage types []",
    );
}

#[test]
fn a_single_attach_storage_on_two_instances_is_refused() {
    one_error(
        aws(&[instances(
            "  - name: a\n    image: node\n    storages: [{name: vol}]\n  - name: b\n    image: node\n    storages:\n      - name: vol\n",
        )
        .to_ref()]),
        "instances/instances.yaml",
        8,
        "instances[1].storages[0].name",
        "attaches to one instance, and instance `a` already mounts it",
    );
}

#[test]
fn members_and_admins_must_be_declared_users() {
    let g = |k: &str| {
        format!(
            "groups:\n  - name: crew\n    is_root: true\n    gid: 2100\n    {k}: [pat, ghost]\nusers:\n  - name: pat\n    first_name: P\n    last_name: C\n    uid: 2101\n"
        )
    };
    for k in ["members", "admins"] {
        one_error(
            docker(&[("groups/groups.yaml", &g(k))]),
            "groups/groups.yaml",
            5,
            &format!("groups[0].{k}[1]"),
            "`ghost`",
        );
    }
}

#[test]
fn posix_ids_below_1024_or_repeated_are_refused() {
    let users = |a: u32, b: u32| {
        format!(
            "groups:\n  - name: crew\n    is_root: true\n    gid: 2100\nusers:\n  - name: pat\n    first_name: P\n    last_name: C\n    uid: {a}\n  - name: sam\n    first_name: S\n    last_name: D\n    uid: {b}\n"
        )
    };
    one_error(
        docker(&[("groups/groups.yaml", &users(1000, 2000))]),
        "groups/groups.yaml",
        9,
        "users[0].uid",
        "uid 1000 is below 1024",
    );
    one_error(
        docker(&[("groups/groups.yaml", &users(2000, 2000))]),
        "groups/groups.yaml",
        13,
        "users[1].uid",
        "uid 2000 is already the uid of another user",
    );
    let gids = "groups:\n  - name: crew\n    is_root: true\n    gid: 2100\n  - name: more\n    gid: 2100\n";
    one_error(
        docker(&[("groups/groups.yaml", gids)]),
        "groups/groups.yaml",
        6,
        "groups[1].gid",
        "gid 2100 is already the gid of group `crew`",
    );
    let low = "groups:\n  - name: crew\n    is_root: true\n    gid: 100\n";
    one_error(
        docker(&[("groups/groups.yaml", low)]),
        "groups/groups.yaml",
        4,
        "groups[0].gid",
        "below 1024",
    );
}

fn builders_with(from: &str, to: &str) -> String {
    let b =
        std::fs::read_to_string(csis_testkit::fixture("fleet-docker/cfg/builders.yml")).unwrap();
    assert!(b.contains(from), "{from}");
    b.replace(from, to)
}

#[test]
fn unknown_builder_types_are_refused() {
    let b = builders_with(
        "type: docker\n    is_default: true\n    runtime: docker-fleet\nstorage",
        "type: podman\n    is_default: true\n    runtime: docker-fleet\nstorage",
    );
    one_error(
        docker(&[("cfg/builders.yml", &b)]),
        "cfg/builders.yml",
        25,
        "instance_builders[0].type",
        "unknown instance builder type `podman`",
    );
    let b = builders_with("type: docker-volume", "type: docker-bind");
    one_error(
        docker(&[("cfg/builders.yml", &b)]),
        "cfg/builders.yml",
        30,
        "storage_builders[0].type",
        "unknown storage builder type `docker-bind`",
    );
}

#[test]
fn a_builder_type_on_a_runtime_of_another_type_is_refused() {
    // tofu runs on aws, not docker
    let b = builders_with(
        "type: docker\n    is_default: true\n    runtime: docker-fleet\nstorage",
        "type: tofu\n    is_default: true\n    runtime: docker-fleet\nstorage",
    );
    one_error(
        docker(&[("cfg/builders.yml", &b)]),
        "cfg/builders.yml",
        27,
        "instance_builders[0].runtime",
        "it needs an aws runtime",
    );
    // docker on an aws runtime
    let fleet = AWS_FLEET.replace("type: tofu", "type: docker");
    one_error(
        aws(&[("cfg/zz-fleet.yml", &fleet)]),
        "cfg/zz-fleet.yml",
        9,
        "instance_builders[0].runtime",
        "cannot run on aws runtime",
    );
    // docker-volume on an aws runtime
    let sb = "storage_builders:\n  - name: vols\n    type: docker-volume\n    runtime: aws-east2\n";
    one_error(
        aws(&[("cfg/zz-vols.yml", sb)]),
        "cfg/zz-vols.yml",
        4,
        "storage_builders[0].runtime",
        "it needs a docker runtime",
    );
}

#[test]
fn an_undeclared_machine_type_is_refused() {
    docker_refuses(
        instances("  - name: x\n    image: app\n    machine_type: huge\n").to_ref(),
        4,
        "instances[0].machine_type",
        "machine type `huge` is not declared by runtime docker-fleet",
    );
}

#[test]
fn instance_names_are_hostname_labels_that_do_not_collide() {
    docker_refuses(
        instances("  - name: app_1\n    image: app\n").to_ref(),
        2,
        "instances[0].name",
        "not a hostname label",
    );
    let long = "a".repeat(60);
    docker_refuses(
        instances(&format!("  - name: {long}\n    image: app\n")).to_ref(),
        2,
        "instances[0].name",
        "at most 59",
    );
    let d = docker(&[
        instances("  - name: box\n    image: app\n  - name: BOX\n    image: app\n").to_ref(),
    ])
    .unwrap_err();
    let e: Vec<&Diagnostic> = d.iter().filter(|d| d.is_error()).collect();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!((e[0].line, e[0].path.as_str()), (4, "instances[1].name"));
    assert!(
        e[0].message.contains("duplicate instance name `BOX`"),
        "{e:#?}"
    );
}

#[test]
fn item_fields_are_strict_and_checked() {
    docker_refuses(
        instances("  - name: x\n    image: app\n    image_policy: always\n").to_ref(),
        4,
        "instances[0].image_policy",
        "always",
    );
    docker_refuses(
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n    share_mode: \"0777\"\n".to_string(),
        )
            .to_ref(),
        4,
        "storages[0].share_mode",
        "share_mode `0777`",
    );
    docker_refuses(
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n    state: archived\n".to_string(),
        )
            .to_ref(),
        4,
        "storages[0].state",
        "cannot be archived",
    );
    one_error(
        docker(&[(
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n    state: destroyed\n",
        )]),
        "instances/instances.yaml",
        9,
        "instances[1].storages[0].name",
        "only an active storage is mounted",
    );
    docker_refuses(
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [nobody]\n".to_string(),
        )
            .to_ref(),
        3,
        "storages[0].groups[0]",
        "group `nobody` is not declared",
    );
    docker_refuses(
        instances("  - name: x\n    image: app\n    storages: [{name: data, mount_point: data}]\n")
            .to_ref(),
        4,
        "instances[0].storages[0].mount_point",
        "not an absolute path",
    );
    docker_refuses(
        instances("  - name: x\n    image: app\n    flavour: big\n").to_ref(),
        4,
        "instances[0].flavour",
        "unknown field",
    );
}

#[test]
fn a_data_lifecycle_is_what_its_storage_type_accepts() {
    docker_refuses(
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n    lifecycle:\n      ia_days: 30\n"
                .to_string(),
        )
            .to_ref(),
        5,
        "storages[0].lifecycle",
        "a volume storage takes no data lifecycle",
    );
    let efs =
        "storage_builders:\n  - name: aws-efs\n    type: tf-aws-efs\n    runtime: aws-east2\n";
    let st = |l: &str| {
        format!("storages:\n  - name: vol\n    groups: [ops]\n  - name: shared\n    type: aws-efs\n    groups: [ops]\n    lifecycle:\n{l}")
    };
    let ok = st("      ia_days: 30\n      archive_days: 90\n");
    aws(&[("cfg/zz-efs.yml", efs), ("storages/storages.yaml", &ok)])
        .unwrap_or_else(|d| panic!("{d:#?}"));
    let bad = st("      ia_days: 31\n");
    one_error(
        aws(&[("cfg/zz-efs.yml", efs), ("storages/storages.yaml", &bad)]),
        "storages/storages.yaml",
        8,
        "storages[1].lifecycle.ia_days",
        "`ia_days` is one of",
    );
}

#[test]
fn an_instance_stands_where_its_builder_image_and_storages_are() {
    one_error(
        aws(&[instances("  - name: a\n    image: node\n    runtime: sim\n").to_ref()]),
        "instances/instances.yaml",
        4,
        "instances[0].runtime",
        "its instance builder `tofu-aws` runs on aws-east2",
    );
    // `app` bakes on docker only; `node` on aws-east2 only
    let img = "images:\n  - name: node\n    source_image: deb-12\n    group: ops\n    runtimes:\n      - image_builder: sim-builder\n";
    one_error(
        aws(&[
            ("images/zz-node.yaml", img),
            instances("  - name: a\n    image: node\n").to_ref(),
        ]),
        "instances/instances.yaml",
        3,
        "instances[0].image",
        "is not baked on runtime aws-east2",
    );
}

#[test]
fn a_user_is_named_once_with_a_first_and_last_name() {
    let g = |u: &str| {
        format!(
            "groups:\n  - name: crew\n    is_root: true\n    gid: 2100\nusers:\n  - name: pat\n{u}"
        )
    };
    one_error(
        docker(&[(
            "groups/groups.yaml",
            &g("    first_name: Pat\n    last_name: \"  \"\n"),
        )]),
        "groups/groups.yaml",
        8,
        "users[0].last_name",
        "may not be blank",
    );
    one_error(
        docker(&[(
            "groups/groups.yaml",
            &g("    first_name: P\n    last_name: C\n    aliases: [p]\n"),
        )]),
        "groups/groups.yaml",
        9,
        "users[0].aliases",
        "`aliases` is refused on a user",
    );
    one_error(
        docker(&[(
            "groups/groups.yaml",
            &g("    first_name: P\n    last_name: C\n    type: okta\n"),
        )]),
        "groups/groups.yaml",
        9,
        "users[0].type",
        "names no declared user builder",
    );
    let b = builders_with(
        "type: posix\n    is_default: true\ninstance",
        "type: okta-tf\n    is_default: true\ninstance",
    );
    one_error(
        docker(&[("cfg/builders.yml", &b)]),
        "cfg/builders.yml",
        20,
        "user_builders[0].org",
        "missing field `org`, `team`",
    );
}

#[test]
fn undeclared_instances_and_unquoted_share_modes() {
    let dir = tree_of(&csis_testkit::fixture("fleet-docker"), &[]);
    let o = LoadOptions {
        undeclares: vec!["instance:app-proof".into()],
        ..opts()
    };
    let t = load(dir.path(), &o).unwrap_or_else(|d| panic!("{d:#?}"));
    assert!(t.instance("app-proof").is_none());
    assert_eq!(t.instances.len(), 2);
    let t = docker(&[(
        "storages/storages.yaml",
        "storages:\n  - name: data\n    groups: [crew]\n    share_mode: 2775\n",
    )])
    .unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(t.storage("data").unwrap().share_mode, "2775");
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

/// A field a docker volume cannot honour would enter the storage's
/// fingerprint and change nothing: refused at its line.
#[test]
fn a_docker_volume_refuses_fields_it_has_no_use_for() {
    for (field, value) in [
        ("size", "50"),
        ("bucket_name", "b"),
        ("availability_zone", "z1"),
        ("config", "{file_system_id: fs-1}"),
    ] {
        let text = format!(
            "storages:\n  - name: data\n    groups: [crew]\n    state: active\n    {field}: {value}\n"
        );
        docker_refuses(
            ("storages/storages.yaml", text.as_str()),
            5,
            &format!("storages[0].{field}"),
            &format!("a docker volume has no `{field}`"),
        );
    }
}

/// A field nothing on a container realises is refused at its line, naming
/// the builder and its type; the same fields on a tofu (AWS) instance,
/// which the original's starters set, load.
#[test]
fn a_docker_instance_refuses_fields_it_has_no_use_for() {
    for (field, value) in [
        ("teardown_after", "90m"),
        ("availability_zone", "z1"),
        ("config", "{cpu_credits: standard}"),
    ] {
        docker_refuses(
            instances(&format!("  - name: x\n    image: app\n    {field}: {value}\n")).to_ref(),
            4,
            &format!("instances[0].{field}"),
            &format!(
                "`{field}` has no effect on a docker instance (builder containers, type docker): remove it"
            ),
        );
    }
    // all of them, and the tags, on a tofu instance: loaded
    let t = aws(&[instances(
        "  - name: a\n    image: node\n    teardown_after: 90m\n    availability_zone: us-east-2a\n    config: {x: 1}\n    tags: {csis_x: y}\n    storages:\n      - name: vol\n        min_size: 100\n        tags: {k: v}\n        config: {k: v}\n",
    )
    .to_ref()])
    .unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(t.instance("a").unwrap().mounts.len(), 1);
}

/// An attach item's `min_size`, `tags` and `config` change nothing for a
/// docker instance (its volume has no size; nothing reads the rest).
#[test]
fn a_docker_instances_attach_item_refuses_fields_it_has_no_use_for() {
    for (field, value) in [("min_size", "10"), ("tags", "{k: v}"), ("config", "{k: v}")] {
        docker_refuses(
            instances(&format!(
                "  - name: x\n    image: app\n    storages:\n      - name: data\n        {field}: {value}\n"
            ))
            .to_ref(),
            6,
            &format!("instances[0].storages[0].{field}"),
            &format!(
                "`{field}` has no effect on a storage mounted by a docker instance (builder containers, type docker)"
            ),
        );
    }
    // empty ones say nothing: accepted
    docker(&[instances(
        "  - name: x\n    image: app\n    storages:\n      - name: data\n        tags: {}\n        config: {}\n",
    )
    .to_ref()])
    .unwrap_or_else(|d| panic!("{d:#?}"));
}

/// Tags of a docker instance or volume are its labels: kept on the model,
/// refused when one would overwrite a label of csis's own.
#[test]
fn docker_tags_are_labels_and_never_csis_own() {
    let t =
        docker(&[instances("  - name: x\n    image: app\n    tags:\n      role: web\n").to_ref()])
            .unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(
        t.instance("x")
            .unwrap()
            .tags
            .get("role")
            .map(String::as_str),
        Some("web")
    );
    docker_refuses(
        instances("  - name: x\n    image: app\n    tags:\n      csis_build: b-1\n").to_ref(),
        5,
        "instances[0].tags.csis_build",
        "instance `x`: tag `csis_build` is a name csis labels the container with itself",
    );
    docker_refuses(
        (
            "storages/storages.yaml",
            "storages:\n  - name: data\n    groups: [crew]\n    tags: {csis_storage: other}\n",
        ),
        4,
        "storages[0].tags.csis_storage",
        "storage `data`: tag `csis_storage` is a name csis labels the volume with itself",
    );
    let builders =
        std::fs::read_to_string(csis_testkit::fixture("fleet-docker/cfg/builders.yml")).unwrap();
    let with = builders.replace(
        "    type: docker-volume\n",
        "    type: docker-volume\n    variables:\n      tags: {csis_config: other}\n",
    );
    assert_ne!(with, builders);
    let line = with
        .lines()
        .position(|l| l.contains("csis_config: other"))
        .unwrap() as u32
        + 1;
    one_error(
        docker(&[("cfg/builders.yml", &with)]),
        "cfg/builders.yml",
        line,
        "storage_builders[0].variables.tags.csis_config",
        "storage builder `volumes`: tag `csis_config` is a name csis labels the volume with itself",
    );
}

/// A storage whose storage builder stands on another runtime than the
/// instance that mounts it is refused at the attach item.
#[test]
fn a_storage_on_another_runtime_is_refused_at_the_attach_line() {
    let vb = "storage_builders:\n  - name: volumes\n    type: docker-volume\n    runtime: docker-local\n";
    let st = "storages:\n  - name: vol\n    groups: [ops]\n  - name: local\n    type: volumes\n    groups: [ops]\n";
    one_error(
        aws(&[
            ("cfg/zz-volumes.yml", vb),
            ("storages/storages.yaml", st),
            instances("  - name: a\n    image: node\n    storages:\n      - name: vol\n      - name: local\n")
                .to_ref(),
        ]),
        "instances/instances.yaml",
        6,
        "instances[0].storages[1].name",
        "storage `local` lives on runtime docker-local, instance `a` on aws-east2",
    );
}

/// A docker runtime's `teardown_after` is only its instances' default,
/// which no container realises: refused at its line.
#[test]
fn a_docker_runtime_refuses_teardown_after() {
    let rb = std::fs::read_to_string(csis_testkit::fixture(
        "fleet-docker/cfg/runtime-builders.yml",
    ))
    .unwrap();
    let with = rb.replace(
        "    default_machine_type: small\n",
        "    default_machine_type: small\n    teardown_after: 2h\n",
    );
    assert_ne!(with, rb);
    one_error(
        docker(&[("cfg/runtime-builders.yml", &with)]),
        "cfg/runtime-builders.yml",
        8,
        "runtime_builders[0].teardown_after",
        "`teardown_after` has no effect on a docker runtime",
    );
}
