//! `csis state import --instances --storages`: the machines and volumes a
//! runtime holds, labelled as this tree's (`csis_config`) and as one of its
//! declared instances or storages (`csis_instance`, `csis_storage`), that
//! the records do not hold, adopted into them as a build would have
//! recorded them (a lost or reset `meta-state/`, records from another
//! checkout). Storages first (an instance's launch record names the volumes
//! it mounts), then instances: the launch record from the declaration and
//! the machine's labels (`csis_build`, `csis_generation`), the generation
//! opened with the runtime's id, the pin bound to the build it runs.
//!
//! Never adopted: another tree's, an undeclared name, a name the records
//! already hold (launched, or a storage with a state), an ephemeral
//! instance's machine (it lives for one run), a machine without a build
//! label, two machines of one instance (said, neither taken).

use std::collections::BTreeMap;

use anyhow::Result;
use csis_cache::fleet::Machine;
use csis_cache::storage_state::{transition, RecordedFacts, StorageState};
use csis_cache::{MetaState, Recorder};
use csis_rules::Tree;
use csis_runtime::{InstanceFacts, Inventory, VolumeFacts};
use csis_schema::tags;
use serde::Serialize;

use super::apply::{launch_record, mount_requests, script_of};
use super::plan::FleetView;

/// One instance adopted (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportedInstance {
    pub name: String,
    pub runtime: String,
    pub build: String,
    pub generation: u32,
    /// The runtime's id of the machine (a container id).
    pub machine: String,
    pub hostname: String,
}

/// One storage adopted (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportedStorage {
    pub name: String,
    pub runtime: String,
    /// The runtime's id of the volume.
    pub id: String,
}

/// What the fleet part of `csis state import` adopted, and what it left
/// with the reason (one line each).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FleetImport {
    pub instances: Vec<ImportedInstance>,
    pub storages: Vec<ImportedStorage>,
    pub skipped: Vec<String>,
}

/// Which parts to adopt.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parts {
    pub instances: bool,
    pub storages: bool,
}

fn ours(tree: &Tree, config: Option<&String>) -> bool {
    config.is_some_and(|c| tags::is_config_of(c, &tree.config.id))
}

/// The storages to adopt from one runtime's volumes.
fn storages_of(
    tree: &Tree,
    v: &FleetView,
    runtime: &str,
    volumes: &[VolumeFacts],
    out: &mut FleetImport,
) {
    let mut by_name: BTreeMap<&str, Vec<&VolumeFacts>> = BTreeMap::new();
    for vol in volumes.iter().filter(|vol| ours(tree, vol.config.as_ref())) {
        if let Some(n) = vol.labels.get(tags::STORAGE) {
            by_name.entry(n.as_str()).or_default().push(vol);
        }
    }
    for (name, vols) in by_name {
        let Some(s) = tree.storage(name).filter(|s| s.runtime == runtime) else {
            out.skipped.push(format!(
                "storage {name} on {runtime}: not declared on this runtime; not adopted"
            ));
            continue;
        };
        if v.records.storage_state(&s.name).is_some() {
            continue;
        }
        if vols.len() > 1 {
            let ids: Vec<&str> = vols.iter().map(|v| v.name.as_str()).collect();
            out.skipped.push(format!(
                "storage {name} on {runtime}: {} volumes carry its label ({}); none adopted",
                vols.len(),
                ids.join(", ")
            ));
            continue;
        }
        out.storages.push(ImportedStorage {
            name: s.name.clone(),
            runtime: runtime.to_string(),
            id: vols[0].name.clone(),
        });
    }
}

/// The instances to adopt from one runtime's machines.
fn instances_of(
    tree: &Tree,
    v: &FleetView,
    runtime: &str,
    machines: &[InstanceFacts],
    out: &mut FleetImport,
) {
    let mut by_name: BTreeMap<&str, Vec<&InstanceFacts>> = BTreeMap::new();
    for m in machines.iter().filter(|m| ours(tree, m.config.as_ref())) {
        if let Some(n) = m.labels.get(tags::INSTANCE) {
            by_name.entry(n.as_str()).or_default().push(m);
        }
    }
    for (name, ms) in by_name {
        let Some(inst) = tree.instance(name).filter(|i| i.runtime == runtime) else {
            out.skipped.push(format!(
                "instance {name} on {runtime}: not declared on this runtime; not adopted"
            ));
            continue;
        };
        if v.records
            .launch_record(&inst.name)
            .is_some_and(|r| r.launched)
            || v.records.current_generation(&inst.name).is_some()
        {
            continue;
        }
        if inst.ephemeral {
            out.skipped.push(format!(
                "instance {name} on {runtime}: ephemeral (a machine of one run); not adopted"
            ));
            continue;
        }
        if ms.len() > 1 {
            let ids: Vec<&str> = ms.iter().map(|m| m.id.as_str()).collect();
            out.skipped.push(format!(
                "instance {name} on {runtime}: {} machines carry its label ({}); none adopted",
                ms.len(),
                ids.join(", ")
            ));
            continue;
        }
        let m = ms[0];
        let (Some(build), Some(generation)) = (
            m.labels.get(tags::BUILD),
            m.labels
                .get(tags::GENERATION)
                .and_then(|g| g.parse::<u32>().ok())
                .filter(|g| *g >= 1),
        ) else {
            out.skipped.push(format!(
                "instance {name} on {runtime}: machine {} has no {} or {} label; not adopted",
                m.id,
                tags::BUILD,
                tags::GENERATION
            ));
            continue;
        };
        out.instances.push(ImportedInstance {
            name: inst.name.clone(),
            runtime: runtime.to_string(),
            build: build.clone(),
            generation,
            machine: m.id.clone(),
            hostname: m
                .name
                .clone()
                .unwrap_or_else(|| format!("{}-{generation:03}", inst.name)),
        });
    }
}

/// Decide what to adopt from each runtime's inventory (`inventories`:
/// runtime name -> what it holds).
pub fn decide(
    tree: &Tree,
    v: &FleetView,
    inventories: &BTreeMap<String, Inventory>,
    parts: Parts,
) -> FleetImport {
    let mut out = FleetImport::default();
    for (rt, inv) in inventories {
        if parts.storages {
            storages_of(tree, v, rt, &inv.volumes, &mut out);
        }
        if parts.instances {
            instances_of(tree, v, rt, &inv.instances, &mut out);
        }
    }
    out
}

/// Record what [`decide`] chose, through the recorder (journalled): each
/// storage active with its volume, then each instance launched. An
/// instance whose mounts are not active on record (its storage neither
/// recorded nor adopted) is left, said in `skipped`.
pub fn record(
    tree: &Tree,
    meta: &MetaState,
    recorder: &Recorder,
    run: &str,
    import: &mut FleetImport,
) -> Result<()> {
    for s in &import.storages {
        let Some(decl) = tree.storage(&s.name) else {
            continue;
        };
        let t = transition(None, StorageState::Active, false, decl.supports_archive)
            .map_err(|e| anyhow::anyhow!("storage {}: {e}", s.name))?;
        let facts = RecordedFacts {
            builder: decl.builder.clone(),
            type_: decl.storage_type.clone(),
            bucket_name: decl.bucket_name.clone(),
            id: Some(s.id.clone()),
            ..RecordedFacts::default()
        };
        recorder.record_storage(&s.name, &t, facts, run)?;
    }
    let view = FleetView::load(meta)?;
    let mut kept = Vec::new();
    for i in std::mem::take(&mut import.instances) {
        let Some(inst) = tree.instance(&i.name) else {
            continue;
        };
        let mounts = match mount_requests(&view, inst) {
            Ok(m) => m,
            Err(e) => {
                import.skipped.push(format!(
                    "instance {} on {}: {}; not adopted",
                    i.name, i.runtime, e.message
                ));
                continue;
            }
        };
        let script = script_of(tree, inst, &i.hostname, &mounts);
        let mut rec = launch_record(run, inst, &i.build, &i.hostname, &script);
        rec.launched = true;
        rec.launched_run = Some(run.to_string());
        let machine = Machine {
            generation: i.generation,
            instance_id: Some(i.machine.clone()),
            provider_hostname: Some(i.hostname.clone()),
        };
        recorder.record_launch(&i.name, rec, &machine, run)?;
        kept.push(i);
    }
    import.instances = kept;
    recorder.flush()?;
    Ok(())
}
