//! `csis empty --runtime RT`: does the runtime hold nothing beyond released
//! builds, and does a strict state query of it agree? Exit 0 empty,
//! 1 leftovers or drift, 2 the runtime cannot answer.

use std::process::ExitCode;

use anyhow::Result;
use csis_cache::drift::{self, RuntimeView};
use csis_cache::{MetaState, Revocations};

use csis_ops::state::{declared_runtimes, image_parents, load_tree, tokio_rt, view_of};
use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let Some(decl) = tree.runtime(&args.runtime) else {
        eprintln!(
            "empty: runtime {} is not declared in this tree",
            args.runtime
        );
        return Ok(ExitCode::from(2));
    };
    let name = decl.name.clone();
    let rt = match csis_ops::wiring::runtime(&tree, &name) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("empty: {name} cannot answer: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let tokio = tokio_rt()?;
    let inventory = match tokio.block_on(rt.inventory()) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("empty: {name} cannot list its inventory ({e})");
            return Ok(ExitCode::from(2));
        }
    };
    let view: RuntimeView = tokio.block_on(view_of(&name, Ok(&rt)));
    let images = match &view.images {
        Ok(i) => i.clone(),
        Err(e) => {
            eprintln!("empty: {name} cannot list its images ({e})");
            return Ok(ExitCode::from(2));
        }
    };
    let meta = MetaState::of_tree(tree.root());
    let releases = meta.releases()?;
    let mut leftovers = Vec::new();
    for img in &images {
        if !releases.is_current(&img.build_id) {
            leftovers.push(format!(
                "image {} ({})",
                img.build_id,
                img.tags
                    .get(drift::TAG_SERIES)
                    .map(String::as_str)
                    .unwrap_or("?")
            ));
        }
    }
    for i in &inventory.instances {
        leftovers.push(format!(
            "instance {} ({:?})",
            i.name.as_deref().unwrap_or(&i.id),
            i.power
        ));
    }
    for v in &inventory.volumes {
        leftovers.push(format!("volume {v}"));
    }
    // A strict query of this runtime must agree too.
    let (lineage, pins) = csis_ops::state::records(tree.root())?;
    let revs = Revocations::load(&meta)?;
    let parents = image_parents(&tree);
    let report = drift::judge(
        drift::Records {
            lineage: &lineage,
            pins: &pins,
            revocations: &revs,
            image_parents: &parents,
        },
        std::slice::from_ref(&view),
        &declared_runtimes(&tree),
        None,
    );
    let drift_here: Vec<_> = report
        .drift_on(&name)
        .into_iter()
        .filter(|d| d.hard || matches!(d.drift.as_str(), "missing" | "foreign" | "changed"))
        .collect();
    for l in &leftovers {
        println!("leftover: {l}");
    }
    for d in &drift_here {
        println!("drift: {} {}: {}: {}", d.kind, d.name, d.drift, d.detail);
    }
    if leftovers.is_empty() && drift_here.is_empty() {
        println!("empty: {name} holds nothing beyond released builds");
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}
