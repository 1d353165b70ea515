//! `csis instances`: each instance the tree declares or the records hold,
//! with its runtime, the build it runs, its generation and hostname, its
//! state, and whether it is behind its image's head. Read-only; asks no
//! runtime.

use anyhow::Result;
use csis_cache::{Lineage, MetaState};
use csis_rules::fleet::ImagePolicy;
use csis_rules::Tree;
use serde::Serialize;

use super::plan::FleetView;

/// One instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceLine {
    pub name: String,
    pub runtime: String,
    pub image: String,
    /// `pinned` or `follow` (None: declared no more).
    pub policy: Option<String>,
    pub ephemeral: bool,
    /// The build it runs (launched), else the one it is pinned to.
    pub build: Option<String>,
    pub generation: Option<u32>,
    pub hostname: Option<String>,
    /// `launched`, `not launched`, `ephemeral`, `undeclared` (recorded,
    /// declared no more: the next build under `apply_instances`
    /// decommissions it).
    pub state: String,
    /// A replacement `csis upgrade instance` left for the next build.
    pub pending: Option<String>,
    /// Its image's head, when it is newer than what it runs.
    pub behind: Option<String>,
}

/// The answer of `csis instances`.
#[derive(Debug, Clone, Serialize)]
pub struct InstancesReport {
    pub instances: Vec<InstanceLine>,
}

/// Every declared instance, then every recorded one declared no more.
pub fn instances(tree: &Tree, meta: &MetaState) -> Result<InstancesReport> {
    let view = FleetView::load(meta)?;
    let lineage = meta.lineage()?;
    let mut out: Vec<InstanceLine> = tree
        .instances
        .iter()
        .map(|i| {
            let mut l = line(&view, &lineage, &i.name, &i.runtime, &i.image);
            l.policy = Some(
                match i.image_policy {
                    ImagePolicy::Pinned => "pinned",
                    ImagePolicy::Follow => "follow",
                }
                .into(),
            );
            l.ephemeral = i.ephemeral;
            if i.ephemeral {
                l.state = "ephemeral".into();
            }
            l
        })
        .collect();
    for (name, rec) in &view.records.launch.instances {
        if tree.instance(name).is_none() {
            let mut l = line(&view, &lineage, name, &rec.runtime, &rec.image);
            l.state = "undeclared".into();
            out.push(l);
        }
    }
    Ok(InstancesReport { instances: out })
}

fn line(v: &FleetView, lineage: &Lineage, name: &str, runtime: &str, image: &str) -> InstanceLine {
    let launched = v.launched(name);
    let generation = v.records.current_generation(name).map(|g| g.number);
    let build = launched
        .and_then(|r| r.bound_build())
        .or_else(|| v.pins.instance_pin(name))
        .map(str::to_string);
    let head = lineage.head(image, runtime).map(|b| b.build_id.clone());
    InstanceLine {
        name: name.to_string(),
        runtime: runtime.to_string(),
        image: image.to_string(),
        policy: None,
        ephemeral: false,
        build: build.clone(),
        generation: launched.and(generation),
        hostname: launched.map(|r| r.hostname.clone()),
        state: if launched.is_some() {
            "launched"
        } else {
            "not launched"
        }
        .into(),
        pending: v.pins.pending_replacements.get(name).cloned(),
        behind: head.filter(|h| launched.is_some() && Some(h) != build.as_ref()),
    }
}
