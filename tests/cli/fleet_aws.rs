//! The fleet on AWS (issue 22): the standard-aws starter's storage `data`
//! (`tf-aws-ebs`) and instance `team-node-1` (`tofu`) go through their
//! roots' gated sequence in `csis build`, with a recording stand-in for
//! `tofu` on PATH (tofu cannot be installed here) that, on `apply` of the
//! instance root, makes in moto the machine the module would make (its
//! `Name` tag and this tree's `csis_config`).
//!
//! The images are recorded, not baked: AMIs tagged as the plan's bakes are
//! made in moto and adopted by `csis state import`, so the build has only
//! the fleet to do. Then:
//! - a plan whose deletes no operation asked for is refused, nothing
//!   applied, nothing recorded, the refusal naming the address;
//! - a plan of creations is applied: storage root first, the identity
//!   roots (`apply_identity`), then the instance root with the team-node AMI
//!   in its tfvars; the storage is recorded active with the volume the apply
//!   made, and the instance launched (generation 1, the machine found by
//!   its Name tag, the pin bound);
//! - the machine is verified over SSM (an SSM double answers for it:
//!   `AWS_ENDPOINT_URL_SSM`), its verdict recorded;
//! - the next build has nothing to do and calls tofu no more;
//! - an ephemeral instance added to the root is proved and torn down in
//!   one build (two passes of the root: `ephemeral_present` true, then
//!   false), its generation opened and closed.
//!
//! moto: `runtimes/aws/tests/moto.sh`; skipped loudly without it or without
//! ../shared/reference, a failure under `CSIS_REQUIRE_MOTO`.

use crate::aws_support;
use aws_support::*;

use serde_json::{json, Value};

const TOFU: &str = r#"#!/bin/sh
printf '%s|%s\n' "$PWD" "$*" >> "$TOFU_RECORD"
case "$1" in
  version|-version|--version) echo "OpenTofu v1.8.5" ;;
  plan) echo plan > tfplan ;;
  show)
    if grep -q 'ephemeral_present = false' instances.auto.tfvars 2>/dev/null; then
      cat "$TOFU_PLAN_TEARDOWN"
    else
      cat "$TOFU_PLAN_JSON"
    fi ;;
  apply)
    case "$PWD" in
      */instance-image/*)
        # the root's ephemerals stand while ephemeral_present is true
        if grep -q 'ephemeral_present = true' instances.auto.tfvars 2>/dev/null; then
          want="$TOFU_WITH_EPHEMERAL"
        else
          want="$TOFU_DURABLE"
        fi
        python3 "$TOFU_PY" "$TOFU_MOTO" "$TOFU_REGION" converge "$want" >/dev/null || exit 1 ;;
      */storage/*) python3 "$TOFU_PY" "$TOFU_MOTO" "$TOFU_REGION" volume "$TOFU_VOLUME" >/dev/null || exit 1 ;;
    esac ;;
esac
exit 0
"#;

pub(crate) fn plan_doc(changes: &[(&str, &[&str])]) -> String {
    let rc: Vec<Value> = changes
        .iter()
        .map(|(a, acts)| json!({"address": a, "change": {"actions": acts}}))
        .collect();
    json!({"format_version": "1.2", "resource_changes": rc}).to_string()
}

#[test]
fn the_starters_storage_and_instance_go_through_their_roots() {
    let Some(reference) = reference() else {
        eprintln!("\n*** SKIPPED: ../shared/reference is not there ***\n");
        return;
    };
    let Some(t) = Starter::new(&reference) else {
        return;
    };
    // a tree id of its own: another run's AMIs and machines are not ours
    let id = format!("fleet-aws-{:08x}", std::process::id() ^ 0x00f1_ee75);
    replace_in(
        &t.root.join("cfg/_config.yml"),
        &[("id: my-team-images-REPLACE-ME", &format!("id: {id}"))],
    );
    let config = csis_schema::tags::config_value(&id);

    // Every bake of the plan recorded: AMIs tagged as its builds, adopted.
    let (code, out, err) = t.csis(&["plan", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let run = csis_cache::run_id_now();
    let bakes: Vec<&Value> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "bake")
        .collect();
    assert!(!bakes.is_empty(), "{out}");
    let series_of = |label: &str| -> Option<String> {
        bakes
            .iter()
            .find(|b| b["label"] == label)
            .map(|b| b["series"].as_str().unwrap().to_string())
    };
    let seed: Vec<Value> = bakes
        .iter()
        .map(|b| {
            let series = b["series"].as_str().unwrap();
            let parent = b["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|d| series_of(d.as_str()?))
                .next()
                .map_or(MOTO_AMI.to_string(), |p| format!("@{p}"));
            json!({
                "series": series,
                "name": format!("{series}-{}", &run[..10]),
                "tags": {
                    "csis_config": config,
                    "csis_series": series,
                    "csis_parent": parent,
                    "csis_fingerprint": &b["fingerprint"].as_str().unwrap()[..16],
                    "csis_run": run,
                },
            })
        })
        .collect();
    let amis = py(&["seed", &Value::from(seed).to_string(), MOTO_AMI]).expect("seeded");
    let (code, out, err) = t.csis(&["state", "import"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (_, out, _) = t.csis(&["plan", "--json"]);
    let plan: Value = serde_json::from_str(&out).unwrap();
    let due: Vec<&Value> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["due"] == true && n["kind"] == "bake")
        .collect();
    assert!(due.is_empty(), "every bake is recorded: {due:#?}");
    let node_ami = amis["team-node"]
        .as_str()
        .expect("team-node was seeded")
        .to_string();

    // The stand-in, and the apply flags on.
    let bin = t.root.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tofu = bin.join("tofu");
    csis_testkit::write_executable(&tofu, TOFU).unwrap();
    let pyfile = bin.join("moto.py");
    std::fs::write(&pyfile, PY).unwrap();
    let record = bin.join("record");
    let plan_json = bin.join("plan.json");
    let teardown_json = bin.join("teardown.json");
    let durable =
        json!({"image": node_ami, "tags": {"Name": "team-node-1", "csis_config": config}});
    let proof = json!({"image": node_ami, "tags": {"Name": "proof-1", "csis_config": config}});
    let machine = tempfile::tempdir().unwrap();
    let ssm = csis_testkit::ssm::SsmDouble::start(machine.path(), Default::default());
    std::fs::write(machine.path().join("mounts"), "/mnt/data\n").unwrap();
    let env = vec![
        path_with(&bin),
        ("TOFU_RECORD", record.display().to_string()),
        ("TOFU_PLAN_JSON", plan_json.display().to_string()),
        ("TOFU_PY", pyfile.display().to_string()),
        ("TOFU_MOTO", moto_url()),
        ("TOFU_REGION", REGION.to_string()),
        (
            "TOFU_VOLUME",
            json!({"tags": {"Name": "data", "csis_config": config, "purpose": "data"}}).to_string(),
        ),
        ("TOFU_PLAN_TEARDOWN", teardown_json.display().to_string()),
        (
            "TOFU_DURABLE",
            json!({"config": config, "want": [durable], "gone": ["proof-1"]}).to_string(),
        ),
        (
            "TOFU_WITH_EPHEMERAL",
            json!({"config": config, "want": [durable, proof], "gone": []}).to_string(),
        ),
        // the machines answer SSM here: their launch marker, their mounts
        ("AWS_ENDPOINT_URL_SSM", ssm.url.clone()),
    ];
    replace_in(
        &t.root.join("cfg/_config.yml"),
        &[
            ("apply_identity: false", "apply_identity: true"),
            ("apply_storage: false", "apply_storage: true"),
            ("apply_instances: false", "apply_instances: true"),
        ],
    );
    let named = || -> Vec<String> {
        serde_json::from_value(py(&["named", "team-node-1"]).unwrap()).unwrap()
    };
    // another run's machines of these names (a killed run's) are no test's now
    for name in [
        "team-node-1",
        "proof-1",
        "proof-2",
        "proof-3",
        "proof-4",
        "proof-5",
        "proof-6",
    ] {
        let leftovers: Vec<String> = serde_json::from_value(py(&["named", name]).unwrap()).unwrap();
        if !leftovers.is_empty() {
            py(&["terminate", &Value::from(leftovers).to_string()]);
        }
    }
    let calls = || recorded_calls(&record);

    // 1. a plan that deletes what no operation asked for: refused
    std::fs::write(
        &plan_json,
        plan_doc(&[
            ("module.storage_data.aws_ebs_volume.this", &["create"]),
            ("aws_security_group.csis_instances", &["delete"]),
        ]),
    )
    .unwrap();
    let (code, out, err) = t.csis_with(&["build"], &env);
    assert_ne!(code, 0, "{out}\n{err}");
    let said = format!("{out}\n{err}");
    assert!(
        said.contains("aws_security_group.csis_instances: planned delete")
            && said.contains("refused, nothing applied"),
        "{said}"
    );
    assert!(
        !calls().iter().any(|(_, a)| a.starts_with("apply")),
        "{:?}",
        calls()
    );
    assert!(named().is_empty(), "nothing applied");
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    assert!(fleet.storage_state("data").is_none(), "nothing recorded");
    assert!(
        fleet.launch_record("team-node-1").is_none(),
        "nothing recorded"
    );

    // 2. creations only: applied, storage root first, then the instance root
    // (the machine's user data ends by writing its launch marker)
    ssm.mark_launched();
    std::fs::write(
        &plan_json,
        plan_doc(&[
            ("module.storage_data.aws_ebs_volume.this", &["create"]),
            ("module.instance_team_node_1.aws_instance.this", &["create"]),
        ]),
    )
    .unwrap();
    std::fs::remove_file(&record).unwrap();
    let (code, out, err) = t.csis_with(&["build"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    let c = calls();
    let seq = |root: &str| -> Vec<String> {
        c.iter()
            .filter(|(d, _)| d.starts_with(root))
            .map(|(_, a)| a.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        seq("storage/aws-ebs/"),
        ["init", "plan", "show", "apply"],
        "{c:?}"
    );
    assert_eq!(
        seq("instance-image/tofu-aws/"),
        ["init", "plan", "show", "apply"],
        "{c:?}"
    );
    for root in ["identity/opa-groups/", "identity/okta-users/"] {
        assert_eq!(
            seq(root),
            ["init", "plan", "show", "apply"],
            "{root}: {c:?}"
        );
    }
    let first_instance = c
        .iter()
        .position(|(d, _)| d.starts_with("instance-image/"))
        .unwrap();
    let last_storage = c
        .iter()
        .rposition(|(d, _)| d.starts_with("storage/"))
        .unwrap();
    let last_identity = c
        .iter()
        .rposition(|(d, _)| d.starts_with("identity/"))
        .unwrap();
    assert!(
        last_storage < first_instance,
        "the storage root applies first: {c:?}"
    );
    assert!(
        last_identity < first_instance,
        "the identity roots before the instance root: {c:?}"
    );
    assert!(
        c.iter().any(|(d, a)| d.starts_with("storage/")
            && a.contains("-backend-config=aws-ebs-storage-generation.tfbackend.hcl")),
        "{c:?}"
    );
    // the instance root planned with the team-node AMI
    let root = t
        .root
        .join("generated/instance-image/tofu-aws/instance-generation");
    let vars: String = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().to_string_lossy().ends_with(".tfvars"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(vars.contains(&node_ami), "the image var: {vars}");
    // what the apply made, recorded
    let machines = named();
    assert_eq!(machines.len(), 1, "{machines:?}");
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    assert_eq!(
        fleet.storage_state("data"),
        Some(csis_cache::storage_state::StorageState::Active)
    );
    let vol = fleet.storages.storages["data"].facts.id.clone();
    assert!(
        vol.as_deref().is_some_and(|v| v.starts_with("vol-")),
        "the volume the apply made is the storage's: {vol:?}"
    );
    let (code, out, err) = t.csis(&["instances", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let inst: Value = serde_json::from_str(&out).unwrap();
    let node = inst["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "team-node-1")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(node["state"], "launched", "{inst:#}");
    assert_eq!(node["generation"], 1, "{inst:#}");
    assert_eq!(node["build"], Value::from(node_ami.clone()), "{inst:#}");
    let gen = fleet
        .current_generation("team-node-1")
        .expect("generation 1 open");
    assert_eq!(gen.instance_id.as_deref(), Some(machines[0].as_str()));
    let pins = csis_cache::MetaState::of_tree(&t.root).pins().unwrap();
    assert_eq!(pins.instances.get("team-node-1"), Some(&node_ami));
    // and verified over SSM: marker, booted image, the one mount
    let verdicts = || -> Vec<Value> {
        let meta = csis_cache::MetaState::of_tree(&t.root);
        csis_cache::verifications::Verifications::load(&meta)
            .unwrap()
            .verifications
    };
    let v = verdicts();
    let node_verdict = v
        .iter()
        .find(|v| v["instance"] == "team-node-1")
        .unwrap_or_else(|| panic!("a verdict of team-node-1: {v:#?}"));
    assert_eq!(node_verdict["ok"], true, "{node_verdict:#}");
    assert_eq!(node_verdict["generation"], 1, "{node_verdict:#}");
    let checks: Vec<&str> = node_verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        ["startup scripts", "booted image", "data disks mounted"],
        "{node_verdict:#}"
    );
    assert!(
        ssm.calls().iter().any(|c| c == "AmazonSSM.SendCommand"),
        "{:?}",
        ssm.calls()
    );

    // 3. nothing more to do: tofu is not called again
    let before = calls().len();
    let (code, out, err) = t.csis_with(&["build"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(calls().len(), before, "{:?}", calls());
    assert_eq!(named().len(), 1);

    // 4. an ephemeral instance in the same root: the root applied with
    // `ephemeral_present = true`, the machine proved over SSM, then a
    // second pass with `ephemeral_present = false` whose only destroy is
    // the ephemeral's module; its generation opened and closed, the
    // durable one untouched
    let instances = t.root.join("instances/instances.yaml");
    let mut text = std::fs::read_to_string(&instances).unwrap();
    text.push_str("  - name: proof-1\n    image: team-node\n    ephemeral: true\n");
    std::fs::write(&instances, text).unwrap();
    std::fs::write(
        &plan_json,
        plan_doc(&[("module.instance_proof_1[0].aws_instance.this", &["create"])]),
    )
    .unwrap();
    std::fs::write(
        &teardown_json,
        plan_doc(&[("module.instance_proof_1[0].aws_instance.this", &["delete"])]),
    )
    .unwrap();
    let before = calls().len();
    let (code, out, err) = t.csis_with(&["build"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    let c: Vec<String> = calls()[before..]
        .iter()
        .filter(|(d, _)| d.starts_with("instance-image/"))
        .map(|(_, a)| a.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(
        c,
        ["init", "plan", "show", "apply", "init", "plan", "show", "apply"],
        "proof, then teardown: {:?}",
        calls()
    );
    let proofs: Vec<String> = serde_json::from_value(py(&["named", "proof-1"]).unwrap()).unwrap();
    assert!(proofs.is_empty(), "the ephemeral is gone: {proofs:?}");
    assert_eq!(named().len(), 1, "the durable machine stands");
    let vars = std::fs::read_to_string(root.join("instances.auto.tfvars")).unwrap();
    assert!(vars.contains("ephemeral_present = false"), "{vars}");
    let v = verdicts();
    let proof_verdict = v
        .iter()
        .find(|v| v["instance"] == "proof-1")
        .unwrap_or_else(|| panic!("a verdict of proof-1: {v:#?}"));
    assert_eq!(proof_verdict["ok"], true, "{proof_verdict:#}");
    assert_eq!(proof_verdict["ephemeral"], true, "{proof_verdict:#}");
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    assert!(
        fleet.current_generation("proof-1").is_none(),
        "its generation closed: {:#?}",
        fleet.instances.instances.get("proof-1")
    );
    assert_eq!(
        fleet.current_generation("team-node-1").map(|g| g.number),
        Some(1),
        "the durable one untouched"
    );
    // proved: the next build has nothing to do
    let before = calls().len();
    let (code, out, err) = t.csis_with(&["build"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(calls().len(), before, "{:?}", calls());

    // 5. an ephemeral that boots another image fails its proof: the build
    // fails naming the check, and the machine still goes (on_failure:
    // teardown), its failed verdict recorded, its generation closed
    let mut text = std::fs::read_to_string(&instances).unwrap();
    text.push_str(
        "  - name: proof-2\n    image: team-node\n    ephemeral: true\n    on_failure: teardown\n",
    );
    std::fs::write(&instances, text).unwrap();
    std::fs::write(
        &plan_json,
        plan_doc(&[("module.instance_proof_2[0].aws_instance.this", &["create"])]),
    )
    .unwrap();
    std::fs::write(
        &teardown_json,
        plan_doc(&[("module.instance_proof_2[0].aws_instance.this", &["delete"])]),
    )
    .unwrap();
    let wrong = json!({"image": MOTO_AMI, "tags": {"Name": "proof-2", "csis_config": config}});
    let env5: Vec<(&str, String)> = env
        .iter()
        .map(|(k, v)| match *k {
            "TOFU_WITH_EPHEMERAL" => (
                *k,
                json!({"config": config, "want": [durable, wrong], "gone": []}).to_string(),
            ),
            "TOFU_DURABLE" => (
                *k,
                json!({"config": config, "want": [durable], "gone": ["proof-1", "proof-2"]})
                    .to_string(),
            ),
            _ => (*k, v.clone()),
        })
        .collect();
    let before = calls().len();
    let (code, out, err) = t.csis_with(&["build"], &env5);
    assert_ne!(code, 0, "{out}\n{err}");
    let said = format!("{out}\n{err}");
    assert!(
        said.contains("did not verify") && said.contains("booted image"),
        "{said}"
    );
    let applies = calls()[before..]
        .iter()
        .filter(|(d, a)| d.starts_with("instance-image/") && a.starts_with("apply"))
        .count();
    assert_eq!(applies, 2, "the proof and the teardown: {:?}", calls());
    let left: Vec<String> = serde_json::from_value(py(&["named", "proof-2"]).unwrap()).unwrap();
    assert!(left.is_empty(), "torn down although it failed: {left:?}");
    let v = verdicts();
    let failed = v
        .iter()
        .find(|v| v["instance"] == "proof-2")
        .unwrap_or_else(|| panic!("a verdict of proof-2: {v:#?}"));
    assert_eq!(failed["ok"], false, "{failed:#}");
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    assert!(fleet.current_generation("proof-2").is_none());

    // 6. two ephemerals due, a build of one of them: the teardown waits for
    // the verdicts of the nodes this build runs only, so neither stays up
    // (they share ephemeral_present); the other is proved by the next build
    let mut text = std::fs::read_to_string(&instances).unwrap().replace(
        "  - name: proof-2\n    image: team-node\n    ephemeral: true\n    on_failure: teardown\n",
        "",
    );
    text.push_str("  - name: proof-3\n    image: team-node\n    ephemeral: true\n");
    text.push_str("  - name: proof-4\n    image: team-node\n    ephemeral: true\n");
    std::fs::write(&instances, text).unwrap();
    std::fs::write(
        &plan_json,
        plan_doc(&[
            ("module.instance_proof_3[0].aws_instance.this", &["create"]),
            ("module.instance_proof_4[0].aws_instance.this", &["create"]),
        ]),
    )
    .unwrap();
    std::fs::write(
        &teardown_json,
        plan_doc(&[
            ("module.instance_proof_3[0].aws_instance.this", &["delete"]),
            ("module.instance_proof_4[0].aws_instance.this", &["delete"]),
        ]),
    )
    .unwrap();
    let up = |n: &str| json!({"image": node_ami, "tags": {"Name": n, "csis_config": config}});
    let env6: Vec<(&str, String)> = env
        .iter()
        .map(|(k, v)| match *k {
            "TOFU_WITH_EPHEMERAL" => (
                *k,
                json!({"config": config, "want": [durable, up("proof-3"), up("proof-4")], "gone": []}).to_string(),
            ),
            "TOFU_DURABLE" => (
                *k,
                json!({"config": config, "want": [durable], "gone": ["proof-3", "proof-4"]}).to_string(),
            ),
            _ => (*k, v.clone()),
        })
        .collect();
    let standing =
        |n: &str| -> Vec<String> { serde_json::from_value(py(&["named", n]).unwrap()).unwrap() };
    let before = calls().len();
    let (code, out, err) = t.csis_with(&["build", "//instances/proof-3"], &env6);
    assert_eq!(code, 0, "{out}\n{err}");
    let applies = calls()[before..]
        .iter()
        .filter(|(d, a)| d.starts_with("instance-image/") && a.starts_with("apply"))
        .count();
    assert_eq!(applies, 2, "the proof and the teardown: {:?}", calls());
    assert!(standing("proof-3").is_empty() && standing("proof-4").is_empty());
    let proved = |n: &str| {
        verdicts()
            .iter()
            .any(|v| v["instance"] == n && v["ok"] == true)
    };
    assert!(proved("proof-3") && !proved("proof-4"));
    // proof-4 came up with proof-3 (one ephemeral_present for both): not
    // proved, but a generation of its own, opened with its machine and
    // closed by the teardown
    let closed = |n: &str| -> Vec<(u32, Option<String>)> {
        let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
        fleet.instances.instances.get(n).map_or(Vec::new(), |l| {
            l.closed()
                .map(|c| (c.generation.number, c.generation.instance_id.clone()))
                .collect()
        })
    };
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    assert!(fleet.current_generation("proof-4").is_none());
    let came_up = closed("proof-4");
    assert_eq!(came_up.len(), 1, "{came_up:?}");
    assert!(
        came_up[0]
            .1
            .as_deref()
            .is_some_and(|id| id.starts_with("i-")),
        "its machine's id: {came_up:?}"
    );
    let (code, out, err) = t.csis_with(&["build"], &env6);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(proved("proof-4"));
    assert!(standing("proof-3").is_empty() && standing("proof-4").is_empty());
    // and proof-3, proved already, came up with proof-4: its second generation
    assert_eq!(closed("proof-3").len(), 2, "{:?}", closed("proof-3"));
    assert_eq!(closed("proof-4").len(), 2, "{:?}", closed("proof-4"));

    // 7. a run that stops before a due ephemeral's proof (`--fail-fast
    // -j 1`: proof-6 boots another image and fails, so proof-5's node never
    // starts): the root's ephemerals are torn down at the end of the run
    // all the same, proof-5 recorded as having come up, none left standing
    let mut text = std::fs::read_to_string(&instances).unwrap();
    text.push_str("  - name: proof-5\n    image: team-node\n    ephemeral: true\n");
    text.push_str(
        "  - name: proof-6\n    image: team-node\n    ephemeral: true\n    on_failure: teardown\n",
    );
    std::fs::write(&instances, text).unwrap();
    let all = ["proof-3", "proof-4", "proof-6", "proof-5"];
    let module = |n: &str| {
        format!(
            "module.instance_{}[0].aws_instance.this",
            n.replace('-', "_")
        )
    };
    let creates: Vec<String> = all[2..].iter().map(|n| module(n)).collect();
    let deletes: Vec<String> = all.iter().map(|n| module(n)).collect();
    let as_changes =
        |v: &[String], act: &'static [&'static str]| -> Vec<(String, &'static [&'static str])> {
            v.iter().map(|a| (a.clone(), act)).collect()
        };
    let doc = |c: Vec<(String, &'static [&'static str])>| {
        let c: Vec<(&str, &[&str])> = c.iter().map(|(a, x)| (a.as_str(), *x)).collect();
        plan_doc(&c)
    };
    std::fs::write(&plan_json, doc(as_changes(&creates, &["create"]))).unwrap();
    std::fs::write(&teardown_json, doc(as_changes(&deletes, &["delete"]))).unwrap();
    let wrong6 = json!({"image": MOTO_AMI, "tags": {"Name": "proof-6", "csis_config": config}});
    let env7: Vec<(&str, String)> = env
        .iter()
        .map(|(k, v)| match *k {
            "TOFU_WITH_EPHEMERAL" => (
                *k,
                json!({"config": config, "want": [durable, up("proof-3"), up("proof-4"), wrong6, up("proof-5")], "gone": []}).to_string(),
            ),
            "TOFU_DURABLE" => (
                *k,
                json!({"config": config, "want": [durable], "gone": all}).to_string(),
            ),
            _ => (*k, v.clone()),
        })
        .collect();
    let (code, out, err) = t.csis_with(&["build", "--fail-fast", "-j", "1"], &env7);
    assert_ne!(code, 0, "proof-6 fails: {out}\n{err}");
    let said = format!("{out}\n{err}");
    assert!(
        said.contains("the run ended before the proof of proof-5"),
        "proof-5's node never ran: {said}"
    );
    for n in all {
        assert!(standing(n).is_empty(), "{n} stands: {said}");
        let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
        assert!(fleet.current_generation(n).is_none(), "{n}: {said}");
    }
    assert!(!proved("proof-6") && !proved("proof-5"));
    assert_eq!(
        closed("proof-5").len(),
        1,
        "proof-5 came up: {:?}",
        closed("proof-5")
    );
    assert_eq!(closed("proof-6").len(), 1, "{:?}", closed("proof-6"));
    // the next build proves proof-5 (proof-6 fails again: it is dropped first)
    let text = std::fs::read_to_string(&instances).unwrap().replace(
        "  - name: proof-6\n    image: team-node\n    ephemeral: true\n    on_failure: teardown\n",
        "",
    );
    std::fs::write(&instances, text).unwrap();
    // (proof-6's module is gone from the root with its declaration)
    let deletes: Vec<String> = deletes
        .into_iter()
        .filter(|d| !d.contains("proof_6"))
        .collect();
    std::fs::write(&teardown_json, doc(as_changes(&deletes, &["delete"]))).unwrap();
    let env8: Vec<(&str, String)> = env7
        .iter()
        .map(|(k, v)| match *k {
            "TOFU_WITH_EPHEMERAL" => (
                *k,
                json!({"config": config, "want": [durable, up("proof-3"), up("proof-4"), up("proof-5")], "gone": []}).to_string(),
            ),
            _ => (*k, v.clone()),
        })
        .collect();
    let (code, out, err) = t.csis_with(&["build", "//instances/proof-5"], &env8);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(proved("proof-5"));
    assert!(standing("proof-5").is_empty());

    // 8. a teardown that fails leaves the ephemerals standing, recorded
    // standing after their proof: the next build's plan removes them
    // (`remove`), one pass of the root with `ephemeral_present = false`,
    // and closes their generations
    let mut text = std::fs::read_to_string(&instances).unwrap();
    text.push_str("  - name: proof-7\n    image: team-node\n    ephemeral: true\n");
    std::fs::write(&instances, text).unwrap();
    let eph = ["proof-3", "proof-4", "proof-5", "proof-7"];
    std::fs::write(
        &plan_json,
        doc(as_changes(&[module("proof-7")], &["create"])),
    )
    .unwrap();
    let deletes: Vec<String> = eph.iter().map(|n| module(n)).collect();
    std::fs::write(&teardown_json, doc(as_changes(&deletes, &["delete"]))).unwrap();
    let wanted: Vec<Value> = std::iter::once(durable.clone())
        .chain(eph.iter().map(|n| up(n)))
        .collect();
    let with = |durable_arg: String| -> Vec<(&str, String)> {
        env.iter()
            .map(|(k, v)| match *k {
                "TOFU_WITH_EPHEMERAL" => (
                    *k,
                    json!({"config": config, "want": wanted, "gone": []}).to_string(),
                ),
                "TOFU_DURABLE" => (*k, durable_arg.clone()),
                _ => (*k, v.clone()),
            })
            .collect()
    };
    // the teardown's apply fails (the stand-in cannot read what to keep)
    let (code, out, err) = t.csis_with(&["build"], &with("not json".into()));
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(proved("proof-7"), "{out}\n{err}");
    for n in eph {
        assert_eq!(standing(n).len(), 1, "{n}: {out}\n{err}");
        let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
        assert!(
            fleet.current_generation(n).is_some(),
            "{n} recorded standing"
        );
    }
    let (code, out, err) = t.csis(&["plan", "--json", "//instances/..."]);
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    for n in eph {
        let node = plan["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| {
                x["label"]
                    .as_str()
                    .is_some_and(|l| l.starts_with(&format!("//instances/{n}@")))
            })
            .unwrap_or_else(|| panic!("{n}: {plan:#}"));
        assert_eq!(node["due"], true, "{node:#}");
        assert_eq!(node["code"], "remove", "{node:#}");
    }
    let before = calls().len();
    let gone = json!({"config": config, "want": [durable], "gone": eph}).to_string();
    let (code, out, err) = t.csis_with(&["build"], &with(gone));
    assert_eq!(code, 0, "{out}\n{err}");
    let applies = calls()[before..]
        .iter()
        .filter(|(d, a)| d.starts_with("instance-image/") && a.starts_with("apply"))
        .count();
    assert_eq!(
        applies,
        1,
        "one pass, ephemeral_present = false: {:?}",
        calls()
    );
    let vars = std::fs::read_to_string(root.join("instances.auto.tfvars")).unwrap();
    assert!(vars.contains("ephemeral_present = false"), "{vars}");
    for n in eph {
        assert!(standing(n).is_empty(), "{n}: {out}\n{err}");
        let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
        assert!(fleet.current_generation(n).is_none(), "{n}: {out}\n{err}");
    }
    assert_eq!(closed("proof-7").len(), 1, "{:?}", closed("proof-7"));
    assert_eq!(named().len(), 1, "the durable machine stands");

    // 9. the fleet's drift on EC2 (fleet_aws_drift)
    crate::fleet_aws_drift::missing_machine_relaunched(&t, &env, &plan_json, &record, vol);
}
