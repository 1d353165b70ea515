//! The fleet in the graph (docs/fleet.md §4): per storage a `storage` node,
//! per instance an `instance` node, and for what the records hold that the
//! tree declares no more, a node that retires it (a storage destroyed, an
//! instance decommissioned).
//!
//! Labels `//storages/NAME@RT:storage` and `//instances/NAME@RT:instance`.
//! A storage node precedes the instances that mount it; an instance node
//! follows its image's build on its runtime (the retag, test and release
//! nodes); a storage destroyed for want of a declaration follows the
//! decommission of the instances recorded mounting it. Every edge is an
//! ordering edge: a fleet node's fingerprint is its own inputs (the launch
//! parameters with the build it will boot; a storage's declared state and
//! facts), and what is due is the fleet planner's decision over the
//! records (`csis_ops::fleet`), not the engine's.

use std::collections::BTreeMap;
use std::sync::Arc;

use csis_engine::{Dep, Label, Node, NodeId, RunPolicy};
use csis_schema::model::BoolOrList;
use serde_json::{json, Value};

use super::assemble::Assembler;
use super::vocabulary::{
    CompileError, InstanceSpec, NodeKind, NodeSpec, RecordedFleet, StorageSpec,
};
use crate::fleet::{ImagePolicy, Instance, Storage};
use crate::tree::Tree;

/// The attribute of a fleet node that may change nothing: why
/// (`apply_instances is false`).
pub const GATED_ATTR: &str = "gated";
/// The attribute of an instance node for an instance the records hold and
/// the tree declares no more.
pub const DECOMMISSION_ATTR: &str = "decommission";

/// The label of an instance's node.
pub fn instance_label(name: &str, runtime: &str) -> Result<Label, CompileError> {
    Label::new(
        &format!("instances/{name}"),
        Some(runtime),
        Some(NodeKind::Instance.as_str()),
    )
    .map_err(|e| CompileError::Label(e.to_string()))
}

/// The label of a storage's node.
pub fn storage_label(name: &str, runtime: &str) -> Result<Label, CompileError> {
    Label::new(
        &format!("storages/{name}"),
        Some(runtime),
        Some(NodeKind::Storage.as_str()),
    )
    .map_err(|e| CompileError::Label(e.to_string()))
}

/// Why `setting` (`apply_instances`, `apply_storage`) keeps a node from
/// changing anything for a builder on a runtime; None: it applies.
pub fn gate(setting: &str, value: &BoolOrList, builder: &str, runtime: &str) -> Option<String> {
    if value.allows(&[builder, runtime]) {
        return None;
    }
    Some(match value {
        BoolOrList::Bool(_) => format!("{setting} is false"),
        BoolOrList::List(l) => format!(
            "{setting} ({}) names neither {builder} nor {runtime}",
            l.join(", ")
        ),
    })
}

/// The fingerprint inputs of a storage node: its declared state and facts.
pub fn storage_inputs(s: &Storage) -> Value {
    csis_schema::secret::redacted(json!({
        "storage": s.name,
        "builder": s.builder,
        "builder_type": s.builder_type,
        "type": s.storage_type,
        "runtime": s.runtime,
        "state": s.requested,
        "groups": s.groups,
        "share_mode": s.share_mode,
        "public_read": s.public_read,
        "attach": s.attach,
        "posix": s.posix,
        "size_gb": s.size_gb,
        "bucket_name": s.bucket_name,
        "availability_zone": s.availability_zone,
        "lifecycle": s.lifecycle,
        "config": s.config,
    }))
}

/// The launch parameters of an instance that are fixed at launch (§9.2):
/// what a change of, without a replacement, is refused at validate.
pub fn launch_params(i: &Instance) -> Value {
    let mounts: Vec<Value> = i
        .mounts
        .iter()
        .map(|m| {
            json!({
                "storage": m.storage,
                "type": m.storage_type,
                "builder": m.builder,
                "mount_point": m.mount_point,
                "group": m.group,
                "share_mode": m.share_mode,
                "public_read": m.public_read,
            })
        })
        .collect();
    csis_schema::secret::redacted(json!({
        "image": i.image,
        "runtime": i.runtime,
        "group": i.group,
        "machine_type": i.machine_type,
        "mounts": mounts,
        "userdata": i.userdata,
        "ephemeral": i.ephemeral,
    }))
}

/// The build an instance will boot, as the records answer before the run:
/// a pending replacement, else its pin (pinned), else its image's head.
pub fn will_boot(i: &Instance, records: &RecordedFleet) -> Option<String> {
    if let Some(b) = records.pending.get(&i.name) {
        return Some(b.clone());
    }
    let head = || {
        records
            .heads
            .get(&(i.image.clone(), i.runtime.clone()))
            .cloned()
    };
    match i.image_policy {
        ImagePolicy::Pinned => records.pins.get(&i.name).cloned().or_else(head),
        ImagePolicy::Follow => head(),
    }
}

/// A requested storage state as its YAML word (`active`, `archived`, `destroyed`).
fn state_str(s: &crate::fleet::StorageState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn policy_str(p: ImagePolicy) -> &'static str {
    match p {
        ImagePolicy::Pinned => "pinned",
        ImagePolicy::Follow => "follow",
    }
}

impl Assembler {
    /// Add the fleet after every series: storages, then instances, then
    /// the nodes that retire what the records hold and the tree declares
    /// no more.
    pub fn add_fleet(&mut self, tree: &Tree, records: &RecordedFleet) -> Result<(), CompileError> {
        let keys = &tree.config.config;
        let mut storage_nodes: BTreeMap<String, NodeId> = BTreeMap::new();
        for s in &tree.storages {
            let gated = gate("apply_storage", &keys.apply_storage, &s.builder, &s.runtime);
            let attached = tree
                .instances
                .iter()
                .any(|i| i.mounts.iter().any(|m| m.storage == s.name));
            let id =
                self.storage_node(&s.name, &s.runtime, &s.builder, Some((s, attached)), gated)?;
            storage_nodes.insert(s.name.clone(), id);
        }
        for i in &tree.instances {
            let id = self.instance_node(tree, i, records)?;
            for m in &i.mounts {
                if let Some(&s) = storage_nodes.get(&m.storage) {
                    self.g.add_dep(id, s, Dep::Order)?;
                }
            }
        }
        let mut retired: BTreeMap<String, NodeId> = BTreeMap::new();
        for (name, r) in &records.instances {
            if tree.instance(name).is_some() {
                continue;
            }
            let id = self.decommission_node(tree, name, r.runtime.as_str(), &r.image)?;
            retired.insert(name.clone(), id);
        }
        for (name, r) in &records.storages {
            if tree.storage(name).is_some() || r.state == "destroyed" {
                continue;
            }
            let runtime = tree
                .storage_builders
                .iter()
                .find(|b| b.name == r.builder)
                .and_then(|b| b.runtime.clone());
            let Some(runtime) = runtime else {
                self.warnings.push(format!(
                    "storage {name}: recorded, declared no more, and its builder {} is not declared on a runtime csis runs; left as recorded",
                    r.builder
                ));
                continue;
            };
            let gated = gate("apply_storage", &keys.apply_storage, &r.builder, &runtime);
            let id = self.storage_node(name, &runtime, &r.builder, None, gated)?;
            for (inst, ir) in &records.instances {
                if ir.mounts.contains(name) {
                    if let Some(&d) = retired.get(inst) {
                        self.g.add_dep(id, d, Dep::Order)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn storage_node(
        &mut self,
        name: &str,
        runtime: &str,
        builder: &str,
        declared: Option<(&Storage, bool)>,
        gated: Option<String>,
    ) -> Result<NodeId, CompileError> {
        let label = storage_label(name, runtime)?;
        let inputs = match declared {
            Some((s, _)) => storage_inputs(s),
            None => {
                json!({"storage": name, "builder": builder, "state": "destroyed", "declared": false})
            }
        };
        let mut node = Node::new(label.clone(), NodeKind::Storage.as_str())
            .with_policy(RunPolicy::Decide)
            .with_attr("storage", name)
            .with_attr("runtime", runtime)
            .with_attr("builder", builder)
            .with_inputs(inputs);
        if let Some(why) = &gated {
            node = node.with_attr(GATED_ATTR, why);
        }
        if let Some((s, attached)) = declared {
            node = node.with_attr("requested", &state_str(&s.requested));
            if attached {
                node = node.with_attr("attached", "true");
            }
            if s.supports_archive {
                node = node.with_attr("supports_archive", "true");
            }
        }
        let spec = StorageSpec {
            label,
            name: name.to_string(),
            runtime: runtime.to_string(),
            builder: builder.to_string(),
            declared: declared.map(|(s, _)| s.clone()),
            gated,
        };
        let id = self.node(Arc::new(node), NodeSpec::Storage(Arc::new(spec)))?;
        self.fleet.push(id);
        Ok(id)
    }

    fn instance_node(
        &mut self,
        tree: &Tree,
        i: &Instance,
        records: &RecordedFleet,
    ) -> Result<NodeId, CompileError> {
        let keys = &tree.config.config;
        let label = instance_label(&i.name, &i.runtime)?;
        let mut inputs = launch_params(i);
        inputs["instance"] = json!(i.name);
        inputs["builder"] = json!(i.builder);
        inputs["image_policy"] = json!(policy_str(i.image_policy));
        inputs["build"] = json!(will_boot(i, records));
        let gated = gate(
            "apply_instances",
            &keys.apply_instances,
            &i.builder,
            &i.runtime,
        );
        let key = (i.image.clone(), i.runtime.clone());
        let after = self.after.get(&key).cloned().unwrap_or_default();
        let mut node = Node::new(label.clone(), NodeKind::Instance.as_str())
            .with_policy(RunPolicy::Decide)
            .with_attr("instance", &i.name)
            .with_attr("image", &i.image)
            .with_attr("runtime", &i.runtime)
            .with_attr("builder", &i.builder)
            .with_attr("policy", policy_str(i.image_policy))
            .with_inputs(inputs);
        if i.ephemeral {
            node = node.with_attr("ephemeral", "true");
        }
        if keys.require_released_builds {
            node = node.with_attr("require_released", "true");
        }
        if let Some(m) = &after.release_model {
            node = node.with_attr("release_model", m);
        }
        if let Some(why) = &gated {
            node = node.with_attr(GATED_ATTR, why);
        }
        let bake = self.bakes.get(&key).copied();
        if bake.is_none() {
            self.warnings.push(format!(
                "instance {} on {}: its image {} does not bake on {}; it boots a recorded build only",
                i.name, i.runtime, i.image, i.runtime
            ));
        }
        let spec = InstanceSpec {
            label,
            name: i.name.clone(),
            runtime: i.runtime.clone(),
            builder: i.builder.clone(),
            image: i.image.clone(),
            declared: Some(i.clone()),
            bake,
            post_bake: after.tests.clone(),
            gated,
            require_released: keys.require_released_builds,
            release_model: after.release_model.clone(),
        };
        let id = self.node(Arc::new(node), NodeSpec::Instance(Arc::new(spec)))?;
        if let Some(last) = after.last {
            self.g.add_dep(id, last, Dep::Order)?;
        }
        self.fleet.push(id);
        Ok(id)
    }

    fn decommission_node(
        &mut self,
        tree: &Tree,
        name: &str,
        runtime: &str,
        image: &str,
    ) -> Result<NodeId, CompileError> {
        let keys = &tree.config.config;
        let label = instance_label(name, runtime)?;
        // The builder is not recorded: the gate reads the runtime (and
        // the runtime's only instance builder, when there is one).
        let builder = tree
            .instance_builders
            .iter()
            .find(|b| b.runtime == runtime)
            .map(|b| b.name.clone())
            .unwrap_or_default();
        let gated = gate("apply_instances", &keys.apply_instances, &builder, runtime);
        let mut node = Node::new(label.clone(), NodeKind::Instance.as_str())
            .with_policy(RunPolicy::Decide)
            .with_attr("instance", name)
            .with_attr("image", image)
            .with_attr("runtime", runtime)
            .with_attr(DECOMMISSION_ATTR, "true")
            .with_inputs(json!({"instance": name, "runtime": runtime, "declared": false}));
        if let Some(why) = &gated {
            node = node.with_attr(GATED_ATTR, why);
        }
        let spec = InstanceSpec {
            label,
            name: name.to_string(),
            runtime: runtime.to_string(),
            builder: builder.clone(),
            image: image.to_string(),
            declared: None,
            bake: None,
            post_bake: Vec::new(),
            gated,
            require_released: keys.require_released_builds,
            release_model: None,
        };
        let id = self.node(Arc::new(node), NodeSpec::Instance(Arc::new(spec)))?;
        self.fleet.push(id);
        Ok(id)
    }
}
