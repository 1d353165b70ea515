//! The files of one root, as the original lays them out (its configuration
//! blocks indent four spaces, its module calls two; most files end without
//! a newline, the identity roots' main file of a group builder with one).

use crate::hv::{attributes, label, multiline, quote, render, Hv};
use crate::{
    plain_name, GroupsRoot, ImageRef, InstanceCall, InstancesRoot, Result, Root, RootBody,
    StorageRoot, TofuError, UsersRoot,
};

/// `(file name, text)` of every file of `root`. `up` leads from the root's
/// directory to the configuration root; `source` is the module base as a
/// call's `source` prefix.
pub fn root_files(root: &Root, up: &str, source: &str) -> Result<Vec<(String, String)>> {
    let stem = root.stem();
    let mut files = match &root.body {
        RootBody::Storage(s) => storage_files(root, s, up, source)?,
        RootBody::Groups(g) => groups_files(root, g, source)?,
        RootBody::Users(u) => users_files(root, u)?,
        RootBody::Instances(i) => crate::userdata::instance_files(root, i, up, source)?,
    };
    files.push((
        format!("{stem}.tfbackend.hcl"),
        root.backend.backend_file(&root.builder, up),
    ));
    Ok(files)
}

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
fn sealed_values(root: &Root) -> Vec<(String, String)> {
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
        u.users.iter().for_each(|x| x.login.sealed(&mut out));
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
    let mut o = String::from("# Sensitive values: the same ENC[age:...] ciphertext the configuration carries, decrypted at plan time by the identity in CSIS_CONFIG_IDENTITY; never committed in clear\ndata \"external\" \"sensitive\" {\n    program = [\n        \"csis\",\n        \"decrypt\",\n        \"--json\",\n    ]\n    query = {\n");
    for (k, m) in &sealed {
        plain_name("sealed key", k)?;
        o.push_str(&format!("        {k:width$} = {},\n", quote(m)));
    }
    o.push_str("    }\n}\nlocals {\n    sensitive = sensitive(data.external.sensitive.result)\n}");
    Ok(Some(o))
}

fn module_call(
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

fn storage_files(
    root: &Root,
    s: &StorageRoot,
    up: &str,
    source: &str,
) -> Result<Vec<(String, String)>> {
    let stem = root.stem();
    let provider = root
        .providers
        .first()
        .map(|p| p.name.as_str())
        .unwrap_or("aws");
    let alias = format!("{provider} = {provider}.{}", root.label());
    let mut files = Vec::new();
    for c in &s.storages {
        plain_name("storage", &c.name)?;
        let l = label(&c.name);
        let groups = if c.allowed_groups.is_empty() {
            "none".to_string()
        } else {
            c.allowed_groups.join(", ")
        };
        let text = format!(
            "# Terraform module call for storage {} generated by {} ({})\n# allowed groups: {groups} (gids by remote-state reference); public_read={}; requested state: {}\n{}\noutput \"storage_{l}\" {{\n    value = module.storage_{l}\n    description = \"Outputs of storage {} for remote-state consumers\"\n}}",
            c.name, root.class, root.builder, c.public_read, c.requested,
            module_call(&format!("storage_{l}"), source, &c.module, &alias, &c.inputs, false),
            c.name
        );
        files.push((format!("{stem}-storage-{l}.tf"), text));
    }
    let mut parts = vec![
        format!(
            "# Terraform configuration for storages generated by {} ({})",
            root.class, root.builder
        ),
        terraform_block(root, &[]),
    ];
    parts.extend(provider_blocks(root));
    parts.extend(sensitive_block(root)?);
    parts.extend(remote_states(root, up));
    files.insert(0, (format!("{stem}.tf"), parts.join("\n")));
    Ok(files)
}

fn identity_main(
    root: &Root,
    what: &str,
    extra: &[(&str, &str)],
    trailing: bool,
) -> Result<String> {
    let mut text = format!(
        "# Terraform configuration for Okta {what} generated by {} ({})\n\n{}\n\n{}",
        root.class,
        root.builder,
        terraform_block(root, extra),
        provider_blocks(root).join("\n")
    );
    if trailing {
        text.push('\n');
    }
    if let Some(s) = sensitive_block(root)? {
        text.push_str("\n\n");
        text.push_str(&s);
    }
    Ok(text)
}

fn groups_files(root: &Root, g: &GroupsRoot, source: &str) -> Result<Vec<(String, String)>> {
    let stem = root.stem();
    let mut with_external = root.clone();
    with_external.providers.push(crate::Provider {
        name: "external".into(),
        args: vec![],
    });
    let mut files = vec![(
        format!("{stem}.tf"),
        identity_main(
            &with_external,
            "groups",
            &[("external", "hashicorp/external")],
            true,
        )?,
    )];
    let provider = root
        .providers
        .first()
        .map(|p| p.name.as_str())
        .unwrap_or("oktapam");
    let alias = format!("{provider} = {provider}.{}", root.label());
    let mut names: Vec<&str> = Vec::new();
    for c in &g.groups {
        plain_name("group", &c.name)?;
        names.push(&c.name);
        let text = format!(
            "# Terraform module call for Okta group {} generated by {} ({})\n{}",
            c.name,
            root.class,
            root.builder,
            module_call(
                &format!("group_{}", label(&c.name)),
                source,
                &c.module,
                &alias,
                &c.inputs,
                true
            )
        );
        files.push((format!("{stem}-group-{}.tf", label(&c.name)), text));
    }
    let vars: Vec<String> = g
        .variables
        .iter()
        .map(|v| {
            format!(
                "variable \"{}\" {{\n    type = string\n    description = {}\n    sensitive = {}\n}}",
                v.name,
                quote(&v.description),
                v.sensitive
            )
        })
        .collect();
    files.push((format!("{stem}-{}-vars.tf", root.builder), vars.join("\n")));
    files.push((format!("{stem}-outputs.tf"), group_outputs(root, g, &names)));
    Ok(files)
}

fn group_outputs(root: &Root, g: &GroupsRoot, names: &[&str]) -> String {
    let mut sorted: Vec<&str> = names.to_vec();
    sorted.sort();
    let modules: String = sorted
        .iter()
        .map(|n| format!("        module.group_{},\n", label(n)))
        .collect();
    let program: String = g
        .gid_program
        .iter()
        .map(|p| format!("        {},\n", quote(p)))
        .collect();
    let mut query = g.gid_query.clone();
    query.push(("groups".into(), sorted.join(",")));
    let qw = query.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let query: String = query
        .iter()
        .map(|(k, v)| format!("        {k:qw$} = {},\n", quote(v)))
        .collect();
    let gw = sorted.iter().map(|n| label(n).len()).max().unwrap_or(0);
    let mut groups = String::new();
    let mut tokens = String::new();
    for n in &sorted {
        let l = label(n);
        groups.push_str(&format!("        {l:gw$} = {{\n"));
        for (k, o) in [
            ("user_group_id    ", "user_group_id"),
            ("admin_group_id   ", "admin_group_id"),
            ("resource_group_id", "resource_group_id"),
            ("user_group_name  ", "user_group_name"),
        ] {
            groups.push_str(&format!("            {k} = module.group_{l}.{o},\n"));
        }
        groups.push_str("        },\n");
        tokens.push_str(&format!(
            "        {l:gw$} = module.group_{l}.enrollment_token,\n"
        ));
    }
    format!(
        "# Outputs of the identity root {b} (DESIGN N7).\n# GIDs are never literals: the oktapam provider exposes no group gid, so this\n# root asks the system's own CLI (read-only, credentials from the environment)\n# and publishes the answer as an output for terraform_remote_state consumers.\n# gid shim: {{group: gid}} for every managed group\ndata \"external\" \"group_gids\" {{\n    provider = external.{a}\n    depends_on = [\n{modules}    ]\n    program = [\n{program}    ]\n    query = {{\n{query}    }}\n}}\noutput \"group_gids\" {{\n    value = {{ for g, gid in data.external.group_gids.result : g => tonumber(gid) }}\n    description = \"Group name -> unix gid, queried from OPA; consume by reference only\"\n}}\noutput \"groups\" {{\n    value = {{\n{groups}    }}\n    description = \"Managed OPA groups and their object ids\"\n}}\noutput \"group_enrollment_tokens\" {{\n    value = {{\n{tokens}    }}\n    description = \"Group -> launch enrollment token (IaC-owned, PLAN.md); consume by reference only\"\n    sensitive = true\n}}",
        b = root.builder,
        a = root.label(),
    )
}

fn users_files(root: &Root, u: &UsersRoot) -> Result<Vec<(String, String)>> {
    let stem = root.stem();
    let sealed = u.users.iter().any(|x| matches!(x.login, Hv::Sealed { .. }));
    let extra: &[(&str, &str)] = if sealed {
        &[("external", "hashicorp/external")]
    } else {
        &[]
    };
    let main = identity_main(root, "users", extra, false)?;
    let provider = root
        .providers
        .first()
        .map(|p| p.name.as_str())
        .unwrap_or("okta");
    let mut lookups = Vec::new();
    for x in &u.users {
        if matches!(x.login, Hv::Map(_) | Hv::List(_)) {
            return Err(TofuError::Invalid(format!(
                "user {}: a login is one string",
                x.name
            )));
        }
        lookups.push(format!(
            "# Lookup of Okta user {n} by login\ndata \"okta_user\" \"{l}\" {{\n    provider = {provider}.{a}\n    skip_roles = true\n    skip_groups = true\n    \n    search {{\n        name = \"profile.login\"\n        value = {v}\n        comparison = \"eq\"\n    }}\n}}",
            n = x.name,
            l = label(&x.name),
            a = root.label(),
            v = render(&x.login, 8, false)
        ));
    }
    Ok(vec![
        (format!("{stem}.tf"), main),
        (format!("{stem}-users-data.tf"), lookups.join("\n")),
    ])
}

/// The per-instance module call.
pub fn instance_call(root: &Root, r: &InstancesRoot, i: &InstanceCall, source: &str) -> String {
    let l = label(&i.name);
    let provider = root
        .providers
        .first()
        .map(|p| p.name.as_str())
        .unwrap_or("aws");
    let alias = format!("{provider} = {provider}.{}", root.label());
    let mut inputs: Vec<(String, Hv)> = Vec::new();
    if i.ephemeral {
        inputs.push((
            "count".into(),
            Hv::Ref("var.ephemeral_present ? 1 : 0".into()),
        ));
    }
    inputs.push(("name".into(), Hv::s(&i.name)));
    match &i.image_ref {
        ImageRef::Pinned { build } => inputs.push(("ami_id".into(), Hv::s(build))),
        ImageRef::Deferred { name_pattern } => {
            inputs.push(("ami_id".into(), Hv::var(&format!("{l}_ami_id"))));
            inputs.push((
                "ami_name_pattern".into(),
                Hv::s(&format!("{name_pattern}*")),
            ));
        }
    }
    inputs.push(("instance_type".into(), Hv::s(&i.instance_type)));
    inputs.push(("associate_public_ip_address".into(), Hv::Bool(false)));
    let mut sgs = Vec::new();
    if r.security_group.is_some() {
        sgs.push(Hv::reference("aws_security_group.csis_instances.id"));
    }
    sgs.extend(i.security_groups.iter().map(|s| Hv::s(s)));
    inputs.push(("vpc_security_group_ids".into(), Hv::List(sgs)));
    if let Some(s) = &i.subnet_id {
        inputs.push(("subnet_id".into(), Hv::s(s)));
    }
    if let Some(p) = &i.iam_instance_profile {
        inputs.push(("iam_instance_profile".into(), Hv::s(p)));
    }
    let tags = i.tags.iter().map(|(k, v)| (k.clone(), Hv::s(v))).collect();
    inputs.push(("tags".into(), Hv::Map(tags)));
    let (vars, ebs) = crate::userdata::template_vars(r, i);
    let user_data = format!(
        "templatefile(\"${{path.module}}/user-data-{l}.sh.tftpl\", {})",
        multiline(&vars, 2)
    );
    inputs.push(("user_data".into(), Hv::Ref(user_data)));
    if !ebs.is_empty() {
        inputs.push(("ebs_volumes".into(), Hv::Map(ebs)));
    }
    format!(
        "# Terraform module call for instance {} generated by {} ({})\n# owning group: {} (via image {}); launch parameters recorded in meta-state/launch-params.yaml (N26)\n{}",
        i.name,
        root.class,
        root.builder,
        i.group,
        i.image,
        module_call(&format!("instance_{l}"), source, &i.module, &alias, &inputs, false)
    )
}
