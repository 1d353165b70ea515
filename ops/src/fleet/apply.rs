//! What a build does for a fleet node (docs/fleet.md §4), deciding again
//! over the records as they are when it runs (this run's bakes included):
//!
//! - a storage: create (a new generation through the runtime), archive
//!   (kept, detached), restore, destroy (refused by the runtime while in
//!   use); each transition recorded in `storage-state.yaml`;
//! - an instance: launch (the canonical hostname of its next generation,
//!   the launch script, the labels), verify (`verify_instance` against the
//!   build with its mounts counted; the verdict in `verifications.yaml`),
//!   record (launch record, pin,
//!   generation); a replacement removes the old machine only after the new
//!   one is verified and recorded, and a failed verification removes the
//!   new one, keeps the old and fails the node; an ephemeral one is
//!   launched, verified (and its image's post-bake tests run in it),
//!   recorded in `verifications.yaml` and removed (`on_failure: keep`
//!   keeps a failed one); a decommission removes the machine and forgets
//!   it.
//!
//! Before it launches, an instance node removes the machines of that
//! instance the records do not hold (a launch a killed run left
//! unrecorded), so a kill at any point leaves the old or the new machine
//! recorded and, after the next build, nothing unrecorded.

use std::collections::BTreeMap;

use csis_cache::fleet::{EphemeralVerdict, Machine};
use csis_cache::launch_params::{LaunchRecord, MountRecord};
use csis_cache::storage_state::{RecordedFacts, StorageState, Transition};
use csis_cache::{MetaState, Recorder};
use csis_engine::NodeError;
use csis_rules::compile::{InstanceSpec, StorageSpec};
use csis_rules::fleet::{ImagePolicy, Instance, OnFailure};
use csis_rules::Tree;
use csis_runtime::fleet::{
    instance_labels, launch_script, storage_labels, LaunchRequest, LaunchScript, LaunchUser,
    MountRequest, StorageRequest,
};
use csis_runtime::{CancellationToken, DynRuntime, RuntimeError, VerifyCheck};
use serde::Serialize;
use serde_json::json;

use super::plan::{
    decide_instance, storage_transition, Action, FleetView, InstanceCase, StorageCase,
};

/// Seconds a new machine has to write its launch marker.
pub const VERIFY_TIMEOUT_S: u64 = 300;

/// What a fleet node works with.
pub struct Apply<'a> {
    pub rt: &'a DynRuntime,
    pub recorder: &'a Recorder,
    pub meta: &'a MetaState,
    pub tree: &'a Tree,
    pub run: &'a str,
    pub cancel: CancellationToken,
    pub log: &'a (dyn Fn(String) + Send + Sync),
    /// Held around a read-modify-write of a `meta-state/` file the
    /// recorder does not own (`verifications.yaml`), as the build's other
    /// writers hold it; fleet nodes run in parallel otherwise.
    pub meta_lock: &'a tokio::sync::Mutex<()>,
}

/// What a fleet node did (the node's output).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Applied {
    pub action: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
    /// The machine removed (a replaced or decommissioned one, an
    /// ephemeral one, a leftover).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    pub reason: String,
}

pub(super) fn rt_err(e: RuntimeError) -> NodeError {
    match e {
        RuntimeError::Cancelled => NodeError::cancelled(),
        e => NodeError::new(csis_schema::secret::redact_printed(&e.to_string())),
    }
}

fn rec_err(what: &str) -> impl Fn(csis_cache::CacheError) -> NodeError + '_ {
    move |e| NodeError::new(format!("{what} could not be recorded: {e}"))
}

impl Apply<'_> {
    /// The records as they are now (this run's included).
    pub(super) fn view(&self) -> Result<FleetView, NodeError> {
        let (pins, records) = self
            .recorder
            .fleet(|p, f| (p.clone(), f.clone()))
            .map_err(|e| NodeError::new(format!("the fleet's records: {e}")))?;
        FleetView::with_records(self.meta, pins, records).map_err(NodeError::new)
    }
}

/// A storage node.
pub async fn storage(a: &Apply<'_>, spec: &StorageSpec) -> Result<Applied, NodeError> {
    let v = a.view()?;
    let case = StorageCase::of_spec(a.tree, spec);
    let t =
        storage_transition(&v, &case).map_err(|e| NodeError::new(format!("{}: {e}", spec.name)))?;
    let d = super::plan::decide_storage(&v, &case);
    let mut out = Applied {
        action: d.action.as_str().into(),
        name: spec.name.clone(),
        reason: d.reason.clone(),
        ..Applied::default()
    };
    if !t.changes() {
        return Ok(out);
    }
    let mut facts = storage_facts(&v, spec);
    match d.action {
        Action::Create => {
            let generation = t.next_generation(v.records.storages.generation(&spec.name));
            let tags = spec.declared.as_ref().map(|s| &s.tags);
            let req = StorageRequest {
                storage: spec.name.clone(),
                generation,
                labels: with_tags(
                    storage_labels(&spec.name, &a.tree.config.id, generation),
                    tags.into_iter().flatten(),
                ),
            };
            let f = a.rt.create_storage(&req).await.map_err(rt_err)?;
            (a.log)(format!("created {} (generation {generation})", f.id));
            facts.id = Some(f.id);
            out.generation = Some(generation);
        }
        Action::Destroy => {
            if let Some(id) = &facts.id {
                let gone = a.rt.destroy_storage(id).await.map_err(rt_err)?;
                (a.log)(format!(
                    "destroyed {id}{}",
                    if gone { "" } else { " (it was gone already)" }
                ));
            }
        }
        // Docker keeps an archived volume as it is (detached); a restore
        // needs nothing of the runtime either.
        _ => (a.log)(format!("{} {}", d.action.as_str(), spec.name)),
    }
    record_storage(a, &spec.name, &t, facts)?;
    Ok(out)
}

/// A storage's facts for its next record: the recorded ones, with its
/// builder, type and bucket as declared now.
pub(super) fn storage_facts(v: &FleetView, spec: &StorageSpec) -> RecordedFacts {
    let recorded = v.records.storages.storages.get(&spec.name);
    let mut facts = recorded.map(|r| r.facts.clone()).unwrap_or_default();
    facts.builder = spec.builder.clone();
    if let Some(s) = &spec.declared {
        facts.type_ = s.storage_type.clone();
        facts.bucket_name = s.bucket_name.clone();
    }
    facts
}

fn record_storage(
    a: &Apply<'_>,
    name: &str,
    t: &Transition,
    facts: RecordedFacts,
) -> Result<(), NodeError> {
    a.recorder
        .record_storage(name, t, facts, a.run)
        .map(drop)
        .map_err(rec_err("the storage transition"))
}

/// An instance node.
pub async fn instance(a: &Apply<'_>, spec: &InstanceSpec) -> Result<Applied, NodeError> {
    let mut v = a.view()?;
    if spec.declared.as_ref().is_some_and(|i| !i.ephemeral)
        && machine_gone(a, &v, &spec.name).await?
    {
        v.missing.insert(spec.name.clone());
    }
    let head = a.recorder.head_build(&spec.image, &spec.runtime);
    let mut case = InstanceCase::of_spec(spec);
    case.head = head.as_deref();
    let d = decide_instance(&v, &case);
    let mut out = Applied {
        action: d.action.as_str().into(),
        name: spec.name.clone(),
        build: d.build.clone(),
        reason: d.reason.clone(),
        ..Applied::default()
    };
    let build = match (d.action, d.build.clone(), &spec.declared) {
        (Action::Decommission, _, _) => {
            decommission(a, &v, spec, &mut out).await?;
            return Ok(out);
        }
        (Action::Remove, _, _) => {
            remove_standing(a, &v, &spec.name, &mut out).await?;
            return Ok(out);
        }
        (Action::Launch | Action::Replace | Action::Relaunch, Some(b), Some(_)) => b,
        _ => return Ok(out),
    };
    let inst = spec.declared.as_ref().expect("matched above");
    out.removed = remove_leftovers(a, &v, &spec.name).await?;
    if inst.ephemeral {
        prove(a, &v, spec, inst, &build, &mut out).await?;
        return Ok(out);
    }
    let old = match d.action {
        Action::Replace => v.launched(&spec.name).cloned(),
        _ => None,
    };
    let (record, machine) = launch_verified(a, &v, inst, &build, &mut out).await?;
    let standing = v.records.current_generation(&spec.name).map(|g| g.number);
    if let (Action::Relaunch, Some(old_gen)) = (d.action, standing) {
        // the old machine is gone: its generation closes `missing`
        return a
            .recorder
            .record_relaunched(&spec.name, old_gen, record, &machine, a.run)
            .map(|_| out)
            .map_err(rec_err("the relaunch"));
    }
    match old {
        None => a
            .recorder
            .record_launch(&spec.name, record, &machine, a.run)
            .map_err(rec_err("the launch"))?,
        Some(old) => {
            let old_gen = v.records.current_generation(&spec.name).map(|g| g.number);
            a.recorder
                .record_replaced(&spec.name, old_gen.unwrap_or(0), record, &machine, a.run)
                .map_err(rec_err("the replacement"))?;
            // Only now, the new machine verified and recorded: the old one goes.
            let id = old_machine_id(&v, &spec.name, &old);
            remove(a, &id, &mut out).await?;
        }
    }
    Ok(out)
}

/// The provider's id of the machine recorded standing now (its hostname
/// when the provider's id is not recorded).
fn old_machine_id(v: &FleetView, name: &str, old: &LaunchRecord) -> String {
    v.records
        .current_generation(name)
        .and_then(|g| g.instance_id.clone())
        .unwrap_or_else(|| old.hostname.clone())
}

/// Is the machine recorded standing for a launched durable instance gone
/// from the runtime (removed behind csis)? False when nothing is launched
/// or the runtime cannot say.
async fn machine_gone(a: &Apply<'_>, v: &FleetView, name: &str) -> Result<bool, NodeError> {
    Ok(!gone_machines(a, v, &[name]).await?.is_empty())
}

/// Of `names`, the launched durable instances whose machine the runtime
/// no longer holds (by the generation's provider id, or the hostname); none
/// where the runtime cannot say.
pub(super) async fn gone_machines(
    a: &Apply<'_>,
    v: &FleetView,
    names: &[&str],
) -> Result<std::collections::BTreeSet<String>, NodeError> {
    let launched: Vec<(&str, &LaunchRecord)> = names
        .iter()
        .filter_map(|n| Some((*n, v.launched(n)?)))
        .collect();
    if launched.is_empty() {
        return Ok(Default::default());
    }
    let standing = match a.rt.query_instances().await {
        Ok(s) => s,
        Err(RuntimeError::Unsupported { .. }) => return Ok(Default::default()),
        Err(e) => return Err(rt_err(e)),
    };
    Ok(launched
        .into_iter()
        .filter(|(name, rec)| {
            let id = v
                .records
                .current_generation(name)
                .and_then(|g| g.instance_id.clone());
            !standing.iter().any(|m| {
                Some(&m.id) == id.as_ref() || m.name.as_deref() == Some(rec.hostname.as_str())
            })
        })
        .map(|(name, _)| name.to_string())
        .collect())
}

async fn remove(a: &Apply<'_>, id: &str, out: &mut Applied) -> Result<(), NodeError> {
    let gone = a.rt.remove_instance(id).await.map_err(rt_err)?;
    (a.log)(format!(
        "removed {id}{}",
        if gone { "" } else { " (it was gone already)" }
    ));
    out.removed.push(id.to_string());
    Ok(())
}

/// An ephemeral machine standing after its proof (`Action::Remove`): it
/// goes, and its generation closes.
async fn remove_standing(
    a: &Apply<'_>,
    v: &FleetView,
    name: &str,
    out: &mut Applied,
) -> Result<(), NodeError> {
    let Some(verdict) = v.standing_ephemeral(name) else {
        return Ok(());
    };
    let id =
        (verdict.machine.instance_id.clone()).unwrap_or_else(|| verdict.record.hostname.clone());
    remove(a, &id, out).await?;
    a.recorder
        .record_ephemeral(name, &verdict, a.run)
        .map_err(rec_err("the ephemeral's removal"))
}

/// Machines of this instance on the runtime that the records do not hold
/// (a launch a killed run did not record): removed before a launch.
async fn remove_leftovers(
    a: &Apply<'_>,
    v: &FleetView,
    name: &str,
) -> Result<Vec<String>, NodeError> {
    let standing = match a.rt.query_instances().await {
        Ok(s) => s,
        Err(RuntimeError::Unsupported { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(rt_err(e)),
    };
    let current = v.records.current_generation(name);
    let recorded = |id: &str, host: Option<&str>| {
        current.is_some_and(|g| {
            g.instance_id.as_deref() == Some(id)
                || host.is_some_and(|h| g.provider_hostname.as_deref() == Some(h))
        }) || v
            .records
            .launch_record(name)
            .is_some_and(|r| host == Some(r.hostname.as_str()) && r.launched)
    };
    let mut removed = Vec::new();
    for i in standing.iter().filter(|i| {
        i.labels
            .get(csis_schema::tags::INSTANCE)
            .map(String::as_str)
            == Some(name)
    }) {
        if recorded(&i.id, i.name.as_deref()) {
            continue;
        }
        (a.log)(format!(
            "removing {}: a machine of {name} the records do not hold (left by an interrupted run)",
            i.name.as_deref().unwrap_or(&i.id)
        ));
        a.rt.remove_instance(&i.id).await.map_err(rt_err)?;
        removed.push(i.name.clone().unwrap_or_else(|| i.id.clone()));
    }
    Ok(removed)
}

/// Launch a machine of `build` for `inst` and verify it; a failed
/// verification removes it and fails the node.
async fn launch_verified(
    a: &Apply<'_>,
    v: &FleetView,
    inst: &Instance,
    build: &str,
    out: &mut Applied,
) -> Result<(LaunchRecord, Machine), NodeError> {
    let (record, machine, checks) = launch_and_check(a, v, inst, build, out).await?;
    let ok = failed(&checks).is_none();
    record_verdict(a, inst, build, &record, machine.generation, ok, &checks).await?;
    if let Some(failed) = failed(&checks) {
        let host = record.hostname.clone();
        let _ =
            a.rt.remove_instance(&machine.instance_id.clone().unwrap_or(host.clone()))
                .await;
        return Err(NodeError::new(format!(
            "{host} did not verify ({failed}); it was removed, the machine standing before (if any) is kept"
        )));
    }
    Ok((record, machine))
}

pub(super) fn failed(checks: &[VerifyCheck]) -> Option<String> {
    let bad: Vec<String> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    (!bad.is_empty()).then(|| bad.join("; "))
}

/// Launch, then verify (the runtime's `verify_instance`, mounts counted).
async fn launch_and_check(
    a: &Apply<'_>,
    v: &FleetView,
    inst: &Instance,
    build: &str,
    out: &mut Applied,
) -> Result<(LaunchRecord, Machine, Vec<VerifyCheck>), NodeError> {
    let (generation, hostname) = v.records.next_machine(&inst.name, inst.ephemeral);
    let mounts = mount_requests(v, inst)?;
    let script = script_of(a.tree, inst, &hostname, &mounts);
    let req = LaunchRequest {
        instance: inst.name.clone(),
        hostname: hostname.clone(),
        build_id: build.to_string(),
        generation,
        machine_type: inst.machine_type.clone(),
        mounts,
        launch_script: script.clone(),
        labels: with_tags(
            instance_labels(&inst.name, &a.tree.config.id, build, generation),
            &inst.tags,
        ),
        ephemeral: inst.ephemeral,
    };
    (a.log)(format!("launching {hostname} from {build}"));
    let li = tokio::select! {
        r = a.rt.launch_instance(&req) => r.map_err(rt_err)?,
        _ = a.cancel.cancelled() => return Err(NodeError::cancelled()),
    };
    out.hostname = Some(hostname.clone());
    out.generation = Some(generation);
    out.build = Some(build.to_string());
    let record = launch_record(a.run, inst, build, &hostname, &script);
    let machine = Machine {
        generation,
        instance_id: Some(li.id.clone()),
        provider_hostname: Some(li.hostname.clone()),
    };
    let checks = match verify(a, &hostname, build, inst.mounts.len()).await {
        Ok(c) => c,
        Err(e) => {
            let _ = a.rt.remove_instance(&li.id).await;
            return Err(rt_err(e));
        }
    };
    Ok((record, machine, checks))
}

/// The runtime's `verify_instance` of the machine `machine` (launch
/// marker, booted image, mounts counted), each check logged.
pub(super) async fn verify(
    a: &Apply<'_>,
    machine: &str,
    build: &str,
    mounts: usize,
) -> Result<Vec<VerifyCheck>, RuntimeError> {
    (a.log)(format!("verifying {machine} ({mounts} mount(s))"));
    let checks = tokio::select! {
        r = a.rt.verify_instance(machine, build, mounts, VERIFY_TIMEOUT_S) => r?,
        _ = a.cancel.cancelled() => return Err(RuntimeError::Cancelled),
    };
    for c in &checks {
        log_check(a, &c.name, c.ok, &c.detail);
    }
    Ok(checks)
}

fn log_check(a: &Apply<'_>, name: &str, ok: bool, detail: &str) {
    (a.log)(format!(
        "{} {name}: {detail}",
        if ok { "ok  " } else { "FAIL" }
    ));
}

/// The image's post-bake tests, run in the machine `id` over the
/// runtime's session, appended to `checks`.
pub(super) async fn post_bake(
    a: &Apply<'_>,
    spec: &InstanceSpec,
    id: &str,
    checks: &mut Vec<VerifyCheck>,
) {
    for t in &spec.post_bake {
        let r =
            a.rt.run_session_command(id, &t.run, crate::image_test::COMMAND_TIMEOUT_S)
                .await;
        let c = match r {
            Ok(r) => crate::image_test::judge(t, r.exit_code, &r.stdout, &r.stderr),
            Err(e) => crate::image_test::could_not_run(t, &e),
        };
        log_check(a, &c.name, c.ok, &c.detail);
        checks.push(VerifyCheck {
            name: c.name,
            ok: c.ok,
            detail: c.detail,
            evidence: c.evidence,
        });
    }
}

/// The launch script of one machine of `inst` (its user data).
pub(super) fn script_of(
    tree: &Tree,
    inst: &Instance,
    hostname: &str,
    mounts: &[MountRequest],
) -> String {
    launch_script(&LaunchScript {
        instance: inst.name.clone(),
        hostname: hostname.to_string(),
        group: inst.group.clone(),
        gid: tree.group(&inst.group).and_then(|g| g.model.gid),
        admins: admins(tree, &inst.group),
        mounts: mounts.to_vec(),
        userdata: inst.userdata.clone(),
    })
}

/// The runtime's id of each storage the instance mounts (recorded by its
/// storage node, which ran before).
pub(super) fn mount_requests(
    v: &FleetView,
    inst: &Instance,
) -> Result<Vec<MountRequest>, NodeError> {
    inst.mounts
        .iter()
        .map(|m| {
            let rec = v.records.storages.storages.get(&m.storage);
            let id = rec
                .filter(|r| r.state == StorageState::Active)
                .and_then(|r| r.facts.id.clone())
                .ok_or_else(|| {
                    NodeError::new(format!(
                        "{} mounts storage {}, which is not active on record (its storage node did not create it: apply_storage?)",
                        inst.name, m.storage
                    ))
                })?;
            Ok(MountRequest {
                storage: m.storage.clone(),
                volume: id,
                mount_point: m.mount_point.clone(),
                group: m.group.clone(),
                share_mode: m.share_mode.clone(),
                public_read: m.public_read,
            })
        })
        .collect()
}

/// csis's labels with the declared `tags` beside them, a secret in one
/// written as its token (as on every label); a tag never replaces one of
/// csis's labels (the load refuses such a name on docker).
pub(super) fn with_tags<'t>(
    mut labels: BTreeMap<String, String>,
    tags: impl IntoIterator<Item = (&'t String, &'t String)>,
) -> BTreeMap<String, String> {
    use csis_schema::secret::redact;
    for (k, v) in tags {
        labels
            .entry(redact(k).into_owned())
            .or_insert_with(|| redact(v).into_owned());
    }
    labels
}

/// The admins of a group that are declared users (a name kept as an
/// `ENC[...]` marker is not put on a machine).
fn admins(tree: &Tree, group: &str) -> Vec<LaunchUser> {
    let Some(g) = tree.group(group) else {
        return Vec::new();
    };
    g.model
        .admins
        .iter()
        .filter(|n| !n.contains("ENC["))
        .filter_map(|n| tree.users.iter().find(|u| &u.name == n))
        .map(|u| LaunchUser {
            name: u.name.clone(),
            uid: u.uid,
            public_keys: u.public_keys.clone(),
        })
        .collect()
}

/// The launch record of a machine (§9.2), in the original's shape.
pub(super) fn launch_record(
    run: &str,
    inst: &Instance,
    build: &str,
    hostname: &str,
    script: &str,
) -> LaunchRecord {
    use sha2::Digest;
    let redacted = csis_schema::secret::redact_printed(&inst.userdata).into_owned();
    LaunchRecord {
        image: inst.image.clone(),
        build: build.to_string(),
        runtime: inst.runtime.clone(),
        group: inst.group.clone(),
        mounts: inst
            .mounts
            .iter()
            .map(|m| MountRecord {
                storage: m.storage.clone(),
                type_: m.storage_type.clone(),
                builder: m.builder.clone(),
                mount_point: m.mount_point.clone(),
                group: m.group.clone(),
                share_mode: m.share_mode.clone(),
                public_read: m.public_read,
                device: None,
                extra: BTreeMap::new(),
            })
            .collect(),
        hostname: hostname.to_string(),
        ephemeral: inst.ephemeral,
        userdata: (!redacted.is_empty()).then_some(redacted),
        user_data_sha256: format!("{:x}", sha2::Sha256::digest(script.as_bytes())),
        machine_type: inst.machine_type.clone(),
        run: run.to_string(),
        launched: false,
        launched_run: None,
        extra: BTreeMap::new(),
    }
}

/// An ephemeral instance: launched, verified (its image's post-bake tests
/// run in it), recorded in `verifications.yaml` and the fleet's records,
/// removed (kept, labelled, when it failed under `on_failure: keep`).
async fn prove(
    a: &Apply<'_>,
    v: &FleetView,
    spec: &InstanceSpec,
    inst: &Instance,
    build: &str,
    out: &mut Applied,
) -> Result<(), NodeError> {
    let (record, machine, mut checks) = launch_and_check(a, v, inst, build, out).await?;
    let id = machine
        .instance_id
        .clone()
        .unwrap_or_else(|| record.hostname.clone());
    post_bake(a, spec, &id, &mut checks).await;
    let ok = failed(&checks).is_none();
    let kept = !ok && inst.on_failure == OnFailure::Keep;
    record_verdict(a, inst, build, &record, machine.generation, ok, &checks).await?;
    // recorded standing first, closed once the machine is gone: a run
    // killed in between leaves it recorded standing (the next plan's
    // `remove`), never a machine under a closed record
    let mut verdict = EphemeralVerdict {
        record: record.clone(),
        machine,
        ok,
        kept: true,
    };
    a.recorder
        .record_ephemeral(&inst.name, &verdict, a.run)
        .map_err(rec_err("the ephemeral verdict"))?;
    if kept {
        (a.log)(format!(
            "{} FAILED; kept (on_failure: keep)",
            record.hostname
        ));
    } else {
        remove(a, &id, out).await?;
        verdict.kept = false;
        a.recorder
            .record_ephemeral(&inst.name, &verdict, a.run)
            .map_err(rec_err("the ephemeral's removal"))?;
    }
    if let Some(f) = failed(&checks) {
        return Err(NodeError::new(format!(
            "{} (ephemeral) did not verify: {f}",
            record.hostname
        )));
    }
    Ok(())
}

/// A new machine's verdict in `meta-state/verifications.yaml` (a durable
/// one's after its launch or replacement, an ephemeral one's proof): the
/// instance, the build, the generation, the checks.
pub(super) async fn record_verdict(
    a: &Apply<'_>,
    inst: &Instance,
    build: &str,
    record: &LaunchRecord,
    generation: u32,
    ok: bool,
    checks: &[VerifyCheck],
) -> Result<(), NodeError> {
    let entry = json!({
        "instance": inst.name,
        "runtime": inst.runtime,
        "expected_build": build,
        "ok": ok,
        "ephemeral": inst.ephemeral,
        "generation": generation,
        "hostname": record.hostname,
        "run": a.run,
        "time": crate::image_test::now_rfc3339(),
        "checks": checks,
    });
    let _meta = a.meta_lock.lock().await;
    csis_cache::verifications::Verifications::append(a.meta, entry).map_err(rec_err("the verdict"))
}

/// Remove the machine, forget the pin and the launch record, close the
/// generation.
async fn decommission(
    a: &Apply<'_>,
    v: &FleetView,
    spec: &InstanceSpec,
    out: &mut Applied,
) -> Result<(), NodeError> {
    if let Some(rec) = v.records.launch_record(&spec.name) {
        let id = old_machine_id(v, &spec.name, rec);
        out.hostname = Some(rec.hostname.clone());
        remove(a, &id, out).await?;
    }
    a.recorder
        .record_decommission(&spec.name, a.run)
        .map(drop)
        .map_err(rec_err("the decommission"))
}

impl<'a> InstanceCase<'a> {
    /// The case of an instance node at run time, from its spec.
    pub fn of_spec(spec: &'a InstanceSpec) -> InstanceCase<'a> {
        let d = spec.declared.as_ref();
        InstanceCase {
            name: &spec.name,
            image: &spec.image,
            runtime: &spec.runtime,
            follow: d.is_some_and(|i| i.image_policy == ImagePolicy::Follow),
            ephemeral: d.is_some_and(|i| i.ephemeral),
            require_released: spec.require_released,
            release_model: spec.release_model.as_deref(),
            declared: d.is_some(),
            head: None,
            bake_due: false,
        }
    }
}

impl<'a> StorageCase<'a> {
    /// The case of a storage node at run time, from its spec.
    pub fn of_spec(tree: &Tree, spec: &'a StorageSpec) -> StorageCase<'a> {
        let d = spec.declared.as_ref();
        StorageCase {
            name: &spec.name,
            requested: d.map(|s| super::plan::cache_state(&s.requested)),
            attached: tree
                .instances
                .iter()
                .any(|i| i.mounts.iter().any(|m| m.storage == spec.name)),
            supports_archive: d.is_some_and(|s| s.supports_archive),
        }
    }
}
