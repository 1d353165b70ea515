//! The mod tests' graph (`csis test-mods`, core.md §3.11): one
//! [`NodeKind::ModTest`] node per modification of each image (one per mod
//! content and OS family base: two images sharing a mod share its test),
//! whose inputs are the mod's content hash (the one its bakes record) and
//! its base, the OS family declaration of the image's chain root (its
//! `local_test_image`, family, version and vendor query). A test is due
//! when it has no record, its record is not a pass, or the record's
//! fingerprint is not the test's: only when the mod's content or its base
//! changed. The graph is its own: a build never runs mod tests (they need
//! a local Docker daemon, which a build on AWS does not).

use std::collections::BTreeMap;
use std::path::Path;

use csis_engine::{Label, Node};
use serde_json::{json, Value};

use super::bake_inputs::mod_input_and_record;
use super::vocabulary::{CompileError, Compiled, ModTestSpec, NodeKind, NodeSpec};
use crate::tree::Tree;

/// Version of the mod test's inputs.
pub const MOD_TEST_RECIPE: &str = "csis-mod-test-v1";

/// The mod tests of a tree: per image, in tree order, each mod once per
/// (content hash, chain root). `hash` answers the content hash of each
/// playbook and script.
pub fn mod_tests(
    tree: &Tree,
    hash: &mut dyn FnMut(&Path) -> String,
) -> Result<Compiled, CompileError> {
    let mut g = csis_engine::Graph::new();
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for image in &tree.images {
        let Some(root) = tree.chain_root(image) else {
            continue;
        };
        for m in tree.mod_inputs(image) {
            let (_, record) = mod_input_and_record(&m, hash);
            let content_hash = record["content_hash"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let operation = record["operation"].as_str().unwrap_or_default().to_string();
            if let Some(first) = seen.get(&(content_hash.clone(), root.name.clone())) {
                warnings.push(format!(
                    "image {}: mod {} is the same as {first}'s: tested once",
                    image.name, m.name
                ));
                continue;
            }
            let label = match Label::new(
                &format!("mods/{}/{}", image.name, m.name),
                None,
                Some(NodeKind::ModTest.as_str()),
            ) {
                Ok(l) => l,
                Err(e) => {
                    warnings.push(format!(
                        "image {}: mod {} has no test label ({e}); not tested",
                        image.name, m.name
                    ));
                    continue;
                }
            };
            seen.insert(
                (content_hash.clone(), root.name.clone()),
                format!("{}/{}", image.name, m.name),
            );
            let entries: Vec<Value> = root
                .active_runtimes()
                .map(|e| {
                    json!({
                        "runtime": e.runtime,
                        "image_id": e.entry.image_id,
                        "query": Value::Object(e.entry.query.clone().into_iter().collect()),
                    })
                })
                .collect();
            let base = json!({
                "os": root.name,
                "family": root.model.family,
                "family_version": root.model.family_version,
                "architecture": root.model.architecture,
                "local_test_image": root.model.local_test_image,
                "query": Value::Object(root.model.query.clone().into_iter().collect()),
                "entries": entries,
            });
            let node = Node::new(
                Label::new(&format!("mods/{}/{}", image.name, m.name), None, None)
                    .map_err(|e| CompileError::Label(e.to_string()))?,
                NodeKind::ModTest.as_str(),
            )
            .with_attr("image", &image.name)
            .with_attr("mod", &m.name)
            .with_attr("content_hash", &content_hash)
            .with_inputs(csis_schema::secret::redacted(json!({
                "recipe": MOD_TEST_RECIPE,
                "content_hash": content_hash,
                "operation": operation,
                "base": base,
            })));
            let id = g.add_node(node)?;
            debug_assert_eq!(id.index(), specs.len());
            specs.push(NodeSpec::ModTest(Box::new(ModTestSpec {
                label,
                image: image.name.clone(),
                modification: m.clone(),
                content_hash,
                operation,
                os: root.name.clone(),
                family: root.model.family.clone(),
                family_version: root.model.family_version.clone(),
                package_manager: root.model.package_manager().to_string(),
                local_test_image: root
                    .model
                    .local_test_image
                    .clone()
                    .filter(|s| !s.trim().is_empty()),
            })));
        }
    }
    Ok(Compiled {
        graph: g,
        specs,
        bakes: Default::default(),
        fleet: Vec::new(),
        warnings,
    })
}

/// The image a family's mods are tested in when the tree declares no
/// `local_test_image` and has no docker entry for the chain root: the
/// family's official image (config.md: `almalinux:<v>` for rhel 10 and
/// later, else `rockylinux:<v>`; the docker seed's per-family images).
pub fn default_test_image(family: &str, version: &str) -> String {
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    match family {
        "rhel" | "rocky" | "almalinux" | "centos" if major >= 10 => format!("almalinux:{version}"),
        "rhel" | "rocky" | "centos" => format!("rockylinux:{version}"),
        "almalinux" => format!("almalinux:{version}"),
        "amzn" | "amazon" | "al" => format!("amazonlinux:{version}"),
        other => format!("{other}:{version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load, LoadOptions};

    #[test]
    fn one_test_per_mod_content_and_base_and_the_content_hash_of_its_bakes() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/graph/basic");
        let t = load(&dir, &LoadOptions::default()).unwrap();
        let c = mod_tests(&t, &mut |p: &Path| super::super::file_hash(p)).unwrap();
        let labels: Vec<String> = c
            .graph
            .ids()
            .map(|i| c.graph.node(i).label().to_string())
            .collect();
        assert_eq!(
            labels,
            [
                "//mods/web/web-setup:mod_test",
                "//mods/app/app-setup:mod_test"
            ]
        );
        // the content hash is the one web's bake records
        let b = super::super::compile(&t, &super::super::NoPins).unwrap();
        let web = b.bake_spec(b.bake_of("web", "sim").unwrap()).unwrap();
        let NodeSpec::ModTest(spec) = c.spec(c.graph.ids().next().unwrap()) else {
            panic!("not a mod test");
        };
        assert_eq!(
            web.mod_records[0]["content_hash"],
            spec.content_hash.as_str()
        );
        assert_eq!(spec.os, "deb12");
        assert_eq!(default_test_image("rhel", "10"), "almalinux:10");
        assert_eq!(default_test_image("rhel", "9"), "rockylinux:9");
        assert_eq!(default_test_image("debian", "12"), "debian:12");
    }
}
