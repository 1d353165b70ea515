//! `csis init`: write a small, commented, working tree to start from. The
//! starters are embedded in the binary (`ops/src/starters/`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

/// Which starter tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Starter {
    /// Simulated bakes on this machine: needs nothing installed.
    Dummy,
    /// Bakes on a Docker daemon (native, through the Docker API).
    Docker,
    /// Bakes AMIs on AWS with packer (placeholders to replace).
    Aws,
}

impl Starter {
    /// Its name, as `--from` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Starter::Dummy => "dummy",
            Starter::Docker => "docker",
            Starter::Aws => "aws",
        }
    }
}

const MOD_BUILDERS: &str = include_str!("starters/common-mod-builders.yml");
const STATE_BACKENDS: &str = include_str!("starters/common-state-backends.yml");
const PLAYBOOK: &str = include_str!("starters/common-playbook.yml");
const SCRIPT: &str = include_str!("starters/common-script.sh");
const GITIGNORE: &str = "generated/\n.csis/\n_private/\nstate/\n";

/// The files of a starter: (path relative to the tree root, content).
pub fn files(starter: Starter) -> Vec<(&'static str, &'static str)> {
    let mut v: Vec<(&'static str, &'static str)> = match starter {
        Starter::Dummy => vec![
            (
                "cfg/_config.yml",
                include_str!("starters/dummy/_config.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/dummy/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/dummy/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/dummy/os-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/dummy/images.yaml"),
            ),
        ],
        Starter::Docker => vec![
            (
                "cfg/_config.yml",
                include_str!("starters/docker/_config.yml"),
            ),
            (
                "cfg/executables.yml",
                include_str!("starters/docker/executables.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/docker/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/docker/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/docker/os-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/docker/images.yaml"),
            ),
        ],
        Starter::Aws => vec![
            ("cfg/_config.yml", include_str!("starters/aws/_config.yml")),
            (
                "cfg/executables.yml",
                include_str!("starters/aws/executables.yml"),
            ),
            (
                "cfg/runtime-builders.yml",
                include_str!("starters/aws/runtime-builders.yml"),
            ),
            (
                "cfg/image-builders.yml",
                include_str!("starters/aws/image-builders.yml"),
            ),
            (
                "cfg/os-builders.yml",
                include_str!("starters/aws/os-builders.yml"),
            ),
            (
                "cfg/storage-builders.yml",
                include_str!("starters/aws/storage-builders.yml"),
            ),
            (
                "images/images.yaml",
                include_str!("starters/aws/images.yaml"),
            ),
        ],
    };
    v.extend([
        ("cfg/mod-builders.yml", MOD_BUILDERS),
        ("cfg/state-backends.yml", STATE_BACKENDS),
        ("playbooks/app.yml", PLAYBOOK),
        ("scripts/motd.sh", SCRIPT),
        (".gitignore", GITIGNORE),
    ]);
    v
}

/// What `csis init` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    pub starter: Starter,
    pub dir: PathBuf,
    /// Paths relative to `dir`, in the order written.
    pub files: Vec<&'static str>,
}

/// Why `csis init` wrote nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum InitRefusal {
    /// The directory already holds a `cfg/`.
    HasCfg { dir: PathBuf },
    /// A file of the starter is already there (nothing is overwritten;
    /// the files before it in the starter's order were written).
    Exists { path: PathBuf },
}

/// Write the `starter` tree into `dir` (created), overwriting nothing.
pub fn init(dir: &Path, starter: Starter) -> Result<std::result::Result<InitReport, InitRefusal>> {
    if dir.join("cfg").exists() {
        return Ok(Err(InitRefusal::HasCfg {
            dir: dir.to_path_buf(),
        }));
    }
    let mut written = Vec::new();
    for (rel, content) in files(starter) {
        let p = dir.join(rel);
        if p.exists() {
            return Ok(Err(InitRefusal::Exists { path: p }));
        }
        write(&p, content)?;
        written.push(rel);
    }
    Ok(Ok(InitReport {
        starter,
        dir: dir.to_path_buf(),
        files: written,
    }))
}

fn write(p: &Path, content: &str) -> Result<()> {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(p, content)?;
    #[cfg(unix)]
    if p.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_of_a_starter_and_then_refuses_to_overwrite() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("new");
        let r = init(&dir, Starter::Docker).unwrap().unwrap();
        assert_eq!(r.files.len(), files(Starter::Docker).len());
        for (rel, content) in files(Starter::Docker) {
            assert_eq!(std::fs::read_to_string(dir.join(rel)).unwrap(), content);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("scripts/motd.sh")).unwrap();
            assert_eq!(mode.permissions().mode() & 0o777, 0o755);
        }
        let again = init(&dir, Starter::Dummy).unwrap().unwrap_err();
        assert_eq!(again, InitRefusal::HasCfg { dir: dir.clone() });
    }

    #[test]
    fn an_existing_file_stops_the_init_at_that_file() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(".gitignore"), "mine\n").unwrap();
        let refusal = init(t.path(), Starter::Dummy).unwrap().unwrap_err();
        assert_eq!(
            refusal,
            InitRefusal::Exists {
                path: t.path().join(".gitignore")
            }
        );
        assert_eq!(
            std::fs::read_to_string(t.path().join(".gitignore")).unwrap(),
            "mine\n"
        );
    }
}
