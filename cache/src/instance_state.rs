//! `meta-state/instance-state.yaml` (core.md §3.11, §9.3): the generation
//! ledger. One generation per physical machine: `instances {name:
//! {generation {durable, ephemeral}, current {...}, history [...]}}`.
//! Durable and ephemeral machines are counted apart; the canonical hostname
//! of a machine is `<name>-NNN` with NNN its number of its kind. Nothing is
//! ever deleted: a closed generation moves to `history` with its `why`.
//! Every change is idempotent (a replayed journal entry changes nothing the
//! second time): a generation is opened by its number, once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const INSTANCE_STATE_FILE: &str = "instance-state.yaml";

/// `<name>-NNN`: the canonical hostname of generation `number` (3 digits,
/// more when the number needs them).
pub fn canonical_hostname(name: &str, number: u32) -> String {
    format!("{name}-{number:03}")
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceState {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub instances: BTreeMap<String, InstanceLedger>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One instance's ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceLedger {
    /// The last number given, per kind.
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub generation: Counters,
    /// The machine standing now, if any (`current: null` when none).
    #[serde(default)]
    pub current: Option<Generation>,
    /// Closed generations (and the original's other events, kept as written).
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub history: Vec<HistoryItem>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `generation {durable, ephemeral}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    #[serde(default)]
    pub durable: u32,
    #[serde(default)]
    pub ephemeral: u32,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A machine's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GenerationKind {
    Durable,
    Ephemeral,
}

impl GenerationKind {
    pub fn of(ephemeral: bool) -> Self {
        if ephemeral {
            GenerationKind::Ephemeral
        } else {
            GenerationKind::Durable
        }
    }
}

/// How a generation is known: `inferred` from a launch, `observed` through
/// the provider's instance id, `adopted` (a machine older than the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    Observed,
    Inferred,
    Adopted,
}

/// Why a generation was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CloseWhy {
    Replaced,
    Decommission,
    Ephemeral,
    ReplacedOutOfBand,
    /// Its machine was found gone (removed behind csis) and a new one
    /// launched in its place (a relaunch).
    Missing,
}

/// One generation (`current`, and the opening half of a closed one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub number: u32,
    pub kind: GenerationKind,
    pub how: How,
    pub opened_run: String,
    /// RFC 3339, UTC.
    #[serde(default)]
    pub opened_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_hostname: Option<String>,
    /// The launch parameters it was launched with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_params: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A closed generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Closed {
    #[serde(flatten)]
    pub generation: Generation,
    pub closed_run: String,
    #[serde(default)]
    pub closed_at: String,
    pub why: CloseWhy,
}

/// An item of `history`: a closed generation, or another event (the
/// original's `resized` events), kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HistoryItem {
    Closed(Box<Closed>),
    Other(Value),
}

/// What opens a generation, besides its number and kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opening {
    pub how: How,
    pub run: String,
    /// RFC 3339, UTC.
    pub at: String,
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub provider_hostname: Option<String>,
    #[serde(default)]
    pub launch_params: Option<Value>,
}

impl Counters {
    pub fn of(&self, kind: GenerationKind) -> u32 {
        match kind {
            GenerationKind::Durable => self.durable,
            GenerationKind::Ephemeral => self.ephemeral,
        }
    }
    fn raise(&mut self, kind: GenerationKind, n: u32) {
        let c = match kind {
            GenerationKind::Durable => &mut self.durable,
            GenerationKind::Ephemeral => &mut self.ephemeral,
        };
        *c = (*c).max(n);
    }
}

impl InstanceLedger {
    /// Has generation `number` of `kind` ever been opened (standing or closed)?
    pub fn has(&self, kind: GenerationKind, number: u32) -> bool {
        let is = |g: &Generation| g.kind == kind && g.number == number;
        self.current.as_ref().is_some_and(is) || self.closed().any(|c| is(&c.generation))
    }

    /// The closed generations, oldest first.
    pub fn closed(&self) -> impl Iterator<Item = &Closed> {
        self.history.iter().filter_map(|h| match h {
            HistoryItem::Closed(c) => Some(&**c),
            HistoryItem::Other(_) => None,
        })
    }
}

impl InstanceState {
    /// The machine of an instance standing now, as recorded.
    pub fn current(&self, name: &str) -> Option<&Generation> {
        self.instances.get(name)?.current.as_ref()
    }

    /// The number the next machine of `kind` gets.
    pub fn next_number(&self, name: &str, kind: GenerationKind) -> u32 {
        self.instances
            .get(name)
            .map_or(0, |l| l.generation.of(kind))
            .saturating_add(1)
    }

    /// Open the next generation of `kind`; returns its number. A standing
    /// one is closed first (`replaced`).
    pub fn open(&mut self, name: &str, kind: GenerationKind, opening: Opening) -> u32 {
        let n = self.next_number(name, kind);
        self.open_numbered(name, kind, n, opening);
        n
    }

    /// Open generation `number` of `kind`, unless it was ever opened (then
    /// nothing changes: a replay). A standing machine of another number is
    /// closed `replaced` first. Returns whether anything changed.
    pub fn open_numbered(
        &mut self,
        name: &str,
        kind: GenerationKind,
        number: u32,
        opening: Opening,
    ) -> bool {
        let l = self.instances.entry(name.to_string()).or_default();
        if l.has(kind, number) {
            return false;
        }
        if l.current.is_some() {
            close_ledger(l, &opening.run, &opening.at, CloseWhy::Replaced);
        }
        l.generation.raise(kind, number);
        l.current = Some(Generation {
            number,
            kind,
            how: opening.how,
            opened_run: opening.run,
            opened_at: opening.at,
            instance_id: opening.instance_id,
            provider_hostname: opening.provider_hostname,
            launch_params: opening.launch_params,
            extra: BTreeMap::new(),
        });
        true
    }

    /// Close the standing generation (moved to `history`). Returns the
    /// number closed, `None` when nothing stands.
    pub fn close(&mut self, name: &str, run: &str, at: &str, why: CloseWhy) -> Option<u32> {
        close_ledger(self.instances.get_mut(name)?, run, at, why)
    }

    /// Close generation `number` if it is the one standing (idempotent).
    pub fn close_numbered(
        &mut self,
        name: &str,
        number: u32,
        run: &str,
        at: &str,
        why: CloseWhy,
    ) -> bool {
        let Some(l) = self.instances.get_mut(name) else {
            return false;
        };
        if l.current.as_ref().map(|g| g.number) != Some(number) {
            return false;
        }
        close_ledger(l, run, at, why).is_some()
    }

    /// The provider's answer for the standing machine: its id (and
    /// hostname) make it `observed`; another id bearing the name closes it
    /// `replaced-out-of-band`. `None` (silence) changes nothing.
    pub fn observe(
        &mut self,
        name: &str,
        instance_id: Option<&str>,
        provider_hostname: Option<&str>,
        run: &str,
        at: &str,
    ) -> bool {
        let Some(id) = instance_id else {
            return false;
        };
        let Some(l) = self.instances.get_mut(name) else {
            return false;
        };
        let Some(g) = l.current.as_mut() else {
            return false;
        };
        match g.instance_id.as_deref() {
            Some(known) if known != id => {
                close_ledger(l, run, at, CloseWhy::ReplacedOutOfBand);
                true
            }
            Some(_) if g.how == How::Observed => false,
            _ => {
                g.instance_id = Some(id.to_string());
                g.provider_hostname = provider_hostname.map(str::to_string);
                g.how = How::Observed;
                true
            }
        }
    }
}

fn close_ledger(l: &mut InstanceLedger, run: &str, at: &str, why: CloseWhy) -> Option<u32> {
    let g = l.current.take()?;
    let n = g.number;
    l.history.push(HistoryItem::Closed(Box::new(Closed {
        generation: g,
        closed_run: run.to_string(),
        closed_at: at.to_string(),
        why,
    })));
    Some(n)
}
