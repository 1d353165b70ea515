//! Lineage operations through the real `csis` binary against moto (never
//! real AWS; skipped loudly when moto does not answer, a failure under
//! `CSIS_REQUIRE_MOTO`): AMIs carrying csis tags are made in moto with boto3
//! (`csis_config` in the original's form, the tree's id lowercased, and one
//! in csis's earlier form, the id as written: both are the tree's), lineage records are written for some of them, then: the state query finds
//! the foreign one; a running instance refuses the disposal of its AMI with
//! nothing deleted, and `empty` lists it from the runtime's inventory;
//! `runtime verify-instance` runs the runtime's verify_instance; a release
//! marks the AMI; retention keeps a released and a pinned build and
//! deregisters the rest children-first (read back from
//! `describe-images`); `state import` adopts the foreign AMI.
//!
//! The rules every runtime keeps are `ops_support::suite`'s, called here
//! for `aws-moto`.
//!
//! moto: `runtimes/aws/tests/moto.sh` (CSIS_MOTO_URL, default
//! http://127.0.0.1:5000). The test works in its own region and deregisters
//! what it made.

use std::collections::BTreeMap;
use std::process::Command as Std;

use csis_cache::BuildRecord;
use serde_json::{json, Value};

use crate::ops_support;
use ops_support::suite::{self, Retention, RuntimeUnderTest};
use ops_support::Tree;

const REGION: &str = "eu-west-3";

const PY: &str = r#"
import boto3, json, sys
url, region, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
ec2 = boto3.client('ec2', region_name=region, endpoint_url=url,
                   aws_access_key_id='testing', aws_secret_access_key='testing')
arg = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
if cmd == 'seed':
    src = ec2.describe_images(Owners=['764336703387'])['Images'][0]['ImageId']
    inst = ec2.run_instances(ImageId=src, MinCount=1, MaxCount=1, InstanceType='t3.micro')['Instances'][0]['InstanceId']
    out = {}
    for key, spec in arg.items():
        ami = ec2.create_image(InstanceId=inst, Name=spec['name'])['ImageId']
        ec2.create_tags(Resources=[ami], Tags=[{'Key': k, 'Value': v} for k, v in spec['tags'].items()])
        out[key] = ami
    ec2.terminate_instances(InstanceIds=[inst])
    subnet = ec2.describe_subnets()['Subnets'][0]['SubnetId']
    print(json.dumps({'amis': out, 'subnet': subnet}))
elif cmd == 'images':
    out = {}
    for i in ec2.describe_images(Owners=['self'])['Images']:
        out[i['ImageId']] = {t['Key']: t['Value'] for t in i.get('Tags', [])}
    print(json.dumps(out))
elif cmd == 'run':
    i = ec2.run_instances(ImageId=arg, MinCount=1, MaxCount=1, InstanceType='t3.micro')['Instances'][0]['InstanceId']
    print(json.dumps(i))
elif cmd == 'run_named':
    i = ec2.run_instances(ImageId=arg['image'], MinCount=1, MaxCount=1, InstanceType='t3.micro',
                          TagSpecifications=[{'ResourceType': 'instance',
                                              'Tags': [{'Key': 'Name', 'Value': arg['name']}]}])['Instances'][0]['InstanceId']
    print(json.dumps(i))
elif cmd == 'terminate':
    ec2.terminate_instances(InstanceIds=[arg])
    print('null')
elif cmd == 'cleanup':
    ids = [i['InstanceId'] for r in ec2.describe_instances()['Reservations'] for i in r['Instances']
           if i['State']['Name'] not in ('terminated',)]
    if ids:
        ec2.terminate_instances(InstanceIds=ids)
    for i in ec2.describe_images(Owners=['self'])['Images']:
        ec2.deregister_image(ImageId=i['ImageId'])
    print('null')
"#;

fn moto_url() -> String {
    std::env::var("CSIS_MOTO_URL").unwrap_or_else(|_| "http://127.0.0.1:5000".into())
}

fn py(cmd: &str, arg: Option<Value>) -> Option<Value> {
    let mut c = Std::new("python3");
    c.args(["-c", PY, &moto_url(), REGION, cmd]);
    if let Some(a) = arg {
        c.arg(a.to_string());
    }
    let out = c.output().ok()?;
    if !out.status.success() {
        eprintln!("python3 {cmd}: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn moto_ready() -> bool {
    let boto = Std::new("python3")
        .args(["-c", "import boto3"])
        .status()
        .is_ok_and(|s| s.success());
    let ok = boto && py("images", None).is_some();
    if !ok {
        if std::env::var_os("CSIS_REQUIRE_MOTO").is_some() {
            panic!("moto (or python3 boto3) is not available and CSIS_REQUIRE_MOTO is set");
        }
        eprintln!(
            "*** SKIPPED: moto is not answering on {} or python3 lacks boto3; start it with runtimes/aws/tests/moto.sh ***",
            moto_url()
        );
    }
    ok
}

struct Cleanup;
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = py("cleanup", None);
    }
}

impl Tree {
    /// The copy, its `csis` talking to moto only (no AWS profile or files).
    fn new(subst: &[(&str, &str)]) -> Tree {
        let t = csis_testkit::Tree::copy(&csis_testkit::fixture("ops/aws"), subst);
        let (config, credentials) = (
            t.root.join("no-aws-config"),
            t.root.join("no-aws-credentials"),
        );
        Tree(
            t.env("AWS_ENDPOINT_URL", moto_url())
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env("AWS_CONFIG_FILE", config)
                .env("AWS_SHARED_CREDENTIALS_FILE", credentials)
                .env_remove("AWS_PROFILE"),
        )
    }
}

fn fp(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

/// (key, series, parent key or "vendor", run, fingerprint char)
const BUILDS: &[(&str, &str, &str, &str, char)] = &[
    ("b1", "alma-9", "vendor", "2026_10_01t00_00_00_000000", 'a'),
    ("w0", "web", "b1", "2026_10_01t01_00_00_000000", 'b'),
    ("w1", "web", "b1", "2026_10_02t00_00_00_000000", 'c'),
    ("b2", "alma-9", "vendor", "2026_10_03t00_00_00_000000", 'd'),
    ("w2", "web", "b2", "2026_10_04t00_00_00_000000", 'e'),
    ("w3", "web", "b2", "2026_10_05t00_00_00_000000", 'f'),
    // never recorded: foreign
    ("f1", "web", "b2", "2026_10_06t00_00_00_000000", '9'),
    // another tree's (another csis_config) in the same account: never this tree's
    ("o1", "web", "b2", "2026_10_07t00_00_00_000000", '8'),
];

/// The config id of the tree under test, as its `cfg/_config.yml` writes it.
const TREE_ID: &str = "Ops-AWS";

/// The `csis_config` of a seeded AMI: the tree's id as the original 0.1.1
/// writes it (lowercased, as its emission tags the starter's AMIs), as
/// csis wrote it before (the id as written: `w0`), or another tree's.
fn config_of(key: &str) -> &'static str {
    match key {
        "o1" => "another-tree",
        "w0" => TREE_ID,
        _ => "ops-aws",
    }
}

#[test]
fn aws_dispose_retention_release_foreign_import_on_moto() {
    if !moto_ready() {
        return;
    }
    let _ = py("cleanup", None);
    let _cleanup = Cleanup;

    // AMIs in moto; parents are named by AMI id, so seed parents first
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut subnet = String::new();
    for (key, series, parent, run, c) in BUILDS {
        let parent_id = if *parent == "vendor" {
            "vendor".to_string()
        } else {
            ids[*parent].clone()
        };
        let spec = json!({ *key: {
            "name": format!("{series}-{key}"),
            "tags": {
                "csis_config": config_of(key),
                "csis_series": series, "csis_parent": parent_id, "csis_run": run,
                "csis_fingerprint": fp(*c)[..16].to_string(),
                "csis_identity_types": "", "csis_storage_types": ""
            }
        }});
        let out = py("seed", Some(spec)).expect("seed moto");
        ids.insert(
            key.to_string(),
            out["amis"][*key].as_str().unwrap().to_string(),
        );
        subnet = out["subnet"].as_str().unwrap().to_string();
    }
    let t = Tree::new(&[
        ("@SUBNET@", &subnet),
        ("us-east-2", REGION),
        ("id: ops-aws", &format!("id: {TREE_ID}")),
    ]);
    // lineage records for all but the foreign one
    let mut l = csis_cache::Lineage::default();
    for (key, series, parent, run, c) in BUILDS.iter().filter(|b| b.0 != "f1" && b.0 != "o1") {
        let mut r = BuildRecord::new(ids[*key].clone(), *series, "aws-moto");
        r.parent = Some(if *parent == "vendor" {
            "vendor".into()
        } else {
            ids[*parent].clone()
        });
        r.run = Some(run.to_string());
        r.input_fingerprint = Some(fp(*c));
        r.name = Some(format!("{series}-{key}"));
        l.add_build(r);
    }
    t.meta().save_lineage(&l).unwrap();
    let id = |k: &str| ids[k].clone();

    // the state query: one foreign AMI; the runtime lists its instances (none)
    let (code, out, err) = t.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let foreign: Vec<&str> = out.lines().filter(|l| l.contains(": foreign:")).collect();
    assert_eq!(foreign.len(), 1, "{out}");
    assert!(foreign[0].contains(&id("f1")), "{out}");
    assert!(
        !out.contains(&id("o1")),
        "another tree's AMI is not judged: {out}"
    );
    assert!(!out.contains("unavailable: instances/aws-moto"), "{out}");
    assert_eq!(t.run(&["state", "query", "--strict"]).0, 1);

    let holds = |ami: &str| py("images", None).unwrap().get(ami).is_some();
    let tag = |ami: &str, key: &str| {
        py("images", None).unwrap()[ami][key]
            .as_str()
            .map(str::to_string)
    };
    let rt = RuntimeUnderTest {
        tree: &t,
        name: "aws-moto",
        holds: &holds,
        tag: Some(&tag),
    };

    // an instance running from w2 refuses its disposal; nothing deleted
    let inst = py("run", Some(json!(id("w2")))).unwrap();
    let inst = inst.as_str().unwrap().to_string();
    suite::in_use_refuses_disposal(&rt, &[&id("w2"), &id("w0")], &inst);
    // `empty` reads the runtime's inventory: the instance on w2 and the
    // unreleased AMIs are leftovers (exit 1, not 2 "cannot list")
    let (code, out, err) = t.run(&["empty", "--runtime", "aws-moto"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains(&format!("leftover: instance {inst} (Running)")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!("leftover: image {}", id("w2"))),
        "{out}"
    );
    py("terminate", Some(json!(inst))).unwrap();

    // verify-instance: the runtime's verify_instance through the CLI. moto's
    // SSM answers Success with no output, so the launch marker is never
    // seen; the booted image is read from EC2 (expected: the pin)
    let vm = py(
        "run_named",
        Some(json!({"image": id("w2"), "name": "vm-v"})),
    )
    .unwrap();
    let vm = vm.as_str().unwrap().to_string();
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("vm-v".into(), id("w2"));
    t.meta().save_pins(&pins).unwrap();
    let (code, out, err) = t.run(&[
        "runtime",
        "verify-instance",
        "aws-moto",
        "vm-v",
        "--timeout",
        "1",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("FAIL startup scripts: no completion marker within 1s"),
        "{out}"
    );
    assert!(
        out.contains(&format!("ok   booted image: booted {}", id("w2"))),
        "{out}"
    );
    assert!(
        out.contains("verify: vm-v on aws-moto: NOT verified"),
        "{out}"
    );
    let (code, out, err) = t.run(&[
        "runtime",
        "verify-instance",
        "aws-moto",
        "vm-v",
        "--expect",
        &id("w1"),
        "--timeout",
        "1",
        "--json",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["expected_build"], id("w1"));
    assert_eq!(v["checks"][1]["name"], "booted image");
    assert_eq!(
        v["checks"][1]["detail"],
        format!("booted {}, expected {}", id("w2"), id("w1"))
    );
    // no such machine: refused by name; no pin and no --expect: cannot say
    let (code, _, err) = t.run(&[
        "runtime",
        "verify-instance",
        "aws-moto",
        "nobody",
        "--expect",
        // a full AMI id lineage does not record passes through (`ami-1`
        // would be refused: too short to name a build)
        "ami-00000000000000001",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot run a command on 'nobody': it is absent (no such machine)"),
        "{err}"
    );
    let (code, _, err) = t.run(&["runtime", "verify-instance", "aws-moto", "nobody"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no pin"), "{err}");
    py("terminate", Some(json!(vm))).unwrap();
    let mut pins = t.meta().pins().unwrap();
    pins.instances.remove("vm-v");
    t.meta().save_pins(&pins).unwrap();

    // a release: recorded, and (apply_release) marked on the AMI
    suite::release_is_recorded_and_marked(&rt, "web", &id("w3"), "prod");

    // retention keep 1; an instance pinned to w1; w3 released (and newest)
    let mut pins = t.meta().pins().unwrap();
    pins.instances.insert("vm-1".into(), id("w1"));
    t.meta().save_pins(&pins).unwrap();
    let rt_yml = t.root.join("cfg/runtime-builders.yml");
    let text = std::fs::read_to_string(&rt_yml).unwrap();
    std::fs::write(
        &rt_yml,
        text.replace(
            "    default_machine_type: t3.medium\n",
            "    default_machine_type: t3.medium\n    retention_keep: 1\n",
        ),
    )
    .unwrap();
    suite::retention_keeps_released_and_pinned(
        &rt,
        &Retention {
            released: None,
            pinned: (&id("w1"), "web", "vm-1"),
            disposed: &[&id("w0"), &id("w2"), &id("b1")],
            kept: &[&id("w1"), &id("w3"), &id("b2"), &id("f1"), &id("o1")],
            child_first: (&id("w0"), &id("b1")),
        },
    );

    // the foreign AMI adopted from its tags; another tree's never
    let out = suite::foreign_is_adopted(&rt, &id("f1"), "web", &id("b2"));
    let rec = t
        .meta()
        .lineage()
        .unwrap()
        .find(&id("f1"))
        .cloned()
        .unwrap();
    assert_eq!(rec.input_fingerprint.as_deref(), Some(&fp('9')[..16]));
    assert!(
        !out.contains(&id("o1")),
        "another tree's AMI is never adopted: {out}"
    );
    assert!(t.meta().lineage().unwrap().find(&id("o1")).is_none());
}
