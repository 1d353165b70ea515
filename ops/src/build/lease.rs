//! On a shared store a build holds a lease per (series, runtime) it bakes,
//! releases or disposes, instead of the tree lock: which ones the plan
//! needs, and taking them.

use std::collections::BTreeMap;

use anyhow::Result;
use csis_rules::compile::{ForceBake, NodeSpec, ParentSpec};

use super::{BuildOptions, Notice, Plan, Reporter};
use crate::session::Session;
use crate::TreeArgs;

/// On a shared store: take the lease of each (series, runtime) the plan
/// bakes, releases or disposes, then plan again on the records as they are
/// now (a runner that held one of them may have baked it meanwhile), until
/// the plan needs no lease `l` does not hold. `Some(why)`: `--no-wait`,
/// and another runner holds one.
pub(super) fn lease_the_plan(
    tree: &TreeArgs,
    args: &BuildOptions,
    l: &csis_cache::lease::Leases,
    session: &mut Session,
    plan: &mut Plan,
    reporter: &dyn Reporter,
) -> Result<Option<String>> {
    let force = ForceBake::parse(&args.force_bake);
    loop {
        let (keys, covers) = lease_keys(session, plan);
        if keys.iter().all(|(s, r)| l.holds(s, r)) {
            return Ok(None);
        }
        let note = |e: &csis_cache::lease::LeaseEvent| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            reporter.note(&Notice::lease(e, now))
        };
        match l.acquire(&keys, &covers, !args.no_wait, &note) {
            Ok(_) => {}
            Err(e @ csis_cache::CacheError::Locked { .. }) => return Ok(Some(e.to_string())),
            Err(e) => return Err(e.into()),
        }
        // (the runtimes constructed so far go on with the new session)
        let made = std::mem::take(&mut session.runtimes);
        *session = crate::session::open(&tree.dir, &tree.load_options())?;
        session.runtimes = made;
        let sel = session.select(&args.patterns)?;
        *plan = session.plan(&sel, &force)?;
    }
}

/// The leases a plan needs: (series, runtime) of every due bake, release
/// and dispose node, and per key the parent builds its bake stands on.
#[allow(clippy::type_complexity)]
fn lease_keys(
    session: &Session,
    plan: &Plan,
) -> (
    Vec<(String, String)>,
    BTreeMap<(String, String), Vec<String>>,
) {
    let c = &session.compiled;
    let mut keys = Vec::new();
    let mut covers: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.due) {
        match c.spec(n.id) {
            NodeSpec::Bake(spec) => {
                let key = (spec.series.clone(), spec.runtime.clone());
                if let ParentSpec::Image {
                    series,
                    pinned_build,
                    ..
                } = &spec.parent
                {
                    let parent = pinned_build.clone().or_else(|| {
                        session
                            .lineage
                            .head(series, &spec.runtime)
                            .map(|b| b.build_id.clone())
                    });
                    if let Some(p) = parent {
                        covers.entry(key.clone()).or_default().push(p);
                    }
                }
                keys.push(key);
            }
            NodeSpec::Release { bake, .. } => {
                if let Some(spec) = c.bake_spec(*bake) {
                    keys.push((spec.series.clone(), spec.runtime.clone()));
                }
            }
            NodeSpec::Dispose {
                series, runtime, ..
            } => keys.push((series.clone(), runtime.clone())),
            _ => {}
        }
    }
    keys.sort();
    keys.dedup();
    (keys, covers)
}
