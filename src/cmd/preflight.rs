//! `csis preflight`: per runtime, does the daemon or cloud answer (and with
//! what identity/version); and is every executable the tree declares on
//! PATH. Exit 0 when all answer, 2 otherwise (or when no runtime is declared).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use csis_runtime::RuntimeError;

use csis_ops::state::{load_tree, tokio_rt};
use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {}

/// Where `binary` is found: an absolute/relative path as is, else on PATH.
pub(crate) fn find_executable(binary: &str) -> Option<PathBuf> {
    let is_exe = |p: &Path| {
        p.is_file() && {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                p.metadata()
                    .map(|m| m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
            }
            #[cfg(not(unix))]
            {
                true
            }
        }
    };
    if binary.contains('/') {
        let p = PathBuf::from(binary);
        return is_exe(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(binary))
        .find(|p| is_exe(p))
}

pub fn run(global: &GlobalArgs, _args: Args) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let tokio = tokio_rt()?;
    let mut ok = true;
    if tree.runtimes.is_empty() {
        println!("FAIL runtimes: the tree declares none");
        ok = false;
    }
    for decl in &tree.runtimes {
        let rt = match csis_ops::wiring::runtime(&tree, &decl.name) {
            Ok(r) => r,
            Err(e) => {
                println!("FAIL runtime {}: {e:#}", decl.name);
                ok = false;
                continue;
            }
        };
        match tokio.block_on(rt.preflight()) {
            Ok(lines) => {
                for l in lines {
                    println!(
                        "{} runtime {}: {}: {}",
                        if l.ok { "ok  " } else { "FAIL" },
                        decl.name,
                        l.what,
                        l.detail
                    );
                    ok &= l.ok;
                }
            }
            Err(e @ RuntimeError::Unsupported { .. }) => {
                println!("??   runtime {}: cannot check ({e})", decl.name);
            }
            Err(e) => {
                println!("FAIL runtime {}: {e}", decl.name);
                ok = false;
            }
        }
    }
    for exe in &tree.executables {
        let binary = exe.model.binary();
        match find_executable(binary) {
            Some(p) => println!("ok   executable {}: {}", exe.name, p.display()),
            None => {
                println!(
                    "FAIL executable {}: binary '{binary}' not found (an absolute path, or a name on PATH)",
                    exe.name
                );
                ok = false;
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
