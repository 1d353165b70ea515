//! `csis builds`: the recorded builds per series and runtime, newest
//! first, with their marks (head, released, pinned, tested, revoked; with
//! `check`, `gone` when the runtime no longer has it). Read-only: reads
//! `meta-state/` with the journal of an interrupted build merged in, and
//! takes no lock. The rows come from `csis_cache::build_ref::list_builds`.

use std::time::SystemTime;

use anyhow::Result;
use csis_cache::build_ref::{list_builds, mark_tested, pattern_problem};
use csis_cache::release_rules::ImageTests;
use csis_cache::{LocalDir, MetaState, Revocations};

pub use csis_cache::build_ref::BuildRow;

use crate::TreeArgs;

/// What to list.
#[derive(Debug, Clone, Default)]
pub struct BuildsQuery {
    /// Only series whose name matches: a glob (`web*`) or a substring.
    pub pattern: Option<String>,
    /// Only builds on this runtime.
    pub runtime: Option<String>,
    /// Ask each runtime whether it still has the build.
    pub check: bool,
}

/// The listing, or why the query is refused.
#[derive(Debug)]
pub enum Builds {
    /// The pattern cannot match a series name: why.
    Refused(String),
    Listed {
        rows: Vec<BuildRow>,
        /// What `check` could not ask (a runtime that does not answer).
        notes: Vec<String>,
    },
}

pub fn list(tree: &TreeArgs, q: &BuildsQuery) -> Result<Builds> {
    if let Some(p) = q.pattern.as_deref().and_then(pattern_problem) {
        return Ok(Builds::Refused(p));
    }
    let meta = MetaState::of_tree(&tree.dir);
    let (lineage, pins) = meta.load_with_journal(&LocalDir::of_tree(&tree.dir).journal())?;
    let releases = meta.releases()?;
    let revocations = Revocations::load(&meta)?;
    let mut rows = list_builds(
        &lineage,
        &pins,
        &releases,
        &revocations,
        q.pattern.as_deref(),
        q.runtime.as_deref(),
        SystemTime::now(),
    );
    mark_tested(&mut rows, &ImageTests::load(&meta)?);
    let mut notes = Vec::new();
    if q.check {
        let cx = crate::Context::open(tree, crate::Access::Read, |_| {})?;
        notes = crate::inspect::check_builds(&cx, &mut rows);
    }
    Ok(Builds::Listed { rows, notes })
}

/// The build id a command's `BUILD` argument names: a full id, or a short
/// one that names exactly one record (on `runtime` when given). A query
/// that names none is passed on unchanged (the operation refuses it with
/// its own report); one that names several, or is too short, is refused:
/// `Err(why)`.
pub fn resolve_build_id(
    cx: &crate::Context,
    query: &str,
    runtime: Option<&str>,
) -> Result<std::result::Result<String, String>> {
    use csis_cache::build_ref::{resolve_build, BuildRefError, BuildScope};
    let (lineage, _) = cx.records()?;
    let scope = BuildScope {
        series: None,
        runtime,
    };
    Ok(match resolve_build(&lineage, query, scope) {
        Ok(rec) => Ok(rec.build_id.clone()),
        Err(BuildRefError::NotFound { .. }) => Ok(query.to_string()),
        Err(e) => Err(e.to_string()),
    })
}
