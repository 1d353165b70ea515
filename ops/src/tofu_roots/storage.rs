//! The storage roots: one per `tf-aws-*` storage builder, a module call per
//! storage with the inputs the original passes (an EFS's access points and
//! mount targets, an S3 bucket's lifecycle rule, the tags).

use std::collections::BTreeMap;

use anyhow::Result;
use std::collections::BTreeSet;

use csis_rules::fleet::{Storage, StorageState};
use csis_rules::groups::StorageBuilder;
use csis_rules::{RuntimeEntry, Tree};
use csis_schema::tags;
use csis_tofu::*;

use super::backend::backend;
use super::{aws_provider, executable, identity_remotes, required, storage_class};

/// Does a storage's live resource stand (the root calls its module)? Not
/// when it is requested destroyed, nor archived where its builder archives
/// (its data then in [`archive_name`]).
pub(super) fn stands(s: &Storage) -> bool {
    match s.requested {
        StorageState::Destroyed => false,
        StorageState::Archived => !s.supports_archive,
        StorageState::Active => true,
    }
}

/// The archive of a storage (its snapshot's `Name` tag), as the original
/// names it: `csis-<label>-archive`.
pub(crate) fn archive_name(storage: &str) -> String {
    format!(
        "csis-{}-archive",
        csis_tofu::hv::label(storage).replace('_', "-")
    )
}

/// The tags of a storage: the builder's `variables.tags`, the storage's,
/// the config id; sorted, as the original writes them.
fn storage_tags(tree: &Tree, b: &StorageBuilder, s: &Storage) -> Hv {
    let mut t: BTreeMap<String, String> = BTreeMap::new();
    if let Some(serde_json::Value::Object(m)) = b.model.variables.get("tags") {
        for (k, v) in m {
            t.insert(
                k.clone(),
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            );
        }
    }
    t.extend(s.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
    t.insert(tags::CONFIG.into(), tags::config_value(&tree.config.id));
    Hv::Map(t.into_iter().map(|(k, v)| (k, Hv::Str(v))).collect())
}

fn json_hv(v: &serde_json::Value) -> Hv {
    match v {
        serde_json::Value::Bool(b) => Hv::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Hv::Num)
            .unwrap_or_else(|| Hv::Str(n.to_string())),
        serde_json::Value::String(s) => Hv::s(s),
        serde_json::Value::Array(a) => Hv::List(a.iter().map(json_hv).collect()),
        serde_json::Value::Object(m) => {
            Hv::Map(m.iter().map(|(k, v)| (k.clone(), json_hv(v))).collect())
        }
        serde_json::Value::Null => Hv::Ref("null".into()),
    }
}

/// The module inputs of one storage, in the original's order: the
/// builder's variables (tags last), the name, the type's own fields, the
/// placement, the tags.
fn storage_inputs(
    tree: &Tree,
    b: &StorageBuilder,
    s: &Storage,
    rt: Option<&RuntimeEntry>,
    archived: &BTreeSet<String>,
) -> Vec<(String, Hv)> {
    let mut v: Vec<(String, Hv)> = b
        .model
        .variables
        .iter()
        .filter(|(k, _)| k.as_str() != "tags")
        .map(|(k, x)| (k.clone(), json_hv(x)))
        .collect();
    // a bucket is named by `bucket_name` alone
    if b.model.type_ != "tf-aws-s3" {
        v.push(("name".into(), Hv::s(&s.display)));
    }
    let net = rt.and_then(|r| r.aws()).and_then(|a| a.networking.as_ref());
    match b.model.type_.as_str() {
        "tf-aws-ebs" => {
            v.push((
                "size".into(),
                Hv::Num(i64::from(s.size_gb.or(b.model.size).unwrap_or(100))),
            ));
            // a restore: recorded archived, declared active (the module
            // finds the snapshot by its Name tag)
            if archived.contains(&s.name) && s.supports_archive {
                v.push(("snapshot_name".into(), Hv::s(&archive_name(&s.display))));
            }
            if let Some(z) = &s.availability_zone {
                v.push(("availability_zone".into(), Hv::s(z)));
            } else if let Some(sub) = net.and_then(|n| n.default_subnet()) {
                v.push(("subnet_id".into(), Hv::s(&sub.subnet_id)));
            }
        }
        "tf-aws-s3" => {
            let bucket = s
                .bucket_name
                .clone()
                .or(b.model.bucket_name.clone())
                .unwrap_or_else(|| s.display.clone());
            v.push(("bucket_name".into(), Hv::s(&bucket)));
            if let Some(rule) = s.lifecycle.as_ref().and_then(s3_lifecycle_rule) {
                v.push(("lifecycle_rules".into(), Hv::List(vec![rule])));
            }
            // each allowed group's prefix; no gid (a bucket has no owner)
            if !s.groups.is_empty() {
                let mut groups = s.groups.clone();
                groups.sort();
                v.push(("group_prefixes".into(), Hv::strs(&groups)));
            }
            if s.public_read {
                v.push(("public_read".into(), Hv::Bool(true)));
            }
        }
        _ => {
            // an existing filesystem adopted (`config.file_system_id`)
            if let Some(id) = s.config.get("file_system_id").and_then(|x| x.as_str()) {
                v.push(("existing_file_system_id".into(), Hv::s(id)));
            }
            efs_lifecycle(s.lifecycle.as_ref(), &mut v);
            // each allowed group's subtree is an access point, its gid by
            // reference, its mode the storage's share mode
            if !s.groups.is_empty() {
                let mut groups = s.groups.clone();
                groups.sort();
                let points = groups
                    .iter()
                    .map(|g| {
                        let point = vec![
                            ("gid".to_string(), gid_expression(tree, g)),
                            ("path".to_string(), Hv::s(&format!("/{g}"))),
                            ("permissions".to_string(), Hv::s(&s.share_mode)),
                        ];
                        (g.clone(), Hv::Map(point))
                    })
                    .collect();
                v.push(("access_points".into(), Hv::Map(points)));
            }
            if s.public_read {
                v.push(("public_read".into(), Hv::Bool(true)));
            }
            // mount targets: one per zone (EFS allows no more), in the
            // private subnets only; named only with clients to grant NFS to
            if let Some(n) = net {
                let mut zones = std::collections::BTreeSet::new();
                let subnets: Vec<String> = n
                    .subnets
                    .iter()
                    .filter(|x| !x.public)
                    .filter(|x| {
                        zones.insert(
                            x.availability_zone
                                .clone()
                                .unwrap_or_else(|| x.subnet_id.clone()),
                        )
                    })
                    .map(|x| x.subnet_id.clone())
                    .collect();
                if !subnets.is_empty() && !n.addl_security_groups.is_empty() {
                    v.push(("vpc_id".into(), Hv::s(&n.network)));
                    v.push(("mount_target_subnet_ids".into(), Hv::strs(&subnets)));
                    v.push((
                        "client_security_group_ids".into(),
                        Hv::strs(&n.addl_security_groups),
                    ));
                }
            }
        }
    }
    v.push(("tags".into(), storage_tags(tree, b, s)));
    v
}

/// A group's gid in a root: the identity root's output for a group of a
/// managed Okta builder (by reference), else the group's declared gid (a
/// posix group), else empty.
fn gid_expression(tree: &Tree, group: &str) -> Hv {
    let Some(g) = tree.group(group) else {
        return Hv::s("");
    };
    let okta = g
        .builder
        .as_deref()
        .and_then(|b| tree.group_builder(b))
        .filter(|b| b.model.type_ == "okta-tf");
    match (okta, g.model.gid) {
        (Some(b), _) => Hv::remote_output(
            &csis_tofu::hv::label(&b.display),
            &format!("group_gids[{}]", csis_tofu::hv::quote(group)),
        ),
        (None, Some(gid)) => Hv::Num(gid.into()),
        (None, None) => Hv::s(""),
    }
}

/// An s3 storage's data `lifecycle` as the module's one rule (the
/// original's `lifecycle_rules`: id `csis`, 0 days = none); None when it
/// declares none.
fn s3_lifecycle_rule(l: &csis_schema::model::JsonMap) -> Option<Hv> {
    if l.is_empty() {
        return None;
    }
    let days = |k: &str| l.get(k).and_then(|v| v.as_i64()).unwrap_or(0);
    let text = |k: &str, or: &str| l.get(k).and_then(|v| v.as_str()).unwrap_or(or).to_string();
    Some(Hv::Map(vec![
        ("expire_days".into(), Hv::Num(days("expire_days"))),
        ("id".into(), Hv::s("csis")),
        ("prefix".into(), Hv::Str(text("prefix", ""))),
        (
            "storage_class".into(),
            Hv::Str(text("storage_class", "STANDARD_IA")),
        ),
        ("transition_days".into(), Hv::Num(days("transition_days"))),
    ]))
}

/// An efs storage's data `lifecycle` as the module's inputs:
/// `transition_to_ia` (`ia_days`) and `transition_to_archive`
/// (`archive_days`), in the provider's `AFTER_N_DAYS` words.
fn efs_lifecycle(l: Option<&csis_schema::model::JsonMap>, v: &mut Vec<(String, Hv)>) {
    let Some(l) = l else { return };
    for (key, input) in [
        ("ia_days", "transition_to_ia"),
        ("archive_days", "transition_to_archive"),
    ] {
        if let Some(d) = l.get(key).and_then(|d| d.as_u64()) {
            let word = if d == 1 {
                "AFTER_1_DAY".to_string()
            } else {
                format!("AFTER_{d}_DAYS")
            };
            v.push((input.into(), Hv::Str(word)));
        }
    }
}

/// The identity roots whose gids these storages' groups read (none for
/// storages without groups).
fn gid_remotes(tree: &Tree, storages: &[&Storage]) -> Result<Vec<RemoteState>> {
    let used: std::collections::BTreeSet<&str> = storages
        .iter()
        .flat_map(|s| &s.groups)
        .filter_map(|g| tree.group(g)?.builder.as_deref())
        .filter_map(|b| tree.group_builder(b))
        .map(|b| b.display.as_str())
        .collect();
    Ok(identity_remotes(tree)?
        .into_iter()
        .filter(|r| used.contains(r.workspace.as_str()))
        .collect())
}

pub(super) fn storage_root(
    tree: &Tree,
    b: &StorageBuilder,
    storages: &[&Storage],
    archived: &BTreeSet<String>,
) -> Result<Root> {
    let (class, module) =
        storage_class(&b.model.type_).unwrap_or(("TofuStorageBuilder", "aws_storage"));
    let rt = b.runtime.as_deref().and_then(|r| tree.runtime(r));
    let calls = storages
        .iter()
        .map(|s| StorageCall {
            name: s.display.clone(),
            module: module.into(),
            allowed_groups: s.groups.clone(),
            public_read: s.public_read,
            requested: serde_json::to_value(s.requested)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            inputs: storage_inputs(tree, b, s, rt, archived),
        })
        .collect();
    Ok(Root {
        builder: b.display.clone(),
        class: class.into(),
        executable: executable(tree, b.model.executable.as_deref()),
        required_providers: required(&b.model.required_plugins, &[("aws", "hashicorp/aws")]),
        providers: rt.map(aws_provider).into_iter().collect(),
        backend: backend(tree, b.model.state_configuration.as_deref(), rt)?,
        remote_states: gid_remotes(tree, storages)?,
        body: RootBody::Storage(StorageRoot { storages: calls }),
    })
}
