//! Which runtime type is which crate: builds the runtimes a command touches
//! from the loaded tree. Every command that talks to runtimes goes through
//! [`runtimes`], so a new runtime type is wired in one place.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use csis_rules::model::RuntimeKind;
use csis_rules::Tree;
use csis_runtime::DynRuntime;
use csis_runtime_dummy::{DummyConfig, DummyRuntime};

/// Construct the runtime named `name` of the tree.
pub fn runtime(tree: &Tree, name: &str) -> Result<DynRuntime> {
    let Some(rt) = tree.runtime(name) else {
        bail!("runtime {name} is not declared in this tree");
    };
    match &rt.kind {
        RuntimeKind::Dummy(d) => {
            let state_dir = match &d.store {
                Some(dir) => tree.root().join(dir),
                None => csis_cache::LocalDir::of_tree(tree.root()).sub("dummy"),
            };
            let mut cfg = DummyConfig::new(rt.name.clone(), state_dir);
            cfg.bake_seconds = d.bake_seconds;
            cfg.fail_series.extend(d.fail.iter().cloned());
            for image in &tree.images {
                if let Some(s) = image
                    .model
                    .config
                    .get("dummy_bake_seconds")
                    .and_then(|v| v.as_f64())
                {
                    cfg.series_seconds.insert(image.name.clone(), s);
                }
            }
            Ok(Arc::new(DummyRuntime::new(cfg)))
        }
        RuntimeKind::Docker(_) => {
            let settings = csis_runtime_docker::DockerSettings::from_model(tree, rt)
                .map_err(|e| anyhow::anyhow!("runtime {}: {e}", rt.display))?;
            let docker = csis_runtime_docker::docker_runtime(settings)
                .map_err(|e| anyhow::anyhow!("runtime {}: {e}", rt.display))?;
            Ok(docker)
        }
        RuntimeKind::Aws(aws) => {
            let mut settings = csis_runtime_aws::AwsSettings::from_model(&rt.common, aws);
            settings.packer_binary = packer_binary(tree, &rt.name);
            Ok(Arc::new(csis_runtime_aws::AwsRuntime::new(settings)))
        }
    }
}

/// The `executables:` binary of the packer image builder bound to `runtime`.
fn packer_binary(tree: &Tree, runtime: &str) -> Option<String> {
    tree.image_builders
        .iter()
        .filter(|ib| ib.runtime == runtime)
        .filter_map(|ib| ib.executable.as_deref())
        .filter_map(|exe| tree.executable(exe))
        .map(|e| e.model.binary.clone().unwrap_or_else(|| e.name.clone()))
        .next()
}

/// Construct every runtime in `names` (deduplicated), by name.
pub fn runtimes<'a>(
    tree: &Tree,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<String, DynRuntime>> {
    let mut out = BTreeMap::new();
    for name in names {
        if !out.contains_key(name) {
            out.insert(name.to_string(), runtime(tree, name)?);
        }
    }
    Ok(out)
}
