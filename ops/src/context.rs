//! [`Context`]: a tree opened for an operation, for reading or for writing.
//!
//! Writing takes the tree lock (one writer per tree) and folds a journal
//! left by an interrupted build into `meta-state/` first, so no replay
//! brings back what the operation changes. A build opens its context the
//! same way ([`Access::Build`]): the tree lock, or on a shared store the
//! leases of what its plan touches, and the journal settled by the
//! [`Context::recorder`] it writes its records with. Runtimes are
//! constructed on demand, once each, by the context's
//! [`crate::wiring::Runtimes`]; hook calls run on its one tokio runtime.

use std::path::Path;

use anyhow::Result;
use csis_cache::lease::Leases;
use csis_cache::{Lineage, LocalDir, MetaState, Pins, Recorder, TreeLock};
use csis_rules::Tree;
use csis_runtime::DynRuntime;

use crate::TreeArgs;

/// How an operation uses the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: no lock.
    Read,
    /// Writes `meta-state/`: the tree lock, the journal settled.
    Write,
    /// A build: the tree lock, waiting for it or not (`--no-wait`: a held
    /// lock is a [`csis_cache::CacheError::Locked`]), taken without the
    /// holder's note ([`Context::note_holder`]: a build answered by its
    /// no-op stamp writes nothing); the journal settled by its
    /// [`Context::recorder`]. On a shared store no lock: the build leases
    /// what its plan touches ([`Context::hold_leases`]).
    Build { wait: bool },
}

impl Access {
    /// `Read` for a dry run, else `Write`.
    pub fn writing_unless(dry_run: bool) -> Access {
        if dry_run {
            Access::Read
        } else {
            Access::Write
        }
    }
}

/// A tree opened for one operation.
pub struct Context {
    tree: Option<Tree>,
    root: std::path::PathBuf,
    pub meta: MetaState,
    pub local: LocalDir,
    access: Access,
    /// Dropped before the lock: a runtime may write under the tree as it
    /// goes (the dummy store compacts its change log).
    runtimes: crate::wiring::Runtimes,
    lock: Option<TreeLock>,
    leases: Option<Leases>,
}

/// `--meta-state`: the records of every tree this process opens live
/// there, whatever `meta_state:` in `cfg/_config.yml` says.
pub fn use_meta_state(spec: Option<csis_schema::model::MetaStateSpec>) {
    csis_cache::remote::set_override(spec)
}

impl Context {
    /// Load the tree (a [`crate::NotLoaded`] when it does not load) and, to
    /// write, take the lock (`on_wait` says so while another csis holds
    /// it) and settle the journal.
    pub fn open(args: &TreeArgs, access: Access, on_wait: impl FnOnce(&str)) -> Result<Context> {
        let tree = crate::load_tree(&args.dir, &args.load_options())?;
        let root = tree.root().to_path_buf();
        let mut cx = Context::records_only(&root, access, on_wait)?;
        cx.tree = Some(tree);
        Ok(cx)
    }

    /// The records of the tree at `dir` without loading its configuration
    /// (`csis revoke` reads and writes only `meta-state/`; a build loads
    /// its tree once past its no-op stamp, `crate::session::open_in`).
    pub fn records_only(dir: &Path, access: Access, on_wait: impl FnOnce(&str)) -> Result<Context> {
        let meta = MetaState::of_tree(dir);
        let local = LocalDir::of_tree(dir);
        let lock = match access {
            Access::Read => None,
            Access::Write => {
                let l = local.lock(true, on_wait)?;
                settle_journal(dir)?;
                Some(l)
            }
            Access::Build { .. } if meta.is_remote() => None,
            Access::Build { wait } => Some(local.lock_unnoted(wait, on_wait)?),
        };
        Ok(Context {
            tree: None,
            root: dir.to_path_buf(),
            meta,
            local,
            access,
            runtimes: Default::default(),
            lock,
            leases: None,
        })
    }

    /// Whether the records are on a shared store (other runners write
    /// them: a build leases what it touches instead of locking the tree).
    pub fn shared(&self) -> bool {
        self.meta.is_remote()
    }

    /// Say in the lock file who holds it (a build, once it goes past its
    /// no-op stamp); nothing when the context holds no lock.
    pub fn note_holder(&self) {
        if let Some(l) = &self.lock {
            l.note_holder();
        }
    }

    /// The context's runtimes, lent to a build's session while it plans
    /// (`crate::session::open_in`); [`Context::return_runtimes`] gives
    /// them back for the run.
    pub(crate) fn lend_runtimes(&mut self) -> crate::wiring::Runtimes {
        std::mem::take(&mut self.runtimes)
    }

    /// The runtimes [`Context::lend_runtimes`] lent, back.
    pub(crate) fn return_runtimes(&mut self, runtimes: crate::wiring::Runtimes) {
        self.runtimes = runtimes;
    }

    /// The records opened for writing, a journal left by an interrupted
    /// build settled first (a build's recorder).
    pub fn recorder(&self) -> Result<Recorder> {
        Ok(Recorder::open(self.meta.clone(), self.local.journal())?)
    }

    /// Hold the leases a build took on a shared store until
    /// [`Context::release_leases`] (or the context's end).
    pub fn hold_leases(&mut self, leases: Leases) {
        self.leases = Some(leases);
    }

    /// The leases held, to be let go by the caller.
    pub fn release_leases(&mut self) -> Option<Leases> {
        self.leases.take()
    }

    /// The loaded tree. Panics for a context opened with [`Context::records_only`].
    pub fn tree(&self) -> &Tree {
        self.tree
            .as_ref()
            .expect("the context was opened with its tree")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// `lineage.yaml` and `pins.yaml` as the next build will see them (a
    /// journal left by an interrupted build merged in).
    pub fn records(&self) -> Result<(Lineage, Pins)> {
        records(&self.root)
    }

    /// The canonical name of a declared runtime (a name or an alias).
    pub fn runtime_name(&self, name: &str) -> Option<String> {
        self.tree().runtime(name).map(|r| r.name.clone())
    }

    /// The runtime `name`, constructed on first use.
    pub fn runtime(&self, name: &str) -> Result<DynRuntime> {
        self.runtimes.get(self.tree(), name)
    }

    /// The operation's runtimes and their tokio runtime.
    pub fn runtimes(&self) -> &crate::wiring::Runtimes {
        &self.runtimes
    }

    /// Run a hook call (or any future) to completion on the context's
    /// tokio runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtimes.block_on(f)
    }

    /// Stop the context's tokio runtime (see [`crate::wiring::Runtimes::shutdown`]).
    pub fn shutdown_runtimes(&mut self) {
        self.runtimes.shutdown()
    }
}

/// Fold a journal left by an interrupted build into `meta-state/` (call
/// with the tree lock held, before a lineage operation rewrites
/// `lineage.yaml` or `pins.yaml`): otherwise the next build would replay the
/// journal over the operation's changes (e.g. bring back a disposed record).
pub fn settle_journal(root: &Path) -> Result<()> {
    csis_cache::Recorder::open(MetaState::of_tree(root), LocalDir::of_tree(root).journal())?;
    Ok(())
}

/// `lineage.yaml` and `pins.yaml` as the next build will see them (with a
/// journal left by an interrupted build merged in).
pub fn records(root: &Path) -> Result<(csis_cache::Lineage, csis_cache::Pins)> {
    Ok(MetaState::of_tree(root).load_with_journal(&LocalDir::of_tree(root).journal())?)
}
