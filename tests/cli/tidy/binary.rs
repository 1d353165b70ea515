//! "the binary reaches the house through ops": the `csis` package depends
//! (not for its tests) on no csis crate but csis-ops, csis-schema (its
//! diagnostics) and csis-graph (the graph page's renderer).

use serde_json::Value;

use super::{deps, packages};

/// Each csis crate the `csis`
/// package depends on (not for its tests) beyond csis-ops, the schema (its
/// diagnostics) and the graph page's renderer.
pub fn past_ops(meta: &Value) -> Vec<String> {
    packages(meta)
        .filter(|p| p["name"] == "csis")
        .flat_map(deps)
        .filter(|(name, kind)| {
            name.starts_with("csis")
                && kind != "dev"
                && !matches!(name.as_str(), "csis-ops" | "csis-schema" | "csis-graph")
        })
        .map(|(name, kind)| format!("the binary depends on {name} ({kind})"))
        .collect()
}

#[cfg(test)]
mod checks {
    use serde_json::json;

    #[test]
    fn the_binary_rule_fails_on_a_crate_past_ops() {
        let bad = json!({"packages": [{"name": "csis", "dependencies": [
            {"name": "csis-ops", "kind": null},
            {"name": "csis-cache", "kind": null},
            {"name": "csis-rules", "kind": "dev"},
        ]}]});
        assert_eq!(
            super::past_ops(&bad),
            ["the binary depends on csis-cache (normal)"]
        );
    }
}
