//! The fleet's refusals: one error each at its file, line and field.

use super::*;

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

#[test]
fn storages_of_one_label_and_archive_name_are_refused() {
    // `data_1` and `data.1` make one module label (`data_1`) and one
    // archive name (`csis-data-1-archive`): a restore of one would read the
    // other's snapshot.
    one_error(
        aws(&[(
            "storages/storages.yaml",
            "storages:\n  - name: data_1\n    groups: [ops]\n  - name: data.1\n    groups: [ops]\n",
        )]),
        "storages/storages.yaml",
        4,
        "storages[1].name",
        "makes the same tofu label and archive name as storage `data_1` (storages/storages.yaml:2): `data_1` and `csis-data-1-archive`",
    );
    // names that differ otherwise load
    let t = aws(&[(
        "storages/storages.yaml",
        "storages:\n  - name: data-1\n    groups: [ops]\n  - name: data-2\n    groups: [ops]\n",
    )])
    .unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(t.storages.len(), 2);
}
