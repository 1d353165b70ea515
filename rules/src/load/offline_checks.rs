//! The runtime types' own offline checks, as the load runs them: the
//! caller registers them per runtime type ([`RuntimeChecks`] in
//! [`super::LoadOptions`]; rules depends on no runtime crate), the load
//! calls them on each runtime entry and on each series baked on a runtime,
//! and turns each [`Problem`] into a diagnostic at the place of its field.

use super::Loader;
use crate::tree::{Origin, OsBuilder, OsRuntime, Tree};
use csis_schema::diag::Diagnostic;
use csis_schema::model::{RuntimeCommon, RuntimeKind};
use csis_schema::offline::{BaseEntry, MadeSeries, Problem};
use csis_schema::yaml::{join_path, Loc, Node};

/// The offline checks of one runtime type.
#[derive(Clone, Copy)]
pub struct RuntimeChecks {
    /// The `type:` of the runtime entries these checks are for.
    pub runtime_type: &'static str,
    /// The problems of a runtime entry of this type.
    pub entry: fn(&RuntimeCommon, &RuntimeKind) -> Vec<Problem>,
    /// The problems of an OS builder's entry on a runtime of this type.
    pub base_entry: fn(&BaseEntry) -> Vec<Problem>,
    /// The problems of a series baked on a runtime of this type.
    pub series: fn(&MadeSeries) -> Vec<Problem>,
}

impl std::fmt::Debug for RuntimeChecks {
    // By type name only: the load options' rendering is part of what the
    // incremental load hashes, and function addresses are not content.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RuntimeChecks({})", self.runtime_type)
    }
}

/// The node at a dotted `path` below `node`, or the deepest one of its
/// prefixes that exists.
fn node_at<'a>(node: &'a Node, path: &str) -> &'a Node {
    let mut n = node;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        match n.get(seg) {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}

impl Loader<'_> {
    fn checks_of(&self, runtime_type: &str) -> Option<RuntimeChecks> {
        self.opts
            .runtime_checks
            .iter()
            .find(|c| c.runtime_type == runtime_type)
            .copied()
    }

    fn report(&mut self, loc: &Loc, path: String, p: Problem) {
        let d = Diagnostic::at(loc, &path, p.message).with_hint_opt(p.hint);
        self.d.push(if p.warning { d.warning() } else { d });
    }

    /// The registered checks of the entry's runtime type, each problem at
    /// the place of its field in `node` (the entry at `path`).
    pub(super) fn check_runtime_entry(
        &mut self,
        node: &Node,
        path: &str,
        common: &RuntimeCommon,
        kind: &RuntimeKind,
    ) {
        let Some(checks) = self.checks_of(kind.type_name()) else {
            return;
        };
        for p in (checks.entry)(common, kind) {
            let loc = node_at(node, p.at.as_deref().unwrap_or(&p.path))
                .loc
                .clone();
            let full = if p.path.is_empty() {
                path.to_string()
            } else {
                join_path(path, &p.path)
            };
            self.report(&loc, full, p);
        }
    }

    /// The registered checks of an OS builder's entry on a runtime of
    /// `runtime_type`, each problem at the place of its field in the entry.
    pub(super) fn check_base_entry(
        &mut self,
        t: &Tree,
        os: &OsBuilder,
        e: &OsRuntime,
        runtime_type: &str,
    ) {
        let Some(checks) = self.checks_of(runtime_type) else {
            return;
        };
        let base = BaseEntry {
            image_id: e.entry.image_id.clone(),
            query: t.os_query(os, e),
        };
        for p in (checks.base_entry)(&base) {
            let field = p.at.as_deref().unwrap_or(&p.path);
            let field = field.split('.').next().unwrap_or_default();
            let loc = e.origin.field(field).clone();
            self.report(&loc, series_path(&e.origin, &p.path), p);
        }
    }

    /// The registered series checks of the runtimes each image and OS
    /// builder bakes on: an image's problems at the place of their field,
    /// an OS builder's at the builder; but not the images `kept` says came
    /// resolved (and checked) from the memo (empty: none did).
    pub(super) fn check_series_on_runtimes(&mut self, t: &Tree, kept: &[bool]) {
        for (i, img) in t.images.iter().enumerate() {
            if kept.get(i).copied().unwrap_or(false) {
                continue;
            }
            for e in img.active_runtimes() {
                let Some(rt) = t.runtime(e.runtime.as_deref().unwrap_or("")) else {
                    continue;
                };
                let Some(checks) = self.checks_of(rt.type_name()) else {
                    continue;
                };
                let series = MadeSeries {
                    class: "image",
                    made_name: t.image_final_name(img, e),
                    tag_keys: t.image_tag_keys(img, e),
                };
                for p in (checks.series)(&series) {
                    let field = p.at.as_deref().unwrap_or(&p.path);
                    let field = field.split('.').next().unwrap_or_default();
                    let loc = img.origin.field(field).clone();
                    self.report(&loc, series_path(&img.origin, &p.path), p);
                }
            }
        }
        for os in &t.os_builders {
            for e in os.active_runtimes() {
                let Some(rt) = t.runtime(e.runtime.as_deref().unwrap_or("")) else {
                    continue;
                };
                let Some(checks) = self.checks_of(rt.type_name()) else {
                    continue;
                };
                let series = MadeSeries {
                    class: "OS builder",
                    made_name: t.os_final_name(os, e),
                    tag_keys: t.os_tags(os, e).keys().cloned().collect(),
                };
                for p in (checks.series)(&series) {
                    let loc = os.origin.loc.clone();
                    self.report(&loc, series_path(&os.origin, &p.path), p);
                }
            }
        }
    }
}

fn series_path(origin: &Origin, path: &str) -> String {
    if path.is_empty() {
        origin.path.clone()
    } else {
        join_path(&origin.path, path)
    }
}
