//! The repository's own valid fixture tree loads, and the resolved values
//! the graph compile reads are what config.md says.

use std::collections::BTreeMap;
use std::path::PathBuf;

use csis_rules::{load, LoadOptions, Parent, Tree};

fn fixture() -> PathBuf {
    csis_testkit::fixture("config/valid")
}

fn env() -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    e.insert("CSIS_TEST_USER".to_string(), "avery".to_string());
    e
}

fn tree() -> Tree {
    match load(
        &fixture(),
        &LoadOptions {
            env: Some(env()),
            ..Default::default()
        },
    ) {
        Ok(t) => t,
        Err(d) => panic!(
            "{}",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

#[test]
fn loads_without_warnings() {
    let t = tree();
    assert!(
        t.warnings.is_empty(),
        "{:?}",
        t.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(t.runtimes.len(), 3);
    assert_eq!(t.images.len(), 3);
    assert_eq!(t.config.id, "csis-test-fixture");
    assert_eq!(
        t.config
            .config
            .extra
            .get("carried_key")
            .and_then(|v| v.as_str()),
        Some("carried")
    );
    assert!(t.config.config.require_image_tests);
}

#[test]
fn lookups_by_name_alias_and_default() {
    let t = tree();
    assert_eq!(t.runtime("simulated").unwrap().name, "sim");
    assert_eq!(t.runtime("default").unwrap().name, "sim");
    assert_eq!(t.runtime("SIM").unwrap().name, "sim");
    assert_eq!(t.runtime("sim").unwrap().max_parallel(), Some(3));
    let aws = t.runtime("aws-east2").unwrap();
    // a number where a string is declared becomes a string; templates see `this`
    assert_eq!(
        aws.aws().unwrap().account_id.as_deref(),
        Some("123456789012")
    );
    assert_eq!(
        aws.common.description.as_deref(),
        Some("AWS in us-east-2 for 123456789012")
    );
    assert_eq!(aws.state_backend.as_deref(), Some("local-state"));
    assert_eq!(t.mod_builder("bash").unwrap().name, "bash-remote");
    assert_eq!(t.image_builder("default").unwrap().runtime, "sim");
    let rt = t.runtime("sim").unwrap();
    assert_eq!(rt.origin.file(), "cfg/runtime-builders.yml");
    assert_eq!(rt.origin.loc.line, 3);
    assert_eq!(rt.origin.path, "runtime_builders[0]");
}

#[test]
fn chains_and_effective_values() {
    let t = tree();
    let app = t.image("app").unwrap();
    assert_eq!(app.parent, Parent::Image("base".into()));
    let chain: Vec<&str> = t.chain(app).iter().map(|l| l.name()).collect();
    assert_eq!(chain, ["app", "base", "deb-12"]);
    assert_eq!(t.chain_root(app).unwrap().name, "deb-12");
    assert_eq!(
        t.children("base")
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["app"]
    );
    assert_eq!(
        t.children("DEB-12")
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["base"]
    );
    assert!(t.children("app").is_empty());
    let stamp = t.capability_stamp(app);
    assert_eq!(stamp.identity_types, ["posix"]);
    assert_eq!(stamp.storage_types, ["ebs"]);
    // `image_builder: default` resolves to the default image builder and its runtime
    assert_eq!(
        app.runtimes[0].image_builder.as_deref(),
        Some("sim-builder")
    );
    assert_eq!(app.runtimes[0].runtime.as_deref(), Some("sim"));
    assert_eq!(t.retention_keep(app, "sim"), Some(2));

    let base = t.image("base").unwrap();
    assert_eq!(base.model.description.as_deref(), Some("base for avery"));
    // bake user: image entry first, then the family default on AWS
    let aws_entry = base.runtime_entry("aws-east2").unwrap();
    assert_eq!(t.image_bake_user(base, aws_entry).as_deref(), Some("admin"));
    let sim_entry = base.runtime_entry("sim").unwrap();
    assert_eq!(t.image_bake_user(base, sim_entry).as_deref(), Some("root"));
    assert_eq!(t.retention_keep(base, "aws-east2"), Some(4));
    assert_eq!(t.retention_keep(base, "sim"), None);
    // disk: image -> chain root -> 200
    assert_eq!(t.image_disk_size(base), 200);
    assert_eq!(t.image_disk_size(t.image("rh-app").unwrap()), 30);
    let deb = t.os_builder("deb-12").unwrap();
    let deb_aws = deb.runtime_entry("aws-east2").unwrap();
    assert_eq!(t.os_disk_size(deb, deb_aws), 50);
    assert_eq!(t.os_disk_size(deb, deb.runtime_entry("sim").unwrap()), 200);
    let alma = t.os_builder("alma-9").unwrap();
    assert_eq!(t.os_disk_size(alma, &alma.runtimes[0]), 60);
    assert_eq!(t.os_bake_user(deb, deb_aws).as_deref(), Some("admin"));
    assert_eq!(deb_aws.entry.description.as_deref(), Some("debian on AWS"));
    assert_eq!(
        deb.model.tags.get("OS").map(String::as_str),
        Some("debian-12")
    );
    assert_eq!(t.os_machine_type(deb_aws).as_deref(), Some("t3.medium"));

    // mods: paths resolved against the root; inline script lines stay literal
    let mods = t.mod_inputs(base);
    assert_eq!(mods.len(), 2);
    assert_eq!(mods[0].builder, "ansible-default");
    assert_eq!(mods[0].files, vec![fixture().join("playbooks/setup.yml")]);
    assert_eq!(
        mods[0].config.get("version").and_then(|v| v.as_str()),
        Some("1")
    );
    assert_eq!(mods[1].builder, "bash-remote");
    assert_eq!(
        mods[1].inline,
        vec!["echo '{{ not rendered }}'".to_string()]
    );
    assert_eq!(mods[1].files, vec![fixture().join("scripts/setup.sh")]);

    // in-bake tests: dpkg for an apt chain, rpm for a dnf one; entry tests replace the builder's
    let tests = t.image_tests(base);
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0].run, "dpkg -s 'curl'");
    assert_eq!(
        t.os_tests(alma, &alma.runtimes[0])[0].run,
        "rpm -q 'openssl'"
    );
    let deb_docker = deb.runtime_entry("docker-local").unwrap();
    assert_eq!(t.os_tests(deb, deb_docker)[0].run, "id -u 'root'");
    assert_eq!(
        t.post_bake_tests(base).unwrap().mounts,
        vec!["/mnt/data".to_string()]
    );
}

/// The offline checks read an image's tag keys without its tags: the same
/// keys in the same order (runtime, image builder, image, entry; a later
/// level's key keeps the first one's place).
#[test]
fn image_tag_keys_are_the_keys_of_image_tags() {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir_with(
        &fixture(),
        dir.path(),
        &[
            (
                "  - name: base\n",
                "  - name: base\n    tags: {team: mine, own: x}\n",
            ),
            (
                "      - image_builder: sim-builder\n",
                "      - image_builder: sim-builder\n        tags: {entry: y, own: z}\n",
            ),
        ],
    );
    let opts = LoadOptions {
        env: Some(env()),
        ..Default::default()
    };
    let t = load(dir.path(), &opts).unwrap_or_else(|d| panic!("{d:?}"));
    let mut seen = Vec::new();
    for img in &t.images {
        for e in &img.runtimes {
            let want: Vec<String> = t.image_tags(img, e).keys().cloned().collect();
            assert_eq!(
                t.image_tag_keys(img, e),
                want,
                "{} on {:?}",
                img.name,
                e.runtime
            );
            seen.push(want);
        }
    }
    assert!(
        seen.iter()
            .any(|k| k.len() >= 3 && k.contains(&"entry".to_string())),
        "some entry has tags of several levels: {seen:?}"
    );
}
