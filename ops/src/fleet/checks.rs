//! Launch parameters are immutable after launch (core.md §9.2): a launched
//! instance whose declaration changed a parameter its launch record holds
//! (image, runtime, group, machine type, mounts, userdata, ephemeral),
//! while no replacement is pending or due, is refused at the changed
//! field's line. `csis upgrade instance NAME` (a replacement) takes the new
//! parameters.

use csis_cache::launch_params::LaunchRecord;
use csis_rules::compile::NodeKind;
use csis_rules::fleet::Instance;
use csis_rules::Tree;
use csis_schema::Diagnostic;
use serde_json::{json, Value};

use super::plan::{Action, FleetView};

/// The first launch parameter whose declaration differs from the record:
/// `(field, recorded, declared)`.
pub fn changed_param(inst: &Instance, rec: &LaunchRecord) -> Option<(&'static str, Value, Value)> {
    let userdata = csis_schema::secret::redact_printed(&inst.userdata).into_owned();
    let mounts = |ms: Vec<Value>| Value::Array(ms);
    let declared_mounts = mounts(
        inst.mounts
            .iter()
            .map(|m| {
                json!([
                    m.storage,
                    m.storage_type,
                    m.builder,
                    m.mount_point,
                    m.group,
                    m.share_mode,
                    m.public_read
                ])
            })
            .collect(),
    );
    let recorded_mounts = mounts(
        rec.mounts
            .iter()
            .map(|m| {
                json!([
                    m.storage,
                    m.type_,
                    m.builder,
                    m.mount_point,
                    m.group,
                    m.share_mode,
                    m.public_read
                ])
            })
            .collect(),
    );
    let pairs: [(&'static str, Value, Value); 7] = [
        ("image", json!(rec.image), json!(inst.image)),
        ("runtime", json!(rec.runtime), json!(inst.runtime)),
        ("group", json!(rec.group), json!(inst.group)),
        (
            "machine_type",
            json!(rec.machine_type),
            json!(inst.machine_type),
        ),
        ("storages", recorded_mounts, declared_mounts),
        (
            "userdata",
            json!(rec.userdata.clone().unwrap_or_default()),
            json!(userdata),
        ),
        ("ephemeral", json!(rec.ephemeral), json!(inst.ephemeral)),
    ];
    pairs.into_iter().find(|(f, r, d)| {
        // A record without a runtime (the original's) says nothing of it.
        !(*f == "runtime" && rec.runtime.is_empty()) && r != d
    })
}

/// The refusal of one changed parameter, at its field.
fn refusal(inst: &Instance, field: &str, recorded: &Value, declared: &Value) -> Diagnostic {
    let loc = inst.origin.field(field);
    let mut d = Diagnostic::at(
        loc,
        &format!("{}.{field}", inst.origin.path),
        format!(
            "instance {}: `{field}` changed since its launch ({recorded} -> {declared}); launch parameters are immutable after launch",
            inst.name
        ),
    );
    d.hint = Some(format!(
        "`csis upgrade instance {}` replaces it with the new parameters in the next build, or restore the declaration",
        inst.name
    ));
    d
}

/// Every launched instance of `tree` whose parameters changed while
/// `replacing(name)` says no replacement will take them.
pub fn launch_param_changes(
    tree: &Tree,
    view: &FleetView,
    replacing: &dyn Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    tree.instances
        .iter()
        .filter(|i| !i.ephemeral && !replacing(&i.name))
        .filter_map(|i| {
            let rec = view.launched(&i.name)?;
            let (f, r, d) = changed_param(i, rec)?;
            Some(refusal(i, f, &r, &d))
        })
        .collect()
}

/// The refusals of a plan: an instance node that is not a replacement
/// (nor a decommission) while its parameters changed.
pub fn refusals_of_plan(
    tree: &Tree,
    meta: &csis_cache::MetaState,
    graph: &csis_engine::Graph,
    plan: &csis_engine::Plan,
) -> anyhow::Result<Vec<Diagnostic>> {
    let nodes: Vec<_> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Instance)
        .collect();
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let view = FleetView::load(meta)?;
    let replacing = |name: &str| {
        nodes.iter().any(|n| {
            graph.node(n.id).attr("instance") == Some(name)
                && Action::parse(&n.code) == Some(Action::Replace)
        })
    };
    Ok(launch_param_changes(tree, &view, &replacing))
}

/// What `csis validate` refuses against the records (no plan: a
/// replacement is pending, or a follow instance's head moved).
pub fn validate_checks(tree: &Tree) -> anyhow::Result<Vec<Diagnostic>> {
    if tree.instances.is_empty() {
        return Ok(Vec::new());
    }
    let meta = csis_cache::MetaState::of_tree(tree.root());
    let view = FleetView::load(&meta)?;
    let lineage = meta.lineage()?;
    let replacing = |name: &str| {
        if view.pins.pending_replacements.contains_key(name) {
            return true;
        }
        let Some(i) = tree.instance(name) else {
            return false;
        };
        let running = view.launched(name).and_then(|r| r.bound_build());
        i.image_policy == csis_rules::fleet::ImagePolicy::Follow
            && lineage
                .head(&i.image, &i.runtime)
                .is_some_and(|h| Some(h.build_id.as_str()) != running)
    };
    Ok(launch_param_changes(tree, &view, &replacing))
}
