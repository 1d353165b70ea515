//! `csis upgrade image|instance NAME [--to BUILD] [--runtime RT]
//! [--dry-run]` (core.md §4.4, §7.2): move exactly one pin, never a
//! cascade. An image's pin moves to its parent series' head on the runtime
//! (or to BUILD: a recorded, unrevoked build of the parent series there);
//! the plan then shows the image due ("parent pin moved") and one `csis
//! build` bakes it and its follow descendants. An instance's pin moves to
//! its image series' head (or BUILD), and the move waits in
//! `pending_replacements` for the instance lifecycle. Every move is
//! journalled in `pins.yaml`'s `upgrades` (`op: upgrade`).
//!
//! Also here: [`behind`], the pinned images whose parent has a newer head
//! (`csis plan` says so, with the command to run).

use anyhow::Result;
use csis_cache::build_ref::{resolve_build, BuildScope};
use csis_cache::{head_unrevoked, Lineage, PinMove, Revocations};
use csis_rules::compile::{NodeKind, NodeSpec, ParentSpec};
use csis_rules::tree::Parent;
use csis_schema::model::ParentPolicy;
use serde::Serialize;

use crate::Context;

/// What is upgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpgradeKind {
    Image,
    Instance,
}

impl UpgradeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UpgradeKind::Image => "image",
            UpgradeKind::Instance => "instance",
        }
    }
}

/// What `csis upgrade` was asked.
#[derive(Debug, Clone)]
pub struct UpgradeArgs {
    pub kind: UpgradeKind,
    pub name: String,
    /// A build as a person names it (default: the series head).
    pub to: Option<String>,
    pub runtime: Option<String>,
    pub dry_run: bool,
}

/// The answer of `csis upgrade`: one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum UpgradeReport {
    /// The pin moved (or, with `--dry-run`, would move).
    Moved {
        kind: UpgradeKind,
        name: String,
        runtime: String,
        from: Option<String>,
        to: String,
        dry_run: bool,
        /// What to run next.
        next: String,
    },
    /// The pin names that build already: nothing changed.
    AlreadyPinned {
        kind: UpgradeKind,
        name: String,
        runtime: String,
        build_id: String,
    },
    /// Nothing changed: why, in one line.
    Refused { reason: String },
}

impl UpgradeReport {
    /// 0 moved; 1 refused or already pinned (as the original).
    pub fn exit_code(&self) -> u8 {
        match self {
            UpgradeReport::Moved { .. } => crate::exit::SUCCESS,
            _ => crate::exit::FAILURE,
        }
    }
}

fn refused(reason: impl Into<String>) -> Result<UpgradeReport> {
    Ok(UpgradeReport::Refused {
        reason: reason.into(),
    })
}

/// The build `to` names in `series` on `runtime` (recorded, unrevoked), or
/// the series' unrevoked head; `Err` is the one line of refusal.
fn target(
    lineage: &Lineage,
    revs: &Revocations,
    series: &str,
    runtime: &str,
    to: Option<&str>,
    whose: &str,
) -> std::result::Result<String, String> {
    let Some(to) = to else {
        return head_unrevoked(lineage, revs, series, runtime)
            .map(|h| h.build_id.clone())
            .ok_or_else(|| format!("{whose} {series} has no (unrevoked) build on {runtime}"));
    };
    let scope = BuildScope {
        series: None,
        runtime: None,
    };
    let rec = resolve_build(lineage, to, scope).map_err(|e| e.to_string())?;
    if rec.series != series {
        return Err(format!(
            "build {} is of series {}, not {series} ({whose})",
            rec.build_id, rec.series
        ));
    }
    if !rec.on_runtime(runtime) {
        return Err(format!(
            "build {} is on runtime {}, not {runtime}",
            rec.build_id,
            rec.runtime.as_deref().unwrap_or("?")
        ));
    }
    if let Some(r) = revs.get(&rec.build_id) {
        return Err(format!(
            "build {} is revoked{}",
            rec.build_id,
            r.reason
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        ));
    }
    Ok(rec.build_id.clone())
}

/// `csis upgrade`. The context is opened for writing unless a dry run.
pub fn upgrade(cx: &Context, args: &UpgradeArgs) -> Result<UpgradeReport> {
    match args.kind {
        UpgradeKind::Image => upgrade_image(cx, args),
        UpgradeKind::Instance => upgrade_instance(cx, args),
    }
}

fn upgrade_image(cx: &Context, args: &UpgradeArgs) -> Result<UpgradeReport> {
    let tree = cx.tree();
    let Some(image) = tree.image(&args.name) else {
        return refused(format!("{} is not an image of this tree", args.name));
    };
    let parent = match &image.parent {
        Parent::Os(o) | Parent::Image(o) => o.clone(),
    };
    if image.model.parent_policy == ParentPolicy::Follow {
        return refused(format!(
            "image {} has parent_policy: follow ({}): its pin moves with every bake of {parent}",
            image.name,
            image.origin.display()
        ));
    }
    let rts: Vec<&csis_rules::tree::ImageRuntime> = image.active_runtimes().collect();
    let entry = match &args.runtime {
        Some(rt) => {
            let Some(name) = cx.runtime_name(rt) else {
                return refused(format!("runtime {rt} is not declared in this tree"));
            };
            match rts
                .iter()
                .find(|r| r.runtime.as_deref() == Some(name.as_str()))
            {
                Some(e) => *e,
                None => return refused(format!("image {} does not bake on {name}", image.name)),
            }
        }
        None => match rts.as_slice() {
            [one] => *one,
            [] => return refused(format!("image {} bakes on no runtime", image.name)),
            _ => {
                let names: Vec<&str> = rts.iter().filter_map(|r| r.runtime.as_deref()).collect();
                return refused(format!(
                    "image {} bakes on several runtimes ({}); name one with --runtime",
                    image.name,
                    names.join(", ")
                ));
            }
        },
    };
    let runtime = entry.runtime.clone().unwrap_or_default();
    if let Some(fixed) = &entry.entry.image_identifier {
        return refused(format!(
            "image {} on {runtime} bakes from the fixed image_identifier {fixed}: it has no pin",
            image.name
        ));
    }
    let (lineage, mut pins) = cx.records()?;
    let revs = Revocations::load(&cx.meta)?;
    let to = match target(
        &lineage,
        &revs,
        &parent,
        &runtime,
        args.to.as_deref(),
        &format!("the parent of {}", image.name),
    ) {
        Ok(b) => b,
        Err(reason) => return refused(reason),
    };
    let from = pins.image_pin(&image.name, &runtime).map(str::to_string);
    if from.as_deref() == Some(to.as_str()) {
        return Ok(UpgradeReport::AlreadyPinned {
            kind: UpgradeKind::Image,
            name: image.name.clone(),
            runtime,
            build_id: to,
        });
    }
    if !args.dry_run {
        let run = csis_cache::run_id_now();
        pins.move_image_pin(&image.name, &runtime, &to, Some(&run), "upgrade");
        cx.meta.save_pins(&pins)?;
    }
    Ok(UpgradeReport::Moved {
        kind: UpgradeKind::Image,
        next: format!("csis build //images/{}@{runtime}", image.name),
        name: image.name.clone(),
        runtime,
        from,
        to,
        dry_run: args.dry_run,
    })
}

fn upgrade_instance(cx: &Context, args: &UpgradeArgs) -> Result<UpgradeReport> {
    let (lineage, mut pins) = cx.records()?;
    let Some(pinned) = pins.instances.get(&args.name).cloned() else {
        return refused(format!(
            "instance {} has no pin in meta-state/pins.yaml",
            args.name
        ));
    };
    let Some(rec) = lineage.find(&pinned) else {
        return refused(format!(
            "instance {} is pinned to {pinned}, which lineage does not record",
            args.name
        ));
    };
    let series = rec.series.clone();
    let runtime = match (&args.runtime, rec.runtime.clone()) {
        (Some(rt), Some(r)) if cx.runtime_name(rt).as_deref() != Some(r.as_str()) => {
            return refused(format!("instance {} stands on {r}, not {rt}", args.name))
        }
        (_, Some(r)) => r,
        (Some(rt), None) => rt.clone(),
        (None, None) => {
            return refused(format!(
                "the build {pinned} instance {} is pinned to names no runtime; give --runtime",
                args.name
            ))
        }
    };
    let revs = Revocations::load(&cx.meta)?;
    let to = match target(
        &lineage,
        &revs,
        &series,
        &runtime,
        args.to.as_deref(),
        &format!("the image of instance {}", args.name),
    ) {
        Ok(b) => b,
        Err(reason) => return refused(reason),
    };
    if to == pinned {
        return Ok(UpgradeReport::AlreadyPinned {
            kind: UpgradeKind::Instance,
            name: args.name.clone(),
            runtime,
            build_id: to,
        });
    }
    if !args.dry_run {
        let run = csis_cache::run_id_now();
        pins.instances.insert(args.name.clone(), to.clone());
        pins.pending_replacements
            .insert(args.name.clone(), to.clone());
        pins.upgrades.push(PinMove {
            kind: "instance".into(),
            name: args.name.clone(),
            from: Some(pinned.clone()),
            to: to.clone(),
            run: Some(run),
            op: "upgrade".into(),
            runtime: Some(runtime.clone()),
            extra: Default::default(),
        });
        cx.meta.save_pins(&pins)?;
    }
    Ok(UpgradeReport::Moved {
        kind: UpgradeKind::Instance,
        next: format!(
            "replace instance {} with {to} (pending in meta-state/pins.yaml)",
            args.name
        ),
        name: args.name.clone(),
        runtime,
        from: Some(pinned),
        to,
        dry_run: args.dry_run,
    })
}

/// A pinned image whose parent has a newer (unrevoked) head than its pin:
/// current, but behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Behind {
    pub image: String,
    pub runtime: String,
    pub parent: String,
    pub pinned: String,
    pub head: String,
    /// The command that moves the pin.
    pub command: String,
}

/// The planned bakes that are current under `parent_policy: pinned` while
/// their parent series has a newer head on the runtime.
pub fn behind(session: &crate::session::Session, plan: &csis_engine::Plan) -> Vec<Behind> {
    let c = &session.compiled;
    let mut out = Vec::new();
    // One pass over the records, not one per pinned bake (quadratic: 10% of
    // a 5,000-image plan's instructions).
    let heads = session.lineage.head_index();
    for n in plan
        .nodes
        .iter()
        .filter(|n| !n.due && n.kind == NodeKind::Bake)
    {
        let NodeSpec::Bake(spec) = c.spec(n.id) else {
            continue;
        };
        let ParentSpec::Image {
            series,
            policy: ParentPolicy::Pinned,
            pinned_build: Some(pin),
            ..
        } = &spec.parent
        else {
            continue;
        };
        // head_unrevoked, from the index
        let Some(head) = heads
            .head(series, &spec.runtime)
            .filter(|h| !session.revs.is_revoked(&h.build_id))
        else {
            continue;
        };
        if &head.build_id != pin {
            out.push(Behind {
                image: spec.series.clone(),
                runtime: spec.runtime.clone(),
                parent: series.clone(),
                pinned: pin.clone(),
                head: head.build_id.clone(),
                command: format!(
                    "csis upgrade image {} --runtime {}",
                    spec.series, spec.runtime
                ),
            });
        }
    }
    out
}
