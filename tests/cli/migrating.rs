//! A migrating team's first day (issue 26): the original's command lines
//! get a pointer; every declared executable is version-checked by its
//! checker; `preflight --strict`; `generated/.gitignore` as the original
//! writes it; `config-drift` and `runtime-unchanged` for a committed
//! `generated/`; `verify instance NAME`.

use std::path::{Path, PathBuf};
use std::process::Command;

use csis_testkit::Tree;

/// A tree `csis init` wrote (the dummy starter).
fn init_dummy() -> Tree {
    let t = Tree::empty();
    let (code, _, err) = csis_testkit::output(csis_testkit::csis().arg("init").arg(&t.root));
    assert_eq!(code, 0, "{err}");
    t
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every command line of the original csis does not parse answers with
/// exit 2 and one line naming what to run instead (the starter's Justfile
/// and CI lines first).
#[test]
fn the_originals_commands_get_one_line_pointers() {
    let cases: &[(&str, &str)] = &[
        ("run --all", "csis build --dry-run //..."),
        ("--root-dir . --no-dry-run run --all --commit", "csis -C . build //..."),
        ("run --only team-node", "//images/team-node"),
        (
            "--root-dir . --locked --no-dry-run run base-image instance-image release retention --only-runtime aws-main --commit",
            "csis -C . build //os/...@aws-main //images/...@aws-main",
        ),
        ("run instance-image --only none --apply-runtime aws-main", "csis plan"),
        ("run --all --no-apply", "csis plan //..."),
        ("run --all --force-bake team-node --no-dry-run", "csis build --force-bake team-node //..."),
        ("run --migrate-state x --no-dry-run", "tofu init -migrate-state"),
        ("build-all", "csis build --dry-run //..."),
        ("--base-only build-all", "//os/..."),
        ("generate", "csis build --dry-run //..."),
        ("init-config repo --from standard-aws", "csis init repo --from aws"),
        ("init-config repo --from standard-gce", "gcloud runtime cannot bake"),
        ("bootstrap", "csis init"),
        ("materialize generated/x", "csis decrypt"),
        ("state-migration begin --workspace w --run r", "csis state push"),
        ("prune-attachments --builder b --run r", "generated/identity/"),
        ("gate-plan plan.json", "gates every root's plan"),
        ("apply-check --lifecycle storage", "`--dry-run` is a flag of each command"),
        ("empty", ""),
        ("identity-attributes --probe", "csis identity export-gids"),
        ("unmount storage --instance i --storage s --mount-point /m", "leaves a machine with the machine"),
        ("workload token", "OIDC"),
        ("workload probe", "OIDC"),
        ("forget instance i", "decommissioned by `csis build`"),
        ("cleanup", "csis dispose image --retention"),
        ("verify login", "csis verify instance"),
        ("verify assert team-node-1", "exits 1 on a failed verification"),
        ("--no-dry-run dispose image --runtime aws-main --all --commit", "csis dispose image --runtime aws-main --all"),
        ("--dry-run dispose image --runtime aws-main --all", "csis dispose image --runtime aws-main --all --dry-run"),
        ("--dry-run lineage relabel --runtime aws-main", "csis lineage relabel --runtime aws-main --dry-run"),
        ("lineage restamp --runtime aws-main --commit", "csis lineage restamp --runtime aws-main"),
        ("state import --no-storages", "csis state import"),
        ("--verbose validate", "csis validate"),
        ("--locked validate", "csis validate"),
        ("--install-completion", "csis completions"),
        ("--no-dry-run", "act by default"),
    ];
    for (line, want) in cases {
        if line == &"empty" {
            continue; // csis has `empty --runtime RT`: clap's own usage error
        }
        let args: Vec<&str> = line.split_whitespace().collect();
        let (code, out, err) = csis_testkit::output(csis_testkit::csis().args(&args));
        assert_eq!(code, 2, "{line}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{line}: one line: {err}");
        assert!(err.contains(want), "{line}: wants `{want}`: {err}");
        assert!(err.contains("docs/migrating.md"), "{line}: {err}");
    }
    // what csis parses is never shadowed; a typo is clap's
    let (code, _, err) = csis_testkit::output(csis_testkit::csis().args(["frobnicate"]));
    assert_eq!(code, 2);
    assert!(err.contains("unrecognized subcommand"), "{err}");
    assert!(!err.contains("migrating.md"), "{err}");
}

fn stand_in(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    csis_testkit::write_executable(&p, &format!("#!/bin/sh\n{body}\n")).unwrap();
    p
}

/// A declared `aws-cli` below its floor, an unparseable one, and an absent
/// `open-tofu` fail `validate` at their lines with the original's text,
/// though no builder csis runs names them; `preflight` sees the same, and
/// `--strict` exits 1.
#[test]
fn every_declared_executable_is_checked_by_its_checker() {
    let t = init_dummy();
    let tree = t.root.clone();
    let bin = tree.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    stand_in(
        &bin,
        "aws",
        "echo 'aws-cli/1.2.3 Python/3.11.7 Linux/6 botocore/1'",
    );
    stand_in(
        &bin,
        "garbled-aws",
        "echo 'Amazon command line, some version'",
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::write(
        tree.join("cfg/executables.yml"),
        format!(
            "executables:\n  - name: aws-cli\n    binary: aws\n    version: \">=2.32\"\n  - name: old-aws\n    type: aws-cli\n    binary: {}\n  - name: open-tofu\n    type: tofu\n    binary: /nonexistent/bin/tofu\n    version: \">1,<2\"\n",
            bin.join("garbled-aws").display()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| csis_testkit::output(t.csis().args(args).env("PATH", &path));
    let (code, out, err) = run(&["validate", "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let diags: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let at = |line: u64, text: &str| {
        assert!(
            diags.iter().any(|d| d["file"] == "cfg/executables.yml"
                && d["line"] == line
                && d["message"] == text),
            "{text} at line {line}: {out}"
        )
    };
    at(2, "aws-cli: version 1.2.3 does not satisfy `>=2.32`");
    // the checker found by type when the name has none
    at(
        5,
        &format!(
            "old-aws: AwsCLIVersionChecker could not parse a version from `{} --version`",
            bin.join("garbled-aws").display()
        ),
    );
    at(8, "open-tofu: binary '/nonexistent/bin/tofu' not found (declared in cfg/executables.yml; an absolute path, or a name on PATH)");
    // a build refuses before anything bakes; nothing recorded
    let (code, out, err) = run(&["build"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("aws-cli: version 1.2.3"),
        "{out}{err}"
    );
    assert!(!tree.join("meta-state/lineage.yaml").exists());
    // preflight sees the same; --strict exits 1
    let (code, out, _) = run(&["preflight"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("FAIL executable aws-cli: version 1.2.3 does not satisfy `>=2.32`"),
        "{out}"
    );
    let (code, _, _) = run(&["preflight", "--strict"]);
    assert_eq!(code, 1);
    // at the floor, all pass
    stand_in(&bin, "aws", "echo 'aws-cli/2.32.0 Python/3.13'");
    std::fs::write(
        tree.join("cfg/executables.yml"),
        "executables:\n  - name: aws-cli\n    binary: aws\n    version: \">=2.32\"\n",
    )
    .unwrap();
    let (code, out, err) = run(&["validate"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = run(&["preflight", "--strict"]);
    assert_eq!(code, 0, "{out}");
}

const REF: &str =
    "../shared/reference/cs-image-system-0.1.1-emission/standard-aws-on-moto/generated";

/// A build that emits writes `generated/.gitignore` (and its lifecycle
/// directories') as the original does: built-ins, the tree's `gitignore:`
/// lists, the run-local names in the root one.
#[test]
fn a_build_writes_the_generated_gitignore() {
    let t = init_dummy();
    let tree = t.root.clone();
    let cfg = tree.join("cfg/_config.yml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}gitignore:\n  - \"*.log\"\n")).unwrap();
    let (code, out, err) = t.run(&["build", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    let root = std::fs::read_to_string(tree.join("generated/.gitignore")).unwrap();
    assert!(root.starts_with("# DO NOT EDIT THIS FILE.\n"), "{root}");
    let lines: Vec<&str> = root.lines().collect();
    for l in [
        "target/",
        "terraform.tfstate",
        "*.log",
        "state-report.json",
        "manifest.json",
    ] {
        assert!(lines.contains(&l), "{l}: {root}");
    }
    let lc = std::fs::read_to_string(tree.join("generated/base-image/.gitignore")).unwrap();
    assert!(
        lc.contains("*.log") && !lc.contains("state-report.json"),
        "{lc}"
    );
    // the original's, for its starter, byte for byte
    let r = csis_testkit::workspace().join(REF);
    if r.is_dir() {
        let starter = csis_testkit::workspace()
            .join("../shared/reference/cs-image-system-0.1.1-starters/standard-aws");
        let loaded = csis_rules::load(&starter, &csis_rules::LoadOptions::default()).unwrap();
        assert_eq!(
            csis_ops::emission::gitignore_text(&loaded, true),
            std::fs::read_to_string(r.join(".gitignore")).unwrap()
        );
        assert_eq!(
            csis_ops::emission::gitignore_text(&loaded, false),
            std::fs::read_to_string(r.join("base-image/.gitignore")).unwrap()
        );
    }
}

/// `config-drift`: 2 with nothing committed under generated/, 0 when the
/// committed emission is what a dry build writes, 1 with the diff when a
/// declaration changed it.
#[test]
fn config_drift_compares_the_committed_emission() {
    let t = init_dummy();
    let tree = t.root.clone();
    git(&tree, &["init", "-q"]);
    std::fs::write(tree.join(".gitignore"), ".csis/\n").unwrap();
    git(&tree, &["add", "."]);
    git(&tree, &["commit", "-q", "-m", "tree"]);
    let (code, _, err) = t.run(&["config-drift"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nothing is committed under generated/"),
        "{err}"
    );

    let (code, out, err) = t.run(&["build", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    git(&tree, &["add", "-f", "generated"]);
    git(&tree, &["commit", "-q", "-m", "emission"]);
    let (code, out, err) = t.run(&["config-drift"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("current"), "{out}");

    let cfg = tree.join("cfg/_config.yml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}gitignore:\n  - \"*.log\"\n")).unwrap();
    let (code, out, err) = t.run(&["config-drift"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("+*.log"), "{out}");
    assert!(out.contains("--- committed/generated/.gitignore"), "{out}");
    // the tree's own generated/ is untouched (the dry run ran on a copy)
    assert!(!std::fs::read_to_string(tree.join("generated/.gitignore"))
        .unwrap()
        .contains("*.log"));
}

/// `runtime-unchanged RT --ref REF`: the runtime's roots against the ref,
/// run ids and date stamps normalised; 2 for an unknown runtime.
#[test]
fn runtime_unchanged_compares_a_runtimes_roots_with_a_ref() {
    let t = init_dummy();
    let tree = t.root.clone();
    let root = tree.join("generated/base-image/debian-12@local-sim");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("source-debian-12.pkr.hcl");
    std::fs::write(
        &file,
        "name = \"debian-12-local-sim-20261130-062625\"\nrun = \"2026_11_30t06_26_25_779098\"\n",
    )
    .unwrap();
    std::fs::write(root.join("manifest.json"), "{}").unwrap();
    git(&tree, &["init", "-q"]);
    git(&tree, &["add", "-f", "."]);
    git(&tree, &["commit", "-q", "-m", "tree"]);
    // another run, another stamp: unchanged
    std::fs::write(
        &file,
        "name = \"debian-12-local-sim-20261201-101010\"\nrun = \"2026_12_01t10_10_10_000001\"\n",
    )
    .unwrap();
    std::fs::write(root.join("manifest.json"), "{\"other\": 1}").unwrap();
    let (code, out, err) = t.run(&["runtime-unchanged", "local-sim"]);
    assert_eq!(code, 0, "{out}{err}");
    // a declaration's change: the diff, exit 1
    std::fs::write(
        &file,
        "name = \"debian-12-local-sim-20261201-101010\"\nrun = \"2026_12_01t10_10_10_000001\"\ninstance_type = \"t3.large\"\n",
    )
    .unwrap();
    let (code, out, err) = t.run(&["runtime-unchanged", "local-sim", "--ref", "HEAD"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("+instance_type = \"t3.large\""), "{out}");
    let (code, _, err) = t.run(&["runtime-unchanged", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runtime `nope` is not declared"), "{err}");
}

/// The GCE starter loads and validates, and a plan says per image that its
/// gcloud runtime cannot bake in csis yet (not only "matches nothing").
#[test]
fn the_gce_starter_says_why_nothing_bakes() {
    let starter = csis_testkit::workspace()
        .join("../shared/reference/cs-image-system-0.1.1-starters/standard-gce");
    if !starter.is_dir() {
        eprintln!("*** SKIPPED: ../shared/reference is not there ***");
        return;
    }
    // (a copy: the plan writes its caches under the tree)
    let t = Tree::copy(&starter, &[]);
    let (code, out, err) = t.run(&["plan"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("pattern `//...` matches nothing"), "{err}");
    assert!(
        err.contains("image team-node: cannot bake in csis yet: its image builder `packer-gce` bakes on its gcloud runtime"),
        "{err}"
    );
    assert!(
        err.contains("base image el10: cannot bake in csis yet"),
        "{err}"
    );
    assert!(
        err.contains("`csis validate` still checked the whole tree"),
        "{err}"
    );
}

/// The original's `verify instance NAME`: the runtime is read from the
/// instance's declaration (its image's one runtime); an undeclared one is
/// refused in one line pointing at `verify instance RT NAME`.
#[test]
fn verify_instance_takes_the_originals_one_argument() {
    let t = init_dummy();
    let tree = t.root.clone();
    // an instance needs an instance builder and an image with a group
    for (path, text) in [
        (
            "cfg/zz-fleet.yml",
            "group_builders:\n  - name: posix-local\n    type: posix\n    is_default: true\ninstance_builders:\n  - name: machines\n    type: docker\n    runtime: local-sim\n",
        ),
        ("groups/groups.yaml", "groups:\n  - name: apps\n    gid: 3000\n"),
        (
            "images/zz-node.yaml",
            "images:\n  - name: node\n    source_image: debian-12\n    group: apps\n    runtimes:\n      - image_builder: sim\n",
        ),
        (
            "instances/instances.yaml",
            "instances:\n  - name: node-1\n    image: node\n",
        ),
    ] {
        let p = tree.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let (code, _, err) = t.run(&["verify", "instance", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "instance nope is not declared in instances/; name it: `csis verify instance RT nope`"
        ),
        "{err}"
    );
    let (one, _, err1) = t.run(&["verify", "instance", "node-1"]);
    let (two, _, err2) = t.run(&["verify", "instance", "local-sim", "node-1"]);
    assert!(!err1.contains("not declared"), "{err1}");
    assert_eq!((one, err1), (two, err2), "the same as naming its runtime");
}

/// A declared executable's version is probed once: a second `validate`
/// (and a build's checks) answer from `.csis/cache/probes.json` and run no
/// subprocess, until the binary changes (issue 23 item 4).
#[test]
fn version_probes_are_cached_until_the_binary_changes() {
    let t = init_dummy();
    let tree = t.root.clone();
    let bin = tree.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let count = tree.join("probes-run");
    let tool = stand_in(
        &bin,
        "tool",
        &format!("echo x >> {}; echo 'tool 1.4.2'", count.display()),
    );
    // settled: older than the racy window
    let age = |p: &Path, when: &str| {
        let st = Command::new("touch")
            .args(["-d", when])
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    };
    age(&tool, "2020-01-01 00:00:00");
    std::fs::write(
        tree.join("cfg/executables.yml"),
        format!(
            "executables:\n  - name: tool\n    binary: {}\n    version: \">=1.4\"\n",
            tool.display()
        ),
    )
    .unwrap();
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    for _ in 0..2 {
        let (code, out, err) = t.run(&["validate"]);
        assert_eq!(code, 0, "{out}{err}");
    }
    assert_eq!(runs(), 1, "the second validate answered from the cache");
    assert!(tree.join(".csis/cache/probes.json").is_file());
    let (code, out, err) = t.run(&["build", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(runs(), 1, "a dry build probes nothing new");
    // the binary changed: probed again, and its new answer counts
    stand_in(
        &bin,
        "tool",
        &format!("echo x >> {}; echo 'tool 1.3.0'", count.display()),
    );
    age(&tool, "2021-01-01 00:00:00");
    let (code, out, err) = t.run(&["validate"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("tool: version 1.3.0 does not"),
        "{out}{err}"
    );
    assert_eq!(runs(), 2);
}

/// core.md §1.4, N10/N24: a capability the root base gains is not the
/// capability of a build that stands on an older root build. A pinned
/// child of the base and the follow children below it keep the stamp of
/// the base build the pin names, so they stay current; the base and its
/// follow children are due. Moving the pin brings the capability down the
/// pinned chain.
#[test]
fn a_capability_the_base_gains_leaves_a_pinned_chain_current() {
    let t = Tree::of("graph/basic");
    // web <- deb12 is pinned (the default), app <- web and tools <- app
    // follow; here also pinned <- deb12 (pinned), kid <- pinned and
    // grandkid <- kid (follow), and sib <- deb12 (follow)
    std::fs::write(
        t.root.join("images/zz-pinned.yaml"),
        "images:\n  - name: sib\n    source_image: deb12\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n  - name: pinned\n    source_image: deb12\n    parent_policy: pinned\n    runtimes: [{image_builder: sim-bake}]\n  - name: kid\n    source_image: pinned\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n  - name: grandkid\n    source_image: kid\n    parent_policy: follow\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    t.ok(&["build"]);
    let plan = |t: &csis_testkit::Tree| -> serde_json::Value {
        serde_json::from_str(&t.ok(&["plan", "--json"])).unwrap()
    };
    let due = |p: &serde_json::Value, s: &str| -> (bool, String) {
        let n = p["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| {
                n["label"] == format!("//images/{s}@sim:bake")
                    || n["label"] == format!("//os/{s}@sim:bake")
            })
            .unwrap_or_else(|| panic!("{s} not planned"));
        (
            n["due"] == true,
            n["reason"].as_str().unwrap_or("").to_string(),
        )
    };
    let chains = ["web", "app", "tools", "pinned", "kid", "grandkid"];
    let p = plan(&t);
    for s in chains.iter().chain(&["deb12", "sib"]) {
        assert!(!due(&p, s).0, "{s}: {:?}", due(&p, s));
    }

    // the base gains a storage type (with the storage builder it needs)
    let os = t.root.join("cfg/os-builders.yml");
    let text = std::fs::read_to_string(&os).unwrap().replacen(
        "    is_default: true\n",
        "    is_default: true\n    storage_types: [ebs]\n",
        1,
    );
    std::fs::write(&os, text).unwrap();
    std::fs::write(
        t.root.join("cfg/storage-builders.yml"),
        "storage_builders:\n  - name: ebs\n    type: tf-aws-ebs\n",
    )
    .unwrap();
    let p = plan(&t);
    assert!(due(&p, "deb12").0, "{:?}", due(&p, "deb12"));
    // the follow sibling of the pinned children moves with the base
    assert!(due(&p, "sib").0, "{:?}", due(&p, "sib"));
    // the pinned chains stand on the old base build: current, all of them
    // (the follow children below a pinned child too)
    for s in chains {
        let (d, why) = due(&p, s);
        assert!(!d, "{s} is due: {why}");
    }
    t.ok(&["build"]);
    let p = plan(&t);
    for s in chains.iter().chain(&["deb12", "sib"]) {
        assert!(!due(&p, s).0, "{s}: {:?}", due(&p, s));
    }
    let caps = |s: &str| -> serde_json::Value {
        let l = csis_cache::MetaState::of_tree(&t.root).lineage().unwrap();
        let b = l.head(s, "sim").unwrap();
        serde_json::to_value(&b.capabilities).unwrap()["storage_types"].clone()
    };
    assert_eq!(caps("sib"), serde_json::json!(["ebs"]));
    assert_eq!(caps("grandkid"), serde_json::json!([]));

    // the pin moves to the new base build: the capability comes down the chain
    t.ok(&["upgrade", "image", "pinned", "--runtime", "sim"]);
    let p = plan(&t);
    for s in ["pinned", "kid", "grandkid"] {
        assert!(due(&p, s).0, "{s}: {:?}", due(&p, s));
    }
    t.ok(&["build"]);
    assert_eq!(caps("pinned"), serde_json::json!(["ebs"]));
    assert_eq!(caps("grandkid"), serde_json::json!(["ebs"]));
    let p = plan(&t);
    assert!(!due(&p, "grandkid").0, "{:?}", due(&p, "grandkid"));
}
