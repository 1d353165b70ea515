//! The fleet's records together ([`FleetRecords`]: `launch-params.yaml`,
//! `instance-state.yaml`, `storage-state.yaml`; the instance side of
//! `pins.yaml` stays in [`Pins`]), the read-side questions the planner
//! asks of them, and the journalled operations ([`FleetOp`]) the
//! [`crate::Recorder`] writes.
//!
//! Every operation carries what it needs to be applied again with the same
//! result (numbers, builds and times are fixed when it is journalled), so a
//! replay after a kill between the journal and the files converges: a
//! generation is opened by its number once, a pin move is journalled once,
//! a storage transition applies only from its recorded `from`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::instance_state::{
    canonical_hostname, CloseWhy, Generation, GenerationKind, How, InstanceState, Opening,
};
use crate::launch_params::{LaunchParams, LaunchRecord};
use crate::pins::{PinMove, Pins};
use crate::storage_state::{RecordedFacts, StorageState, StorageStates, Transition};

/// The three fleet files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetRecords {
    pub launch: LaunchParams,
    pub instances: InstanceState,
    pub storages: StorageStates,
}

/// The machine a launch stood up: its generation number (of the launch
/// record's kind) and what the provider said about it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub generation: u32,
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub provider_hostname: Option<String>,
}

/// An ephemeral instance's run: launched from `record` as `machine`,
/// verified (`ok`), then removed, unless `kept` (a failed one under
/// `on_failure: keep`: it stands, labelled, and its generation stays open).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EphemeralVerdict {
    pub record: LaunchRecord,
    pub machine: Machine,
    pub ok: bool,
    #[serde(default)]
    pub kept: bool,
}

/// The pin operations of [`crate::Recorder::bind_instance`] (the others
/// are the record operations' own: `replace`, `decommission`,
/// `ephemeral`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceOp {
    /// First bind (no pin yet).
    Bind,
    /// A follow instance's pin moves to its image's new head.
    Follow,
    /// `csis upgrade instance`: the pin moves and the replacement waits in
    /// `pending_replacements`.
    Upgrade,
}

impl InstanceOp {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceOp::Bind => "bind",
            InstanceOp::Follow => "follow",
            InstanceOp::Upgrade => "upgrade",
        }
    }
}

/// What the records say of one instance (see [`FleetRecords::instance`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceView<'a> {
    /// The build it is pinned to.
    pub pin: Option<&'a str>,
    /// The build a replacement waits to bring (`csis upgrade instance`).
    pub pending: Option<&'a str>,
    pub launch: Option<&'a LaunchRecord>,
    /// The machine standing now.
    pub current: Option<&'a Generation>,
}

impl InstanceView<'_> {
    /// Nothing recorded at all (a first launch is due).
    pub fn is_new(&self) -> bool {
        self.pin.is_none()
            && self.pending.is_none()
            && self.launch.is_none()
            && self.current.is_none()
    }
}

impl FleetRecords {
    /// Everything recorded about one instance: pin, pending replacement,
    /// launch record, standing machine.
    pub fn instance<'a>(&'a self, pins: &'a Pins, name: &str) -> InstanceView<'a> {
        InstanceView {
            pin: pins.instance_pin(name),
            pending: pins.pending_replacements.get(name).map(String::as_str),
            launch: self.launch_record(name),
            current: self.current_generation(name),
        }
    }

    /// The launch record of an instance.
    pub fn launch_record(&self, name: &str) -> Option<&LaunchRecord> {
        self.launch.record(name)
    }

    /// The machine standing now for an instance, as recorded.
    pub fn current_generation(&self, name: &str) -> Option<&Generation> {
        self.instances.current(name)
    }

    /// The number the next machine of an instance gets, and its hostname.
    pub fn next_machine(&self, name: &str, ephemeral: bool) -> (u32, String) {
        let n = self
            .instances
            .next_number(name, GenerationKind::of(ephemeral));
        (n, canonical_hostname(name, n))
    }

    /// A storage's recorded state (`None`: never applied).
    pub fn storage_state(&self, name: &str) -> Option<StorageState> {
        self.storages.state(name)
    }

    /// Instances the records hold (a launch record, a standing machine or
    /// a pin) that `declared` does not name, sorted: what a decommission
    /// would retire.
    pub fn undeclared_instances(&self, pins: &Pins, declared: &[&str]) -> Vec<String> {
        let declared: BTreeSet<&str> = declared.iter().copied().collect();
        let mut out: BTreeSet<&str> = BTreeSet::new();
        out.extend(self.launch.instances.keys().map(String::as_str));
        out.extend(
            self.instances
                .instances
                .iter()
                .filter(|(_, l)| l.current.is_some())
                .map(|(k, _)| k.as_str()),
        );
        out.extend(pins.instances.keys().map(String::as_str));
        out.extend(pins.pending_replacements.keys().map(String::as_str));
        out.into_iter()
            .filter(|n| !declared.contains(n))
            .map(str::to_string)
            .collect()
    }

    /// Storages recorded and not destroyed that `declared` does not name,
    /// sorted (core.md §9.1: each becomes a planned destroy).
    pub fn undeclared_storages(&self, declared: &[&str]) -> Vec<String> {
        self.storages
            .storages
            .iter()
            .filter(|(n, r)| r.state != StorageState::Destroyed && !declared.contains(&n.as_str()))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

impl Pins {
    /// The build an instance is pinned to.
    pub fn instance_pin(&self, name: &str) -> Option<&str> {
        self.instances.get(name).map(String::as_str)
    }

    /// Journal an instance move once (a replay finds it and adds nothing).
    fn journal_instance(
        &mut self,
        name: &str,
        from: Option<String>,
        to: &str,
        run: &str,
        op: &str,
    ) {
        let m = PinMove {
            kind: "instance".into(),
            name: name.into(),
            from,
            to: to.into(),
            run: Some(run.into()),
            op: op.into(),
            runtime: None,
            extra: Default::default(),
        };
        if !self.upgrades.contains(&m) {
            self.upgrades.push(m);
        }
    }
}

/// One journalled fleet operation (see the module's doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum FleetOp {
    Launch {
        name: String,
        record: LaunchRecord,
        machine: Machine,
        run: String,
        at: String,
    },
    Replaced {
        name: String,
        old_generation: u32,
        /// The build the old machine ran (the journal's `from`).
        old_build: Option<String>,
        record: LaunchRecord,
        machine: Machine,
        run: String,
        at: String,
        /// Why the old generation closed (`replaced` when absent; `missing`
        /// for a relaunch of a machine found gone).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<CloseWhy>,
    },
    Decommission {
        name: String,
        /// The pin forgotten, the generation closed, the launch record's
        /// hostname forgotten (as they were when journalled).
        pin: Option<String>,
        generation: Option<u32>,
        hostname: Option<String>,
        run: String,
        at: String,
    },
    Ephemeral {
        name: String,
        verdict: EphemeralVerdict,
        run: String,
        at: String,
    },
    Storage {
        name: String,
        transition: Transition,
        facts: RecordedFacts,
        run: String,
    },
    Bind {
        name: String,
        build: String,
        op: InstanceOp,
        run: String,
    },
    Observe {
        name: String,
        /// The generation standing when the provider answered.
        number: u32,
        instance_id: String,
        provider_hostname: Option<String>,
        run: String,
        at: String,
    },
}

fn opening(record: &LaunchRecord, m: &Machine, run: &str, at: &str) -> Opening {
    Opening {
        how: if m.instance_id.is_some() {
            How::Observed
        } else {
            How::Inferred
        },
        run: run.to_string(),
        at: at.to_string(),
        instance_id: m.instance_id.clone(),
        provider_hostname: m.provider_hostname.clone(),
        launch_params: serde_json::to_value(record).ok(),
    }
}

/// A launch record as a launched machine's.
fn launched(record: &LaunchRecord, run: &str) -> LaunchRecord {
    let mut r = record.clone();
    r.launched = true;
    r.launched_run.get_or_insert_with(|| run.to_string());
    r
}

impl FleetOp {
    /// Its change to `pins.yaml`. Idempotent.
    pub(crate) fn apply_pins(&self, pins: &mut Pins) {
        match self {
            FleetOp::Launch {
                name, record, run, ..
            } => {
                if let Some(b) = record.bound_build() {
                    let from = pins.instance_pin(name).map(str::to_string);
                    if from.as_deref() != Some(b) {
                        let op = if from.is_none() { "bind" } else { "follow" };
                        pins.instances.insert(name.clone(), b.to_string());
                        pins.journal_instance(name, from, b, run, op);
                    }
                }
            }
            // a relaunch of the pinned build moves no pin
            FleetOp::Replaced {
                name,
                record,
                why: Some(CloseWhy::Missing),
                ..
            } if pins.instance_pin(name) == record.bound_build()
                && !pins.pending_replacements.contains_key(name) => {}
            FleetOp::Replaced {
                name,
                old_build,
                record,
                run,
                ..
            } => apply_replaced_pins(pins, name, old_build.clone(), record, run),
            FleetOp::Decommission { name, pin, run, .. } => {
                if pins.instance_pin(name) == pin.as_deref() {
                    pins.pending_replacements.remove(name);
                    if pin.is_some() {
                        pins.instances.remove(name);
                        pins.journal_instance(name, pin.clone(), "", run, "decommission");
                    }
                }
            }
            FleetOp::Ephemeral {
                name, verdict, run, ..
            } => {
                if let Some(b) = verdict.record.bound_build() {
                    let from = pins.instance_pin(name).map(str::to_string);
                    pins.instances.insert(name.clone(), b.to_string());
                    pins.journal_instance(name, from.filter(|f| f != b), b, run, "ephemeral");
                }
            }
            FleetOp::Storage { .. } | FleetOp::Observe { .. } => {}
            FleetOp::Bind {
                name,
                build,
                op,
                run,
            } => {
                let from = pins.instance_pin(name).map(str::to_string);
                let pending = pins.pending_replacements.get(name) == Some(build);
                let moved = from.as_deref() != Some(build.as_str());
                if moved || (*op == InstanceOp::Upgrade && !pending) {
                    pins.instances.insert(name.clone(), build.clone());
                    if *op == InstanceOp::Upgrade {
                        pins.pending_replacements
                            .insert(name.clone(), build.clone());
                    }
                    pins.journal_instance(name, from, build, run, op.as_str());
                }
            }
        }
    }

    /// Its change to the three fleet files. Idempotent.
    pub(crate) fn apply_records(&self, f: &mut FleetRecords) {
        match self {
            FleetOp::Launch {
                name,
                record,
                machine,
                run,
                at,
            } => {
                let kind = GenerationKind::of(record.ephemeral);
                let n = machine.generation;
                if !f
                    .instances
                    .instances
                    .get(name)
                    .is_some_and(|l| l.has(kind, n))
                {
                    f.launch
                        .instances
                        .insert(name.clone(), launched(record, run));
                }
                f.instances
                    .open_numbered(name, kind, n, opening(record, machine, run, at));
            }
            FleetOp::Replaced {
                name,
                old_generation,
                record,
                machine,
                run,
                at,
                why,
                ..
            } => {
                let kind = GenerationKind::of(record.ephemeral);
                let n = machine.generation;
                if !f
                    .instances
                    .instances
                    .get(name)
                    .is_some_and(|l| l.has(kind, n))
                {
                    f.launch
                        .instances
                        .insert(name.clone(), launched(record, run));
                    let why = why.unwrap_or(CloseWhy::Replaced);
                    f.instances
                        .close_numbered(name, *old_generation, run, at, why);
                }
                f.instances
                    .open_numbered(name, kind, n, opening(record, machine, run, at));
            }
            FleetOp::Decommission {
                name,
                generation,
                hostname,
                run,
                at,
                ..
            } => {
                if f.launch.record(name).map(|r| &r.hostname) == hostname.as_ref() {
                    f.launch.instances.remove(name);
                }
                if let Some(n) = generation {
                    f.instances
                        .close_numbered(name, *n, run, at, CloseWhy::Decommission);
                }
            }
            FleetOp::Ephemeral {
                name,
                verdict,
                run,
                at,
            } => apply_ephemeral(f, name, verdict, run, at),
            FleetOp::Storage {
                name,
                transition,
                facts,
                run,
            } => {
                f.storages.apply(name, transition, facts.clone(), run);
            }
            FleetOp::Bind { .. } => {}
            FleetOp::Observe {
                name,
                number,
                instance_id,
                provider_hostname,
                run,
                at,
            } => {
                if f.current_generation(name).map(|g| g.number) == Some(*number) {
                    let host = provider_hostname.as_deref();
                    f.instances.observe(name, Some(instance_id), host, run, at);
                }
            }
        }
    }
}

/// A replacement's pin: the pending replacement it consumes (`replace`),
/// else the pin follows the new machine's build (`follow`).
fn apply_replaced_pins(
    pins: &mut Pins,
    name: &str,
    old_build: Option<String>,
    record: &LaunchRecord,
    run: &str,
) {
    let Some(b) = record.bound_build() else {
        return;
    };
    let pending = pins.pending_replacements.get(name).map(String::as_str) == Some(b);
    let pinned = pins.instance_pin(name) == Some(b);
    let replay = pins.upgrades.iter().any(|m| {
        m.kind == "instance"
            && m.name == name
            && m.to == b
            && m.run.as_deref() == Some(run)
            && (m.op == "replace" || m.op == "follow")
    });
    if replay {
        return;
    }
    let op = if pending || pinned {
        "replace"
    } else {
        "follow"
    };
    if pending {
        pins.pending_replacements.remove(name);
    }
    pins.instances.insert(name.to_string(), b.to_string());
    pins.journal_instance(name, old_build, b, run, op);
}

fn apply_ephemeral(f: &mut FleetRecords, name: &str, v: &EphemeralVerdict, run: &str, at: &str) {
    let kind = GenerationKind::Ephemeral;
    let n = v.machine.generation;
    if !f
        .instances
        .instances
        .get(name)
        .is_some_and(|l| l.has(kind, n))
    {
        let mut record = launched(&v.record, run);
        record.ephemeral = true;
        f.instances
            .open_numbered(name, kind, n, opening(&record, &v.machine, run, at));
        f.launch.instances.insert(name.to_string(), record);
    }
    if !v.kept
        && f.instances
            .close_numbered(name, n, run, at, CloseWhy::Ephemeral)
    {
        if let Some(r) = f.launch.instances.get_mut(name) {
            r.launched = false;
        }
    }
}
