//! The resolved tree as the original's tofu roots (`csis-tofu`, issue 22):
//! one identity root per Okta group builder (`okta-tf`) and user builder
//! (`okta-tf-ro` lookups; `okta-tf`: managed users, an `okta_user` each)
//! with something declared, one storage root per `tf-aws-*`
//! storage builder, one instance root per `tofu` instance builder, each
//! with the module inputs the original passes, its state backend (the
//! builder's `state_configuration`, else its runtime's, else the default;
//! `use_state_backends: false`: local state under `state/`) and the remote
//! states it reads (instances read storage volume ids and group gids by
//! reference). A value declared as `ENC[...]` stays a marker, written by
//! reference (`local.sensitive`), never in clear.
//!
//! [`roots_input`] is pure; [`emit`] writes the roots under the tree's
//! `generation_directory` and records their state locations.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use csis_rules::fleet::{Instance, InstanceBuilder, Storage, UserBuilder};
use csis_rules::groups::{GroupBuilder, StorageBuilder};
use csis_rules::{RuntimeEntry, Tree};
use csis_schema::tags;
use csis_tofu::*;

mod backend;
mod storage;

use backend::backend;
pub(crate) use storage::archive_name;
use storage::storage_root;

/// What the roots read from the records.
#[derive(Debug, Clone, Default)]
pub struct FleetRecords {
    /// The run id.
    pub run: String,
    /// `pins.yaml` `instances`: instance -> the build it stands on.
    pub pins: BTreeMap<String, String>,
    /// instance -> canonical hostname of the generation it stands (or
    /// will): `<name>-NNN`; an instance without one gets `<name>-001`.
    pub hostnames: BTreeMap<String, String>,
    /// The storages recorded archived: one declared active again is made
    /// from its archive (`snapshot_name`).
    pub archived: std::collections::BTreeSet<String>,
}

fn is_marker(v: &str) -> bool {
    v.trim_start().starts_with("ENC[")
}

/// A declared value: a marker sealed under `key`, else as written.
fn declared(v: &str, key: &str, as_key: bool) -> Hv {
    if is_marker(v) {
        Hv::Sealed {
            key: key.to_string(),
            marker: v.trim().to_string(),
            as_key,
        }
    } else {
        Hv::s(v)
    }
}

fn executable(tree: &Tree, name: Option<&str>) -> String {
    name.and_then(|n| tree.executable(n))
        .map(|e| {
            e.model
                .binary
                .clone()
                .unwrap_or_else(|| e.model.name.clone())
        })
        .unwrap_or_else(|| "tofu".into())
}

fn required(plugins: &[serde_json::Value], default: &[(&str, &str)]) -> Vec<RequiredProvider> {
    let v: Vec<RequiredProvider> = plugins
        .iter()
        .filter_map(|p| {
            Some(RequiredProvider {
                name: p.get("name")?.as_str()?.to_string(),
                source: p.get("source")?.as_str()?.to_string(),
                version: p
                    .get("version")
                    .and_then(|x| x.as_str())
                    .map(str::to_string),
            })
        })
        .collect();
    if !v.is_empty() {
        return v;
    }
    default
        .iter()
        .map(|(n, s)| RequiredProvider {
            name: n.to_string(),
            source: s.to_string(),
            version: None,
        })
        .collect()
}

fn aws_provider(rt: &RuntimeEntry) -> Provider {
    let a = rt.aws();
    let mut args = vec![(
        "region".to_string(),
        Hv::s(a.map(|a| a.region.as_str()).unwrap_or("")),
    )];
    if let Some(p) = a.and_then(|a| a.credentials.profile_name.as_deref()) {
        args.push(("profile".into(), Hv::s(p)));
    }
    Provider {
        name: "aws".into(),
        args,
    }
}

/// The managed Okta group builders (`okta-tf`) that have groups.
fn okta_group_builders(tree: &Tree) -> Vec<&GroupBuilder> {
    tree.group_builders
        .iter()
        .filter(|b| b.model.type_ == "okta-tf")
        .filter(|b| {
            tree.groups
                .iter()
                .any(|g| g.builder.as_deref() == Some(b.name.as_str()))
        })
        .collect()
}

fn storage_class(builder_type: &str) -> Option<(&'static str, &'static str)> {
    match builder_type {
        "tf-aws-ebs" => Some(("TofuEbsStorageBuilder", "aws_storage_ebs")),
        "tf-aws-efs" => Some(("TofuEfsStorageBuilder", "aws_storage_efs")),
        "tf-aws-s3" => Some(("TofuS3StorageBuilder", "aws_storage_s3")),
        _ => None,
    }
}

/// The storage builders csis writes roots for (those with a storage
/// declared), with the storages that stand.
fn storage_builders(tree: &Tree) -> Vec<(&StorageBuilder, Vec<&Storage>)> {
    let mut v: Vec<(&StorageBuilder, Vec<&Storage>)> = tree
        .storage_builders
        .iter()
        .filter(|b| storage_class(&b.model.type_).is_some())
        .filter(|b| tree.storages.iter().any(|s| s.builder == b.name))
        .map(|b| {
            // a storage requested destroyed (or archived, where the builder
            // archives) keeps its root, without its module call: the root's
            // plan destroys it (an archived one once its archive is taken,
            // `fleet::tofu`), and the original writes a comment only
            let s = tree
                .storages
                .iter()
                .filter(|s| s.builder == b.name && storage::stands(s))
                .collect();
            (b, s)
        })
        .collect();
    v.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    v
}

fn remote(
    tree: &Tree,
    workspace: &str,
    own: Option<&str>,
    rt: Option<&RuntimeEntry>,
) -> Result<RemoteState> {
    Ok(RemoteState {
        workspace: workspace.to_string(),
        backend: backend(tree, own, rt)?,
    })
}

fn identity_remotes(tree: &Tree) -> Result<Vec<RemoteState>> {
    okta_group_builders(tree)
        .into_iter()
        .map(|g| {
            remote(
                tree,
                &g.display,
                g.model.state_configuration.as_deref(),
                None,
            )
        })
        .collect()
}

fn groups_root(tree: &Tree, b: &GroupBuilder) -> Result<Root> {
    let m = &b.model;
    let (Some(org), Some(team)) = (m.org.as_deref(), m.team.as_deref()) else {
        bail!(
            "{}: group builder {}: an okta-tf builder needs org and team",
            b.origin.display(),
            b.display
        );
    };
    let team_label = csis_tofu::hv::label(team).to_lowercase();
    let api_host = m
        .api_host
        .clone()
        .unwrap_or_else(|| format!("https://{org}.pam.okta.com"));
    let credential = |v: &Option<String>, what: &str| -> Result<Hv> {
        match v.as_deref() {
            None => Ok(Hv::var(&format!("{team_label}_{what}"))),
            // sealed under the provider argument's name, as the original
            Some(x) if is_marker(x) => Ok(declared(x, &format!("oktapam_{what}"), false)),
            Some(_) => bail!(
                "{}: group builder {}: `{what}` is written in clear: refused (leave it out, it comes from TF_VAR_{team_label}_{what}, or encrypt it: csis encrypt)",
                b.origin.field(what).display(), b.display
            ),
        }
    };
    let provider = Provider {
        name: "oktapam".into(),
        args: vec![
            ("oktapam_key".into(), credential(&m.key, "key")?),
            ("oktapam_secret".into(), credential(&m.secret, "secret")?),
            ("oktapam_api_host".into(), Hv::s(&api_host)),
            ("oktapam_team".into(), Hv::s(team)),
        ],
    };
    let var = |what: &str, cap: &str| Variable {
        name: format!("{team_label}_{what}"),
        description: format!("{cap} for {team}, auto-generated by OktaTfGroupBuilderModel"),
        sensitive: true,
    };
    // declared whether or not the builder carries the pair sealed (as the
    // original does): TF_VAR_ names a team's CI sets stay valid
    let variables = [("key", "Key"), ("secret", "Secret")]
        .into_iter()
        .map(|(w, c)| var(w, c))
        .collect();
    Ok(Root {
        builder: b.display.clone(),
        class: "OktaTfGroupBuilder".into(),
        executable: executable(tree, m.executable.as_deref()),
        required_providers: required(
            &providers_json(&m.required_providers),
            &[("oktapam", "okta/oktapam")],
        ),
        providers: vec![provider],
        backend: backend(tree, m.state_configuration.as_deref(), None)?,
        remote_states: vec![],
        body: RootBody::Groups(GroupsRoot {
            groups: group_calls(tree, b),
            variables,
            // csis's own CLI in place of `cs-image-system` (see docs/migrating.md)
            gid_program: vec!["csis".into(), "identity".into(), "export-gids".into()],
            gid_query: vec![
                ("identity_type".into(), "okta".into()),
                ("org".into(), org.into()),
                ("team".into(), team.into()),
                ("api_host".into(), api_host),
            ],
        }),
    })
}

fn providers_json(p: &[csis_rules::groups::ProviderModel]) -> Vec<serde_json::Value> {
    p.iter()
        .map(|p| serde_json::json!({"name": p.name, "source": p.source, "version": p.version}))
        .collect()
}

/// A group's members and admins as the load resolved them
/// ([`csis_rules::groups::Membership`]), each marker sealed by reference.
fn group_calls(tree: &Tree, b: &GroupBuilder) -> Vec<GroupCall> {
    let selector = b
        .model
        .gateway_selector
        .clone()
        .or_else(|| tree.config.config.okta_gateway_selector.clone())
        .unwrap_or_default();
    let mut calls = Vec::new();
    for g in tree
        .groups
        .iter()
        .filter(|g| g.builder.as_deref() == Some(b.name.as_str()))
    {
        if g.model.unmanaged {
            calls.push(GroupCall {
                name: g.display.clone(),
                unmanaged: true,
                module: "okta_opa_module".into(),
                inputs: vec![],
            });
            continue;
        }
        let (members, admins) = (&g.membership.members, &g.membership.admins);
        let names = |v: &[String], what: &str| {
            Hv::List(
                v.iter()
                    .enumerate()
                    .map(|(i, x)| {
                        declared(
                            x,
                            &format!("{what}_{}_{i}", csis_tofu::hv::label(&g.name)),
                            true,
                        )
                    })
                    .collect(),
            )
        };
        calls.push(GroupCall {
            name: g.display.clone(),
            unmanaged: false,
            module: "okta_opa_module".into(),
            inputs: vec![
                ("group_id".into(), Hv::s(&g.display)),
                ("members".into(), names(members, "member")),
                ("admins".into(), names(admins, "admin")),
                ("delegated_admin_group_ids".into(), Hv::List(vec![])),
                (
                    "account_discovery".into(),
                    Hv::Bool(b.model.account_discovery.unwrap_or(true)),
                ),
                ("gateway_selector".into(), Hv::s(&selector)),
            ],
        });
    }
    calls
}

fn users_root(tree: &Tree, b: &UserBuilder) -> Result<Option<Root>> {
    let m = &b.model;
    let users: Vec<_> = tree
        .users
        .iter()
        .filter(|u| u.builder.as_deref() == Some(b.name.as_str()))
        .collect();
    let managed = m.type_ == "okta-tf";
    if users.is_empty() || !(managed || m.type_ == "okta-tf-ro") {
        return Ok(None);
    }
    let template = m
        .default_user_email_template
        .clone()
        .unwrap_or_else(|| "{{ user.name }}@{{ builder.email_domain }}".into());
    let mut lookups = Vec::new();
    for u in users {
        // the name canonical, as the original loads it (`Blake.Bravo` is
        // looked up as `blake.bravo`); a sealed name as declared
        let name = if is_marker(&u.name) {
            u.name.clone()
        } else {
            csis_rules::normalize_name(&u.name)
        };
        let key = format!("email_{}", csis_tofu::hv::label(&name));
        let login = match &u.email {
            Some(e) => declared(e, &key, false),
            None => {
                let domain = m.email_domain.clone().unwrap_or_default();
                if is_marker(&domain) {
                    bail!("{}: user builder {}: an encrypted email_domain cannot form a login; give each user an `email` (encrypted if need be)", b.origin.field("email_domain").display(), b.display);
                }
                Hv::s(
                    &template
                        .replace("{{ user.name }}", &name)
                        .replace("{{ builder.email_domain }}", &domain),
                )
            }
        };
        if managed {
            lookups.push(managed_user(b, u, name));
        } else {
            lookups.push(UserLookup {
                name,
                login,
                resource: None,
            });
        }
    }
    Ok(Some(Root {
        builder: b.display.clone(),
        class: if managed {
            "OktaTfUserBuilder"
        } else {
            "OktaTfUserRoBuilder"
        }
        .into(),
        executable: executable(tree, m.executable.as_deref()),
        required_providers: required(
            &providers_json(&m.required_providers),
            &[("okta", "okta/okta")],
        ),
        providers: vec![Provider {
            name: "okta".into(),
            args: vec![
                ("org_name".into(), Hv::s(m.org.as_deref().unwrap_or(""))),
                (
                    "base_url".into(),
                    Hv::s(m.okta_base_url.as_deref().unwrap_or("okta.com")),
                ),
            ],
        }],
        backend: backend(tree, m.state_configuration.as_deref(), None)?,
        remote_states: vec![],
        body: RootBody::Users(UsersRoot { users: lookups }),
    }))
}

/// A managed user (`okta-tf`): its `okta_user` arguments as the original
/// writes them (names, login, e-mail, status, then each profile field
/// declared), each `ENC[...]` value sealed by reference; the login is the
/// e-mail under `email_as_username` (the default), else the name.
fn managed_user(b: &UserBuilder, u: &csis_rules::fleet::User, name: String) -> UserLookup {
    let m = &b.model;
    let um = &u.model;
    let l = csis_tofu::hv::user_label(&name);
    let field = |what: &str, v: &str| declared(v, &format!("{what}_{l}"), false);
    let email = u.email.as_deref().map(|e| field("email", e));
    let login = match &email {
        Some(e) if m.email_as_username.unwrap_or(true) => e.clone(),
        _ => field("login", &name),
    };
    let status = if um.is_enabled == Some(false) {
        "SUSPENDED".to_string()
    } else {
        m.default_user_status
            .clone()
            .unwrap_or_else(|| "STAGED".into())
    };
    let mut args = vec![
        ("first_name".to_string(), field("first_name", &u.first_name)),
        ("last_name".to_string(), field("last_name", &u.last_name)),
        ("login".to_string(), login.clone()),
        ("email".to_string(), email.unwrap_or_else(|| login.clone())),
        ("status".to_string(), Hv::s(&status)),
    ];
    let profile = [
        ("middle_name", &um.middle_name),
        ("mobile_phone", &um.mobile_phone),
        ("honorific_prefix", &um.honorific_prefix),
        ("honorific_suffix", &um.honorific_suffix),
        ("title", &um.title),
        ("display_name", &um.display_name),
        ("nick_name", &um.nick_name),
        ("profile_url", &um.profile_url),
        ("second_email", &um.second_email),
        ("primary_phone", &um.primary_phone),
        ("street_address", &um.street_address),
        ("city", &um.city),
        ("state", &um.state),
        ("zip_code", &um.zip_code),
        ("country_code", &um.country_code),
        ("postal_address", &um.postal_address),
        ("preferred_language", &um.preferred_language),
        ("locale", &um.locale),
        ("timezone", &um.timezone),
        ("user_type", &um.user_type),
        ("employee_number", &um.employee_number),
        ("cost_center", &um.cost_center),
        ("organization", &um.organization),
        ("division", &um.division),
        ("department", &um.department),
        ("manager_id", &um.manager_id),
        ("manager", &um.manager),
    ];
    for (k, v) in profile {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            args.push((k.to_string(), field(k, v)));
        }
    }
    UserLookup {
        name,
        login,
        resource: Some(args),
    }
}

fn instance_call(
    tree: &Tree,
    i: &Instance,
    rt: &RuntimeEntry,
    records: &FleetRecords,
) -> InstanceCall {
    let aws = rt.aws();
    let net = aws.and_then(|a| a.networking.as_ref());
    let image_ref = match records.pins.get(&i.name) {
        Some(build) => ImageRef::Pinned {
            build: build.clone(),
        },
        None => {
            let builder = tree
                .image(&i.image)
                .and_then(|im| im.runtime_entry(&rt.name))
                .and_then(|e| e.image_builder.clone())
                .unwrap_or_else(|| rt.common.default_image_builder.clone());
            ImageRef::Deferred {
                name_pattern: format!("{}-{builder}", i.image),
            }
        }
    };
    let mut t: BTreeMap<String, String> =
        i.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    t.insert(tags::CONFIG.into(), tags::config_value(&tree.config.id));
    let group = tree.group(&i.group);
    let okta = group
        .and_then(|g| g.builder.as_deref())
        .and_then(|b| tree.group_builder(b))
        .is_some_and(|b| b.identity_type == "okta");
    InstanceCall {
        name: i.name.clone(),
        hostname: records
            .hostnames
            .get(&i.name)
            .cloned()
            .unwrap_or_else(|| format!("{}-001", i.name)),
        image: i.image.clone(),
        group: i.group.clone(),
        module: "aws_instance".into(),
        image_ref,
        instance_type: i
            .machine_type
            .clone()
            .unwrap_or_else(|| rt.common.default_machine_type.clone()),
        subnet_id: net
            .and_then(|n| n.default_subnet().or(n.subnets.first()))
            .map(|s| s.subnet_id.clone()),
        iam_instance_profile: aws.and_then(|a| {
            a.session_instance_profile
                .clone()
                .or(a.iam_instance_profile.clone())
        }),
        security_groups: net
            .map(|n| n.addl_security_groups.clone())
            .unwrap_or_default(),
        tags: t.into_iter().collect(),
        mounts: i
            .mounts
            .iter()
            .filter(|m| matches!(m.storage_type.as_str(), "ebs" | "efs" | "s3"))
            .map(|m| MountInput {
                storage: m.storage.clone(),
                storage_type: m.storage_type.clone(),
                workspace: tree
                    .storage_builder(&m.builder)
                    .map(|b| b.display.clone())
                    .unwrap_or_else(|| m.builder.clone()),
                mount_point: m.mount_point.clone(),
                group: m.group.clone(),
                share_mode: m.share_mode.clone(),
                public_read: m.public_read,
            })
            .collect(),
        ephemeral: i.ephemeral,
        enrollment: okta,
        gid: group.and_then(|g| g.model.gid),
        userdata: Some(i.userdata.clone()).filter(|u| !u.trim().is_empty()),
    }
}

fn instances_root(
    tree: &Tree,
    b: &InstanceBuilder,
    records: &FleetRecords,
) -> Result<Option<Root>> {
    let instances: Vec<&Instance> = tree
        .instances
        .iter()
        .filter(|i| i.builder == b.name)
        .collect();
    if instances.is_empty() {
        return Ok(None);
    }
    let Some(rt) = tree.runtime(&b.runtime) else {
        bail!(
            "{}: instance builder {}: runtime {} is not one csis runs",
            b.origin.display(),
            b.display,
            b.runtime
        );
    };
    let net = rt.aws().and_then(|a| a.networking.as_ref());
    let security_group = net
        .filter(|n| n.network.starts_with("vpc-"))
        .map(|n| SecurityGroup {
            vpc_id: n.network.clone(),
            ssh_ingress_security_group_ids: n.ssh_ingress_security_group_ids.clone(),
        });
    let mut remote_states = Vec::new();
    for (sb, _) in storage_builders(tree) {
        let srt = sb.runtime.as_deref().and_then(|r| tree.runtime(r));
        remote_states.push(remote(
            tree,
            &sb.display,
            sb.model.state_configuration.as_deref(),
            srt,
        )?);
    }
    remote_states.extend(identity_remotes(tree)?);
    Ok(Some(Root {
        builder: b.display.clone(),
        class: "TofuInstanceBuilder".into(),
        executable: executable(tree, b.executable.as_deref()),
        required_providers: required(&b.required_plugins, &[("aws", "hashicorp/aws")]),
        providers: vec![aws_provider(rt)],
        backend: backend(tree, b.state_configuration.as_deref(), Some(rt))?,
        remote_states,
        body: RootBody::Instances(InstancesRoot {
            config_id: tags::config_value(&tree.config.id),
            security_group,
            identity_workspace: okta_group_builders(tree).first().map(|g| g.display.clone()),
            instances: instances
                .into_iter()
                .map(|i| instance_call(tree, i, rt, records))
                .collect(),
        }),
    }))
}

/// Every tofu root the tree declares something for, in the original's run
/// order: identity (groups, users), storage, instances.
pub fn roots_input(tree: &Tree, records: &FleetRecords) -> Result<RootsInput> {
    let mut roots = Vec::new();
    for b in okta_group_builders(tree) {
        roots.push(groups_root(tree, b)?);
    }
    for b in &tree.user_builders {
        roots.extend(users_root(tree, b)?);
    }
    for (b, s) in storage_builders(tree) {
        roots.push(storage_root(tree, b, &s, &records.archived)?);
    }
    for b in tree.instance_builders.iter().filter(|b| b.type_ == "tofu") {
        roots.extend(instances_root(tree, b, records)?);
    }
    Ok(RootsInput {
        run: records.run.clone(),
        module_source_base: tree.config.config.module_source_base.clone(),
        roots,
    })
}

/// Write the roots under the tree's `generation_directory` and record each
/// one's state location in `meta_state/state-locations.yaml`. Refused,
/// nothing written: a root that would hold a secret in clear, two roots at
/// one location, a recorded root moved.
pub fn emit(tree: &Tree, records: &FleetRecords, meta_state: &Path) -> Result<Emission> {
    write_roots(tree, &roots_input(tree, records)?, meta_state)
}

/// [`emit`] of roots already mapped.
fn write_roots(tree: &Tree, input: &RootsInput, meta_state: &Path) -> Result<Emission> {
    let generated = tree
        .root
        .join(tree.config.generation_directory.trim_start_matches("./"));
    let entries: Vec<(String, Location)> = csis_tofu::backend::locations(input)?
        .into_iter()
        .zip(&input.roots)
        .map(|(l, r)| (r.builder.clone(), l))
        .collect();
    csis_tofu::backend::check_locations(meta_state, &entries)?;
    let e = csis_tofu::emit(input, &tree.root, &generated)?;
    // as written (a local state's path from its root, as its backend file)
    let written: Vec<(String, Location)> = e
        .roots
        .iter()
        .map(|r| (r.builder.clone(), r.location.clone()))
        .collect();
    csis_tofu::backend::record_locations(meta_state, &written)?;
    Ok(e)
}

/// The roots a build writes, dry run or real run (issue 22): every
/// tofu-typed builder with something declared, the instances' pins and
/// hostnames from the records (a machine standing: its generation's
/// hostname; else the next one). `None` when the tree declares nothing a
/// tofu root realises, and nothing is written.
pub fn emit_for_build(
    tree: &Tree,
    meta: &csis_cache::MetaState,
    run: &str,
) -> Result<Option<Emission>> {
    let fleet = meta.fleet()?;
    let hostnames = tree
        .instances
        .iter()
        .map(|i| {
            let h = match fleet.current_generation(&i.name) {
                Some(g) => csis_cache::canonical_hostname(&i.name, g.number),
                None => fleet.next_machine(&i.name, i.ephemeral).1,
            };
            (i.name.clone(), h)
        })
        .collect();
    let archived = tree
        .storages
        .iter()
        .filter(|s| {
            fleet.storage_state(&s.name) == Some(csis_cache::storage_state::StorageState::Archived)
        })
        .map(|s| s.name.clone())
        .collect();
    let records = FleetRecords {
        run: run.to_string(),
        pins: meta.pins()?.instances,
        hostnames,
        archived,
    };
    let input = roots_input(tree, &records)?;
    if input.roots.is_empty() {
        return Ok(None);
    }
    write_roots(tree, &input, meta.dir()).map(Some)
}
