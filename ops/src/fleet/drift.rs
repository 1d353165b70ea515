//! The fleet's part of the state query: the fleet's records against what
//! each runtime holds of this tree (`query_instances`, `query_storages`).
//!
//! - an instance recorded launched whose machine is gone: `missing`, hard;
//! - a machine booting another build than its launch record: `changed`;
//! - a machine labelled as one of this tree's instances that the records
//!   do not hold (a launch a killed run left, or one made behind csis):
//!   `foreign`;
//! - an active storage whose volume is gone: `missing`, hard.

use std::collections::BTreeSet;

use csis_cache::drift::Drift;
use csis_cache::storage_state::StorageState;
use csis_rules::Tree;
use csis_runtime::fleet::StorageFacts;
use csis_runtime::{DynRuntime, InstanceFacts, RuntimeError};
use csis_schema::tags;

use super::plan::FleetView;

fn drift(kind: &str, name: &str, what: &str, detail: String, hard: bool) -> Drift {
    Drift {
        kind: kind.into(),
        name: name.into(),
        drift: what.into(),
        detail,
        hard,
    }
}

/// The runtimes the fleet's records stand on (instances and storages).
fn fleet_runtimes(tree: &Tree, v: &FleetView) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = v
        .records
        .launch
        .instances
        .values()
        .filter(|r| r.launched)
        .map(|r| r.runtime.clone())
        .collect();
    out.extend(tree.instances.iter().map(|i| i.runtime.clone()));
    out.extend(tree.storages.iter().map(|s| s.runtime.clone()));
    out.retain(|r| !r.is_empty());
    out
}

/// The runtime a recorded storage stands on (its declaration's, else its
/// builder's).
fn storage_runtime(tree: &Tree, name: &str, builder: &str) -> Option<String> {
    tree.storage(name).map(|s| s.runtime.clone()).or_else(|| {
        tree.storage_builders
            .iter()
            .find(|b| b.name == builder)
            .and_then(|b| b.runtime.clone())
    })
}

/// The fleet's drift on every runtime it stands on, and what could not be
/// asked.
pub async fn fleet_drift(
    tree: &Tree,
    v: &FleetView,
    made: &crate::wiring::Runtimes,
) -> (Vec<Drift>, Vec<String>) {
    let mut out = Vec::new();
    let mut unavailable = Vec::new();
    for name in fleet_runtimes(tree, v) {
        let rt = match made.get(tree, &name) {
            Ok(r) => r,
            Err(e) => {
                unavailable.push(format!("{name}: fleet: {e:#}"));
                continue;
            }
        };
        match ask(&rt).await {
            Ok((machines, volumes)) => {
                out.extend(instance_drift(v, &name, &machines));
                out.extend(storage_drift(tree, v, &name, &volumes));
            }
            Err(RuntimeError::Unsupported { .. }) => {}
            Err(e) => unavailable.push(format!("{name}: fleet: {e}")),
        }
    }
    (out, unavailable)
}

async fn ask(rt: &DynRuntime) -> Result<(Vec<InstanceFacts>, Vec<StorageFacts>), RuntimeError> {
    Ok((rt.query_instances().await?, rt.query_storages().await?))
}

fn instance_drift(v: &FleetView, runtime: &str, machines: &[InstanceFacts]) -> Vec<Drift> {
    let mut out = Vec::new();
    let label = |m: &InstanceFacts, k: &str| m.labels.get(k).cloned();
    for (name, r) in &v.records.launch.instances {
        if !r.launched || r.ephemeral || r.runtime != runtime {
            continue;
        }
        let id = v
            .records
            .current_generation(name)
            .and_then(|g| g.instance_id.clone());
        let found = machines
            .iter()
            .find(|m| Some(&m.id) == id.as_ref() || m.name.as_deref() == Some(r.hostname.as_str()));
        match found {
            None => out.push(drift(
                "instance",
                name,
                "missing",
                format!(
                    "{} (build {}) is recorded launched on {runtime} and is gone",
                    r.hostname, r.build
                ),
                true,
            )),
            Some(m) => {
                let booted = label(m, tags::BUILD).or(m.image.clone());
                if booted.as_deref().is_some_and(|b| b != r.build) {
                    out.push(drift(
                        "instance",
                        name,
                        "changed",
                        format!(
                            "{} boots {}, its launch record says {}",
                            r.hostname,
                            booted.unwrap_or_default(),
                            r.build
                        ),
                        false,
                    ));
                }
            }
        }
    }
    for m in machines {
        let Some(inst) = label(m, tags::INSTANCE) else {
            continue;
        };
        let recorded = v
            .records
            .launch_record(&inst)
            .is_some_and(|r| r.launched && m.name.as_deref() == Some(r.hostname.as_str()))
            || v.records
                .current_generation(&inst)
                .is_some_and(|g| g.instance_id.as_ref() == Some(&m.id));
        if !recorded {
            out.push(drift(
                "instance",
                &inst,
                "foreign",
                format!(
                    "{} on {runtime} is labelled as instance {inst} and is not recorded",
                    m.name.as_deref().unwrap_or(&m.id)
                ),
                false,
            ));
        }
    }
    out
}

fn storage_drift(
    tree: &Tree,
    v: &FleetView,
    runtime: &str,
    volumes: &[StorageFacts],
) -> Vec<Drift> {
    let mut out = Vec::new();
    for (name, r) in &v.records.storages.storages {
        if r.state != StorageState::Active
            || storage_runtime(tree, name, &r.facts.builder).as_deref() != Some(runtime)
        {
            continue;
        }
        let Some(id) = &r.facts.id else {
            continue;
        };
        if !volumes.iter().any(|f| &f.id == id) {
            out.push(drift(
                "storage",
                name,
                "missing",
                format!(
                    "{id} (generation {}) is recorded active on {runtime} and is gone",
                    r.generation
                ),
                true,
            ));
        }
    }
    out
}
