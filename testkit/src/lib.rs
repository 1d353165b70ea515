//! What csis's tests share (a dev-dependency only, never a dependency):
//! the fixture trees under `tests/fixtures/` and temporary copies of them
//! ([`fixture`], [`copy_dir`], [`Tree`]), the real `csis` binary ([`csis`],
//! [`output`]), and the redaction of build ids, run ids, fingerprints,
//! times and paths in JSON reports before they are snapshotted
//! ([`Redact`]), the local Docker daemon with a busybox base image
//! ([`docker`]), and age keys and markers ([`age_keygen`], [`age_encrypt`]).
//!
//! It depends on no csis crate, so that every crate can use it in its
//! tests without a dependency cycle.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod docker;
pub mod http;
pub mod opa;
mod redact;
pub mod ssm;

pub use redact::Redact;

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ is in the workspace")
        .to_path_buf()
}

/// `tests/fixtures/<rel>` of the workspace.
pub fn fixture(rel: &str) -> PathBuf {
    workspace().join("tests/fixtures").join(rel)
}

/// Every file under `dir`, at any depth (none where `dir` does not read).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Copy the tree at `from` to `to` (created), files and directories; the
/// copies are writable whatever the originals are (the shared reference
/// trees are read-only).
pub fn copy_dir(from: &Path, to: &Path) {
    copy_dir_with(from, to, &[]);
}

/// [`copy_dir`], replacing each `(from, to)` of `subst` in every file's
/// text (the files must be UTF-8 when `subst` is not empty).
pub fn copy_dir_with(from: &Path, to: &Path, subst: &[(&str, &str)]) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for e in entries {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir_with(&e.path(), &dst, subst);
        } else if subst.is_empty() {
            std::fs::copy(e.path(), &dst).unwrap();
            let mut perm = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dst, perm).unwrap();
        } else {
            let mut text = std::fs::read_to_string(e.path()).unwrap();
            for (k, v) in subst {
                text = text.replace(k, v);
            }
            std::fs::write(&dst, text).unwrap();
        }
    }
}

/// A temporary copy of a fixture tree at `root` (`<tmp>/tree`), removed
/// when dropped.
pub struct Tree {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    /// Set (`Some`) or removed (`None`) in every [`Tree::csis`].
    env: Vec<(OsString, Option<OsString>)>,
}

impl Tree {
    /// A copy of `tests/fixtures/<rel>`.
    pub fn of(rel: &str) -> Tree {
        Tree::copy(&fixture(rel), &[])
    }

    /// A copy of the tree at `from`, with `subst` applied to every file.
    pub fn copy(from: &Path, subst: &[(&str, &str)]) -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        copy_dir_with(from, &root, subst);
        Tree {
            tmp,
            root,
            env: Vec::new(),
        }
    }

    /// A temporary directory whose `root` (`<tmp>/tree`) is not made yet:
    /// for the tree `csis init` writes.
    pub fn empty() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        Tree {
            tmp,
            root,
            env: Vec::new(),
        }
    }

    /// Every [`Tree::csis`] runs with `key=value` in its environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Tree {
        let v = value.as_ref().to_os_string();
        self.env.push((key.as_ref().to_os_string(), Some(v)));
        self
    }

    /// Every [`Tree::csis`] runs without `key` in its environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Tree {
        self.env.push((key.as_ref().to_os_string(), None));
        self
    }

    /// The tree at `root`, which this `Tree` does not own: a tree a test
    /// lays out itself, a starter a helper copied, a fixture read in place.
    /// Its commands are every tree's; `tmp` is a scratch directory of its
    /// own, and `root` is left as it is when the `Tree` is dropped.
    pub fn at(root: impl Into<PathBuf>) -> Tree {
        Tree {
            tmp: tempfile::tempdir().unwrap(),
            root: root.into(),
            env: Vec::new(),
        }
    }

    /// The tree's root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `csis -C <root>`, with no injected dummy failure.
    pub fn csis(&self) -> Command {
        self.command(&self.root)
    }

    /// [`Tree::csis`] naming a directory inside the tree (`csis -C <dir>`,
    /// as after a `cd` into it).
    pub fn csis_in(&self, dir: &Path) -> Command {
        assert!(
            dir.starts_with(&self.root),
            "{} is not in the tree {}",
            dir.display(),
            self.root.display()
        );
        self.command(dir)
    }

    /// [`Tree::csis`] run from `cwd`, naming the tree as a person types it:
    /// `csis -C <dir>`, `dir` relative to `cwd` (`.` inside the tree).
    pub fn csis_from(&self, cwd: &Path, dir: &str) -> Command {
        assert_eq!(
            cwd.join(dir).canonicalize().unwrap(),
            self.root.canonicalize().unwrap(),
            "-C {dir} from {} is not the tree",
            cwd.display()
        );
        let mut c = self.command(Path::new(dir));
        c.current_dir(cwd);
        c
    }

    /// `csis -C <dir>` with the tree's environment.
    fn command(&self, dir: &Path) -> Command {
        let mut c = csis();
        c.arg("-C").arg(dir).env_remove("CSIS_DUMMY_FAIL");
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Run `csis -C <root> ARGS`: exit code, stdout, stderr.
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        output(self.csis().args(args))
    }

    /// [`Tree::run`] that must exit 0: its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "csis {args:?} failed:\n{out}\n{err}");
        out
    }
}

/// A tree is its root where a path is wanted (`t.join("cfg")`, a helper
/// taking `&Path`).
impl std::ops::Deref for Tree {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.root
    }
}

impl AsRef<Path> for Tree {
    fn as_ref(&self) -> &Path {
        &self.root
    }
}

/// The `csis` binary of this build (built by cargo for the workspace's
/// integration tests), on no tree: `init`, `--help`, the commands that
/// read stdin alone. A command on a tree is [`Tree::csis`]'s (the tidy rule
/// `tests/cli/tidy/testkit.rs` holds it).
pub fn csis() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("csis"))
}

/// Run `cmd` to its end: exit code (-1 when killed by a signal), stdout,
/// stderr (lossy UTF-8).
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not run: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `cmd` with `input` on its stdin to its end (stdout and stderr
/// captured): the commands that read stdin (`decrypt --json`, `identity
/// export-gids`, Terraform's external programs).
pub fn with_stdin(mut cmd: Command, input: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} did not run: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `age-keygen -o <dir>/id.age-identity` (Debian package `age`): the
/// identity file and its recipient (`age1...`).
pub fn age_keygen(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("id.age-identity");
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(&key)
        .output()
        .expect("age-keygen (Debian package `age`) is installed");
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&key).unwrap();
    let recipient = text
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("age-keygen writes its public key")
        .trim()
        .to_string();
    (key, recipient)
}

/// The `ENC[age:...]` marker of `plain` encrypted to `recipient` (`age -r`,
/// Debian package `age`), as the loader opens it.
pub fn age_encrypt(recipient: &str, plain: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("age")
        .args(["-r", recipient])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("age (Debian package `age`) is installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plain.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "age -r {recipient}");
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&out.stdout);
    format!("ENC[age:{b64}]")
}

/// Write `text` to `path` as an executable file, from a child process.
///
/// A file a threaded process holds open for writing is inherited by any fork
/// another thread makes before it execs, and executing the file meanwhile fails
/// "Text file busy" (ETXTBSY). Written by `sh`, the write descriptor never lives
/// in this process. Tests that stand in for packer, tofu or a probe use it.
pub fn write_executable(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes())?;
    let st = child.wait()?;
    if st.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "could not write {}",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_a_tree_and_substitutes_text() {
        let t = tempfile::tempdir().unwrap();
        let from = t.path().join("from");
        std::fs::create_dir_all(from.join("a/b")).unwrap();
        std::fs::write(from.join("top.yml"), "name: NAME\n").unwrap();
        std::fs::write(from.join("a/b/deep.yml"), "NAME and NAME\n").unwrap();
        copy_dir(&from, &t.path().join("plain"));
        assert_eq!(
            std::fs::read_to_string(t.path().join("plain/a/b/deep.yml")).unwrap(),
            "NAME and NAME\n"
        );
        let tree = Tree::copy(&from, &[("NAME", "house")]);
        assert_eq!(
            std::fs::read_to_string(tree.root.join("top.yml")).unwrap(),
            "name: house\n"
        );
        assert_eq!(
            std::fs::read_to_string(tree.root.join("a/b/deep.yml")).unwrap(),
            "house and house\n"
        );
    }

    #[test]
    fn a_tree_s_commands_carry_its_environment() {
        let t = Tree::copy(&fixture("ops/basic"), &[])
            .env("CSIS_TESTKIT_A", "1")
            .env_remove("CSIS_TESTKIT_B");
        let c = t.csis();
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("CSIS_TESTKIT_A"), Some(OsStr::new("1")))));
        assert!(envs.contains(&(OsStr::new("CSIS_TESTKIT_B"), None)));
        assert!(envs.contains(&(OsStr::new("CSIS_DUMMY_FAIL"), None)));
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, [OsStr::new("-C"), t.root.as_os_str()]);
    }

    #[test]
    fn a_tree_names_itself_from_inside_and_from_a_working_directory() {
        let t = Tree::copy(&fixture("ops/basic"), &[]);
        let cfg = t.join("cfg");
        let c = t.csis_in(&cfg);
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, [OsStr::new("-C"), cfg.as_os_str()]);
        let c = t.csis_from(t.tmp.path(), "tree");
        assert_eq!(c.get_current_dir(), Some(t.tmp.path()));
        assert_eq!(c.get_args().nth(1), Some(OsStr::new("tree")));
        let at = Tree::at(t.path()).env("CSIS_TESTKIT_A", "1");
        assert_eq!(at.csis().get_args().nth(1), Some(t.root.as_os_str()));
        drop(at);
        assert!(t.join("cfg").is_dir(), "a tree `at` a root leaves it");
    }

    #[test]
    #[should_panic(expected = "is not in the tree")]
    fn a_directory_outside_the_tree_is_refused() {
        let t = Tree::copy(&fixture("ops/basic"), &[]);
        t.csis_in(t.tmp.path());
    }

    #[test]
    fn an_age_marker_holds_an_age_file() {
        use base64::Engine as _;
        let t = tempfile::tempdir().unwrap();
        let (_, recipient) = age_keygen(t.path());
        let m = age_encrypt(&recipient, "secret");
        let b64 = m
            .strip_prefix("ENC[age:")
            .unwrap()
            .strip_suffix(']')
            .unwrap();
        let file = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert!(file.starts_with(b"age-encryption.org/v1\n"), "{m}");
    }

    #[test]
    fn fixtures_are_the_workspace_s() {
        assert!(fixture("ops/basic/cfg").is_dir());
        assert!(workspace().join("Cargo.lock").is_file());
    }
}
