//! The `csis-bake-v1` fingerprint inputs of a bake ([`BAKE_RECIPE`]): a
//! base image's (with its vendor declaration) and an image's, each mod's
//! input (with the content hash of its files) and lineage record, and the
//! in-bake tests. What enters a bake's inputs, and what is left out on
//! purpose, is described once, in ARCHITECTURE.md ("Fingerprints").

use std::path::Path;

use csis_engine::Fingerprint;
use serde_json::{json, Value};

use super::vocabulary::GroupSpec;
use crate::tree::{InBakeTest, ModInput, OsBuilder, OsRuntime};
use csis_schema::model::ModKind;

/// Version of the bake-input recipe (what goes into a bake's inputs). Bump
/// it when the inputs change shape: every bake fingerprint then moves once.
pub const BAKE_RECIPE: &str = "csis-bake-v1";

/// blake3 of a file's bytes (`missing` when unreadable).
pub fn file_hash(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(b) => blake3::hash(&b).to_hex().to_string(),
        Err(_) => "missing".to_string(),
    }
}

fn mod_idempotent(m: &ModInput) -> &'static str {
    match m.kind {
        ModKind::Ansible => "ansible",
        ModKind::BashRemote if m.inline.is_empty() && m.files.is_empty() && m.ensure.is_some() => {
            "declared"
        }
        ModKind::BashRemote => "unknown",
    }
}

/// A mod's fingerprint input (with per-file content hashes, so `--explain`
/// names the file that changed) and its lineage record. The values both
/// share are made once (a `config` serialized three times was most of an
/// image's compile).
pub(super) fn mod_input_and_record(
    m: &ModInput,
    hash: &mut dyn FnMut(&Path) -> String,
) -> (Value, Value) {
    let files = Value::Array(
        m.declared_files
            .iter()
            .zip(m.files.iter())
            .map(|(d, abs)| json!({"path": d, "blake3": hash(abs)}))
            .collect(),
    );
    let builder = Value::String(m.builder.clone());
    let config = Value::Object(
        m.config
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    let script = json!(m.inline);
    let ensure = json!(m.ensure);
    let content = json!({
        "type": builder,
        "config": config,
        "files": files,
        "script": script,
        "ensure": ensure,
    });
    let content_hash = Fingerprint::compute("mod-content", &content, &[]).to_hex();
    let Value::Object(mut input) = content else {
        unreachable!("json! of an object");
    };
    let name = Value::String(m.name.clone());
    let operation = Value::String(m.kind.operation().to_string());
    let idempotent = Value::String(mod_idempotent(m).to_string());
    input.insert("name".into(), name.clone());
    input.insert("operation".into(), operation.clone());
    input.insert("idempotent".into(), idempotent.clone());
    let record = json!({
        "name": name,
        "type": builder,
        "operation": operation,
        "idempotent": idempotent,
        "content_hash": content_hash,
    });
    (Value::Object(input), record)
}

pub(super) fn tests_input(tests: &[InBakeTest]) -> Value {
    Value::Array(
        tests
            .iter()
            .map(|t| json!({"run": t.run, "expect_rc": t.expect_rc, "contains": t.contains}))
            .collect(),
    )
}

/// A base image's vendor declaration, its resolve node's question and part
/// of its bake's inputs: the OS builder's `family`, `family_version`,
/// `architecture` and `query`, and the runtime entry's `image_id` and query.
pub(super) fn vendor_input(os: &OsBuilder, entry: &OsRuntime, architecture: &str) -> Value {
    let entry_query = Value::Object(entry.entry.query.clone().into_iter().collect());
    json!({
        "family": os.model.family,
        "family_version": os.model.family_version,
        "architecture": architecture,
        "query": Value::Object(os.model.query.clone().into_iter().collect()),
        "runtime_source": {"image_id": entry.entry.image_id, "image_name": null, "query": entry_query},
    })
}

/// A base image's bake inputs (its parent is the vendor image; no mods).
pub(super) fn base_bake_inputs(
    os: &OsBuilder,
    vendor: &Value,
    capabilities: &Value,
    tests: &[InBakeTest],
    disk_size: u32,
    update: &Value,
) -> Value {
    json!({
        "recipe": BAKE_RECIPE,
        "series": os.name,
        "parent": "vendor",
        "capabilities": capabilities,
        "mods": [],
        "tests": tests_input(tests),
        "disk_size": disk_size,
        "vendor": vendor,
        "admin_user": os.model.admin_user,
        "admin_public_keys": os.admin_public_keys,
        "update": update,
    })
}

/// An image's bake inputs without its `mods` (added once its files are
/// hashed, [`mod_input_and_record`]). `parent` is `{series, policy}` or
/// `{image_identifier}`.
pub(super) fn image_bake_inputs(
    series: &str,
    parent: Value,
    capabilities: &Value,
    tests: &[InBakeTest],
    disk_size: u32,
    group: Option<&GroupSpec>,
) -> Value {
    let mut inputs = json!({
        "recipe": BAKE_RECIPE,
        "series": series,
        "parent": parent,
        "capabilities": capabilities,
        "tests": tests_input(tests),
        "disk_size": disk_size,
    });
    // the group activation changes the image (and its verification):
    // an image with a group hashes it (one without keeps its inputs)
    if let Some(g) = group {
        inputs["group"] = json!({
            "name": g.group,
            "identity_type": g.identity_type,
            "posix": g.posix,
        });
    }
    inputs
}
