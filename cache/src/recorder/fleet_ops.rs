//! The fleet operations of the [`Recorder`] (docs/fleet.md §2). Each is
//! one journal line (fsynced) before anything else, then one change of the
//! records: locally `pins.yaml` and the fleet files rewritten at once (each
//! atomic; the journal is emptied only after all are written), on a store
//! one [`crate::remote::transact_fleet`]. A kill anywhere leaves either no
//! line (nothing happened: the records as before) or the line, which the
//! next reader or recorder applies (idempotently) to converge.

use std::sync::MutexGuard;

use super::{RecState, Recorder};
use crate::fleet::{EphemeralVerdict, FleetOp, FleetRecords, InstanceOp, Machine};
use crate::instance_state::GenerationKind;
use crate::journal::{
    journal_nonempty, read_journal, replay_fleet_journal, truncate, JournalEntry,
};
use crate::launch_params::LaunchRecord;
use crate::pins::Pins;
use crate::storage_state::{RecordedFacts, Transition};
use crate::CacheError;

/// Now, RFC 3339 UTC (`opened_at`, `closed_at`).
fn now() -> String {
    crate::runid::rfc3339_now()
}

/// A fleet operation holds no secret value in clear (userdata, tags).
fn redact(op: FleetOp) -> FleetOp {
    if !csis_schema::secret::any() {
        return op;
    }
    let Ok(mut v) = serde_json::to_value(&op) else {
        return op;
    };
    csis_schema::secret::redact_json(&mut v);
    serde_json::from_value(v).unwrap_or(op)
}

impl Recorder {
    fn refused(&self, message: String) -> CacheError {
        CacheError::Parse {
            path: self.meta.dir().to_path_buf(),
            message,
        }
    }

    /// The state with the fleet files read (once), the journal merged in.
    fn fleet_loaded(&self) -> Result<MutexGuard<'_, RecState>, CacheError> {
        let mut st = self.loaded()?;
        if st.fleet.is_none() {
            let f = match self.meta.remote()? {
                Some(r) => crate::remote::read_fleet(&r.store)?,
                None => {
                    let mut f = FleetRecords::load(&self.meta)?;
                    st.fleet_dirty |= replay_fleet_journal(&self.journal, &mut f) > 0;
                    f
                }
            };
            st.fleet = Some(f);
        }
        Ok(st)
    }

    /// Locally, before the journal is emptied: the fleet files, when the
    /// recorder changed them or the journal holds fleet operations.
    pub(super) fn write_fleet(&self, st: &mut RecState) -> Result<(), CacheError> {
        if st.fleet.is_none() && journal_has_fleet(&self.journal) {
            let mut f = FleetRecords::load(&self.meta)?;
            replay_fleet_journal(&self.journal, &mut f);
            st.fleet = Some(f);
            st.fleet_dirty = true;
        }
        if st.fleet_dirty {
            if let Some(f) = &st.fleet {
                f.save(&self.meta)?;
            }
            st.fleet_dirty = false;
        }
        Ok(())
    }

    /// Journal one operation and apply it.
    fn fleet_op(&self, op: FleetOp) -> Result<(), CacheError> {
        let op = redact(op);
        let mut st = self.fleet_loaded()?;
        if let Some(f) = &st.failure {
            return Err(self.refused(format!(
                "an earlier record could not be written ({f}); nothing more is recorded"
            )));
        }
        let entry = JournalEntry::fleet(op.clone());
        self.append_entry(&mut st, &entry)?;
        if let Some(r) = self.meta.remote()? {
            let got = crate::remote::transact_fleet(&r.store, |p, f| {
                op.apply_pins(p);
                op.apply_records(f);
            });
            let (_, _, fleet) = got.inspect_err(|e| st.failure = Some(e.to_string()))?;
            truncate(&self.journal);
            op.apply_pins(&mut st.pins);
            st.fleet = Some(fleet);
            return Ok(());
        }
        op.apply_pins(&mut st.pins);
        if let Some(f) = st.fleet.as_mut() {
            op.apply_records(f);
        }
        st.fleet_dirty = true;
        st.pending += 1;
        let r = self.write_out(&mut st);
        if let Err(e) = &r {
            st.failure = Some(e.to_string());
        }
        r
    }

    /// Look at the fleet records (and the pins) as recorded so far.
    pub fn fleet<T>(&self, f: impl FnOnce(&Pins, &FleetRecords) -> T) -> Result<T, CacheError> {
        let st = self.fleet_loaded()?;
        let fleet = st.fleet.as_ref().expect("loaded above");
        Ok(f(&st.pins, fleet))
    }

    /// Refuse a machine number given before to another machine (the ledger
    /// never reuses one). `Ok(true)`: that very machine is recorded already
    /// (nothing to do).
    fn check_number(
        &self,
        name: &str,
        kind: GenerationKind,
        m: &Machine,
    ) -> Result<bool, CacheError> {
        let n = m.generation;
        let (given, next) = self.fleet(|_, f| {
            let l = f.instances.instances.get(name);
            let given = l.and_then(|l| {
                l.current
                    .iter()
                    .chain(l.closed().map(|c| &c.generation))
                    .find(|g| g.kind == kind && g.number == n)
                    .map(|g| g.instance_id.clone())
            });
            (given, f.instances.next_number(name, kind))
        })?;
        match given {
            Some(id) if id == m.instance_id => Ok(true),
            Some(id) => Err(self.refused(format!(
                "instance {name}: generation {n} was given before (to {}); nothing recorded",
                id.as_deref().unwrap_or("a machine of unknown id")
            ))),
            None if n == 0 || n < next => Err(self.refused(format!(
                "instance {name}: generation {n} was given before or is not a number (the next is {next}); nothing recorded"
            ))),
            None => Ok(false),
        }
    }

    /// A first launch (or a launch after a decommission): the launch record
    /// (`launched: true`), generation `machine.generation` opened, the pin
    /// bound to its build (`bind`; `follow` when the pin named another).
    /// Calling it again for the same machine changes nothing.
    pub fn record_launch(
        &self,
        name: &str,
        record: LaunchRecord,
        machine: &Machine,
        run: &str,
    ) -> Result<(), CacheError> {
        let kind = GenerationKind::of(record.ephemeral);
        if self.check_number(name, kind, machine)? {
            return Ok(());
        }
        let standing = self.fleet(|_, f| f.current_generation(name).map(|g| g.number))?;
        if let Some(n) = standing {
            return Err(self.refused(format!(
                "instance {name}: generation {n} stands; a new machine for it is a replacement (record_replaced); nothing recorded"
            )));
        }
        self.fleet_op(FleetOp::Launch {
            name: name.into(),
            record,
            machine: machine.clone(),
            run: run.into(),
            at: now(),
        })
    }

    /// A verified replacement, in one record change: the new launch record,
    /// generation `old_generation` closed (`replaced`) and the new one
    /// opened, the pin at the new build (`replace` when it consumes the
    /// pending replacement or the pin already named it, else `follow`).
    /// Before this returns the old machine is the recorded one; after, the
    /// new one (a kill in between leaves one or the other, never none).
    pub fn record_replaced(
        &self,
        name: &str,
        old_generation: u32,
        new: LaunchRecord,
        machine: &Machine,
        run: &str,
    ) -> Result<(), CacheError> {
        self.record_successor(name, old_generation, new, machine, run, None)
    }

    /// A relaunch: as [`Recorder::record_replaced`], the old generation
    /// (whose machine was found gone) closed `missing`.
    pub fn record_relaunched(
        &self,
        name: &str,
        old_generation: u32,
        new: LaunchRecord,
        machine: &Machine,
        run: &str,
    ) -> Result<(), CacheError> {
        let why = Some(crate::instance_state::CloseWhy::Missing);
        self.record_successor(name, old_generation, new, machine, run, why)
    }

    fn record_successor(
        &self,
        name: &str,
        old_generation: u32,
        new: LaunchRecord,
        machine: &Machine,
        run: &str,
        why: Option<crate::instance_state::CloseWhy>,
    ) -> Result<(), CacheError> {
        let kind = GenerationKind::of(new.ephemeral);
        if self.check_number(name, kind, machine)? {
            return Ok(());
        }
        let (standing, old_build) = self.fleet(|_, f| {
            (
                f.current_generation(name).map(|g| g.number),
                f.launch_record(name)
                    .and_then(|r| r.bound_build().map(str::to_string)),
            )
        })?;
        if standing != Some(old_generation) {
            return Err(self.refused(format!(
                "instance {name}: generation {old_generation} is not the one standing ({}); nothing recorded",
                standing.map_or("none".to_string(), |n| n.to_string())
            )));
        }
        self.fleet_op(FleetOp::Replaced {
            name: name.into(),
            old_generation,
            old_build,
            record: new,
            machine: machine.clone(),
            run: run.into(),
            at: now(),
            why,
        })
    }

    /// A decommission: the pin (and a pending replacement) forgotten
    /// (`decommission`), the launch record forgotten, the standing
    /// generation closed (`decommission`; the ledger keeps it). False when
    /// nothing was recorded for it.
    pub fn record_decommission(&self, name: &str, run: &str) -> Result<bool, CacheError> {
        let (pin, generation, hostname, pending) = self.fleet(|p, f| {
            (
                p.instance_pin(name).map(str::to_string),
                f.current_generation(name).map(|g| g.number),
                f.launch_record(name).map(|r| r.hostname.clone()),
                p.pending_replacements.contains_key(name),
            )
        })?;
        if pin.is_none() && generation.is_none() && hostname.is_none() && !pending {
            return Ok(false);
        }
        self.fleet_op(FleetOp::Decommission {
            name: name.into(),
            pin,
            generation,
            hostname,
            run: run.into(),
            at: now(),
        })?;
        Ok(true)
    }

    /// An ephemeral run: generation `verdict.machine.generation` (of the
    /// ephemeral counter) opened and, unless the machine was kept, closed
    /// (`ephemeral`); the launch record (`launched` only when kept); the
    /// pin at the build it proved (`ephemeral`). The same verdict again with
    /// `kept: false` closes a kept machine once it is removed.
    pub fn record_ephemeral(
        &self,
        name: &str,
        verdict: &EphemeralVerdict,
        run: &str,
    ) -> Result<(), CacheError> {
        let n = verdict.machine.generation;
        if self.check_number(name, GenerationKind::Ephemeral, &verdict.machine)? {
            // recorded already: only a kept machine removed since closes
            let standing = self.fleet(|_, f| f.current_generation(name).map(|g| g.number))?;
            if verdict.kept || standing != Some(n) {
                return Ok(());
            }
        }
        self.fleet_op(FleetOp::Ephemeral {
            name: name.into(),
            verdict: verdict.clone(),
            run: run.into(),
            at: now(),
        })
    }

    /// A storage transition a real apply made (from
    /// [`crate::storage_state::transition`]), with the facts the apply
    /// reported. Refused when its `from` is not the recorded state.
    /// Returns the storage's generation after it.
    pub fn record_storage(
        &self,
        name: &str,
        transition: &Transition,
        facts: RecordedFacts,
        run: &str,
    ) -> Result<u32, CacheError> {
        let recorded = self.fleet(|_, f| f.storage_state(name))?;
        if recorded != transition.from {
            return Err(self.refused(format!(
                "storage {name}: the transition starts from {} but the records say {}; nothing recorded",
                transition.from.map_or("new".into(), |s| s.to_string()),
                recorded.map_or("new".into(), |s| s.to_string()),
            )));
        }
        self.fleet_op(FleetOp::Storage {
            name: name.into(),
            transition: *transition,
            facts,
            run: run.into(),
        })?;
        self.fleet(|_, f| f.storages.generation(name))
    }

    /// Move an instance's pin (`bind`, `follow`; `upgrade` also sets
    /// `pending_replacements`), journalled in `pins.yaml`. False when the
    /// pin already says so.
    pub fn bind_instance(
        &self,
        name: &str,
        build: &str,
        op: InstanceOp,
        run: &str,
    ) -> Result<bool, CacheError> {
        let unchanged = self.fleet(|p, _| {
            p.instance_pin(name) == Some(build)
                && (op != InstanceOp::Upgrade
                    || p.pending_replacements.get(name).map(String::as_str) == Some(build))
        })?;
        if unchanged {
            return Ok(false);
        }
        self.fleet_op(FleetOp::Bind {
            name: name.into(),
            build: build.into(),
            op,
            run: run.into(),
        })?;
        Ok(true)
    }
}

impl Recorder {
    /// The provider's answer about an instance's standing machine (core.md
    /// §9.3): its id makes an `inferred` generation `observed`; another id
    /// bearing the name closes it `replaced-out-of-band`; silence (`None`)
    /// changes nothing. Returns whether the ledger changed.
    pub fn observe_instance(
        &self,
        name: &str,
        instance_id: Option<&str>,
        provider_hostname: Option<&str>,
        run: &str,
    ) -> Result<bool, CacheError> {
        let Some(id) = instance_id else {
            return Ok(false);
        };
        let at = now();
        let number = self.fleet(|_, f| {
            let n = f.current_generation(name)?.number;
            let mut trial = f.instances.clone();
            trial
                .observe(name, Some(id), provider_hostname, run, &at)
                .then_some(n)
        })?;
        let Some(number) = number else {
            return Ok(false);
        };
        self.fleet_op(FleetOp::Observe {
            name: name.into(),
            number,
            instance_id: id.into(),
            provider_hostname: provider_hostname.map(str::to_string),
            run: run.into(),
            at,
        })?;
        Ok(true)
    }
}

/// Does the journal hold a fleet operation?
fn journal_has_fleet(journal: &std::path::Path) -> bool {
    journal_nonempty(journal) && read_journal(journal).0.iter().any(|e| e.fleet.is_some())
}
