//! What `plan`, `build`, `graph` and `watch` share: load the tree and
//! `meta-state/`, compile the graph, select by patterns, fingerprint, plan.
//! Nothing here writes anything or talks to a runtime.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::{anyhow, bail, Result};
use csis_cache::{Lineage, LineageRecords, MetaPins, MetaState};
use csis_engine::{Fingerprints, Pattern, Plan, Selection};
use csis_rules::compile::{compile, planner, Compiled, ForceBake};
use csis_rules::Tree;

use crate::GlobalArgs;

/// A loaded, compiled tree.
pub struct Session {
    pub root: PathBuf,
    pub tree: Tree,
    pub meta: MetaState,
    pub lineage: Lineage,
    pub compiled: Compiled,
    pub fps: Fingerprints,
}

/// Load the tree (printing diagnostics on failure) and compile it.
pub fn open(global: &GlobalArgs) -> Result<Session> {
    let opts = crate::cmd::validate::load_options(global);
    let tree = match csis_rules::load(&global.dir, &opts) {
        Ok(t) => t,
        Err(diags) => {
            crate::cmd::validate::print_human(&diags);
            let errors = diags.iter().filter(|d| d.is_error()).count();
            bail!("the tree does not load ({errors} error(s))");
        }
    };
    open_tree(tree)
}

/// Compile an already loaded tree against its `meta-state/`.
pub fn open_tree(tree: Tree) -> Result<Session> {
    let root = tree.root().to_path_buf();
    let meta = MetaState::of_tree(&root);
    // Revoked heads and pins to revoked builds are invisible to the plan
    // (lineage operations, csis_cache::planning_view).
    // Records of an interrupted build still in the journal count.
    let (lineage, pins) =
        meta.load_with_journal(&csis_cache::LocalDir::of_tree(&root).journal())?;
    let (lineage, pins) =
        csis_cache::planning_view(&lineage, &pins, &csis_cache::Revocations::load(&meta)?);
    let compiled = compile(&tree, &MetaPins::new(&pins, &lineage))?;
    let fps = compiled.graph.fingerprints()?;
    Ok(Session {
        root,
        tree,
        meta,
        lineage,
        compiled,
        fps,
    })
}

impl Session {
    /// Select by patterns (none = `//...`). A pattern matching nothing is an
    /// error naming the closest labels.
    pub fn select(&self, patterns: &[String]) -> Result<Selection> {
        let pats: Vec<Pattern> = if patterns.is_empty() {
            vec![Pattern::all()]
        } else {
            patterns
                .iter()
                .map(|p| Pattern::parse(p).map_err(|e| anyhow!("{e}")))
                .collect::<Result<_>>()?
        };
        self.compiled
            .graph
            .select(&pats)
            .map_err(|e| anyhow!("{e}"))
    }

    /// The plan for a selection.
    pub fn plan(&self, sel: &Selection, force: &ForceBake) -> Result<Plan> {
        let records = LineageRecords::new(&self.lineage, SystemTime::now());
        Ok(planner(force).plan(&self.compiled.graph, sel, &self.fps, &records)?)
    }
}
