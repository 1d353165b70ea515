//! Files the lowering writes: what holds a secret (a modification's
//! `config:`, a step's lines) as a 0600 file under `.csis/bake-vars/`
//! (removed once its bake is over), and the one write-if-changed (atomic,
//! same content: untouched).

use std::path::{Path, PathBuf};

use crate::BakeRequest;

/// A name with everything but `[A-Za-z0-9._-]` replaced by `_`.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// `.csis/bake-vars/<bake>/` of a bake (see [`private_vars`]).
fn private_vars_dir(req: &BakeRequest) -> PathBuf {
    req.tree_root
        .join(".csis")
        .join("bake-vars")
        .join(file_safe(&req.label))
}

/// Remove a bake's private vars once the bake is over (baked, failed or
/// cancelled): the secret stays on disk only while the tool that needs it
/// runs. An emission without a bake (`--dry-run`) keeps them for the
/// packer root that names them.
pub fn remove_private_vars(req: &BakeRequest) {
    let _ = std::fs::remove_dir_all(private_vars_dir(req));
}

/// Where a modification's `config:` holding a secret is handed to
/// ansible (`-e @<file>`): `.csis/bake-vars/<bake>/<mod>.json` under the
/// tree, mode 0600, written (when changed) as the bake is lowered. The
/// emission names the file, never the value.
pub fn private_vars(req: &BakeRequest, module: &str, json: &str) -> std::io::Result<PathBuf> {
    private_file(req, &format!("{}.json", file_safe(module)), json.as_bytes())
}

/// A file holding a secret, at `rel` under `.csis/bake-vars/<bake>/`
/// (mode 0600, every directory from `bake-vars/<bake>` down 0700), written
/// when changed; its absolute path. What the emission writes names this
/// file, never its content: a step's lines ([`super::privatize`]), a
/// bundle file holding a secret line.
pub(super) fn private_file(
    req: &BakeRequest,
    rel: &str,
    content: &[u8],
) -> std::io::Result<PathBuf> {
    let top = private_vars_dir(req);
    let path = top.join(rel);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or(top.clone());
    std::fs::create_dir_all(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut d = dir.as_path();
        loop {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
            if d == top {
                break;
            }
            match d.parent() {
                Some(p) if p.starts_with(&top) => d = p,
                _ => break,
            }
        }
    }
    write_if_changed(&path, content, 0o600)?;
    Ok(path)
}

/// `.csis/bake-vars/<bake>/<rel>`, written or not.
pub(super) fn private_path(req: &BakeRequest, rel: &str) -> PathBuf {
    private_vars_dir(req).join(rel)
}

/// Write a file unless it already holds exactly this content (atomic).
pub fn write_if_changed(path: &Path, content: &[u8], mode: u32) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp~"));
    let _ = std::fs::remove_file(&tmp);
    // Created with its mode, so a 0600 file (a secret's vars) is never
    // readable by others, not even between write and chmod.
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, mode);
    {
        use std::io::Write as _;
        let mut f = open.open(&tmp)?;
        f.write_all(content)?;
    }
    #[cfg(unix)]
    {
        // the umask may have taken bits the mode asks for (0755 scripts)
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    }
    let _ = mode;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}
