//! What the tests against moto with the original's starters share: the
//! starter copied with moto's network put in, `csis` run against moto, a
//! boto3 helper for what a test makes in moto.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use serde_json::Value;

pub const REGION: &str = "us-east-2";
/// The newest AlmaLinux 10 x86_64 of runtimes/aws/tests/fixtures/amis.json
/// (what the starter's query finds in moto), and its owner.
pub const MOTO_AMI: &str = "ami-0a1a10000000000a2";
pub const MOTO_AMI_OWNER: &str = "764336703387";

pub const PY: &str = r#"
import boto3, json, sys
url, region, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
ec2 = boto3.client('ec2', region_name=region, endpoint_url=url,
                   aws_access_key_id='testing', aws_secret_access_key='testing')
if cmd == 'network':
    vpc = ec2.create_vpc(CidrBlock='10.61.0.0/16')['Vpc']['VpcId']
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock='10.61.1.0/24', AvailabilityZone=region + 'a')['Subnet']['SubnetId']
    sg = ec2.create_security_group(GroupName='recipe-gateway-' + vpc, Description='gateway', VpcId=vpc)['GroupId']
    print(json.dumps({'vpc': vpc, 'subnet': subnet, 'sg': sg}))
elif cmd == 'ami':
    print(json.dumps(len(ec2.describe_images(ImageIds=[sys.argv[4]])['Images'])))
elif cmd == 'seed':
    # AMIs tagged as builds: [{series, name, tags}] in order; a `csis_parent`
    # of `@<series>` names the AMI seeded for that series before it
    src = ec2.run_instances(ImageId=sys.argv[5], MinCount=1, MaxCount=1, InstanceType='t3.micro')['Instances'][0]['InstanceId']
    out = {}
    for spec in json.loads(sys.argv[4]):
        tags = dict(spec['tags'])
        if tags.get('csis_parent', '').startswith('@'):
            tags['csis_parent'] = out[tags['csis_parent'][1:]]
        ami = ec2.create_image(InstanceId=src, Name=spec['name'])['ImageId']
        ec2.create_tags(Resources=[ami], Tags=[{'Key': k, 'Value': v} for k, v in tags.items()])
        out[spec['series']] = ami
    ec2.terminate_instances(InstanceIds=[src])
    print(json.dumps(out))
elif cmd == 'converge':
    # {"config": C, "want": [{image, tags}], "gone": [names]}: make each
    # wanted machine unless one of its Name and config C stands; terminate
    # every machine of a gone name and config C (another run's are not ours)
    arg = json.loads(sys.argv[4])
    def standing(name):
        out = []
        filters = [{'Name': 'tag:Name', 'Values': [name]},
                   {'Name': 'tag:csis_config', 'Values': [arg['config']]}]
        for r in ec2.describe_instances(Filters=filters)['Reservations']:
            out += [i['InstanceId'] for i in r['Instances'] if i['State']['Name'] != 'terminated']
        return out
    for w in arg.get('want', []):
        if not standing(w['tags']['Name']):
            ec2.run_instances(ImageId=w['image'], MinCount=1, MaxCount=1, InstanceType='t3.micro',
                              TagSpecifications=[{'ResourceType': 'instance',
                                                  'Tags': [{'Key': k, 'Value': v} for k, v in w['tags'].items()]}])
    for name in arg.get('gone', []):
        ids = standing(name)
        if ids:
            ec2.terminate_instances(InstanceIds=ids)
    print(json.dumps(True))
elif cmd == 'named':
    out = []
    for r in ec2.describe_instances(Filters=[{'Name': 'tag:Name', 'Values': [sys.argv[4]]}])['Reservations']:
        for i in r['Instances']:
            if i['State']['Name'] != 'terminated':
                out.append(i['InstanceId'])
    print(json.dumps(out))
elif cmd == 'volume':
    arg = json.loads(sys.argv[4])
    v = ec2.create_volume(AvailabilityZone=region + 'a', Size=1,
                          TagSpecifications=[{'ResourceType': 'volume',
                                              'Tags': [{'Key': k, 'Value': v} for k, v in arg['tags'].items()]}])['VolumeId']
    print(json.dumps(v))
elif cmd == 'delete_volume':
    ec2.delete_volume(VolumeId=sys.argv[4])
    print(json.dumps(True))
elif cmd == 'terminate':
    ec2.terminate_instances(InstanceIds=json.loads(sys.argv[4]))
    print(json.dumps(True))
"#;

/// `PATH` with `bin` (a test's stand-in executables) first.
pub fn path_with(bin: &Path) -> (&'static str, String) {
    let rest = std::env::var("PATH").unwrap_or_default();
    ("PATH", format!("{}:{rest}", bin.display()))
}

/// The calls a recording stand-in wrote to `record` (`$PWD|ARGS` lines):
/// each as (its directory under `generated/`, its arguments).
pub fn recorded_calls(record: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (cwd, argv) = l.split_once('|').unwrap_or((l, ""));
            let dir = cwd.split("/generated/").nth(1).unwrap_or(cwd).to_string();
            (dir, argv.to_string())
        })
        .collect()
}

pub fn moto_url() -> String {
    std::env::var("CSIS_MOTO_URL").unwrap_or_else(|_| "http://127.0.0.1:5000".into())
}

pub fn py(args: &[&str]) -> Option<Value> {
    let out = Std::new("python3")
        .args(["-c", PY, &moto_url(), REGION])
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("python3 {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Whether moto answers (and python3 has boto3) with the fixture AMI `ami`
/// of this tree's runtimes/aws/tests/fixtures/amis.json; else skipped, or a
/// failure under `CSIS_REQUIRE_MOTO`, saying why.
pub fn moto_with_fixtures(ami: &str) -> bool {
    match py(&["ami", ami]) {
        None => skip(&format!(
            "moto is not answering on {} or python3 lacks boto3; start it with runtimes/aws/tests/moto.sh",
            moto_url()
        )),
        Some(n) if n != 1 => skip(&format!(
            "moto runs without this tree's runtimes/aws/tests/fixtures/amis.json ({ami} is not there; restart it with moto.sh)"
        )),
        Some(_) => return true,
    }
    false
}

pub fn skip(why: &str) {
    if std::env::var_os("CSIS_REQUIRE_MOTO").is_some() {
        panic!("{why} and CSIS_REQUIRE_MOTO is set");
    }
    eprintln!("\n*** SKIPPED: {why} ***\n");
}

pub fn reference() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference");
    p.is_dir().then_some(p)
}

pub fn replace_in(path: &Path, pairs: &[(&str, &str)]) {
    let mut s = std::fs::read_to_string(path).unwrap();
    for (a, b) in pairs {
        assert!(s.contains(a), "{} holds no {a}", path.display());
        s = s.replace(a, b);
    }
    std::fs::write(path, s).unwrap();
}

/// The starter, copied, its REPLACE-ME ids swapped for moto's and its
/// instance profile for the one the original's emission ran with.
pub struct Starter {
    pub _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub aws: PathBuf,
    pub net: Value,
    /// `CSIS_CONFIG_IDENTITY` for the runs (none: unset).
    pub identity: Option<PathBuf>,
}

impl Starter {
    pub fn new(reference: &Path) -> Option<Starter> {
        Self::named(reference, "standard-aws")
    }

    /// [`Starter::new`] for another of the original's AWS starters.
    pub fn named(reference: &Path, starter: &str) -> Option<Starter> {
        if !moto_with_fixtures(MOTO_AMI) {
            return None;
        }
        let Some(net) = py(&["network"]) else {
            skip("moto answers but made no VPC, subnet and security group");
            return None;
        };
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(starter);
        csis_testkit::copy_dir(
            &reference
                .join("cs-image-system-0.1.1-starters")
                .join(starter),
            &root,
        );
        replace_in(
            &root.join("cfg/runtime-builders.yml"),
            &[
                ("vpc-REPLACE-ME", net["vpc"].as_str().unwrap()),
                ("sg-REPLACE-ME-gateway", net["sg"].as_str().unwrap()),
                ("subnet-REPLACE-ME-a", net["subnet"].as_str().unwrap()),
                ("REPLACE-ME-ssm-instance-profile", "peer-ssm-profile"),
            ],
        );
        let aws = tmp.path().join("aws");
        std::fs::create_dir_all(&aws).unwrap();
        std::fs::write(
            aws.join("config"),
            format!("[profile REPLACE-ME-profile]\nregion = {REGION}\n"),
        )
        .unwrap();
        std::fs::write(
            aws.join("credentials"),
            "[REPLACE-ME-profile]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
        )
        .unwrap();
        Some(Starter {
            _tmp: tmp,
            root,
            aws,
            net,
            identity: None,
        })
    }

    pub fn csis(&self, args: &[&str]) -> (i32, String, String) {
        self.csis_with(args, &[])
    }

    /// [`Starter::csis`] with more environment.
    pub fn csis_with(&self, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
        let mut t = csis_testkit::Tree::at(&self.root)
            .env("AWS_ENDPOINT_URL", moto_url())
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", self.aws.join("config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", self.aws.join("credentials"))
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("CSIS_CONFIG_IDENTITY");
        if let Some(i) = &self.identity {
            t = t.env("CSIS_CONFIG_IDENTITY", i);
        }
        for (k, v) in env {
            t = t.env(k, v);
        }
        t.run(args)
    }
}
