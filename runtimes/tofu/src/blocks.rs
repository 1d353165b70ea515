//! The blocks every kind of root shares: the `terraform` block (required
//! providers, the empty partial backend), provider blocks with the
//! builder's alias, remote states, the sealed values' `data "external"
//! "sensitive"`, and a module call.

use crate::hv::{attributes, quote, render, Hv};
use crate::{plain_name, Result, Root, RootBody, TofuError};

/// The `terraform` block: required providers, then the empty backend.
pub fn terraform_block(root: &Root, extra: &[(&str, &str)]) -> String {
    let mut entries: Vec<String> = root
        .required_providers
        .iter()
        .map(|p| {
            let mut e = format!(
                "        {} = {{\n            source = {}\n",
                p.name,
                quote(&p.source)
            );
            if let Some(v) = &p.version {
                e.push_str(&format!("            version = {}\n", quote(v)));
            }
            e.push_str("        }");
            e
        })
        .collect();
    for (name, source) in extra {
        if !root.required_providers.iter().any(|p| p.name == *name) {
            entries.push(format!(
                "        {name} = {{\n            source = {}\n        }}",
                quote(source)
            ));
        }
    }
    format!(
        "terraform {{\n    required_providers {{\n{}\n    }}\n    \n{}\n}}",
        entries.join("\n        \n"),
        root.backend.block()
    )
}

/// Provider blocks, each with `alias = <builder label>`.
pub fn provider_blocks(root: &Root) -> Vec<String> {
    root.providers
        .iter()
        .map(|p| {
            let mut o = format!("provider \"{}\" {{\n", p.name);
            for (k, v) in &p.args {
                o.push_str(&format!("    {k} = {}\n", render(v, 4, true)));
            }
            o.push_str(&format!("    alias = \"{}\"\n}}", root.label()));
            o
        })
        .collect()
}

pub fn remote_states(root: &Root, up: &str) -> Vec<String> {
    root.remote_states
        .iter()
        .map(|r| r.backend.remote_state(&r.workspace, up))
        .collect()
}

/// Every sealed value of the root's module calls and providers.
pub(crate) fn sealed_values(root: &Root) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in &root.providers {
        p.args.iter().for_each(|(_, v)| v.sealed(&mut out));
    }
    let calls: Vec<&Vec<(String, Hv)>> = match &root.body {
        RootBody::Storage(s) => s.storages.iter().map(|c| &c.inputs).collect(),
        RootBody::Groups(g) => g.groups.iter().map(|c| &c.inputs).collect(),
        RootBody::Users(_) | RootBody::Instances(_) => Vec::new(),
    };
    for c in calls {
        c.iter().for_each(|(_, v)| v.sealed(&mut out));
    }
    if let RootBody::Users(u) = &root.body {
        for x in &u.users {
            x.login.sealed(&mut out);
            x.resource
                .iter()
                .flatten()
                .for_each(|(_, v)| v.sealed(&mut out));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `data "external" "sensitive"` and `local.sensitive`: the ciphertext as
/// declared, opened at plan time by `csis decrypt --json` with the identity
/// in `CSIS_CONFIG_IDENTITY`; `None` when the root seals nothing.
pub fn sensitive_block(root: &Root) -> Result<Option<String>> {
    let sealed = sealed_values(root);
    if sealed.is_empty() {
        return Ok(None);
    }
    for pair in sealed.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(TofuError::Invalid(format!(
                "root {}: two sealed values under one key {}: refused",
                root.builder, pair[0].0
            )));
        }
    }
    let width = sealed.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut o = String::from("# Sensitive values: the same ENC[age:...] ciphertext the configuration carries, decrypted at plan time by the identity in CSIS_CONFIG_IDENTITY; never committed in clear\ndata \"external\" \"sensitive\" {\n");
    // a root that configures the external provider (the groups root's
    // aliased one) names it, as the original does
    if root.providers.iter().any(|p| p.name == "external") {
        o.push_str(&format!("    provider = external.{}\n", root.label()));
    }
    o.push_str("    program = [\n        \"csis\",\n        \"decrypt\",\n        \"--json\",\n    ]\n    query = {\n");
    for (k, m) in &sealed {
        plain_name("sealed key", k)?;
        o.push_str(&format!("        {k:width$} = {},\n", quote(m)));
    }
    o.push_str("    }\n}\nlocals {\n    sensitive = sensitive(data.external.sensitive.result)\n}");
    Ok(Some(o))
}

pub fn module_call(
    name: &str,
    source: &str,
    module: &str,
    alias: &str,
    inputs: &[(String, Hv)],
    aligned: bool,
) -> String {
    let mut attrs = vec![
        ("source".to_string(), Hv::s(&format!("{source}/{module}"))),
        ("providers".to_string(), Hv::Ref(format!("{{ {alias} }}"))),
    ];
    attrs.extend(inputs.iter().cloned());
    let body = attributes(&attrs, aligned);
    format!("module \"{name}\" {{\n{body}}}")
}
