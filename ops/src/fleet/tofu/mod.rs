//! What the storage and instance nodes of a tofu-typed builder do in a
//! real run (issue 22; core.md §3.6, §3.8): the builder's root, as the
//! build emitted it (`crate::tofu_roots::emit_for_build`), goes through its
//! gated sequence once per run ([`RootRuns`]: the first node of a root runs
//! it, the others read its outcome), with
//!
//! - the image of each instance of the root written into its tfvars first
//!   (the decision of its node over the records as they are now: this
//!   run's bakes included, which the instance nodes of a root all wait for,
//!   `order_tofu_nodes`);
//! - `-replace=module.instance_<label>.aws_instance.this` for a replacement
//!   (a pending `upgrade instance`, a follow head that moved, a machine
//!   gone), and as the only destroys the gate allows: those replacements,
//!   a decommissioned instance's and a storage retired's module;
//! - the apply flag (`apply_instances`, `apply_storage`) read again from the
//!   tree right before `apply`;
//! - before an instance root, the identity roots (groups, users) whose
//!   builders `apply_identity` allows, in the same way (the instance root
//!   reads their gids and enrollment tokens).
//!
//! After an apply, each node records what the apply produced, and only
//! that (a recorder never claims what no apply made): an instance's machine
//! is found in the runtime's inventory by its `Name` tag (the module's
//! `name`) and this tree's `csis_config`, and recorded launched (its
//! generation opened with the provider's id, the pin bound or moved); a
//! decommissioned one is forgotten once its machine is gone; a storage's
//! transition is recorded. A refusal of the gate fails the node, naming
//! every address; a flag turned off since the plan applies nothing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use csis_cache::fleet::Machine;
use csis_cache::launch_params::LaunchRecord;
use csis_engine::NodeError;
use csis_rules::compile::{InstanceSpec, StorageSpec};
use csis_rules::fleet::{Instance, OnFailure};
use csis_tofu::runner::{Gate, Mode, Outcome, Sequence, Tofu};
use tokio::sync::OnceCell;

mod archives;
mod ephemerals;
mod validated;
pub use archives::ArchiveOutcome;
use archives::Archives;
use ephemerals::{prove, Proofs};

use super::apply::{failed, launch_record, record_verdict, rt_err, verify, Applied, Apply};
use super::plan::{
    decide_instance, decide_storage, storage_transition, Action, FleetView, InstanceCase,
    StorageCase,
};

/// A storage or instance builder that works through a tofu root.
pub fn is_tofu(builder_type: &str) -> bool {
    builder_type == "tofu" || builder_type.starts_with("tf-")
}

/// The module address of an instance or a storage in its root.
fn module(kind: &str, name: &str) -> String {
    format!("module.{kind}_{}", csis_tofu::hv::label(name))
}

/// What one root's sequence ended in, for each node of the root.
#[derive(Debug, Clone)]
pub struct RootRun {
    pub dir: PathBuf,
    pub outcome: Outcome,
    /// A storage root's archives, taken before its plan and deleted after
    /// its apply.
    pub archives: ArchiveOutcome,
}

/// One root's sequence, run once per run, read by each of its nodes.
type RootCell = Arc<OnceCell<Result<RootRun, String>>>;

/// Which apply flag a root's sequence reads again before `apply`.
pub type FlagFn = dyn Fn(&str, &str, &str) -> bool + Send + Sync;

/// The roots of this run: emitted once, each sequence run once.
pub struct RootRuns {
    emission: OnceCell<Result<Vec<csis_tofu::EmittedRoot>, String>>,
    runs: Mutex<HashMap<PathBuf, RootCell>>,
    /// The ephemerals each instance root proves this run.
    proofs: Mutex<HashMap<PathBuf, Proofs>>,
    /// The instances whose nodes this run runs: a root's teardown waits
    /// for the verdicts of its due ephemerals among them only (one left
    /// out of the selection never arrives).
    running: HashSet<String>,
    /// Instances whose node ended without a proof of its own (nothing to
    /// do when it ran): a root's proofs registered after never wait for
    /// them.
    settled: Mutex<HashSet<String>>,
    /// `(setting, builder, runtime)` -> is it allowed now (the tree read again).
    flag: Arc<FlagFn>,
    /// Where each call and its output go (`.csis/logs/<run>/tofu-<builder>.log`).
    log_dir: PathBuf,
}

/// One root's sequence: what to plan and what the gate allows.
struct Ask {
    lifecycle: &'static str,
    builder: String,
    runtime: String,
    setting: &'static str,
    replace: Vec<String>,
    allowed: Vec<String>,
    images: Vec<(String, String)>,
    /// `ephemeral_present` of an instance root with ephemerals.
    ephemeral: Option<bool>,
    /// A storage root's archives.
    archives: Archives,
}

impl RootRuns {
    pub fn new(flag: Arc<FlagFn>, log_dir: PathBuf, running: HashSet<String>) -> Self {
        RootRuns {
            emission: OnceCell::new(),
            runs: Mutex::new(HashMap::new()),
            proofs: Mutex::new(HashMap::new()),
            running,
            settled: Mutex::new(HashSet::new()),
            flag,
            log_dir,
        }
    }

    /// Will this run's node of instance `name` bring a verdict (its node
    /// runs, and has not ended without one)?
    fn awaits(&self, name: &str) -> bool {
        self.running.contains(name) && !lock(&self.settled).contains(name)
    }

    async fn roots(&self, a: &Apply<'_>) -> Result<&[csis_tofu::EmittedRoot], NodeError> {
        let r = self
            .emission
            .get_or_init(|| async {
                crate::tofu_roots::emit_for_build(a.tree, a.meta, a.run)
                    .map(|e| e.map(|e| e.roots).unwrap_or_default())
                    .map_err(|e| format!("{e:#}"))
            })
            .await;
        r.as_deref().map_err(|e| NodeError::new(e.clone()))
    }

    async fn run(&self, a: &Apply<'_>, ask: Ask, proofs: Proofs) -> Result<RootRun, NodeError> {
        let roots = self.roots(a).await?;
        let root = roots
            .iter()
            .find(|r| r.builder == ask.builder && r.dir.starts_with(ask.lifecycle))
            .ok_or_else(|| {
                NodeError::new(format!(
                    "no {} root of builder {} was emitted",
                    ask.lifecycle, ask.builder
                ))
            })?
            .clone();
        self.run_root(a, root, ask, proofs).await
    }

    /// The identity roots (groups, users) before an instance root reads
    /// their outputs (core.md §3.1: storage, identity, instance), each where
    /// `apply_identity` allows its builder on `runtime` (a root it does not
    /// allow is left as it stands: planned by nobody, applied by nobody).
    /// Once per run, as every root.
    async fn identity(&self, a: &Apply<'_>, runtime: &str) -> Result<(), NodeError> {
        let roots: Vec<csis_tofu::EmittedRoot> = self
            .roots(a)
            .await?
            .iter()
            .filter(|r| r.dir.starts_with("identity"))
            .cloned()
            .collect();
        for root in roots {
            if !(self.flag)("apply_identity", &root.builder, runtime) {
                continue;
            }
            let ask = Ask {
                lifecycle: "identity",
                builder: root.builder.clone(),
                runtime: runtime.to_string(),
                setting: "apply_identity",
                replace: Vec::new(),
                allowed: Vec::new(),
                images: Vec::new(),
                ephemeral: None,
                archives: Archives::default(),
            };
            let run = self.run_root(a, root, ask, Proofs::default()).await?;
            if let Outcome::Refused { reasons } = &run.outcome {
                return Err(NodeError::new(format!(
                    "the plan of {} was refused, nothing applied: {}",
                    run.dir.display(),
                    reasons.join("; ")
                )));
            }
        }
        Ok(())
    }

    async fn run_root(
        &self,
        a: &Apply<'_>,
        root: csis_tofu::EmittedRoot,
        ask: Ask,
        mut proofs: Proofs,
    ) -> Result<RootRun, NodeError> {
        let dir = root_dir(a, &root);
        let cell = lock(&self.runs).entry(dir.clone()).or_default().clone();
        let r = cell
            .get_or_init(|| async {
                if !ask.images.is_empty() || ask.ephemeral.is_some() {
                    csis_tofu::write_image_vars(&dir, &ask.images, ask.ephemeral)
                        .map_err(|e| e.to_string())?;
                }
                let proving = !proofs.due.is_empty();
                if proving {
                    proofs.root = Some(root.clone());
                    proofs.runtime = ask.runtime.clone();
                    lock(&self.proofs).insert(dir.clone(), proofs);
                }
                let taken = ask.archives.take(a).await?;
                (a.log)(format!("tofu root {}: plan and apply", root.dir.display()));
                let mut run = self.sequence(&root, &dir, &ask).await?;
                run.archives.taken = taken;
                if run.outcome == Outcome::Applied {
                    run.archives.kept = ask.archives.release(a).await;
                }
                if proving && run.outcome == Outcome::Applied {
                    self.record_bystanders(a, &dir).await?;
                }
                Ok(run)
            })
            .await;
        r.clone().map_err(NodeError::new)
    }

    /// The gated sequence of `root` in `dir` (real run): plan with the
    /// ask's `replace`, destroys only where its `allowed` says, its apply
    /// flag read again before `apply`.
    async fn sequence(
        &self,
        root: &csis_tofu::EmittedRoot,
        dir: &Path,
        ask: &Ask,
    ) -> Result<RootRun, String> {
        let mut tofu = Tofu::new(&root.executable);
        tofu.log = Some(self.log_dir.join(format!("tofu-{}.log", root.builder)));
        let gate = Gate {
            allowed_destroys: ask.allowed.clone(),
        };
        let flag = self.flag.clone();
        let (setting, builder, runtime) = (ask.setting, ask.builder.clone(), ask.runtime.clone());
        let apply_flag = move || flag(setting, &builder, &runtime);
        let seq = Sequence {
            dir,
            backend_file: &root.backend_file,
            mode: Mode::Real,
            replace: &ask.replace,
            gate: &gate,
            apply_flag: &apply_flag,
        };
        let report = tofu.sequence(&seq).await.map_err(|e| e.to_string())?;
        Ok(RootRun {
            dir: dir.to_path_buf(),
            outcome: report.outcome,
            archives: ArchiveOutcome::default(),
        })
    }
}

/// A dry run's check of each root it wrote, as the original's dry run
/// makes it (core.md §3.7): `init -input=false -backend=false`, then
/// `validate`, in the root's directory under `generated`, with the root's
/// executable; no state is read, nothing planned or applied. Each root's
/// directory (relative to `generated/`) with its verdict (an executable
/// that is not there is skipped: `validate` names it at its line).
pub async fn validate_dry(
    roots: &[csis_tofu::EmittedRoot],
    generated: &Path,
    log_dir: &Path,
    cache_dir: &Path,
    modules: &Path,
) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    let mut validated = validated::Validated::open(cache_dir);
    let modules = validated::modules_digest(modules);
    for root in roots {
        // not there: `validate` says so at the builder's line; the dry run
        // emits all the same
        let Some(exe) = csis_runtime::probe::resolve(&root.executable) else {
            continue;
        };
        let dir = generated.join(&root.dir);
        let name = root.dir.display().to_string();
        // as it was when its check last passed: not checked again
        let key = validated::key(&exe, &dir, modules.as_ref());
        if key.as_deref().is_some_and(|k| validated.passed(&name, k)) {
            out.push((name, Ok(())));
            continue;
        }
        let mut tofu = Tofu::new(&root.executable);
        tofu.log = Some(log_dir.join(format!("tofu-{}.log", root.builder)));
        let seq = Sequence {
            dir: &dir,
            backend_file: &root.backend_file,
            mode: Mode::Dry,
            replace: &[],
            gate: &Gate::default(),
            apply_flag: &|| false,
        };
        let verdict = tofu
            .sequence(&seq)
            .await
            .map(drop)
            .map_err(|e| e.to_string());
        if let (Ok(()), Some(k)) = (&verdict, key) {
            validated.remember(&name, k);
        }
        out.push((name, verdict));
    }
    validated.save();
    out
}

/// A mutex's guard, poisoned or not (a panicked node leaves its data as
/// it was: each change here is one insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the build wrote `root`.
fn root_dir(a: &Apply<'_>, root: &csis_tofu::EmittedRoot) -> PathBuf {
    a.tree.root().join("generated").join(&root.dir)
}

/// The outcome as this node sees it: applied (go on recording), or the
/// node's answer (refused: an error; gated now: nothing changed).
fn applied(run: &RootRun, out: &mut Applied) -> Result<bool, NodeError> {
    match &run.outcome {
        Outcome::Applied => Ok(true),
        Outcome::Refused { reasons } => Err(NodeError::new(format!(
            "the plan of {} was refused, nothing applied: {}",
            run.dir.display(),
            reasons.join("; ")
        ))),
        Outcome::Gated | Outcome::Validated => {
            out.reason = format!(
                "{} (the apply flag is off now: nothing applied)",
                out.reason
            );
            Ok(false)
        }
    }
}

/// A tofu-typed instance node.
pub async fn instance(
    a: &Apply<'_>,
    spec: &InstanceSpec,
    siblings: &[&InstanceSpec],
    roots: &RootRuns,
) -> Result<Applied, NodeError> {
    let mut v = a.view()?;
    // a launched durable machine of the root removed behind csis: relaunched
    // (`-replace`), as the state query says it is missing
    let durable: Vec<&str> = (siblings.iter())
        .filter(|s| s.declared.as_ref().is_some_and(|i| !i.ephemeral))
        .map(|s| s.name.as_str())
        .collect();
    v.missing = super::apply::gone_machines(a, &v, &durable).await?;
    let v = v;
    let decide = |s: &InstanceSpec| {
        let head = a.recorder.head_build(&s.image, &s.runtime);
        let mut case = InstanceCase::of_spec(s);
        case.head = head.as_deref();
        decide_instance(&v, &case)
    };
    let d = decide(spec);
    let mut out = Applied {
        action: d.action.as_str().into(),
        name: spec.name.clone(),
        build: d.build.clone(),
        reason: d.reason.clone(),
        ..Applied::default()
    };
    if !d.action.changes() {
        if spec.declared.as_ref().is_some_and(|i| i.ephemeral) {
            roots.settle(a, &spec.builder, &spec.name, &mut out).await?;
        }
        return Ok(out);
    }
    let awaits = |name: &str| roots.awaits(name);
    let (ask, proofs) = instance_root_ask(&v, spec, siblings, &decide, &awaits);
    let present = ask.ephemeral == Some(true);
    roots.identity(a, &spec.runtime).await?;
    let run = roots.run(a, ask, proofs).await?;
    if !applied(&run, &mut out)? {
        return Ok(out);
    }
    if d.action == Action::Remove {
        return ephemerals::removed(a, &v, &spec.name, present, out).await;
    }
    // What the apply made: the machine named after the instance.
    let found = named_machines(a, &spec.name).await?;
    if d.action == Action::Decommission {
        if let Some(m) = found.first() {
            return Err(NodeError::new(format!(
                "{}: the apply was to destroy it, but {} still stands; nothing recorded",
                spec.name, m.id
            )));
        }
        a.recorder
            .record_decommission(&spec.name, a.run)
            .map_err(|e| NodeError::new(format!("the decommission: {e}")))?;
        return Ok(out);
    }
    let inst = spec
        .declared
        .as_ref()
        .expect("declared: not a decommission");
    let build = d.build.clone().unwrap_or_default();
    if inst.ephemeral {
        let keep_failed = inst.on_failure == OnFailure::Keep;
        let (verdict, failure) = match prove(a, &v, spec, inst, &build, &found, &mut out).await {
            Ok((verdict, failure)) => (Some(verdict), failure),
            Err(e) => (None, Some(e)),
        };
        let keep = failure.is_some() && keep_failed;
        let teardown = roots
            .finished(a, &run.dir, &spec.name, verdict, keep, &mut out)
            .await;
        if let Some(e) = failure {
            return Err(e);
        }
        teardown?;
        return Ok(out);
    }
    let old_id = v
        .records
        .current_generation(&spec.name)
        .and_then(|g| g.instance_id.clone());
    let new: Vec<_> = found
        .iter()
        .filter(|m| Some(&m.id) != old_id.as_ref() || d.action == Action::Launch)
        .collect();
    let m = one_new(&spec.name, &new)?;
    let (record, machine) = applied_machine(a, &v, inst, &build, m, &mut out);
    let generation = machine.generation;
    let standing = v.records.current_generation(&spec.name).map(|g| g.number);
    let recorded = match (d.action, standing) {
        (Action::Relaunch, Some(g)) => {
            a.recorder
                .record_relaunched(&spec.name, g, record.clone(), &machine, a.run)
        }
        (Action::Replace, Some(g)) => {
            a.recorder
                .record_replaced(&spec.name, g, record.clone(), &machine, a.run)
        }
        _ => a
            .recorder
            .record_launch(&spec.name, record.clone(), &machine, a.run),
    };
    recorded.map_err(|e| NodeError::new(format!("the launch: {e}")))?;
    (a.log)(format!("{} is {} (applied by tofu)", spec.name, m.id));
    // The apply made it and it is recorded (a recorder records what an
    // apply made); now whether it came up as its user data says.
    let checks = verify(a, &spec.name, &build, inst.mounts.len())
        .await
        .map_err(rt_err)?;
    let ok = failed(&checks).is_none();
    record_verdict(a, inst, &build, &record, generation, ok, &checks).await?;
    if let Some(f) = failed(&checks) {
        return Err(NodeError::new(format!(
            "{} ({}) did not verify ({f}); the apply made it and it stays recorded: mend it, or `csis upgrade instance {}` to replace it",
            spec.name, m.id, spec.name
        )));
    }
    Ok(out)
}

/// The sequence of an instance root (every instance of `spec`'s builder):
/// the image of each, the replacements and destroys the gate allows, and
/// the root's ephemerals this run proves.
fn instance_root_ask(
    v: &FleetView,
    spec: &InstanceSpec,
    siblings: &[&InstanceSpec],
    decide: &dyn Fn(&InstanceSpec) -> super::plan::Decided,
    awaits: &dyn Fn(&str) -> bool,
) -> (Ask, Proofs) {
    let mut ask = Ask {
        lifecycle: "instance-image",
        builder: spec.builder.clone(),
        runtime: spec.runtime.clone(),
        setting: "apply_instances",
        replace: Vec::new(),
        allowed: Vec::new(),
        images: Vec::new(),
        ephemeral: None,
        archives: Archives::default(),
    };
    let mut proofs = Proofs::default();
    let mut standing = false;
    let mut ephemerals = Vec::new();
    for s in siblings {
        let sd = decide(s);
        let m = module("instance", &s.name);
        let ephemeral = s.declared.as_ref().is_some_and(|i| i.ephemeral);
        if ephemeral {
            ephemerals.push(s.name.as_str());
            proofs.modules.push(m.clone());
            // (one that proved and stands goes: not a reason to stay up)
            standing |=
                v.records.current_generation(&s.name).is_some() && sd.action != Action::Remove;
            if sd.action == Action::Launch && awaits(&s.name) {
                proofs.due.insert(s.name.clone());
            }
        }
        match sd.action {
            Action::Replace | Action::Relaunch if !ephemeral => {
                ask.replace.push(format!("{m}.aws_instance.this"));
                ask.allowed.push(m);
            }
            Action::Decommission => ask.allowed.push(m),
            _ => {}
        }
        if s.declared.is_some() {
            if let Some(b) = sd
                .build
                .clone()
                .or_else(|| v.launched(&s.name).map(|r| r.build.clone()))
            {
                ask.images.push((s.name.clone(), b));
            }
        }
    }
    if !proofs.modules.is_empty() {
        // one variable for all of the root's ephemerals: present while one
        // is to be proved or still stands
        let present = !proofs.due.is_empty() || standing;
        ask.ephemeral = Some(present);
        if !present {
            // none due, none recorded standing: an ephemeral machine the
            // plan finds is a leftover (a run stopped mid-proof), and goes
            ask.allowed.extend(proofs.modules.iter().cloned());
        }
        proofs.images = ask.images.clone();
        // the others come up with the due ones, booting their image's build
        proofs.bystanders = (ask.images.iter())
            .filter(|(n, _)| ephemerals.contains(&n.as_str()) && !proofs.due.contains(n))
            .cloned()
            .collect();
    }
    (ask, proofs)
}

/// The machines of this tree (its `csis_config`), one inventory call.
async fn machines_of_tree(a: &Apply<'_>) -> Result<Vec<csis_runtime::InstanceFacts>, NodeError> {
    let inv = a.rt.inventory().await.map_err(rt_err)?;
    Ok(inv
        .instances
        .into_iter()
        .filter(|m| {
            m.config
                .as_deref()
                .is_some_and(|c| csis_schema::tags::is_config_of(c, &a.tree.config.id))
        })
        .collect())
}

/// The machines of this tree named `name` (the module's `Name` tag).
async fn named_machines(
    a: &Apply<'_>,
    name: &str,
) -> Result<Vec<csis_runtime::InstanceFacts>, NodeError> {
    let mut all = machines_of_tree(a).await?;
    all.retain(|m| m.labels.get("Name").map(String::as_str) == Some(name));
    Ok(all)
}

/// The launch record and the machine of `m`, the one new machine an apply
/// made for `inst` (its next generation of the ephemeral or durable kind),
/// recorded launched this run; the node's output names them.
fn applied_machine(
    a: &Apply<'_>,
    v: &FleetView,
    inst: &Instance,
    build: &str,
    m: &csis_runtime::InstanceFacts,
    out: &mut Applied,
) -> (LaunchRecord, Machine) {
    let (generation, hostname) = v.records.next_machine(&inst.name, inst.ephemeral);
    let mut record = launch_record(a.run, inst, build, &hostname, "");
    record.launched = true;
    record.launched_run = Some(a.run.to_string());
    out.hostname = Some(hostname);
    out.generation = Some(generation);
    let machine = Machine {
        generation,
        instance_id: Some(m.id.clone()),
        provider_hostname: m.name.clone(),
    };
    (record, machine)
}

/// The one new machine an apply made for `name`, or why not.
fn one_new<'m>(
    name: &str,
    new: &[&'m csis_runtime::InstanceFacts],
) -> Result<&'m csis_runtime::InstanceFacts, NodeError> {
    match new {
        [m] => Ok(m),
        _ => Err(NodeError::new(format!(
            "{name}: after the apply, {} machine(s) named {name} of this tree stand where one new one was expected ({}); nothing recorded",
            new.len(),
            new.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// A tofu-typed storage node.
pub async fn storage(
    a: &Apply<'_>,
    spec: &StorageSpec,
    siblings: &[&StorageSpec],
    roots: &RootRuns,
) -> Result<Applied, NodeError> {
    let v = a.view()?;
    let case = StorageCase::of_spec(a.tree, spec);
    let t =
        storage_transition(&v, &case).map_err(|e| NodeError::new(format!("{}: {e}", spec.name)))?;
    let d = decide_storage(&v, &case);
    let mut out = Applied {
        action: d.action.as_str().into(),
        name: spec.name.clone(),
        reason: d.reason.clone(),
        ..Applied::default()
    };
    if !t.changes() {
        return Ok(out);
    }
    let mut ask = Ask {
        lifecycle: "storage",
        builder: spec.builder.clone(),
        runtime: spec.runtime.clone(),
        setting: "apply_storage",
        replace: Vec::new(),
        allowed: Vec::new(),
        images: Vec::new(),
        ephemeral: None,
        archives: Archives::default(),
    };
    // each storage of the root by its transition now: the destroys the
    // gate allows, the archives taken before and deleted after
    for s in siblings {
        let sd = decide_storage(&v, &StorageCase::of_spec(a.tree, s));
        if matches!(sd.action, Action::Destroy | Action::Archive) {
            ask.allowed.push(module("storage", &s.name));
        }
        ask.archives.note(a, &v, s, sd.action);
    }
    let run = roots.run(a, ask, Proofs::default()).await?;
    if !applied(&run, &mut out)? {
        return Ok(out);
    }
    let mut facts = super::apply::storage_facts(&v, spec);
    match d.action {
        // its data in the archive taken before the plan, its volume gone
        Action::Archive => {
            facts.archive = run.archives.taken.get(&spec.name).cloned().map(Into::into);
            facts.id = None;
        }
        // a volume the apply made (the module tags it `Name = <storage>`):
        // its id is the storage's (an EFS or a bucket is no volume: none
        // here); a restored one's archive is gone unless it could not go
        Action::Create | Action::Restore => {
            facts.id = made_volume(a, spec).await?.or(facts.id);
            if !run.archives.kept.contains(&spec.name) {
                facts.archive = None;
            }
        }
        Action::Destroy if !run.archives.kept.contains(&spec.name) => facts.archive = None,
        _ => {}
    }
    a.recorder
        .record_storage(&spec.name, &t, facts, a.run)
        .map_err(|e| NodeError::new(format!("the storage transition: {e}")))?;
    Ok(out)
}

/// The volume of `spec` as an apply made it: named by its `Name` tag (the
/// module's `name`, the storage as declared), of this tree.
async fn made_volume(a: &Apply<'_>, spec: &StorageSpec) -> Result<Option<String>, NodeError> {
    let inv =
        a.rt.inventory()
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
    let name = spec.declared.as_ref().map_or(&spec.name, |d| &d.display);
    let ours = |v: &&csis_runtime::VolumeFacts| {
        v.labels.get("Name") == Some(name)
            && v.config
                .as_deref()
                .is_some_and(|c| csis_schema::tags::is_config_of(c, &a.tree.config.id))
    };
    Ok(inv.volumes.iter().find(ours).map(|v| v.name.clone()))
}

/// The flag function of a build: the tree at `dir` loaded again (its
/// overlays too), the gate of `setting` for `builder` on `runtime`.
pub fn flag_reader(dir: PathBuf, opts: csis_rules::LoadOptions) -> Arc<FlagFn> {
    Arc::new(move |setting: &str, builder: &str, runtime: &str| {
        let Ok(tree) = crate::load_tree(&dir, &opts) else {
            return false;
        };
        let keys = &tree.config.config;
        let value = match setting {
            "apply_storage" => &keys.apply_storage,
            "apply_identity" => &keys.apply_identity,
            _ => &keys.apply_instances,
        };
        csis_rules::compile::gate(setting, value, builder, runtime).is_none()
    })
}
