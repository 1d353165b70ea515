//! What each fleet node will do and why: the fleet planner. The engine
//! plans a storage or instance node as any `Decide` node; this pass then
//! decides it over the records (launch records, pins, pending
//! replacements, storage states, verdicts, releases) and the plan (does the
//! image bake this run?), and writes the decision into the plan: the
//! node's code is its [`Action`], its reason says why, and it is due when
//! the action changes something and the node is not gated (`apply_instances`,
//! `apply_storage`: a gated node keeps its action and says `gated`).
//!
//! The build decides again when the node runs ([`decide_instance`] over
//! the records as they are then, this run's bakes included).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use csis_cache::drift::Drift;
use csis_cache::fleet::FleetRecords;
use csis_cache::launch_params::LaunchRecord;
use csis_cache::storage_state::{
    transition, StorageState, Transition, TransitionAction, TransitionError,
};
use csis_cache::{Lineage, MetaState, Pins, Releases};
use csis_engine::{Decision, Graph, Node, Plan, PlannedNode, Reason};
use csis_rules::compile::{NodeKind, DECOMMISSION_ATTR, GATED_ATTR};
use serde::Serialize;

/// What a fleet node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// An instance's first machine (first bind: the head, the pin, or the
    /// release under `require_released_builds`); an ephemeral instance's
    /// proof (launch, verify, remove).
    Launch,
    /// A new machine, verified, then the old one removed: a pending
    /// `upgrade instance`, or a follow image whose head moved.
    Replace,
    /// Recorded, declared no more: the machine removed, the pin and launch
    /// record forgotten, the generation closed.
    Decommission,
    /// A launched durable instance whose machine is gone (removed behind
    /// csis): a new generation of the build it ran, the old one closed
    /// `missing`.
    Relaunch,
    /// An ephemeral instance still standing after its passing proof (a
    /// run stopped between the proof and the teardown): removed, its
    /// generation closed.
    Remove,
    /// Nothing to do.
    Current,
    /// Pinned, and its image has a newer head: not due (`csis upgrade
    /// instance` makes it a replacement).
    Behind,
    /// Nothing to boot yet (no build, or no release under
    /// `require_released_builds`).
    Waiting,
    /// A storage created (new, or regenerated after a destroy).
    Create,
    /// An archived storage made active again.
    Restore,
    Archive,
    Destroy,
    /// A storage state the state machine refuses (the reason says why).
    Refused,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Launch => "launch",
            Action::Replace => "replace",
            Action::Decommission => "decommission",
            Action::Relaunch => "relaunch",
            Action::Remove => "remove",
            Action::Current => "current",
            Action::Behind => "behind",
            Action::Waiting => "waiting",
            Action::Create => "create",
            Action::Restore => "restore",
            Action::Archive => "archive",
            Action::Destroy => "destroy",
            Action::Refused => "refused",
        }
    }

    /// Does it change a machine, a volume or a record?
    pub fn changes(self) -> bool {
        !matches!(
            self,
            Action::Current | Action::Behind | Action::Waiting | Action::Refused
        )
    }

    pub fn parse(s: &str) -> Option<Action> {
        [
            Action::Launch,
            Action::Replace,
            Action::Decommission,
            Action::Relaunch,
            Action::Remove,
            Action::Current,
            Action::Behind,
            Action::Waiting,
            Action::Create,
            Action::Restore,
            Action::Archive,
            Action::Destroy,
            Action::Refused,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }
}

/// A decision: the action, the build it boots (None: the build this run
/// makes, or none), and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decided {
    pub action: Action,
    pub build: Option<String>,
    pub reason: String,
}

fn decided(action: Action, build: Option<&str>, reason: String) -> Decided {
    Decided {
        action,
        build: build.map(str::to_string),
        reason,
    }
}

/// The records the fleet planner reads.
#[derive(Debug, Clone, Default)]
pub struct FleetView {
    pub records: FleetRecords,
    pub pins: Pins,
    pub releases: Releases,
    /// `(instance, build)` with a passing verdict in `verifications.yaml`.
    pub proven: BTreeSet<(String, String)>,
    /// Launched durable instances whose machine the runtime no longer
    /// holds (the state query's `missing`, or the node's own query).
    pub missing: BTreeSet<String>,
}

impl FleetView {
    /// The records as `meta-state/` holds them, with what the journal of
    /// an interrupted build holds merged in (what the next build writes
    /// first), so a plan after a kill says what that build will do.
    pub fn load(meta: &MetaState) -> Result<FleetView> {
        let journal = meta
            .dir()
            .parent()
            .map(|root| csis_cache::LocalDir::of_tree(root).journal());
        let (pins, records) = match journal {
            Some(j) if std::fs::metadata(&j).is_ok_and(|m| m.len() > 0) => {
                meta.fleet_with_journal(&j)?
            }
            _ => (meta.pins()?, FleetRecords::load(meta)?),
        };
        Self::with_records(meta, pins, records)
    }

    /// The view over these pins and fleet records (a build's recorder's),
    /// with the releases and verdicts of `meta-state/`.
    pub fn with_records(meta: &MetaState, pins: Pins, records: FleetRecords) -> Result<FleetView> {
        Ok(FleetView {
            records,
            pins,
            releases: meta.releases()?,
            proven: proven(meta)?,
            missing: BTreeSet::new(),
        })
    }

    /// The launch record of a machine standing now.
    pub fn launched(&self, name: &str) -> Option<&LaunchRecord> {
        self.records
            .launch_record(name)
            .filter(|r| r.launched && !r.ephemeral)
    }

    /// The ephemeral machine of `name` recorded standing, as the verdict
    /// that closes it (`kept: false`) once it is gone.
    pub fn standing_ephemeral(&self, name: &str) -> Option<csis_cache::EphemeralVerdict> {
        let g = self.records.current_generation(name)?;
        if g.kind != csis_cache::instance_state::GenerationKind::Ephemeral {
            return None;
        }
        let record = self.records.launch_record(name)?.clone();
        let ok = (record.bound_build())
            .is_some_and(|b| self.proven.contains(&(name.to_string(), b.to_string())));
        Some(csis_cache::EphemeralVerdict {
            record,
            machine: csis_cache::Machine {
                generation: g.number,
                instance_id: g.instance_id.clone(),
                provider_hostname: g.provider_hostname.clone(),
            },
            ok,
            kept: false,
        })
    }

    /// The current release of `image` under `model`.
    fn released(&self, model: Option<&str>, image: &str) -> Option<&str> {
        let model = model?;
        self.releases
            .current
            .get(model)
            .and_then(|m| m.get(image))
            .map(String::as_str)
    }
}

/// The `(instance, build)` pairs `verifications.yaml` holds a passing
/// verdict for (not a durable machine's: `ephemeral: false`).
fn proven(meta: &MetaState) -> Result<BTreeSet<(String, String)>> {
    let v = csis_cache::verifications::Verifications::load(meta)?;
    Ok(v.verifications
        .iter()
        .filter(|e| e["ok"].as_bool() == Some(true))
        .filter(|e| e["ephemeral"].as_bool() != Some(false))
        .filter_map(|e| {
            Some((
                e["instance"].as_str()?.to_string(),
                e["expected_build"].as_str()?.to_string(),
            ))
        })
        .collect())
}

/// What an instance node's decision reads besides the records.
#[derive(Debug, Clone, Default)]
pub struct InstanceCase<'a> {
    pub name: &'a str,
    pub image: &'a str,
    pub runtime: &'a str,
    pub follow: bool,
    pub ephemeral: bool,
    pub require_released: bool,
    pub release_model: Option<&'a str>,
    /// False: recorded, declared no more.
    pub declared: bool,
    /// The image's head on the runtime.
    pub head: Option<&'a str>,
    /// The image bakes in this run (plan time only).
    pub bake_due: bool,
}

impl<'a> InstanceCase<'a> {
    /// The case of an instance node, from its attributes.
    pub fn of_node(node: &'a Node) -> InstanceCase<'a> {
        let flag = |k: &str| node.attr(k) == Some("true");
        InstanceCase {
            name: node.attr("instance").unwrap_or_default(),
            image: node.attr("image").unwrap_or_default(),
            runtime: node.attr("runtime").unwrap_or_default(),
            follow: node.attr("policy") == Some("follow"),
            ephemeral: flag("ephemeral"),
            require_released: flag("require_released"),
            release_model: node.attr("release_model"),
            declared: !flag(DECOMMISSION_ATTR),
            head: None,
            bake_due: false,
        }
    }
}

/// The decision for one instance (docs/fleet.md §4).
pub fn decide_instance(v: &FleetView, c: &InstanceCase<'_>) -> Decided {
    let name = c.name;
    if !c.declared {
        return match v.records.launch_record(name) {
            Some(r) => decided(
                Action::Decommission,
                r.bound_build(),
                format!(
                    "decommission {}: recorded (build {}), declared no more",
                    r.hostname,
                    r.bound_build().unwrap_or("unbound")
                ),
            ),
            None => match v.pins.instance_pin(name) {
                // a pin alone (never launched): forgotten, so pins.yaml
                // holds no instance the tree does not declare
                Some(p) => decided(
                    Action::Decommission,
                    Some(p),
                    format!("decommission {name}: pinned to {p}, never launched, declared no more (the pin is forgotten)"),
                ),
                None if v.pins.pending_replacements.contains_key(name) => decided(
                    Action::Decommission,
                    None,
                    format!("decommission {name}: a pending replacement, declared no more (it is forgotten)"),
                ),
                None => decided(
                    Action::Current,
                    None,
                    format!("{name}: nothing recorded to decommission"),
                ),
            },
        };
    }
    let pending = v.pins.pending_replacements.get(name).map(String::as_str);
    if c.ephemeral {
        return ephemeral(v, c, pending);
    }
    let Some(l) = v.launched(name) else {
        return first_bind(v, c);
    };
    let d = durable(c, l, pending);
    if v.missing.contains(name) && !d.action.changes() {
        return relaunched(name, l);
    }
    d
}

/// A machine found gone is launched again from the build it ran.
fn relaunched(name: &str, l: &LaunchRecord) -> Decided {
    let running = l.bound_build().unwrap_or("unbound");
    decided(
        Action::Relaunch,
        l.bound_build(),
        format!(
            "relaunch {name}: its machine {} (build {running}) is missing; a new generation boots {running}",
            l.hostname
        ),
    )
}

/// A launched durable instance: replace, behind or current.
fn durable(c: &InstanceCase<'_>, l: &LaunchRecord, pending: Option<&str>) -> Decided {
    let name = c.name;
    let running = l.bound_build().unwrap_or("unbound");
    let host = &l.hostname;
    if let Some(p) = pending.filter(|p| *p != running) {
        return decided(
            Action::Replace,
            Some(p),
            format!("replace {host}: `upgrade instance` pending, {running} -> {p}"),
        );
    }
    let newer = c.head.filter(|h| *h != running);
    if c.follow {
        if c.bake_due {
            return decided(
                Action::Replace,
                None,
                format!(
                    "replace {host}: follow, {} bakes in this run (it runs {running})",
                    c.image
                ),
            );
        }
        if let Some(h) = newer {
            return decided(
                Action::Replace,
                Some(h),
                format!("replace {host}: follow, head moved {running} -> {h}"),
            );
        }
    } else if c.bake_due || newer.is_some() {
        let head = newer.unwrap_or("the build this run makes");
        return decided(
            Action::Behind,
            Some(running),
            format!(
                "behind: {host} is pinned to {running}, {} has a newer head ({head}); `csis upgrade instance {name}` replaces it",
                c.image
            ),
        );
    }
    decided(
        Action::Current,
        Some(running),
        format!("current: {host} runs {running}"),
    )
}

/// The build a first bind takes: the release under
/// `require_released_builds`, else a recorded pin (pinned), else the head.
fn first_bind(v: &FleetView, c: &InstanceCase<'_>) -> Decided {
    let (name, image, rt) = (c.name, c.image, c.runtime);
    if c.require_released {
        return match v.released(c.release_model, image) {
            Some(b) => decided(
                Action::Launch,
                Some(b),
                format!("launch {name}: first bind to the release {b} (require_released_builds)"),
            ),
            None => decided(
                Action::Waiting,
                None,
                format!("waiting: {image} has no released build (require_released_builds)"),
            ),
        };
    }
    let pin = (!c.follow).then(|| v.pins.instance_pin(name)).flatten();
    if let Some(p) = pin {
        return decided(
            Action::Launch,
            Some(p),
            format!("launch {name}: first machine, pinned to {p}"),
        );
    }
    if c.bake_due {
        return decided(
            Action::Launch,
            None,
            format!("launch {name}: first bind to the build of {image} this run makes"),
        );
    }
    match c.head {
        Some(h) => decided(
            Action::Launch,
            Some(h),
            format!("launch {name}: first bind to the head {h}"),
        ),
        None => decided(
            Action::Waiting,
            None,
            format!("waiting: {image} has no build on {rt} yet"),
        ),
    }
}

/// An ephemeral instance proves the build it would boot once: launched,
/// verified, recorded, removed.
fn ephemeral(v: &FleetView, c: &InstanceCase<'_>, pending: Option<&str>) -> Decided {
    let name = c.name;
    if let Some(d) = standing_proven(v, name) {
        return d;
    }
    let pin = (!c.follow).then(|| v.pins.instance_pin(name)).flatten();
    let target = pending.or(pin);
    if target.is_none() && c.bake_due {
        return decided(
            Action::Launch,
            None,
            format!(
                "launch {name} (ephemeral): prove the build of {} this run makes",
                c.image
            ),
        );
    }
    let Some(b) = target.or(c.head) else {
        return decided(
            Action::Waiting,
            None,
            format!("waiting: {} has no build on {} yet", c.image, c.runtime),
        );
    };
    if v.proven.contains(&(name.to_string(), b.to_string())) {
        return decided(
            Action::Current,
            Some(b),
            format!("current: {name} (ephemeral) proved {b}"),
        );
    }
    decided(
        Action::Launch,
        Some(b),
        format!("launch {name} (ephemeral): prove {b}, then remove it"),
    )
}

/// An ephemeral machine standing after it proved its build (the run
/// that raised it stopped before its teardown): it goes. One standing
/// without a passing verdict (kept under `on_failure: keep`, or stopped
/// mid-proof) is left to the proof.
fn standing_proven(v: &FleetView, name: &str) -> Option<Decided> {
    let s = v.standing_ephemeral(name).filter(|s| s.ok)?;
    let b = s.record.bound_build()?;
    Some(decided(
        Action::Remove,
        Some(b),
        format!(
            "remove {} (ephemeral): it proved {b} but still stands (the run that raised it stopped before its teardown)",
            s.record.hostname
        ),
    ))
}

/// What a storage node's decision reads besides the records.
#[derive(Debug, Clone, Default)]
pub struct StorageCase<'a> {
    pub name: &'a str,
    /// None: recorded, declared no more (destroyed).
    pub requested: Option<StorageState>,
    /// A declared instance mounts it.
    pub attached: bool,
    pub supports_archive: bool,
}

impl<'a> StorageCase<'a> {
    pub fn of_node(node: &'a Node) -> StorageCase<'a> {
        let requested = match node.attr("requested") {
            None => None,
            Some("archived") => Some(StorageState::Archived),
            Some("destroyed") => Some(StorageState::Destroyed),
            Some(_) => Some(StorageState::Active),
        };
        StorageCase {
            name: node.attr("storage").unwrap_or_default(),
            requested,
            attached: node.attr("attached") == Some("true"),
            supports_archive: node.attr("supports_archive") == Some("true"),
        }
    }
}

/// The decision for one storage: the state machine (§9.1) from its
/// recorded state to the requested one.
pub fn decide_storage(v: &FleetView, c: &StorageCase<'_>) -> Decided {
    let name = c.name;
    let current = v.records.storage_state(name);
    let requested = c.requested.unwrap_or(StorageState::Destroyed);
    let from = current.map_or("new", |s| s.as_str());
    let t = match storage_transition(v, c) {
        Ok(t) => t,
        Err(e) => return decided(Action::Refused, None, format!("{name}: {e}")),
    };
    let action = match t.action {
        TransitionAction::Create | TransitionAction::Regenerate => Action::Create,
        TransitionAction::Restore => Action::Restore,
        TransitionAction::Archive => Action::Archive,
        TransitionAction::Destroy => Action::Destroy,
        TransitionAction::Keep => Action::Current,
    };
    let why = match (action, c.requested) {
        (Action::Current, _) => format!("current: {name} is {from}"),
        (Action::Destroy, None) => format!("destroy {name}: {from}, declared no more"),
        (Action::Create, _) if current == Some(StorageState::Destroyed) => {
            format!("create {name}: destroyed, requested active (a new generation, no data)")
        }
        (a, _) => format!("{} {name}: {from} -> {requested}", a.as_str()),
    };
    decided(action, None, why)
}

/// The state machine's move for a storage, from its recorded state.
pub fn storage_transition(
    v: &FleetView,
    c: &StorageCase<'_>,
) -> Result<Transition, TransitionError> {
    let requested = c.requested.unwrap_or(StorageState::Destroyed);
    transition(
        v.records.storage_state(c.name),
        requested,
        c.attached,
        c.supports_archive,
    )
}

/// A declared storage state as the records spell it.
pub fn cache_state(s: &csis_rules::fleet::StorageState) -> StorageState {
    match serde_json::to_value(s)
        .ok()
        .as_ref()
        .and_then(|v| v.as_str())
    {
        Some("archived") => StorageState::Archived,
        Some("destroyed") => StorageState::Destroyed,
        _ => StorageState::Active,
    }
}

/// The plan's decision for every fleet node in it (see the module's doc).
pub fn apply_fleet_plan(
    meta: &MetaState,
    lineage: &Lineage,
    graph: &Graph,
    plan: &mut Plan,
) -> Result<()> {
    let is_fleet = |n: &PlannedNode| n.kind == NodeKind::Instance || n.kind == NodeKind::Storage;
    if !plan.nodes.iter().any(is_fleet) {
        return Ok(());
    }
    let view = FleetView::load(meta)?;
    let due_bakes: BTreeSet<(String, String)> = plan
        .nodes
        .iter()
        .filter(|n| n.due && n.kind == NodeKind::Bake)
        .filter_map(|n| Some((n.series.clone()?, n.runtime.clone()?)))
        .collect();
    let mut heads: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for n in plan.nodes.iter_mut().filter(|n| is_fleet(n)) {
        let node = graph.node(n.id);
        let d = if n.kind == NodeKind::Instance {
            let mut c = InstanceCase::of_node(node);
            let key = (c.image.to_string(), c.runtime.to_string());
            c.bake_due = due_bakes.contains(&key);
            let head = heads
                .entry(key.clone())
                .or_insert_with(|| lineage.head(&key.0, &key.1).map(|b| b.build_id.clone()));
            c.head = head.as_deref();
            decide_instance(&view, &c)
        } else {
            decide_storage(&view, &StorageCase::of_node(node))
        };
        set_decision(n, &d, node.attr(GATED_ATTR));
    }
    Ok(())
}

/// The instances a state report finds `missing` whose launch record still
/// names the machine it found gone (a report older than a relaunch names
/// the old hostname).
pub fn missing_of(v: &FleetView, drift: &[Drift]) -> BTreeSet<String> {
    drift
        .iter()
        .filter(|d| d.kind == "instance" && d.drift == "missing")
        .filter(|d| {
            v.launched(&d.name)
                .is_some_and(|r| d.detail.starts_with(&format!("{} ", r.hostname)))
        })
        .map(|d| d.name.clone())
        .collect()
}

/// Plan a relaunch for every launched durable instance `drift` finds
/// missing whose node would otherwise change nothing.
pub fn relaunch_missing(
    meta: &MetaState,
    graph: &Graph,
    plan: &mut Plan,
    drift: &[Drift],
) -> Result<()> {
    if !drift.iter().any(|d| d.kind == "instance") {
        return Ok(());
    }
    let view = FleetView::load(meta)?;
    let missing = missing_of(&view, drift);
    for n in plan
        .nodes
        .iter_mut()
        .filter(|n| n.kind == NodeKind::Instance)
    {
        let node = graph.node(n.id);
        let name = node.attr("instance").unwrap_or_default();
        let quiet = Action::parse(&n.code).is_some_and(|a| !a.changes());
        let Some(l) = view
            .launched(name)
            .filter(|_| quiet && missing.contains(name))
        else {
            continue;
        };
        if node.attr(DECOMMISSION_ATTR) != Some("true") {
            set_decision(n, &relaunched(name, l), node.attr(GATED_ATTR));
        }
    }
    Ok(())
}

/// The hard drift the plan does not repair, as the build refuses on it: an
/// instance found missing whose node is due to relaunch, replace or
/// decommission it is repaired by this build; a gated one names the fix.
pub fn unrepaired(graph: &Graph, plan: &Plan, hard: &[Drift]) -> Vec<String> {
    let node_of = |name: &str| {
        plan.nodes.iter().find(|n| {
            n.kind == NodeKind::Instance && graph.node(n.id).attr("instance") == Some(name)
        })
    };
    let repairs = [Action::Relaunch, Action::Replace, Action::Decommission];
    let mut out = Vec::new();
    for d in hard {
        let line = format!("{} {}: {}: {}", d.kind, d.name, d.drift, d.detail);
        let planned = (d.kind == "instance" && d.drift == "missing")
            .then(|| node_of(&d.name))
            .flatten();
        let action = planned.and_then(|n| Action::parse(&n.code));
        match planned {
            Some(n) if n.due && action.is_some_and(|a| repairs.contains(&a)) => {}
            Some(n) if action == Some(Action::Relaunch) && is_gated(graph, n) => out.push(format!(
                "{line}; the build relaunches it where apply_instances allows ({})",
                graph.node(n.id).attr(GATED_ATTR).unwrap_or("gated")
            )),
            _ => out.push(line),
        }
    }
    out
}

/// Write a decision into a planned node.
fn set_decision(n: &mut PlannedNode, d: &Decided, gated: Option<&str>) {
    n.code = d.action.as_str().to_string();
    n.reason = match gated.filter(|_| d.action.changes()) {
        Some(why) => format!("{} (gated: {why})", d.reason),
        None => d.reason.clone(),
    };
    n.due = d.action.changes() && gated.is_none();
    n.changes.clear();
    n.decision = if n.due {
        Decision::Due {
            reason: Reason::custom(&n.code, n.reason.clone()),
        }
    } else {
        Decision::Current {
            build: d.build.clone(),
        }
    };
}

/// Is a planned fleet node gated (its action would change something, and
/// `apply_*` keeps it from doing so)?
pub fn is_gated(graph: &Graph, n: &PlannedNode) -> bool {
    !n.due
        && graph.node(n.id).attr(GATED_ATTR).is_some()
        && Action::parse(&n.code).is_some_and(Action::changes)
}

/// One fleet node of a plan, for `csis plan --json` (`fleet`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetAction {
    pub label: String,
    /// `instance` or `storage`.
    pub kind: String,
    pub name: String,
    pub runtime: Option<String>,
    pub action: String,
    pub due: bool,
    /// Why the node changes nothing (`apply_instances is false`), when its
    /// action would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gated: Option<String>,
    pub reason: String,
}

/// The fleet nodes of a plan, in plan order.
pub fn fleet_actions(graph: &Graph, plan: &Plan) -> Vec<FleetAction> {
    plan.nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Instance || n.kind == NodeKind::Storage)
        .map(|n| {
            let node = graph.node(n.id);
            FleetAction {
                label: n.label.to_string(),
                kind: n.kind.clone(),
                name: node
                    .attr("instance")
                    .or(node.attr("storage"))
                    .unwrap_or_default()
                    .to_string(),
                runtime: n.runtime.clone(),
                action: n.code.clone(),
                due: n.due,
                gated: is_gated(graph, n)
                    .then(|| node.attr(GATED_ATTR).map(str::to_string))
                    .flatten(),
                reason: n.reason.clone(),
            }
        })
        .collect()
}
