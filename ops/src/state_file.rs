//! Where the state query's report lives and what the last one found: read
//! by the state query, the build's gate and the plan (which relaunches a
//! machine the last query found missing), so it names nothing of the crate.

use std::path::PathBuf;

use csis_cache::drift::{Drift, StateReport};
use csis_rules::Tree;

/// `<tree>/<generation_directory>/state-report.json`.
pub fn report_path(tree: &Tree) -> PathBuf {
    tree.root()
        .join(&tree.config.generation_directory)
        .join("state-report.json")
}

/// The last report's drift (None = no report, or not one csis reads).
pub fn last_report_drift(tree: &Tree) -> Option<Vec<Drift>> {
    let text = std::fs::read_to_string(report_path(tree)).ok()?;
    let report: StateReport = serde_json::from_str(&text).ok()?;
    Some(report.drift)
}
