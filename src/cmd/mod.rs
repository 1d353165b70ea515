//! One module per command. Each exposes `Args` (clap) and `run`: open the
//! context, call one operation of `csis_ops`, render its report. No command
//! imports another.

pub mod build;
pub mod builds;
pub mod completions;
pub mod decrypt;
pub mod dispose;
pub mod drift;
pub mod empty;
pub mod encrypt;
pub mod graph;
pub mod identity;
pub mod init;
pub mod instances;
pub mod inventory;
pub mod lineage;
pub mod mask;
pub mod migrate;
pub mod plan;
pub mod preflight;
pub mod public_safe;
pub mod reencrypt;
pub mod release;
pub mod revoke;
pub mod runtime;
pub mod state;
pub mod test;
pub mod test_mods;
pub mod upgrade;
pub mod validate;
pub mod verify;
pub mod watch;

/// What a command says while another csis holds the tree lock.
pub(crate) fn say_waiting(holder: &str) {
    if holder.is_empty() {
        // (A holder that has not said who it is: a build answering from
        // its no-op stamp, done in milliseconds.)
        eprintln!("waiting for another csis to release the tree lock");
    } else {
        eprintln!("waiting for another csis to release the tree lock ({holder})");
    }
}

/// Open the tree of the global options for an operation.
pub(crate) fn open(
    global: &crate::GlobalArgs,
    access: csis_ops::Access,
) -> anyhow::Result<csis_ops::Context> {
    csis_ops::Context::open(&global.tree(), access, say_waiting)
}

/// Load and compile the tree of the global options (a
/// `csis_ops::NotLoaded` when it does not load): the session of the
/// commands that plan.
pub(crate) fn session(global: &crate::GlobalArgs) -> anyhow::Result<csis_ops::session::Session> {
    csis_ops::session::open(&global.dir, &global.tree().load_options())
}

/// A build as a person names it (the full id, a unique prefix of at least 8
/// characters of its hash, or its name) turned into its full id, within
/// `runtime` when one is given. A reference that names several builds, or
/// is too short to name one, is refused here in one line (exit 1); one that
/// names none is passed on unchanged, so the operation refuses it with its
/// own report.
pub(crate) fn build_id(
    cx: &csis_ops::Context,
    query: &str,
    runtime: Option<&str>,
) -> anyhow::Result<Result<String, std::process::ExitCode>> {
    Ok(
        match csis_ops::builds::resolve_build_id(cx, query, runtime)? {
            Ok(id) => Ok(id),
            Err(why) => {
                eprintln!("refused: {why}");
                Err(std::process::ExitCode::from(csis_ops::exit::FAILURE))
            }
        },
    )
}
