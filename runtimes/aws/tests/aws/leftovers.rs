//! What csis leaves on an AWS runtime, against moto: `inventory` (images,
//! snapshots, instances and volumes csis owns or tagged, with their tags),
//! `clean_stale_bakes` (the marked leftovers of killed bakes, and nothing
//! else), and the power states moto never holds (`pending`, `stopping`,
//! `shutting-down`: a proxy rewrites moto's answer).
//!
//! Each test works in a region of its own (moto is shared by the tests
//! running in parallel), so what a runtime lists there is exactly what the
//! test made.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::Region;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification, VolumeType};
use csis_runtime::{PowerState, Runtime, RuntimeError};
use csis_runtime_aws::stale;
use csis_runtime_aws::AwsRuntime;
use csis_schema::tags;

use crate::common::{self, need_moto};

/// The fixture's vendor AMI (moto seeds it in every region).
const VENDOR: &str = "ami-0deb12000000000d2";

async fn ec2_in(url: &str, region: &str) -> aws_sdk_ec2::Client {
    let conf = common::sdk(url).await;
    aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::config::Builder::from(&conf)
            .region(Region::new(region.to_string()))
            .build(),
    )
}

fn runtime_in(url: &str, name: &str, region: &str) -> AwsRuntime {
    let mut s = common::settings(url, name);
    s.region = region.to_string();
    let mut rt = AwsRuntime::new(s);
    rt.waiter_delay = Duration::from_millis(50);
    rt
}

fn spec(rt: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(rt)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .build()
}

/// One instance with tags on it and on its volumes, a key and groups.
async fn launch(
    ec2: &aws_sdk_ec2::Client,
    image: &str,
    tags: &[(&str, &str)],
    key: Option<&str>,
    groups: &[String],
) -> String {
    let mut call = ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
        .set_key_name(key.map(str::to_string));
    if !groups.is_empty() {
        call = call.set_security_group_ids(Some(groups.to_vec()));
    }
    if !tags.is_empty() {
        call = call
            .tag_specifications(spec(ResourceType::Instance, tags))
            .tag_specifications(spec(ResourceType::Volume, tags));
    }
    call.send().await.unwrap().instances()[0]
        .instance_id
        .clone()
        .unwrap()
}

async fn state_of(ec2: &aws_sdk_ec2::Client, id: &str) -> String {
    let out = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    out.reservations()[0].instances()[0]
        .state
        .as_ref()
        .unwrap()
        .name
        .as_ref()
        .unwrap()
        .as_str()
        .to_string()
}

/// Owned tag pairs as `spec` and `launch` take them.
fn pairs(m: &[(String, String)]) -> Vec<(&str, &str)> {
    m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn ids<'a>(list: impl IntoIterator<Item = &'a csis_runtime_aws::AwsResource>) -> BTreeSet<String> {
    list.into_iter().map(|r| r.id.clone()).collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn inventory_lists_what_csis_owns_or_tagged_with_tags() {
    let url = need_moto!();
    let region = "ca-central-1";
    let ec2 = ec2_in(&url, region).await;
    let rt = runtime_in(&url, &common::unique("aws-inv"), region);
    // a clean slate in this region (a previous run of this test)
    let before = rt.aws_inventory().await.unwrap();
    for i in &before.instances {
        ec2.terminate_instances()
            .instance_ids(&i.id)
            .send()
            .await
            .unwrap();
    }
    for i in &before.images {
        ec2.deregister_image().image_id(&i.id).send().await.unwrap();
    }
    for v in before.volumes.iter().filter(|v| v.of.is_none()) {
        let _ = ec2.delete_volume().volume_id(&v.id).send().await;
    }
    for s in &before.snapshots {
        let _ = ec2.delete_snapshot().snapshot_id(&s.id).send().await;
    }
    let before = rt.aws_inventory().await.unwrap();
    assert_eq!(before, Default::default(), "a clean region");

    // images: one of ours (registered), one not ours
    let web = common::register_image(
        &ec2,
        &common::unique("web"),
        &[("csis_series", "web"), ("csis_config", "team-a")],
    )
    .await;
    let _stranger = common::register_image(&ec2, &common::unique("other"), &[("team", "b")]).await;
    // instances: tagged by csis; launched from our image; a stranger; one terminated
    let vm = launch(
        &ec2,
        VENDOR,
        &[("Name", "vm-1"), ("csis_config", "team-a")],
        None,
        &[],
    )
    .await;
    let from_web = launch(&ec2, &web, &[], None, &[]).await;
    let stranger = launch(&ec2, VENDOR, &[("Name", "someone-else")], None, &[]).await;
    let gone = launch(&ec2, VENDOR, &[("csis_config", "team-a")], None, &[]).await;
    ec2.terminate_instances()
        .instance_ids(&gone)
        .send()
        .await
        .unwrap();
    // an AMI baked from vm-1 (its snapshot is behind it), tagged
    let baked = ec2
        .create_image()
        .instance_id(&vm)
        .name(common::unique("web-baked"))
        .send()
        .await
        .unwrap()
        .image_id
        .unwrap();
    ec2.create_tags()
        .resources(&baked)
        .tags(Tag::builder().key("csis_series").value("web").build())
        .send()
        .await
        .unwrap();
    // volumes: a tagged data disk, an untagged one
    let vol = |tags: &'static [(&'static str, &'static str)]| {
        let ec2 = ec2.clone();
        async move {
            let mut c = ec2
                .create_volume()
                .availability_zone(format!("{region}a"))
                .size(1)
                .volume_type(VolumeType::Gp3);
            if !tags.is_empty() {
                c = c.tag_specifications(spec(ResourceType::Volume, tags));
            }
            c.send().await.unwrap().volume_id.unwrap()
        }
    };
    let data = vol(&[("csis_config", "team-a"), ("Name", "data-1")]).await;
    let loose = vol(&[]).await;
    // a snapshot csis tagged whose AMI is gone: an orphan
    let orphan = ec2
        .create_snapshot()
        .volume_id(&data)
        .tag_specifications(spec(ResourceType::Snapshot, &[("csis_series", "web")]))
        .send()
        .await
        .unwrap()
        .snapshot_id
        .unwrap();
    let loose_snap = ec2
        .create_snapshot()
        .volume_id(&loose)
        .send()
        .await
        .unwrap()
        .snapshot_id
        .unwrap();

    let inv = rt.aws_inventory().await.unwrap();
    assert_eq!(ids(&inv.images), set(&[&web, &baked]), "{inv:#?}");
    let w = inv.images.iter().find(|i| i.id == web).unwrap();
    assert_eq!(
        w.tags.get("csis_config").map(String::as_str),
        Some("team-a")
    );
    assert_eq!(w.tags.get("csis_series").map(String::as_str), Some("web"));
    assert_eq!(w.state.as_deref(), Some("available"));

    assert_eq!(ids(&inv.instances), set(&[&vm, &from_web]), "{inv:#?}");
    let v = inv.instances.iter().find(|i| i.id == vm).unwrap();
    assert_eq!(v.name.as_deref(), Some("vm-1"));
    assert_eq!(v.of.as_deref(), Some(VENDOR));
    assert_eq!(
        v.tags.get("csis_config").map(String::as_str),
        Some("team-a")
    );
    assert_eq!(
        inv.instances
            .iter()
            .find(|i| i.id == from_web)
            .unwrap()
            .of
            .as_deref(),
        Some(web.as_str())
    );
    assert!(!ids(&inv.instances).contains(&stranger));

    // volumes: the tagged disk and the root disks of our two instances
    let vols = ids(&inv.volumes);
    assert!(vols.contains(&data), "{inv:#?}");
    assert!(!vols.contains(&loose), "{inv:#?}");
    let attached: BTreeSet<String> = inv.volumes.iter().filter_map(|v| v.of.clone()).collect();
    assert_eq!(attached, set(&[&vm, &from_web]), "{inv:#?}");
    let d = inv.volumes.iter().find(|v| v.id == data).unwrap();
    assert_eq!(d.name.as_deref(), Some("data-1"));
    assert_eq!(
        d.tags.get("csis_config").map(String::as_str),
        Some("team-a")
    );

    // snapshots: the one behind the baked AMI, and the orphan; never a stranger's
    let snaps = ids(&inv.snapshots);
    assert!(snaps.contains(&orphan), "{inv:#?}");
    assert!(!snaps.contains(&loose_snap), "{inv:#?}");
    let behind: Vec<_> = inv
        .snapshots
        .iter()
        .filter(|s| s.of.as_deref() == Some(baked.as_str()))
        .collect();
    assert!(!behind.is_empty(), "{inv:#?}");
    assert_eq!(
        inv.orphan_snapshots()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        vec![orphan.clone()]
    );

    // through the hook: instances with power and csis_config; volumes with
    // their tags, the orphan snapshot among them
    let api = rt.inventory().await.unwrap();
    let names: BTreeMap<String, (PowerState, Option<String>)> = api
        .instances
        .iter()
        .map(|i| (i.id.clone(), (i.power, i.config.clone())))
        .collect();
    assert_eq!(
        names.get(&vm),
        Some(&(PowerState::Running, Some("team-a".to_string())))
    );
    assert_eq!(names.get(&from_web), Some(&(PowerState::Running, None)));
    let api_vols: BTreeSet<String> = api.volumes.iter().map(|v| v.name.clone()).collect();
    assert!(
        api_vols.contains(&data) && api_vols.contains(&orphan),
        "{api:#?}"
    );
    assert!(
        !behind.iter().any(|s| api_vols.contains(&s.id)),
        "a build's own snapshot is part of the build, not a leftover"
    );
    let dv = api.volumes.iter().find(|v| v.name == data).unwrap();
    assert_eq!(dv.config.as_deref(), Some("team-a"));
    assert_eq!(dv.labels.get("Name").map(String::as_str), Some("data-1"));

    // a stopped machine is listed as stopped
    ec2.stop_instances().instance_ids(&vm).send().await.unwrap();
    let api = rt.inventory().await.unwrap();
    assert_eq!(
        api.instances.iter().find(|i| i.id == vm).unwrap().power,
        PowerState::Stopped
    );
}

#[tokio::test]
async fn an_unreachable_cloud_lists_no_inventory() {
    let rt = common::runtime("http://127.0.0.1:9", "aws-down");
    assert!(matches!(
        rt.inventory().await,
        Err(RuntimeError::Unavailable(_))
    ));
}

/// A pid of this host that no process has any more.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[tokio::test]
async fn clean_stale_bakes_removes_this_runtimes_dead_bakes_only() {
    let url = need_moto!();
    let region = "sa-east-1";
    let ec2 = ec2_in(&url, region).await;
    let name = common::unique("aws-stale");
    let rt = runtime_in(&url, &name, region);
    let other = common::unique("aws-other");
    let host = stale::host_name();
    let dead = format!("{host}:{}", dead_pid());
    let live = stale::bake_owner();
    // the marks exactly as the emitted source writes them
    let lineage = BTreeMap::from([
        ("csis_series".to_string(), "web".to_string()),
        (
            "csis_run".to_string(),
            "2026_11_30t06_26_25_779098".to_string(),
        ),
    ]);
    let marks = |runtime: &str, owner: &str| -> Vec<(String, String)> {
        let mut m = stale::run_tags(runtime, &lineage);
        m.push((tags::BAKE_OWNER.to_string(), owner.to_string()));
        m
    };
    let u = common::unique("x");

    // a killed bake of this runtime: key pair, tagged group, an untagged
    // packer_ group, the builder instance (and its volume), a loose volume
    let key = format!("packer_{u}");
    ec2.create_key_pair()
        .key_name(&key)
        .tag_specifications(spec(ResourceType::KeyPair, &pairs(&marks(&name, &dead))))
        .send()
        .await
        .unwrap();
    let sg = |gname: String, tags: Option<Vec<(String, String)>>| {
        let ec2 = ec2.clone();
        async move {
            let mut c = ec2
                .create_security_group()
                .group_name(gname)
                .description("packer temporary group");
            if let Some(t) = tags {
                c = c.tag_specifications(spec(ResourceType::SecurityGroup, &pairs(&t)));
            }
            c.send().await.unwrap().group_id.unwrap()
        }
    };
    let sg_dead = sg(format!("packer_{u}"), Some(marks(&name, &dead))).await;
    let sg_untagged = sg(format!("packer_{u}_b"), None).await;
    let inst_dead = launch(
        &ec2,
        VENDOR,
        &pairs(&marks(&name, &dead)),
        Some(&key),
        &[sg_dead.clone(), sg_untagged.clone()],
    )
    .await;
    let loose_vol = ec2
        .create_volume()
        .availability_zone(format!("{region}a"))
        .size(1)
        .tag_specifications(spec(ResourceType::Volume, &pairs(&marks(&name, &dead))))
        .send()
        .await
        .unwrap()
        .volume_id
        .unwrap();

    // a bake of this runtime running now (this process owns it)
    let m_live = marks(&name, &live);
    let sg_live = sg(format!("packer_{u}_live"), Some(m_live.clone())).await;
    let inst_live = launch(
        &ec2,
        VENDOR,
        &pairs(&m_live),
        None,
        std::slice::from_ref(&sg_live),
    )
    .await;
    // another host's bake, launched just now: kept; its group, dated by
    // an old run id only: stale
    let m_far = {
        let mut m = stale::run_tags(
            &name,
            &BTreeMap::from([(
                "csis_run".to_string(),
                "2020_01_01t00_00_00_000000".to_string(),
            )]),
        );
        m.push((tags::BAKE_OWNER.to_string(), "elsewhere:1".to_string()));
        m
    };
    let inst_far = launch(&ec2, VENDOR, &pairs(&m_far), None, &[]).await;
    let sg_far = sg(format!("packer_{u}_far"), Some(m_far)).await;
    // another runtime's dead bake, and an unmarked packer_ machine: never touched
    let m_other = marks(&other, &dead);
    let inst_other = launch(&ec2, VENDOR, &pairs(&m_other), None, &[]).await;
    let sg_other = sg(format!("packer_{u}_other"), Some(m_other)).await;
    let stray_key = format!("packer_{u}_stray");
    ec2.create_key_pair()
        .key_name(&stray_key)
        .send()
        .await
        .unwrap();
    let inst_unmarked = launch(
        &ec2,
        VENDOR,
        &[("Name", "Packer Builder")],
        Some(&stray_key),
        &[],
    )
    .await;

    let removed = rt.clean_stale_bakes().await.unwrap();
    let text = removed.join("\n");
    for expected in [
        format!("builder instance {inst_dead} (series web, run 2026_11_30t06_26_25_779098, owner {dead})"),
        format!("volume {loose_vol}"),
        format!("security group {sg_dead} packer_{u}"),
        format!("security group {sg_untagged}"),
        format!("security group {sg_far} packer_{u}_far"),
        format!("key pair {key}"),
    ] {
        assert!(
            removed.iter().any(|r| r.starts_with(&expected)),
            "{expected} not in:\n{text}"
        );
    }
    assert_eq!(removed.len(), 6, "{text}");

    // read back from EC2
    assert_eq!(state_of(&ec2, &inst_dead).await, "terminated");
    for kept in [&inst_live, &inst_far, &inst_other, &inst_unmarked] {
        assert_eq!(state_of(&ec2, kept).await, "running", "{kept}");
    }
    let groups: BTreeSet<String> = ec2
        .describe_security_groups()
        .send()
        .await
        .unwrap()
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id.clone())
        .collect();
    for gone in [&sg_dead, &sg_untagged, &sg_far] {
        assert!(!groups.contains(gone), "{gone} still there");
    }
    for kept in [&sg_live, &sg_other] {
        assert!(groups.contains(kept), "{kept} was removed");
    }
    let keys: BTreeSet<String> = ec2
        .describe_key_pairs()
        .send()
        .await
        .unwrap()
        .key_pairs()
        .iter()
        .filter_map(|k| k.key_name.clone())
        .collect();
    assert!(!keys.contains(&key));
    assert!(
        keys.contains(&stray_key),
        "an unmarked key is never touched"
    );
    let vols = ec2
        .describe_volumes()
        .filters(common::filter("volume-id", &loose_vol))
        .send()
        .await
        .unwrap();
    assert!(vols.volumes().is_empty(), "the loose volume is deleted");

    // nothing left to find
    assert_eq!(rt.clean_stale_bakes().await.unwrap(), Vec::<String>::new());
    // the other runtime finds its own
    let rt_other = runtime_in(&url, &other, region);
    let removed = rt_other.clean_stale_bakes().await.unwrap();
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert_eq!(state_of(&ec2, &inst_other).await, "terminated");
    for id in [&inst_live, &inst_far, &inst_unmarked] {
        let _ = ec2.terminate_instances().instance_ids(id).send().await;
    }
}

/// The proxy's rewrite: every `<name>running</name>` of DescribeInstances
/// becomes the state set in `state`.
fn rewrite_state(state: Arc<Mutex<String>>) -> common::Rewrite {
    Arc::new(move |action: &str, body: String| {
        if action == "DescribeInstances" {
            let to = state.lock().unwrap().clone();
            body.replace("<name>running</name>", &format!("<name>{to}</name>"))
        } else {
            body
        }
    })
}

#[tokio::test]
async fn power_states_in_transition_are_starting_and_stopping() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("trans");
    let id = common::run_instance(&ec2, &name, VENDOR).await;
    let state = Arc::new(Mutex::new("running".to_string()));
    let proxy = common::rewriting_proxy(&url, rewrite_state(state.clone()));
    let rt = common::runtime(&proxy, "aws-trans");
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );
    for (ec2_state, want) in [
        ("pending", PowerState::Starting),
        ("stopping", PowerState::Stopping),
        ("shutting-down", PowerState::Stopping),
        ("stopped", PowerState::Stopped),
        ("terminated", PowerState::Absent),
    ] {
        *state.lock().unwrap() = ec2_state.to_string();
        assert_eq!(
            rt.query_instance_power_state(&name).await.unwrap(),
            want,
            "EC2 {ec2_state}"
        );
    }
    // the vocabulary as reports and JSON carry it
    assert_eq!(
        serde_json::to_value(PowerState::Starting).unwrap(),
        serde_json::json!("starting")
    );
    assert_eq!(
        serde_json::to_value(PowerState::Stopping).unwrap(),
        serde_json::json!("stopping")
    );
    // a state EC2 may add one day: unknown, and said so
    *state.lock().unwrap() = "hibernating".to_string();
    let _ = rt.take_warnings();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Unknown
    );
    assert!(rt
        .take_warnings()
        .iter()
        .any(|w| w.contains("reports unrecognised state 'hibernating'; treating it as unknown")),);
    // the inventory carries the same vocabulary
    let inv_rt = common::runtime(&proxy, "aws-trans");
    ec2.create_tags()
        .resources(&id)
        .tags(Tag::builder().key("csis_config").value("t").build())
        .send()
        .await
        .unwrap();
    *state.lock().unwrap() = "stopping".to_string();
    let inv = inv_rt.inventory().await.unwrap();
    assert_eq!(
        inv.instances.iter().find(|i| i.id == id).unwrap().power,
        PowerState::Stopping
    );
    ec2.terminate_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap();
}
