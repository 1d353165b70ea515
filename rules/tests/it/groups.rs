//! Group builders, storage builders and groups read into strict models:
//! what they refuse (unknown keys, types, variables; an OPA group on a
//! docker runtime; storage on a runtime that cannot keep it), and what they
//! give a bake (the identity and storage prerequisites' builders, the
//! image's group activation). The docker example tree with files added,
//! and the original's standard-aws starter.

use std::path::PathBuf;

use csis_rules::compile::{compile, GroupSpec, NoPins};
use csis_rules::{load, LoadOptions, Tree};

fn example_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(
        &csis_testkit::workspace().join("examples/docker"),
        dir.path(),
    );
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn loaded(files: &[(&str, &str)]) -> Result<Tree, Vec<String>> {
    let dir = example_with(files);
    load(dir.path(), &LoadOptions::default()).map_err(|d| {
        d.into_iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.path, d.message))
            .collect()
    })
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    loaded(files).err().unwrap_or_default()
}

/// Whether an error at `file_line` (`file:line: `) says `s`.
fn has(errors: &[String], file_line: &str, s: &str) -> bool {
    errors
        .iter()
        .any(|l| l.starts_with(file_line) && l.contains(s))
}

const BUILDERS: &str = "group_builders:
  - name: opa
    type: okta-tf
    org: example
    team: ops
    posix: posix-local
  - name: posix-local
    type: posix
    is_default: true
";

const GROUPS: &str = "groups:
  - name: ops
    type: opa
    is_root: true
    members: [alice]
  - name: devs
    members: [bob]
users:
  - name: alice
    first_name: Alice
    last_name: Ops
  - name: bob
    first_name: Bob
    last_name: Dev
";

fn grouped_image(group: &str) -> String {
    format!(
        "images:\n  - name: grouped\n    source_image: debian-12\n    group: {group}\n    runtimes:\n      - image_builder: native\n"
    )
}

#[test]
fn a_posix_group_is_activated_and_names_its_builders() {
    let img = grouped_image("devs");
    let t = loaded(&[
        ("cfg/zz-groups.yml", BUILDERS),
        ("groups/groups.yaml", GROUPS),
        ("images/zz.yaml", &img),
    ])
    .unwrap_or_else(|e| panic!("{e:#?}"));
    // groups and group builders are no longer "not used by csis yet"
    assert!(
        t.unused
            .iter()
            .all(|u| u.what != "groups" && u.what != "group builders"),
        "{:?}",
        t.unused
    );
    assert_eq!(t.groups.len(), 2);
    assert_eq!(t.groups[1].builder.as_deref(), Some("posix-local"));
    assert_eq!(
        t.group_builder("opa").unwrap().posix.as_deref(),
        Some("posix-local")
    );
    let c = compile(&t, &NoPins).unwrap();
    let spec = c
        .bake_spec(c.bake_of("grouped", "docker-local").unwrap())
        .unwrap();
    assert_eq!(
        spec.group,
        Some(GroupSpec {
            group: "devs".into(),
            identity_type: "posix".into(),
            posix: true,
        })
    );
    // the base's posix prerequisites come from the posix group builder
    let base = c
        .bake_spec(c.bake_of("debian-12", "docker-local").unwrap())
        .unwrap();
    let r = base.base_recipe.as_ref().unwrap();
    assert_eq!(r.identity_types, vec!["posix".to_string()]);
    assert_eq!(r.identity_builders, vec![Some("posix-local".to_string())]);
    // the group enters the image's fingerprint inputs; an image without one keeps its inputs
    let inputs = c
        .graph
        .node(c.bake_of("grouped", "docker-local").unwrap())
        .inputs()
        .to_value();
    assert_eq!(inputs["group"]["name"], "devs", "{inputs}");
    let web = c
        .graph
        .node(c.bake_of("web", "docker-local").unwrap())
        .inputs()
        .to_value();
    assert!(web.get("group").is_none(), "{web}");
}

/// An image's group that cannot be: an OPA group on a docker runtime (whose
/// base declares no okta identity type either), a group `groups/` does not
/// declare; each refused at the image's `group:` line.
#[test]
fn an_image_s_impossible_group_is_refused_at_its_line() {
    let cases: [(&str, &[&str]); 2] = [
        (
            "ops",
            &[
                ".group: group `ops` is an OPA group (group builder `opa`, type okta-tf), refused on docker runtime docker-local",
                "declares identity types [posix]",
            ],
        ),
        ("nobody", &["group `nobody` is not declared in groups/"]),
    ];
    for (group, expected) in cases {
        let img = grouped_image(group);
        let e = errors(&[
            ("cfg/zz-groups.yml", BUILDERS),
            ("groups/groups.yaml", GROUPS),
            ("images/zz.yaml", &img),
        ]);
        for s in expected {
            assert!(has(&e, "images/zz.yaml:4: ", s), "{group}: {s}\n{e:#?}");
        }
    }
}

#[test]
fn unknown_keys_types_and_variables_are_refused() {
    let e = errors(&[
        (
            "cfg/zz-groups.yml",
            "group_builders:\n  - name: p\n    type: posix\n    colour: red\n  - name: k\n    type: kerberos\nstorage_builders:\n  - name: s\n    type: tf-aws-ebs\n    runtime: docker-local\n    variables:\n      volume_typo: gp3\n    bucket_name: b\n",
        ),
        ("groups/groups.yaml", "groups:\n  - name: g\n    membres: [x]\n"),
    ]);
    let has = |file_line: &str, s: &str| has(&e, file_line, s);
    assert!(has("cfg/zz-groups.yml:4: ", "colour"), "{e:#?}");
    assert!(
        has(
            "cfg/zz-groups.yml:6: ",
            "unknown group builder type `kerberos`"
        ),
        "{e:#?}"
    );
    assert!(
        has(
            "cfg/zz-groups.yml:12: ",
            "storage_builders[0].variables.volume_typo: unknown variable `volume_typo`"
        ),
        "{e:#?}"
    );
    assert!(
        has(
            "cfg/zz-groups.yml:13: ",
            "`bucket_name` does not apply to storage builders of type tf-aws-ebs"
        ),
        "{e:#?}"
    );
    assert!(
        has("cfg/zz-groups.yml:10: ", "storage_builders[0].runtime: storage builder `s` of type tf-aws-ebs cannot keep its storage on docker runtime docker-local"),
        "{e:#?}"
    );
    assert!(has("groups/groups.yaml:3: ", "membres"), "{e:#?}");
}

fn reference() -> Option<PathBuf> {
    let p = csis_testkit::workspace().join("../shared/reference");
    p.is_dir().then_some(p)
}

#[test]
fn the_standard_aws_starter_gives_its_bakes_their_builders_and_group() {
    let Some(r) = reference() else {
        eprintln!("skipped: ../shared/reference does not exist");
        return;
    };
    let t = load(
        &r.join("cs-image-system-0.1.1-starters/standard-aws"),
        &LoadOptions::default(),
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    let c = compile(&t, &NoPins).unwrap();
    let base = c.bake_spec(c.bake_of("el10", "aws-main").unwrap()).unwrap();
    let b = base.base_recipe.as_ref().unwrap();
    assert_eq!(b.identity_builders, vec![Some("opa-groups".to_string())]);
    assert_eq!(b.storage_builders, vec![Some("aws-ebs".to_string())]);
    let node = c
        .bake_spec(c.bake_of("team-node", "aws-main").unwrap())
        .unwrap();
    // the OPA group builder names a posix builder: the login hook too, as the original emits
    assert_eq!(
        node.group,
        Some(GroupSpec {
            group: "team".into(),
            identity_type: "okta".into(),
            posix: true,
        })
    );
}

/// A group's membership is resolved by the load with the identity it was
/// given (`LoadOptions::identity`, not the process environment): two
/// markers of one person are one member, ordered by the name behind them,
/// the values kept sealed; without the identity each marker stands for
/// itself.
#[test]
fn a_group_s_members_are_compared_by_the_names_behind_their_markers() {
    use age::secrecy::ExposeSecret;
    let id = age::x25519::Identity::generate();
    let key = id.to_string().expose_secret().to_string();
    let recipients = csis_rules::secrets::Recipients::parse(&[id.to_public().to_string()]).unwrap();
    let seal = |s: &str| recipients.encrypt(s).unwrap();
    let (zoe_1, zoe_2, amy) = (seal("zoe"), seal("zoe"), seal("amy"));
    assert_ne!(zoe_1, zoe_2, "two sealings of one name differ");
    let groups = format!(
        "groups:\n  - name: ops\n    type: opa\n    is_root: true\n    admins: [\"{amy}\"]\n    members: [\"{zoe_1}\", carl, \"{zoe_2}\"]\n  - name: devs\n    members: [\"{amy}\"]\n    in_both: true\n    admins: [\"{zoe_2}\"]\nusers:\n  - name: carl\n    first_name: Carl\n    last_name: Dev\n"
    );
    let dir = example_with(&[
        ("cfg/group-builders.yml", BUILDERS),
        ("groups/g.yml", &groups),
    ]);
    let opts = LoadOptions {
        identity: Some(key),
        env: Some(Default::default()),
        ..LoadOptions::default()
    };
    let tree = load(dir.path(), &opts).expect("loads");
    let ops = tree.groups.iter().find(|g| g.name == "ops").unwrap();
    assert_eq!(
        ops.membership.members,
        vec!["carl".to_string(), zoe_1.clone()]
    );
    assert_eq!(ops.membership.admins, vec![amy.clone()]);
    let devs = tree.groups.iter().find(|g| g.name == "devs").unwrap();
    // in_both: the admin zoe is a member too; the root's admin amy joins the admins
    assert_eq!(devs.membership.members, vec![amy.clone(), zoe_2.clone()]);
    assert_eq!(devs.membership.admins, vec![amy.clone(), zoe_2.clone()]);

    // without the identity, each marker stands for itself
    let opts = LoadOptions {
        env: Some(Default::default()),
        ..LoadOptions::default()
    };
    let tree = load(dir.path(), &opts).expect("loads");
    let ops = tree.groups.iter().find(|g| g.name == "ops").unwrap();
    assert_eq!(ops.membership.members.len(), 3);
}
