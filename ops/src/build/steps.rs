//! A bake's steps as the runtimes take them, from the compiled bake spec.

use csis_rules::compile::BakeSpec;
use csis_rules::model::ModKind;
use csis_runtime::{BakeStep, Ensure, EnsureCommand, EnsureFile};

fn ensure_of(e: &csis_rules::model::EnsureModel) -> Ensure {
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

pub fn steps(spec: &BakeSpec) -> Vec<BakeStep> {
    spec.mods
        .iter()
        .map(|m| match m.kind {
            ModKind::Ansible => BakeStep::Ansible {
                name: m.name.clone(),
                playbooks: m.files.clone(),
                extra_arguments: m.extra_arguments.clone(),
                binary: m
                    .binary
                    .clone()
                    .unwrap_or_else(|| "ansible-playbook".into()),
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
