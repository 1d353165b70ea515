//! A root's state backend as the tree declares it (the builder's
//! `state_configuration`, else its runtime's, else the default), with every
//! s3 argument the original passes through.

use anyhow::{bail, Result};
use csis_rules::{RuntimeEntry, Tree};
use csis_schema::model::StateBackendKind;
use csis_tofu::{BackendArg, BackendKind, StateBackend};

/// The state backend of a root: its own, its runtime's, the default.
pub(super) fn backend(
    tree: &Tree,
    own: Option<&str>,
    runtime: Option<&RuntimeEntry>,
) -> Result<StateBackend> {
    if !tree.config.config.use_state_backends {
        return Ok(StateBackend {
            name: "local".into(),
            kind: BackendKind::Local {
                dir: "state".into(),
            },
        });
    }
    let named = own.or(runtime.and_then(|r| r.state_backend.as_deref()));
    let b = match named {
        Some(n) => tree.state_backend(n),
        None => tree
            .state_backends
            .iter()
            .find(|b| b.common.is_default)
            .or_else(|| (tree.state_backends.len() == 1).then(|| &tree.state_backends[0])),
    };
    let Some(b) = b else {
        bail!("no state backend for a tofu root (state_configuration {named:?}): declare one in cfg/ state_backends with is_default, or set use_state_backends: false");
    };
    let kind = match &b.kind {
        StateBackendKind::S3(s) => BackendKind::S3 {
            bucket: s.bucket.clone(),
            key_prefix: s.key.clone(),
            region: s.region.clone(),
            profile: s.profile.clone(),
            encrypt: s.encrypt,
            use_lockfile: s.use_lockfile,
            extra: backend_args(s),
        },
        StateBackendKind::Local(l) => BackendKind::Local {
            dir: l.path.clone(),
        },
    };
    Ok(StateBackend {
        name: b.display.clone(),
        kind,
    })
}

/// The s3 backend's declared arguments beyond the core, each away from
/// its default, in the original's order: the two singular file fields as
/// the lists tofu takes, `no_proxy` a comma string, the nested objects their
/// set members in their declared order.
fn backend_args(s: &csis_schema::model::S3Backend) -> Vec<BackendArg> {
    use serde_json::{json, Value};
    let list = |x: &[String]| (!x.is_empty()).then(|| json!(x));
    let flag = |b: bool| b.then_some(Value::Bool(true));
    let opt = |o: &Option<String>| o.as_ref().map(|x| json!(x));
    let file = |o: &Option<String>| o.as_ref().map(|x| json!([x]));
    let role = s.assume_role.as_ref().and_then(|r| {
        object(vec![
            ("role_arn", Some(json!(r.role_arn))),
            ("duration", opt(&r.duration)),
            ("external_id", opt(&r.external_id)),
            ("policy", opt(&r.policy)),
            ("policy_arns", list(&r.policy_arns)),
            ("session_name", opt(&r.session_name)),
            ("source_identity", opt(&r.source_identity)),
            ("tags", (!r.tags.is_empty()).then(|| json!(r.tags))),
            ("transitive_tag_keys", list(&r.transitive_tag_keys)),
        ])
    });
    let web = s.assume_role_with_web_identity.as_ref().and_then(|r| {
        object(vec![
            ("role_arn", Some(json!(r.role_arn))),
            ("duration", opt(&r.duration)),
            ("policy", opt(&r.policy)),
            ("policy_arns", list(&r.policy_arns)),
            ("session_name", opt(&r.session_name)),
            ("web_identity_token", opt(&r.web_identity_token)),
            ("web_identity_token_file", opt(&r.web_identity_token_file)),
        ])
    });
    let endpoints = s.endpoints.as_ref().and_then(|e| {
        object(
            e.iter()
                .map(|(k, x)| (k.as_str(), Some(json!(x))))
                .collect(),
        )
    });
    let plain = [
        ("allowed_account_ids", list(&s.allowed_account_ids)),
        ("forbidden_account_ids", list(&s.forbidden_account_ids)),
        ("http_proxy", opt(&s.http_proxy)),
        ("https_proxy", opt(&s.https_proxy)),
        (
            "no_proxy",
            (!s.no_proxy.is_empty()).then(|| json!(s.no_proxy.join(","))),
        ),
        ("insecure", flag(s.insecure)),
        (
            "max_retries",
            (s.max_retries != 5).then(|| json!(s.max_retries)),
        ),
        ("shared_config_files", file(&s.shared_config_file)),
        ("shared_credentials_files", file(&s.shared_credentials_file)),
        (
            "skip_credentials_validation",
            flag(s.skip_credentials_validation),
        ),
        ("skip_region_validation", flag(s.skip_region_validation)),
        (
            "skip_requesting_account_id",
            flag(s.skip_requesting_account_id),
        ),
        ("skip_metadata_api_check", flag(s.skip_metadata_api_check)),
        ("skip_s3_checksum", flag(s.skip_s3_checksum)),
        ("use_dualstack_endpoint", flag(s.use_dualstack_endpoint)),
        ("use_fips_endpoint", flag(s.use_fips_endpoint)),
    ];
    let mut out: Vec<BackendArg> = plain
        .into_iter()
        .filter_map(|(k, x)| {
            let x = x?;
            Some(BackendArg {
                name: k.into(),
                hcl: hcl_value(&x),
                value: x,
            })
        })
        .collect();
    for (k, set) in [
        ("endpoints", endpoints),
        ("assume_role", role),
        ("assume_role_with_web_identity", web),
    ] {
        let Some(set) = set else { continue };
        let hcl = set
            .iter()
            .map(|(k, x)| format!("{k} = {}", hcl_value(x)))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(BackendArg {
            name: k.into(),
            hcl: format!("{{ {hcl} }}"),
            value: Value::Object(set.into_iter().collect()),
        });
    }
    out
}

/// An object's set members, in order; none set: no object.
fn object(m: Vec<(&str, Option<serde_json::Value>)>) -> Option<Vec<(String, serde_json::Value)>> {
    let set: Vec<(String, serde_json::Value)> = m
        .into_iter()
        .filter_map(|(k, x)| Some((k.to_string(), x?)))
        .collect();
    (!set.is_empty()).then_some(set)
}

/// A value as the original writes it in a backend file: lists `[a, b]`,
/// maps inline `{ k = v }`.
fn hcl_value(x: &serde_json::Value) -> String {
    use serde_json::Value;
    match x {
        Value::String(s) => csis_tofu::hv::quote(s),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(hcl_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{ {} }}",
            m.iter()
                .map(|(k, v)| format!("{} = {}", csis_tofu::hv::quote(k), hcl_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}
