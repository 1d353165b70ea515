//! A storage archived and restored on AWS (issue 22; core.md §9.1; the
//! original's tf-aws-ebs transition actions): the standard-aws starter's
//! EBS storage `data`, its root's `tofu` replaced by a recording stand-in
//! that plans and applies against moto from the root's files as tofu would
//! (a module call and no volume: create, from the `snapshot_name` archive
//! when it names one; a volume and no module call: delete).
//!
//! - `state: archived`: the volume's data is kept in the snapshot
//!   `csis-data-archive` before the root's plan destroys the volume; when
//!   the archive cannot be taken (two volumes answer to the name), nothing
//!   is planned or applied and the storage stays active;
//! - `state: active` again: the volume is made from the archive, which is
//!   deleted after the apply;
//! - archived, then `destroyed`: the archive goes with the storage.

use crate::aws_support;
use aws_support::*;

use serde_json::Value;

const TOFU: &str = r#"#!/bin/sh
printf '%s|%s\n' "$PWD" "$*" >> "$TOFU_RECORD"
case "$1" in
  version|-version|--version) echo "OpenTofu v1.8.5" ;;
  plan) echo plan > tfplan ;;
  show) python3 "$TOFU_PY" "$TOFU_MOTO" "$TOFU_REGION" "$TOFU_CONFIG" show || exit 1 ;;
  apply) python3 "$TOFU_PY" "$TOFU_MOTO" "$TOFU_REGION" "$TOFU_CONFIG" apply >/dev/null || exit 1 ;;
esac
exit 0
"#;

/// The stand-in's tofu, in the storage root's directory, and the test's
/// questions to moto (`volumes`, `snapshots`, `extra_volume`).
const PY: &str = r#"
import boto3, glob, json, re, sys
url, region, config, cmd = sys.argv[1:5]
ec2 = boto3.client('ec2', region_name=region, endpoint_url=url,
                   aws_access_key_id='testing', aws_secret_access_key='testing')
mine = [{'Name': 'tag:Name', 'Values': ['data']}, {'Name': 'tag:csis_config', 'Values': [config]}]
def volumes():
    return [v for v in ec2.describe_volumes(Filters=mine)['Volumes'] if v['State'] not in ('deleting', 'deleted')]
def snapshots():
    f = [{'Name': 'tag:Name', 'Values': ['csis-data-archive']}, {'Name': 'tag:csis_config', 'Values': [config]}]
    return ec2.describe_snapshots(OwnerIds=['self'], Filters=f)['Snapshots']
def module_call():
    calls = glob.glob('*-storage-data.tf')
    return open(calls[0]).read() if calls else None
def make_volume(**kw):
    tags = [{'Key': 'Name', 'Value': 'data'}, {'Key': 'csis_config', 'Value': config}]
    return ec2.create_volume(AvailabilityZone=region + 'a', Size=1, **kw,
                             TagSpecifications=[{'ResourceType': 'volume', 'Tags': tags}])['VolumeId']
if cmd == 'show':
    call, vols = module_call(), volumes()
    acts = ['create'] if call and not vols else ['delete'] if vols and not call else []
    rc = [{'address': 'module.storage_data.aws_ebs_volume.this', 'change': {'actions': acts}}] if acts else []
    print(json.dumps({'format_version': '1.2', 'resource_changes': rc}))
elif cmd == 'apply':
    call, vols = module_call(), volumes()
    if call and not vols:
        m = re.search(r'snapshot_name = "([^"]+)"', call)
        kw = {}
        if m:
            snaps = sorted(snapshots(), key=lambda s: s['StartTime'])
            if not snaps:
                sys.exit('no snapshot named ' + m.group(1))
            kw['SnapshotId'] = snaps[-1]['SnapshotId']
        make_volume(**kw)
    if vols and not call:
        for v in vols:
            ec2.delete_volume(VolumeId=v['VolumeId'])
    print(json.dumps(True))
elif cmd == 'volumes':
    print(json.dumps([{'id': v['VolumeId'], 'snapshot': v.get('SnapshotId', '')} for v in volumes()]))
elif cmd == 'snapshots':
    print(json.dumps([{'id': s['SnapshotId'], 'volume': s.get('VolumeId', ''), 'state': s['State'],
                       'tags': {t['Key']: t['Value'] for t in s.get('Tags', [])}} for s in snapshots()]))
elif cmd == 'extra_volume':
    print(json.dumps(make_volume()))
elif cmd == 'stale_archive':
    # an archive of another volume, left behind (its deletion failed)
    v = ec2.create_volume(AvailabilityZone=region + 'a', Size=1)['VolumeId']
    tags = [{'Key': 'Name', 'Value': 'csis-data-archive'}, {'Key': 'csis_config', 'Value': config}]
    s = ec2.create_snapshot(VolumeId=v, TagSpecifications=[{'ResourceType': 'snapshot', 'Tags': tags}])['SnapshotId']
    ec2.delete_volume(VolumeId=v)
    print(json.dumps(s))
elif cmd == 'old_archive':
    # a completed archive of the volume, older than its data (taken for a
    # plan that was then refused; the volume written since)
    tags = [{'Key': 'Name', 'Value': 'csis-data-archive'}, {'Key': 'csis_config', 'Value': config}]
    s = ec2.create_snapshot(VolumeId=sys.argv[5], TagSpecifications=[{'ResourceType': 'snapshot', 'Tags': tags}])['SnapshotId']
    print(json.dumps(s))
elif cmd == 'delete_volume':
    ec2.delete_volume(VolumeId=sys.argv[5])
    print(json.dumps(True))
"#;

struct Moto {
    py: std::path::PathBuf,
    config: String,
}

impl Moto {
    fn ask(&self, args: &[&str]) -> Value {
        let out = std::process::Command::new("python3")
            .arg(&self.py)
            .args([moto_url().as_str(), REGION, self.config.as_str()])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
    fn volumes(&self) -> Vec<Value> {
        self.ask(&["volumes"]).as_array().unwrap().clone()
    }
    fn snapshots(&self) -> Vec<Value> {
        self.ask(&["snapshots"]).as_array().unwrap().clone()
    }
}

fn set_state(t: &Starter, from: &str, to: &str) {
    replace_in(
        &t.root.join("storages/storages.yaml"),
        &[(&format!("state: {from}"), &format!("state: {to}"))],
    );
}

fn record(t: &Starter) -> (String, csis_cache::storage_state::RecordedFacts) {
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    let r = &fleet.storages.storages["data"];
    (r.state.as_str().to_string(), r.facts.clone())
}

#[test]
fn an_ebs_storage_is_archived_before_its_volume_goes_and_restored_from_its_archive() {
    let Some(reference) = reference() else {
        eprintln!("\n*** SKIPPED: ../shared/reference is not there ***\n");
        return;
    };
    let Some(t) = Starter::new(&reference) else {
        return;
    };
    // a tree id of its own: another run's volumes and archives are not ours
    let id = format!("fleet-archive-{:08x}", std::process::id() ^ 0x00a1_c41e);
    replace_in(
        &t.root.join("cfg/_config.yml"),
        &[
            ("id: my-team-images-REPLACE-ME", &format!("id: {id}")),
            ("apply_storage: false", "apply_storage: true"),
        ],
    );
    // the instance no longer mounts it: a storage leaves `active` unattached
    replace_in(
        &t.root.join("instances/instances.yaml"),
        &[(
            "    storages:\n      - name: data\n        mount_point: /mnt/data\n",
            "",
        )],
    );
    let config = csis_schema::tags::config_value(&id);
    let bin = t.root.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    csis_testkit::write_executable(&bin.join("tofu"), TOFU).unwrap();
    let pyfile = bin.join("tofu.py");
    std::fs::write(&pyfile, PY).unwrap();
    let record_file = bin.join("record");
    let moto = Moto {
        py: pyfile.clone(),
        config: config.clone(),
    };
    let env = vec![
        path_with(&bin),
        ("TOFU_RECORD", record_file.display().to_string()),
        ("TOFU_PY", pyfile.display().to_string()),
        ("TOFU_MOTO", moto_url()),
        ("TOFU_REGION", REGION.to_string()),
        ("TOFU_CONFIG", config.clone()),
    ];
    let applies = || {
        recorded_calls(&record_file)
            .iter()
            .filter(|(_, a)| a.starts_with("apply"))
            .count()
    };
    let build = |what: &str| -> (i32, String) {
        let (code, out, err) = t.csis_with(&["build", "//storages/..."], &env);
        (code, format!("{what}:\n{out}\n{err}"))
    };
    let call = t.root.join(
        "generated/storage/aws-ebs/storage-generation/aws-ebs-storage-generation-storage-data.tf",
    );

    // 1. created active
    let (code, said) = build("create");
    assert_eq!(code, 0, "{said}");
    let vols = moto.volumes();
    assert_eq!(vols.len(), 1, "{vols:?}\n{said}");
    let first = vols[0]["id"].as_str().unwrap().to_string();
    let (state, facts) = record(&t);
    assert_eq!(
        (state.as_str(), facts.id.as_deref()),
        ("active", Some(first.as_str()))
    );
    assert_eq!(applies(), 1);

    // 2. archived, but two volumes answer to its name: no archive, so
    // nothing planned or applied, the storage still active
    set_state(&t, "active", "archived");
    let (_, out, _) = t.csis(&["plan", "//storages/...", "--json"]);
    let plan: Value = serde_json::from_str(&out).unwrap();
    let node = &plan["nodes"].as_array().unwrap()[0];
    assert_eq!(node["code"], "archive", "{out}");
    assert_eq!(node["due"], true, "{out}");
    let extra = moto.ask(&["extra_volume"]);
    let (code, said) = build("archive refused");
    assert_ne!(code, 0, "{said}");
    assert!(said.contains("its archive could not be taken"), "{said}");
    assert!(said.contains("nothing planned or applied"), "{said}");
    assert_eq!(applies(), 1, "no apply: {said}");
    assert_eq!(moto.volumes().len(), 2, "both volumes stand");
    assert!(moto.snapshots().is_empty(), "no archive taken");
    assert_eq!(record(&t).0, "active", "{said}");
    moto.ask(&["delete_volume", extra.as_str().unwrap()]);

    // 3. archived: the archive first, then the volume goes
    let (code, said) = build("archive");
    assert_eq!(code, 0, "{said}");
    let snaps = moto.snapshots();
    assert_eq!(snaps.len(), 1, "{snaps:?}\n{said}");
    let snap = &snaps[0];
    assert_eq!(
        snap["volume"],
        first.as_str(),
        "the archive is of the volume"
    );
    assert_eq!(snap["state"], "completed");
    assert_eq!(snap["tags"]["csis_storage"], "data");
    assert!(moto.volumes().is_empty(), "the volume is gone: {said}");
    assert!(!call.exists(), "an archived storage has no module call");
    let (state, facts) = record(&t);
    assert_eq!(state, "archived");
    assert_eq!(facts.archive, Some(snap["id"].clone()), "{facts:?}");
    assert_eq!(facts.id, None);
    assert_eq!(applies(), 2);
    // an archived storage has no volume to miss
    let (code, drift) = crate::fleet_aws_drift::fleet_drift(&t);
    assert_eq!((code, drift.len()), (0, 0), "{drift:?}");
    // nothing more to do
    let calls = recorded_calls(&record_file).len();
    let (code, said) = build("archived, again");
    assert_eq!(code, 0, "{said}");
    assert_eq!(recorded_calls(&record_file).len(), calls, "{said}");

    // 4. active again: made from the archive, which then goes
    set_state(&t, "archived", "active");
    let (code, said) = build("restore");
    assert_eq!(code, 0, "{said}");
    let text = std::fs::read_to_string(&call).unwrap();
    assert!(
        text.contains("snapshot_name = \"csis-data-archive\""),
        "{text}"
    );
    let vols = moto.volumes();
    assert_eq!(vols.len(), 1, "{said}");
    assert_eq!(vols[0]["snapshot"], snap["id"], "made from the archive");
    assert!(
        moto.snapshots().is_empty(),
        "the archive is deleted: {said}"
    );
    let (state, facts) = record(&t);
    assert_eq!(state, "active");
    assert_eq!(facts.id.as_deref(), vols[0]["id"].as_str());
    assert_eq!(facts.archive, None);

    // 5. archived again, an archive of another volume left behind and an
    // older archive of this one: neither is this volume's data now, a new
    // archive is taken; then destroyed: every archive goes with it
    let stale = moto.ask(&["stale_archive"]);
    let old = moto.ask(&["old_archive", vols[0]["id"].as_str().unwrap()]);
    set_state(&t, "active", "archived");
    let (code, said) = build("archive again");
    assert_eq!(code, 0, "{said}");
    let snaps = moto.snapshots();
    assert_eq!(snaps.len(), 3, "{said}");
    let fresh = snaps
        .iter()
        .find(|s| s["id"] != stale && s["id"] != old)
        .unwrap();
    assert_eq!(
        fresh["volume"], vols[0]["id"],
        "the archive is of this volume"
    );
    assert_eq!(record(&t).1.archive, Some(fresh["id"].clone()));
    set_state(&t, "archived", "destroyed");
    let (code, said) = build("destroy");
    assert_eq!(code, 0, "{said}");
    assert!(moto.snapshots().is_empty(), "{said}");
    assert!(moto.volumes().is_empty(), "{said}");
    let (state, facts) = record(&t);
    assert_eq!(state, "destroyed");
    assert_eq!(facts.archive, None);
}
