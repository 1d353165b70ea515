//! `csis inventory`: per runtime of the tree, what is on it that belongs
//! to this tree, and only that (a daemon or an account is shared with
//! other trees and with whatever else runs there): images by series and
//! build, recorded or not; machines (containers, instances) by role;
//! volumes; kept failed bakes. Built on the runtime's `query_images` and
//! `inventory` hooks; a runtime that cannot answer says why.
//!
//! What is this tree's: an image or a machine carrying its config id
//! (`csis_config`, in either form), or, carrying none, a machine running
//! one of this tree's images; a volume or kept bake by its config id.

use anyhow::Result;
use csis_runtime::{ImageFacts, InstanceFacts, Inventory, KeptBake, MachineRole};
use csis_schema::tags;
use serde::Serialize;

use crate::Context;

/// The answer of `csis inventory`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryReport {
    /// The tree's config id.
    pub config: String,
    pub runtimes: Vec<RuntimeInventory>,
}

impl InventoryReport {
    /// 0 every runtime answered, 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.runtimes.iter().any(|r| r.cannot_answer.is_some()) {
            crate::exit::CANNOT_ANSWER
        } else {
            crate::exit::SUCCESS
        }
    }
}

/// What one runtime holds of this tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RuntimeInventory {
    pub runtime: String,
    /// Why this runtime gave no (complete) answer.
    pub cannot_answer: Option<String>,
    /// Per series, its builds on the runtime (oldest first).
    pub series: Vec<SeriesImages>,
    /// Containers or instances, bake and test machines among them (`role`).
    pub machines: Vec<Machine>,
    pub volumes: Vec<String>,
    /// Failed bakes' machines `csis build --keep-failed` kept.
    pub kept_failed: Vec<KeptBake>,
}

/// One series' builds on a runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesImages {
    pub series: String,
    pub builds: Vec<InventoryBuild>,
}

/// One build on a runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryBuild {
    pub build_id: String,
    pub name: Option<String>,
    pub created: Option<String>,
    /// `lineage.yaml` records it.
    pub recorded: bool,
    /// It is its series' head on the runtime.
    pub head: bool,
}

/// A machine on a runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub name: String,
    pub role: MachineRole,
    pub power: String,
    /// The build it runs, when the runtime says.
    pub image: Option<String>,
}

/// `csis inventory [--runtime RT]`.
pub fn inventory(cx: &Context, only: Option<&str>) -> Result<InventoryReport> {
    let tree = cx.tree();
    let only = match only {
        Some(o) => Some(
            cx.runtime_name(o)
                .ok_or_else(|| anyhow::anyhow!("runtime {o} is not declared in this tree"))?,
        ),
        None => None,
    };
    let (lineage, _) = cx.records()?;
    let mut report = InventoryReport {
        config: tree.config.id.clone(),
        runtimes: Vec::new(),
    };
    for name in crate::state::declared_runtimes(tree) {
        if only.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        let mut r = RuntimeInventory {
            runtime: name.clone(),
            ..Default::default()
        };
        match cx.runtime(&name) {
            Err(e) => r.cannot_answer = Some(format!("{name} cannot answer: {e:#}")),
            Ok(rt) => {
                let images = cx.block_on(rt.query_images());
                let inv = cx.block_on(rt.inventory());
                fill(&mut r, images, inv, &tree.config.id, &lineage);
            }
        }
        report.runtimes.push(r);
    }
    Ok(report)
}

/// Sort what one runtime answered into this tree's inventory.
fn fill(
    r: &mut RuntimeInventory,
    images: csis_runtime::Result<Vec<ImageFacts>>,
    inv: csis_runtime::Result<Inventory>,
    id: &str,
    lineage: &csis_cache::Lineage,
) {
    let ours = |c: Option<&String>| c.is_some_and(|c| tags::is_config_of(c, id));
    let images: Vec<ImageFacts> = match images {
        Ok(v) => v
            .into_iter()
            .filter(|i| ours(i.tags.get(tags::CONFIG)))
            .collect(),
        Err(e) => {
            r.cannot_answer = Some(format!("{} cannot list its images ({e})", r.runtime));
            Vec::new()
        }
    };
    for img in &images {
        let series = img.tags.get(tags::SERIES).cloned().unwrap_or_default();
        let head = lineage
            .head(&series, &r.runtime)
            .is_some_and(|h| h.build_id == img.build_id);
        let build = InventoryBuild {
            build_id: img.build_id.clone(),
            name: img.name.clone(),
            created: img.created.clone(),
            recorded: lineage.find(&img.build_id).is_some(),
            head,
        };
        match r.series.iter_mut().find(|s| s.series == series) {
            Some(s) => s.builds.push(build),
            None => r.series.push(SeriesImages {
                series,
                builds: vec![build],
            }),
        }
    }
    r.series.sort_by(|a, b| a.series.cmp(&b.series));
    let inv = match inv {
        Ok(i) => i,
        Err(e) => {
            r.cannot_answer
                .get_or_insert(format!("{} cannot list its inventory ({e})", r.runtime));
            return;
        }
    };
    let runs_ours = |i: &InstanceFacts| {
        i.image
            .as_ref()
            .is_some_and(|b| images.iter().any(|img| &img.build_id == b))
    };
    r.machines = inv
        .instances
        .iter()
        .filter(|i| match &i.config {
            Some(c) => ours(Some(c)),
            None => runs_ours(i),
        })
        .map(|i| Machine {
            name: i.name.clone().unwrap_or_else(|| i.id.clone()),
            role: i.role,
            power: serde_json::to_value(i.power)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown".into()),
            image: i.image.clone(),
        })
        .collect();
    r.volumes = inv
        .volumes
        .iter()
        .filter(|v| ours(v.config.as_ref()))
        .map(|v| v.to_string())
        .collect();
    r.kept_failed = inv
        .kept_failed
        .into_iter()
        .filter(|k| ours(k.config.as_ref()))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use csis_runtime::{PowerState, VolumeFacts};
    use std::collections::BTreeMap;

    fn image(id: &str, series: &str, config: &str) -> ImageFacts {
        ImageFacts {
            build_id: id.into(),
            name: Some(format!("{series}-x")),
            created: None,
            tags: BTreeMap::from([
                (tags::SERIES.to_string(), series.to_string()),
                (tags::CONFIG.to_string(), config.to_string()),
            ]),
            unnamed: false,
            series_tags: Vec::new(),
        }
    }

    fn machine(name: &str, image: &str, config: Option<&str>, role: MachineRole) -> InstanceFacts {
        InstanceFacts {
            id: name.into(),
            name: Some(name.into()),
            image: Some(image.into()),
            power: PowerState::Running,
            config: config.map(str::to_string),
            role,
            labels: Default::default(),
        }
    }

    #[test]
    fn only_this_trees_images_machines_volumes_and_kept_bakes() {
        let mut lineage = csis_cache::Lineage::default();
        lineage.add_build(csis_cache::BuildRecord::new("w1", "web", "rt"));
        let images = vec![
            image("w1", "web", "tree-a"),
            image("w2", "web", "Tree-A"),
            image("b9", "web", "tree-b"),
        ];
        let inv = Inventory {
            instances: vec![
                machine("app", "w1", None, MachineRole::Instance),
                machine("theirs", "b9", None, MachineRole::Instance),
                machine("bake", "w1", Some("tree-a"), MachineRole::Bake),
                machine("other-bake", "b9", Some("tree-b"), MachineRole::Bake),
            ],
            volumes: vec![
                VolumeFacts::new(
                    "v-a",
                    BTreeMap::from([(tags::CONFIG.into(), "tree-a".into())]),
                ),
                VolumeFacts::new(
                    "v-b",
                    BTreeMap::from([(tags::CONFIG.into(), "tree-b".into())]),
                ),
                VolumeFacts::new("v-none", BTreeMap::new()),
            ],
            kept_failed: vec![
                KeptBake {
                    name: "csis-failed-a".into(),
                    config: Some("tree-a".into()),
                    ..Default::default()
                },
                KeptBake {
                    name: "csis-failed-b".into(),
                    config: Some("tree-b".into()),
                    ..Default::default()
                },
            ],
        };
        let mut r = RuntimeInventory {
            runtime: "rt".into(),
            ..Default::default()
        };
        fill(&mut r, Ok(images), Ok(inv), "tree-a", &lineage);
        assert_eq!(r.cannot_answer, None);
        assert_eq!(r.series.len(), 1);
        let b = &r.series[0].builds;
        assert_eq!(
            b.iter()
                .map(|b| (b.build_id.as_str(), b.recorded, b.head))
                .collect::<Vec<_>>(),
            vec![("w1", true, true), ("w2", false, false)]
        );
        let m: Vec<(&str, MachineRole)> = r
            .machines
            .iter()
            .map(|m| (m.name.as_str(), m.role))
            .collect();
        assert_eq!(
            m,
            vec![("app", MachineRole::Instance), ("bake", MachineRole::Bake)]
        );
        assert_eq!(r.volumes, vec!["v-a"]);
        assert_eq!(r.kept_failed.len(), 1);
        assert_eq!(r.kept_failed[0].name, "csis-failed-a");
    }

    #[test]
    fn a_runtime_that_cannot_list_says_so() {
        let mut r = RuntimeInventory {
            runtime: "rt".into(),
            ..Default::default()
        };
        let lineage = csis_cache::Lineage::default();
        fill(
            &mut r,
            Err(csis_runtime::RuntimeError::Unavailable("down".into())),
            Ok(Inventory::default()),
            "a",
            &lineage,
        );
        assert_eq!(
            r.cannot_answer.as_deref(),
            Some("rt cannot list its images (down)")
        );
    }
}
