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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use csis_cache::fleet::Machine;
use csis_engine::NodeError;
use csis_rules::compile::{InstanceSpec, StorageSpec};
use csis_tofu::runner::{Gate, Mode, Outcome, Sequence, Tofu};
use tokio::sync::OnceCell;

use super::apply::{launch_record, Applied, Apply};
use super::plan::{
    decide_instance, decide_storage, storage_transition, Action, InstanceCase, StorageCase,
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
}

/// Which apply flag a root's sequence reads again before `apply`.
pub type FlagFn = dyn Fn(&str, &str, &str) -> bool + Send + Sync;

/// The roots of this run: emitted once, each sequence run once.
pub struct RootRuns {
    emission: OnceCell<Result<Vec<csis_tofu::EmittedRoot>, String>>,
    runs: Mutex<HashMap<PathBuf, Arc<OnceCell<Result<RootRun, String>>>>>,
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
}

impl RootRuns {
    pub fn new(flag: Arc<FlagFn>, log_dir: PathBuf) -> Self {
        RootRuns {
            emission: OnceCell::new(),
            runs: Mutex::new(HashMap::new()),
            flag,
            log_dir,
        }
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

    async fn run(&self, a: &Apply<'_>, ask: Ask) -> Result<RootRun, NodeError> {
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
        self.run_root(a, root, ask).await
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
            };
            let run = self.run_root(a, root, ask).await?;
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
    ) -> Result<RootRun, NodeError> {
        let dir = a.tree.root().join("generated").join(&root.dir);
        let cell = self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(dir.clone())
            .or_default()
            .clone();
        let r = cell
            .get_or_init(|| async {
                if !ask.images.is_empty() {
                    csis_tofu::write_image_vars(&dir, &ask.images).map_err(|e| e.to_string())?;
                }
                let mut tofu = Tofu::new(&root.executable);
                tofu.log = Some(self.log_dir.join(format!("tofu-{}.log", root.builder)));
                let gate = Gate {
                    allowed_destroys: ask.allowed.clone(),
                };
                let flag = self.flag.clone();
                let (setting, builder, runtime) =
                    (ask.setting, ask.builder.clone(), ask.runtime.clone());
                let apply_flag = move || flag(setting, &builder, &runtime);
                let seq = Sequence {
                    dir: &dir,
                    backend_file: &root.backend_file,
                    mode: Mode::Real,
                    replace: &ask.replace,
                    gate: &gate,
                    apply_flag: &apply_flag,
                };
                (a.log)(format!("tofu root {}: plan and apply", root.dir.display()));
                let report = tofu.sequence(&seq).await.map_err(|e| e.to_string())?;
                Ok(RootRun {
                    dir: dir.clone(),
                    outcome: report.outcome,
                })
            })
            .await;
        r.clone().map_err(NodeError::new)
    }
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
    let v = a.view()?;
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
        return Ok(out);
    }
    if spec.declared.as_ref().is_some_and(|i| i.ephemeral) {
        return Err(NodeError::new(format!(
            "{}: an ephemeral instance on a tofu builder ({}) is not run by csis yet: declare it durable, or on a docker builder",
            spec.name, spec.builder
        )));
    }
    // The whole root: every instance of this builder.
    let mut ask = Ask {
        lifecycle: "instance-image",
        builder: spec.builder.clone(),
        runtime: spec.runtime.clone(),
        setting: "apply_instances",
        replace: Vec::new(),
        allowed: Vec::new(),
        images: Vec::new(),
    };
    for s in siblings {
        let sd = decide(s);
        let m = module("instance", &s.name);
        match sd.action {
            Action::Replace | Action::Relaunch => {
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
    roots.identity(a, &spec.runtime).await?;
    let run = roots.run(a, ask).await?;
    if !applied(&run, &mut out)? {
        return Ok(out);
    }
    // What the apply made: the machine named after the instance.
    let inv =
        a.rt.inventory()
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
    let found: Vec<_> = inv
        .instances
        .iter()
        .filter(|m| m.labels.get("Name") == Some(&spec.name))
        .filter(|m| {
            m.config
                .as_deref()
                .is_some_and(|c| csis_schema::tags::is_config_of(c, &a.tree.config.id))
        })
        .collect();
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
    let machine_of = |m: &csis_runtime::InstanceFacts| m.id.clone();
    let old_id = v
        .records
        .current_generation(&spec.name)
        .and_then(|g| g.instance_id.clone());
    let new: Vec<_> = found
        .iter()
        .filter(|m| Some(machine_of(m)) != old_id || d.action == Action::Launch)
        .collect();
    let [m] = new.as_slice() else {
        return Err(NodeError::new(format!(
            "{}: after the apply, {} machine(s) named {} of this tree stand where one new one was expected ({}); nothing recorded",
            spec.name,
            new.len(),
            spec.name,
            new.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
        )));
    };
    let (generation, hostname) = v.records.next_machine(&spec.name, false);
    let mut record = launch_record(a.run, inst, &build, &hostname, "");
    record.launched = true;
    record.launched_run = Some(a.run.to_string());
    let machine = Machine {
        generation,
        instance_id: Some(m.id.clone()),
        provider_hostname: m.name.clone(),
    };
    out.hostname = Some(hostname);
    out.generation = Some(generation);
    let standing = v.records.current_generation(&spec.name).map(|g| g.number);
    let recorded = match (d.action, standing) {
        (Action::Relaunch, Some(g)) => a
            .recorder
            .record_relaunched(&spec.name, g, record, &machine, a.run),
        (Action::Replace, Some(g)) => a
            .recorder
            .record_replaced(&spec.name, g, record, &machine, a.run),
        _ => a
            .recorder
            .record_launch(&spec.name, record, &machine, a.run),
    };
    recorded.map_err(|e| NodeError::new(format!("the launch: {e}")))?;
    (a.log)(format!("{} is {} (applied by tofu)", spec.name, m.id));
    Ok(out)
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
    };
    for s in siblings {
        let sd = decide_storage(&v, &StorageCase::of_spec(a.tree, s));
        if matches!(sd.action, Action::Destroy | Action::Archive) {
            ask.allowed.push(module("storage", &s.name));
        }
    }
    let run = roots.run(a, ask).await?;
    if !applied(&run, &mut out)? {
        return Ok(out);
    }
    let mut facts = super::apply::storage_facts(&v, spec);
    // A volume the apply made (the module tags it `Name = <storage>`): its
    // id is the storage's (an EFS or a bucket is no volume: none here).
    if d.action == Action::Create {
        let inv =
            a.rt.inventory()
                .await
                .map_err(|e| NodeError::new(e.to_string()))?;
        let ours = |v: &&csis_runtime::VolumeFacts| {
            v.labels.get("Name") == Some(&spec.name)
                && v.config
                    .as_deref()
                    .is_some_and(|c| csis_schema::tags::is_config_of(c, &a.tree.config.id))
        };
        if let Some(v) = inv.volumes.iter().find(ours) {
            facts.id = Some(v.name.clone());
        }
    }
    a.recorder
        .record_storage(&spec.name, &t, facts, a.run)
        .map_err(|e| NodeError::new(format!("the storage transition: {e}")))?;
    Ok(out)
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
