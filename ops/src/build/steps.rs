//! A bake's steps as the runtimes take them, from the compiled bake spec.

use csis_rules::compile::BakeSpec;
use csis_runtime::{BakeStep, Ensure, EnsureCommand, EnsureFile};
use csis_schema::model::ModKind;

fn ensure_of(e: &csis_schema::model::EnsureModel) -> Ensure {
    Ensure {
        packages: e.packages.clone(),
        files: e
            .files
            .iter()
            .map(|f| EnsureFile {
                path: f.path.clone(),
                content: f.content.clone(),
                mode: match &f.mode {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "0644".into(),
                },
            })
            .collect(),
        services: e.services.clone(),
        commands: e
            .commands
            .iter()
            .map(|c| EnsureCommand {
                run: c.run.clone(),
                unless: c.unless.clone(),
            })
            .collect(),
    }
}

/// The recipe of a bake beyond its steps and tests (lowered by the runtime).
pub fn recipe_of(spec: &BakeSpec) -> csis_runtime::recipe::Recipe {
    use csis_runtime::recipe as r;
    let str_of = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    r::Recipe {
        base: spec.base_recipe.as_ref().map(|b| r::BaseRecipe {
            os_type: b.os_type.clone(),
            family: b.family.clone(),
            family_version: b.family_version.clone(),
            architecture: spec.architecture.clone().unwrap_or_default(),
            update: r::UpdateRecipe {
                policy: serde_json::to_value(b.update.policy)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                packages: b.update.packages.clone(),
                exclude: b.update.exclude.clone(),
                pin: b
                    .update
                    .pin
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
            admin_user: b.admin_user.clone(),
            admin_public_keys: b.admin_public_keys.clone(),
            identity: b
                .identity_types
                .iter()
                .enumerate()
                .map(|(i, t)| r::IdentityPrereq {
                    identity_type: t.clone(),
                    builder: b
                        .identity_builders
                        .get(i)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "csis built-in".into()),
                })
                .collect(),
            storage: b
                .storage_types
                .iter()
                .enumerate()
                .map(|(i, t)| r::StoragePrereq {
                    storage_type: t.clone(),
                    builder: b.storage_builders.get(i).cloned().flatten(),
                })
                .collect(),
        }),
        image: (!spec.base).then(|| r::ImageRecipe {
            group: spec.group.as_ref().map(|g| r::GroupActivation {
                group: g.group.clone(),
                identity_type: g.identity_type.clone(),
                posix: g.posix,
            }),
            bundle: spec
                .mod_records
                .iter()
                .map(|m| r::BundleMod {
                    name: str_of(m, "name"),
                    builder: str_of(m, "type"),
                    operation: str_of(m, "operation"),
                    idempotent: str_of(m, "idempotent"),
                    content_hash: str_of(m, "content_hash"),
                })
                .collect(),
        }),
    }
}

pub fn steps(spec: &BakeSpec) -> Vec<BakeStep> {
    steps_of_mods(&spec.mods)
}

/// The steps of modifications, in order (a bake's, a mod test's).
pub fn steps_of_mods(mods: &[csis_rules::tree::ModInput]) -> Vec<BakeStep> {
    mods.iter()
        .map(|m| match m.kind {
            ModKind::Ansible => BakeStep::Ansible {
                name: m.name.clone(),
                playbooks: m.files.clone(),
                extra_arguments: m.extra_arguments.clone(),
                binary: m
                    .binary
                    .clone()
                    .unwrap_or_else(|| "ansible-playbook".into()),
                extra_vars: m.config.clone().into_iter().collect(),
            },
            ModKind::BashRemote => BakeStep::Shell {
                name: m.name.clone(),
                inline: m.inline.clone(),
                scripts: m.files.clone(),
                ensure: m.ensure.as_ref().map(ensure_of),
                env: m.environment_vars.clone(),
                execute_command: m.execute_command.clone(),
            },
        })
        .collect()
}
