//! csis's operations layer: everything a command does, as a library.
//!
//! The binary (`src/`) parses arguments, opens a [`Context`] or a
//! [`session::Session`], calls one operation here and renders the typed
//! report it returns (for people, or as JSON). Nothing here prints: what an
//! operation did, refused, kept or could not check is data in its report.
//!
//! - [`session`]: load, compile, select, plan (read-only); [`watch`]: the
//!   tree kept loaded (incremental) and the plan's changes.
//! - [`build`]: the node executor of `csis build` (resolve, emit, bake,
//!   retag, release and dispose nodes; parent choice; adoption of a bake a
//!   killed run left unrecorded).
//! - [`wiring`]: the one table of runtime types.
//! - [`build::noop`]: the no-op stamp of `csis build`.
//! - [`context`]: a tree opened to read or to write (lock, settled
//!   journal, records, runtimes on demand, the tokio runtime).
//! - [`state`], [`dispose`], [`release`], [`revoke`], [`lineage`]: the
//!   lineage operations; [`inspect`]: `empty`, `preflight`, `runtime
//!   describe` and `verify-instance`.
//! - [`fleet`]: the fleet's lifecycle (storages and instances: the
//!   planner's actions, what a build does for each node, `csis instances`).
//! - [`inventory`]: `csis inventory`, what each runtime holds of this tree.
//! - [`init`]: the starter trees of `csis init`.
//! - [`identity`]: `csis identity export-gids`, the opa-groups root's gid query.
//! - [`exit`]: the exit codes, by name.

pub mod build;
pub mod builds;
pub mod context;
pub mod dispose;
pub mod drift;
pub mod emission;
pub mod exit;
pub mod fleet;
pub mod graph;
pub mod identity;
pub mod image_test;
pub mod init;
pub mod inspect;
pub mod inventory;
pub mod lineage;
pub mod mod_tests;
pub mod release;
pub mod revoke;
pub mod secrets;
pub mod session;
pub mod shards;
pub mod state;
mod state_file;
pub mod timing;
pub mod tofu_roots;
pub mod upgrade;
pub mod validate;
pub mod vendor;
pub mod watch;
pub mod wiring;

pub use context::{Access, Context};

/// The tree did not load: its diagnostics, for the caller to render.
#[derive(Debug)]
pub struct NotLoaded {
    pub diagnostics: Vec<csis_schema::Diagnostic>,
}

impl std::fmt::Display for NotLoaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errors = self.diagnostics.iter().filter(|d| d.is_error()).count();
        write!(f, "the tree does not load ({errors} error(s))")
    }
}

impl std::error::Error for NotLoaded {}

/// Load the tree at `dir`; a tree that does not load is a [`NotLoaded`].
pub fn load_tree(
    dir: &std::path::Path,
    opts: &csis_rules::LoadOptions,
) -> anyhow::Result<csis_rules::Tree> {
    let tree = csis_rules::load(dir, opts).map_err(|diagnostics| NotLoaded { diagnostics })?;
    // Where its records live (`meta_state:`), for every MetaState of it.
    let spec = tree.config.meta_state.clone().unwrap_or_default();
    csis_cache::remote::set_tree_spec(tree.root(), spec.clone());
    csis_cache::remote::set_tree_spec(dir, spec);
    Ok(tree)
}

/// Which tree, and how to load it: the directory, overlay files and
/// removed declarations of this invocation.
#[derive(Debug, Clone, Default)]
pub struct TreeArgs {
    pub dir: std::path::PathBuf,
    pub overlays: Vec<std::path::PathBuf>,
    pub undeclare: Vec<String>,
}

impl TreeArgs {
    /// The load options: overlays and undeclares, the process environment
    /// (and `CSIS_CONFIG_IDENTITY`), every runtime type's offline checks;
    /// the parse cache in `.csis/cache/` where the tree has a `.csis/`
    /// (as the planning index, `csis_cache::load_for_planning`).
    pub fn load_options(&self) -> csis_rules::LoadOptions {
        let local = csis_cache::LocalDir::of_tree(&self.dir);
        csis_rules::LoadOptions {
            overlays: self.overlays.clone(),
            undeclares: self.undeclare.clone(),
            runtime_checks: crate::wiring::offline_checks(),
            parse_cache: local.dir().is_dir().then(|| local.sub("cache")),
            meta_state_check: Some(csis_cache::objstore::not_built_in),
            ..Default::default()
        }
    }
}

/// What the operations' unit tests share.
#[cfg(test)]
pub(crate) mod test_tree {
    /// A temporary copy of `tests/fixtures/ops/basic` (the dummy runtime
    /// `sim`) and the arguments that name it.
    pub fn ops_basic() -> (tempfile::TempDir, crate::TreeArgs) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        csis_testkit::copy_dir(&csis_testkit::fixture("ops/basic"), &root);
        let args = crate::TreeArgs {
            dir: root,
            ..Default::default()
        };
        (tmp, args)
    }
}

#[cfg(test)]
mod tests {
    /// A tree whose records live on an object store loads where this build
    /// carries the `store` feature, and is refused at its `meta_state:`
    /// line where it does not (the quick start's docker-only install).
    #[test]
    fn a_store_this_build_lacks_is_refused_at_the_meta_state_line() {
        for url in ["s3://team-bucket/records", "gs://team-bucket/records"] {
            let (_tmp, args) = crate::test_tree::ops_basic();
            let cfg = args.dir.join("cfg/_config.yml");
            let text = std::fs::read_to_string(&cfg).unwrap();
            std::fs::write(&cfg, format!("{text}meta_state: {url}\n")).unwrap();
            let line = text.lines().count() as u32 + 1;
            let loaded = crate::load_tree(&args.dir, &args.load_options());
            assert_eq!(
                loaded.is_ok(),
                cfg!(feature = "store"),
                "{url}: loads exactly where the store feature is built"
            );
            match loaded {
                Ok(tree) => {
                    assert_eq!(tree.config.meta_state.unwrap().to_string(), url);
                }
                Err(e) => {
                    let nl = e.downcast_ref::<crate::NotLoaded>().expect("a load error");
                    let d = &nl.diagnostics[0];
                    assert_eq!(
                        (d.file.as_str(), d.line, d.path.as_str()),
                        ("cfg/_config.yml", line, "meta_state"),
                        "{d:?}"
                    );
                    assert!(d.message.contains("`store` feature"), "{}", d.message);
                }
            }
        }
    }
}
