//! For teams that commit `generated/` (as the original's `run --commit`
//! did): `config-drift`, is the committed emission current with the
//! declarations, and `runtime-unchanged`, has a runtime's emission changed
//! since a git ref. Both normalise as the original does: the run ids
//! (`<RUN>`) and the date stamp of image names (`<STAMP>`, the tree's
//! `dateformat`) on both sides; run-local files (`state-report.json`,
//! packer's `manifest.json`) are left out. Nothing else legitimately
//! differs, so an absolute path in the emission is drift.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{anyhow, Context as _, Result};
use serde::Serialize;

use crate::emission::{LIFECYCLE_DIRS, RUN_LOCAL};
use crate::TreeArgs;

/// How one file differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// In the fresh emission, not in the committed one (or at the ref).
    Added,
    /// Committed (or at the ref), no longer emitted.
    Removed,
    Changed,
}

/// One file that differs, with its unified diff (normalised text, 2 lines of context).
#[derive(Debug, Clone, Serialize)]
pub struct FileDrift {
    /// Relative to the tree (`generated/base-image/el10@aws-main/source-el10.pkr.hcl`).
    pub path: String,
    pub change: Change,
    pub diff: String,
}

/// The answer of `config-drift` and `runtime-unchanged`.
#[derive(Debug, Clone, Serialize)]
pub struct DriftReport {
    /// The files compared (present on either side).
    pub compared: usize,
    pub files: Vec<FileDrift>,
}

impl DriftReport {
    /// 0 current / unchanged, 1 with the diff.
    pub fn exit_code(&self) -> u8 {
        if self.files.is_empty() {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILURE
        }
    }
}

/// Why there is no answer (exit 2).
#[derive(Debug, Clone, Serialize, thiserror::Error)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum DriftRefusal {
    #[error("{dir} is not in a git work tree (the committed emission is read from git)")]
    NotGit { dir: String },
    #[error("nothing is committed under {dir}/ at {rev}")]
    NothingCommitted { dir: String, rev: String },
    #[error("the dry run over a copy of the tree failed: {reason}")]
    DryRunFailed { reason: String },
    #[error("runtime `{runtime}` is not declared (declared: {declared})")]
    UnknownRuntime { runtime: String, declared: String },
    #[error("git cannot read {rev}: {reason}")]
    BadRef { rev: String, reason: String },
}

impl DriftRefusal {
    pub fn exit_code(&self) -> u8 {
        crate::exit::CANNOT_ANSWER
    }
}

/// The normaliser of one tree: run ids and its date stamp.
pub struct Normaliser {
    run: regex::Regex,
    stamp: Option<regex::Regex>,
    /// (from, to): a path of the private copy, written as the tree's.
    paths: Vec<(String, String)>,
}

/// A strftime format as a regex of what it prints (digits for the
/// numeric fields, anything else literal).
fn stamp_regex(format: &str) -> Option<regex::Regex> {
    let mut re = String::new();
    let mut chars = format.chars();
    let mut fields = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            re.push_str(&regex::escape(&c.to_string()));
            continue;
        }
        match chars.next()? {
            'Y' | 'G' => re.push_str(r"\d{4}"),
            'm' | 'd' | 'H' | 'M' | 'S' | 'y' | 'I' | 'U' | 'W' | 'V' => re.push_str(r"\d{2}"),
            'e' => re.push_str(r"[ \d]\d"),
            'j' => re.push_str(r"\d{3}"),
            'f' => re.push_str(r"\d+"),
            's' => re.push_str(r"\d+"),
            '%' => {
                re.push('%');
                continue;
            }
            _ => re.push_str(r"[A-Za-z0-9]+"),
        }
        fields += 1;
    }
    if fields == 0 {
        return None;
    }
    regex::Regex::new(&re).ok()
}

impl Normaliser {
    pub fn new(dateformat: &str) -> Normaliser {
        Normaliser {
            // csis's run ids (`%Y_%m_%dt%H_%M_%S_%f`, the original's form)
            run: regex::Regex::new(r"\d{4}_\d{2}_\d{2}t\d{2}_\d{2}_\d{2}(?:_\d+)?")
                .expect("valid regex"),
            stamp: stamp_regex(dateformat),
            paths: Vec::new(),
        }
    }

    /// The text with every run id as `<RUN>` and every date stamp as `<STAMP>`.
    pub fn normalise(&self, text: &str) -> String {
        let mut t = text.to_string();
        for (from, to) in &self.paths {
            t = t.replace(from.as_str(), to);
        }
        let t = self.run.replace_all(&t, "<RUN>");
        match &self.stamp {
            Some(s) => s.replace_all(&t, "<STAMP>").into_owned(),
            None => t.into_owned(),
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .with_context(|| format!("running git in {}", dir.display()))
}

fn in_git(dir: &Path) -> bool {
    git(dir, &["rev-parse", "--is-inside-work-tree"])
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The files under `gen` (relative to the tree root) at `rev`: path -> text.
fn files_at(
    root: &Path,
    rev: &str,
    gen: &str,
) -> Result<std::result::Result<BTreeMap<String, Vec<u8>>, DriftRefusal>> {
    let out = git(
        root,
        &[
            "ls-tree",
            "-r",
            "--name-only",
            rev,
            "--",
            &format!("{gen}/"),
        ],
    )?;
    if !out.status.success() {
        return Ok(Err(DriftRefusal::BadRef {
            rev: rev.into(),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }));
    }
    let mut files = BTreeMap::new();
    for name in String::from_utf8_lossy(&out.stdout).lines() {
        let shown = git(root, &["show", &format!("{rev}:./{name}")])?;
        if shown.status.success() {
            files.insert(name.to_string(), shown.stdout);
        }
    }
    Ok(Ok(files))
}

/// The files under `dir` (recursively), relative to `base`.
fn files_on_disk(base: &Path, dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(base) {
                out.insert(
                    rel.to_string_lossy().replace('\\', "/"),
                    std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
                );
            }
        }
    }
    Ok(out)
}

fn run_local(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    RUN_LOCAL.contains(&name)
}

/// `generated/<lifecycle>/<series>@<runtime>` of a path, if it is in a root.
fn root_of(gen: &str, path: &str) -> Option<(String, String, String)> {
    let rest = path.strip_prefix(gen)?.strip_prefix('/')?;
    let mut parts = rest.splitn(3, '/');
    let lc = parts.next()?;
    let root = parts.next()?;
    parts.next()?;
    if !LIFECYCLE_DIRS.contains(&lc) {
        return None;
    }
    let (series, runtime) = root.rsplit_once('@')?;
    Some((
        format!("{gen}/{lc}/{root}"),
        series.to_string(),
        runtime.to_string(),
    ))
}

fn compare(
    n: &Normaliser,
    ours: &BTreeMap<String, Vec<u8>>,
    theirs: &BTreeMap<String, Vec<u8>>,
    keys: &BTreeSet<String>,
    (old_label, new_label): (&str, &str),
) -> DriftReport {
    let text = |b: &Vec<u8>| n.normalise(&String::from_utf8_lossy(b));
    let mut files = Vec::new();
    for k in keys {
        let (old, new) = (theirs.get(k).map(text), ours.get(k).map(text));
        let change = match (&old, &new) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(_), Some(_)) => Change::Changed,
            (None, Some(_)) => Change::Added,
            (Some(_), None) => Change::Removed,
            (None, None) => continue,
        };
        let (a, b) = (old.unwrap_or_default(), new.unwrap_or_default());
        let diff = similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(2)
            .header(&format!("{old_label}/{k}"), &format!("{new_label}/{k}"))
            .to_string();
        files.push(FileDrift {
            path: k.clone(),
            change,
            diff,
        });
    }
    DriftReport {
        compared: keys.len(),
        files,
    }
}

/// Copy the tree for the dry run: everything but `.git`, `generated/`,
/// `_private/` and `.csis/` (its stamps and logs are this checkout's).
fn copy_tree(from: &Path, to: &Path, generation_directory: &str) -> Result<()> {
    let skip: BTreeSet<&str> = [".git", "_private", ".csis", generation_directory]
        .into_iter()
        .collect();
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf(), true)];
    while let Some((src, dst, top)) = stack.pop() {
        std::fs::create_dir_all(&dst)?;
        for e in std::fs::read_dir(&src)? {
            let e = e?;
            let name = e.file_name();
            if top && skip.contains(name.to_string_lossy().as_ref()) {
                continue;
            }
            let ft = e.file_type()?;
            let (s, d) = (e.path(), dst.join(&name));
            if ft.is_dir() {
                stack.push((s, d, false));
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&s)?;
                #[cfg(unix)]
                std::os::unix::fs::symlink(&target, &d)?;
            } else {
                std::fs::copy(&s, &d).with_context(|| format!("copying {}", s.display()))?;
            }
        }
    }
    Ok(())
}

/// A reporter that keeps what the dry run says (for its failure's reason):
/// its notices as data, and its failed nodes; `words` words a notice (the
/// binary's renderer).
struct Quiet {
    said: std::sync::Mutex<Vec<Said>>,
    words: fn(&crate::build::Notice) -> Vec<String>,
}

enum Said {
    Notice(crate::build::Notice),
    Failed { label: String, error: String },
}

impl Quiet {
    /// What the dry run said, one part per line of a notice (a node's
    /// after its label) or per failure.
    fn reason(&self) -> String {
        let said = self.said.lock().unwrap();
        let mut parts = Vec::new();
        for s in said.iter() {
            match s {
                Said::Notice(n) => {
                    parts.extend((self.words)(n).into_iter().map(|w| match n.label() {
                        Some(label) => format!("{label}: {w}"),
                        None => w,
                    }))
                }
                Said::Failed { label, error } => parts.push(format!("{label}: {error}")),
            }
        }
        parts.join("; ")
    }
}

impl crate::build::Reporter for Quiet {
    fn note(&self, notice: &crate::build::Notice) {
        self.said.lock().unwrap().push(Said::Notice(notice.clone()));
    }
    fn words(&self, notice: &crate::build::Notice) -> Vec<String> {
        (self.words)(notice)
    }
    fn event(&self, e: &csis_engine::Event) {
        if let csis_engine::Event::Failed { label, error, .. } = e {
            self.said.lock().unwrap().push(Said::Failed {
                label: label.to_string(),
                error: error.to_string(),
            });
        }
    }
    fn log_line(&self, _: &str, _: &str) {}
    fn dry_run_plan(&self, _: &csis_engine::Plan) {}
}

/// `config-drift`: a dry build (`build --dry-run //...`, no state query)
/// over a private copy of the tree (its `.git`, `generated/`, `_private/`
/// and `.csis/` left out), its `generated/` compared with the one
/// committed at HEAD: every file it emitted (a due root's files and the
/// `.gitignore`s), every committed file of a root it emitted, and every
/// committed root of a series x runtime the tree no longer bakes. A root
/// that is not due is the emission of its current build, so the committed
/// copy of it stands. A failed dry run is refused with what it said, its
/// notices as `words` words them (the binary's renderer,
/// [`crate::build::Reporter::words`]).
pub fn config_drift(
    tree: &TreeArgs,
    words: fn(&crate::build::Notice) -> Vec<String>,
) -> Result<std::result::Result<DriftReport, DriftRefusal>> {
    let root = tree.dir.canonicalize().unwrap_or_else(|_| tree.dir.clone());
    if !in_git(&root) {
        return Ok(Err(DriftRefusal::NotGit {
            dir: root.display().to_string(),
        }));
    }
    let session = crate::session::open(&root, &tree.load_options())?;
    let gen = session.tree.config.generation_directory.clone();
    let committed = match files_at(&root, "HEAD", &gen)? {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let committed: BTreeMap<String, Vec<u8>> = committed
        .into_iter()
        .filter(|(k, _)| !run_local(k))
        .collect();
    if committed.is_empty() {
        return Ok(Err(DriftRefusal::NothingCommitted {
            dir: gen,
            rev: "HEAD".into(),
        }));
    }
    let targets: BTreeSet<(String, String)> = session
        .bake_fingerprints()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let dateformat = session.tree.config.dateformat.clone();
    drop(session);

    let tmp = tempfile_dir()?;
    let copy = tmp.join("tree");
    copy_tree(&root, &copy, &gen)?;
    let quiet = Arc::new(Quiet {
        said: Default::default(),
        words,
    });
    let args = crate::build::BuildOptions {
        patterns: Vec::new(),
        jobs: None,
        dry_run: true,
        force_bake: Vec::new(),
        fail_fast: false,
        no_state_query: true,
        no_wait: false,
        cancel: Default::default(),
        keep_failed: false,
    };
    let copy_args = TreeArgs {
        dir: copy.clone(),
        overlays: tree
            .overlays
            .iter()
            .map(|o| {
                if o.is_absolute() {
                    o.clone()
                } else {
                    std::env::current_dir()
                        .map(|c| c.join(o))
                        .unwrap_or_else(|_| o.clone())
                }
            })
            .collect(),
        undeclare: tree.undeclare.clone(),
    };
    let outcome = crate::Context::records_only(&copy_args.dir, crate::Access::Read, |_| {})
        .and_then(|cx| crate::build::run_in(cx, &copy_args, &args, quiet.clone()));
    let failed = match &outcome {
        Err(e) => Some(format!("{e:#}")),
        Ok(o) if o.exit_code() != crate::exit::SUCCESS => Some(quiet.reason()),
        Ok(_) => None,
    };
    if let Some(reason) = failed {
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(Err(DriftRefusal::DryRunFailed { reason }));
    }
    let fresh: BTreeMap<String, Vec<u8>> = files_on_disk(&copy, &copy.join(&gen))?
        .into_iter()
        .filter(|(k, _)| !run_local(k))
        .collect();
    let _ = std::fs::remove_dir_all(&tmp);

    let mut n = Normaliser::new(&dateformat);
    n.paths
        .push((copy.display().to_string(), root.display().to_string()));
    let emitted_roots: BTreeSet<String> = fresh
        .keys()
        .filter_map(|k| root_of(&gen, k))
        .map(|r| r.0)
        .collect();
    let mut keys: BTreeSet<String> = fresh.keys().cloned().collect();
    for k in committed.keys() {
        match root_of(&gen, k) {
            Some((dir, series, runtime)) => {
                if emitted_roots.contains(&dir) || !targets.contains(&(series, runtime)) {
                    keys.insert(k.clone());
                }
            }
            None => {
                keys.insert(k.clone());
            }
        }
    }
    Ok(Ok(compare(
        &n,
        &fresh,
        &committed,
        &keys,
        ("committed", "declared"),
    )))
}

/// A private directory for the copy.
fn tempfile_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir().join(format!(
        "csis-config-drift-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&base).map_err(|e| anyhow!("cannot create {}: {e}", base.display()))?;
    Ok(base)
}

/// `runtime-unchanged RT --ref REF`: the runtime's roots
/// (`generated/<lifecycle>/<series>@<runtime>/`) in the working tree
/// against the same paths at `rev`.
pub fn runtime_unchanged(
    tree: &TreeArgs,
    runtime: &str,
    rev: &str,
) -> Result<std::result::Result<DriftReport, DriftRefusal>> {
    let root = tree.dir.canonicalize().unwrap_or_else(|_| tree.dir.clone());
    let t = csis_rules::load(&root, &tree.load_options())
        .map_err(|d| crate::NotLoaded { diagnostics: d })?;
    let Some(rt) = t.runtime(runtime) else {
        return Ok(Err(DriftRefusal::UnknownRuntime {
            runtime: runtime.into(),
            declared: t
                .runtimes
                .iter()
                .map(|r| r.display.clone())
                .collect::<Vec<_>>()
                .join(", "),
        }));
    };
    if !in_git(&root) {
        return Ok(Err(DriftRefusal::NotGit {
            dir: root.display().to_string(),
        }));
    }
    let gen = t.config.generation_directory.clone();
    let mine = |k: &String| {
        !run_local(k)
            && root_of(&gen, k)
                .map(|(_, _, r)| r == rt.name)
                .unwrap_or(false)
    };
    let at_ref: BTreeMap<String, Vec<u8>> = match files_at(&root, rev, &gen)? {
        Ok(f) => f.into_iter().filter(|(k, _)| mine(k)).collect(),
        Err(e) => return Ok(Err(e)),
    };
    let now: BTreeMap<String, Vec<u8>> = files_on_disk(&root, &root.join(&gen))?
        .into_iter()
        .filter(|(k, _)| mine(k))
        .collect();
    let keys: BTreeSet<String> = at_ref.keys().chain(now.keys()).cloned().collect();
    let n = Normaliser::new(&t.config.dateformat);
    Ok(Ok(compare(&n, &now, &at_ref, &keys, (rev, "working"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_and_stamps_are_normalised() {
        let n = Normaliser::new("%Y%m%d_%H%M%S");
        assert_eq!(
            n.normalise("ami_name = \"el10-aws-main-20261130_062625\"\ncsis_run = \"2026_11_30t06_26_25_779098\"\n"),
            "ami_name = \"el10-aws-main-<STAMP>\"\ncsis_run = \"<RUN>\"\n"
        );
        let n = Normaliser::new("%Y-%m-%d-%H%M%S");
        assert_eq!(
            n.normalise("web-docker-2026-11-30-062625"),
            "web-docker-<STAMP>"
        );
        assert_eq!(n.normalise("no stamp here 2026"), "no stamp here 2026");
    }

    #[test]
    fn roots_are_read_from_paths() {
        assert_eq!(
            root_of(
                "generated",
                "generated/base-image/el10@aws-main/source-el10.pkr.hcl"
            ),
            Some((
                "generated/base-image/el10@aws-main".into(),
                "el10".into(),
                "aws-main".into()
            ))
        );
        assert_eq!(root_of("generated", "generated/.gitignore"), None);
        assert_eq!(
            root_of("generated", "generated/base-image/.gitignore"),
            None
        );
    }
}
