//! Public-safe by construction: the scan for material that must never be
//! public, over a tree's files or what the git index would commit.
//!
//! - Refused by name: plans (`tfplan`, `*.tfplan`), state (`*.tfstate*`),
//!   `*.tfvars[.json]`, `.envrc`, `*.pem`, `.private_key.*`, `.public_key.json`.
//! - Hard rules (every file): an age identity, a PEM private key, an AWS
//!   access key id or secret key assignment, a GCP service-account file, a
//!   JWT, Slack and GitHub tokens, `TF_VAR_x=literal`, and any plaintext the
//!   tree carries encrypted (when the identity opens the tree's markers).
//! - Soft rules (skipped in prose and tests: `*.md`, `*.rst`, `*.txt`,
//!   `*.adoc`, `docs/`, `tests/`, `fixtures/`): an e-mail address outside the
//!   reserved example domains, and a token of 40 or more base64 characters
//!   mixing upper case, lower case and digits with high entropy.
//! - Blanked before the rules: `ENC[age:...]` ciphertext, age recipients,
//!   lock-file hashes (`h1:`, `zh:`), SSH public keys.
//! - `public_safe.allow`: an entry is a case-insensitive substring of the
//!   flagged text that lets a finding through, or `path:<glob>` that accepts
//!   a file whole (a glob without `/` also matches a file name anywhere).
//!
//! A finding names file, line, column, the YAML field when the file is YAML,
//! and the rule; never the flagged text.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::Regex;
use serde::Serialize;

use super::markers::YamlFile;

/// Files larger than this are not read; each is a finding (allow by `path:`).
pub const MAX_SCAN_BYTES: usize = 8 << 20;

/// One finding. It never carries the flagged text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub file: String,
    /// 1-based; None for a finding about the file as a whole (its name, its size).
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The YAML field the text stands in, when the file is YAML and it does.
    pub field: Option<String>,
    /// The rule's id (`age-identity`, `email`, ...).
    pub rule: &'static str,
    /// What the rule looks for, in words.
    pub what: &'static str,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ":")?;
        if let Some(field) = &self.field {
            write!(f, " {field}:")?;
        }
        write!(f, " {} ({})", self.what, self.rule)
    }
}

/// What a scan found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScanReport {
    /// `tree` or `staged`.
    pub source: String,
    /// Files looked at.
    pub scanned: usize,
    pub findings: Vec<Finding>,
    /// Findings `public_safe.allow` let through.
    pub allowed: usize,
    /// The tree's decrypted values were searched for (an identity opened them).
    pub plaintexts_checked: bool,
}

impl ScanReport {
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }
}

struct Rule {
    id: &'static str,
    what: &'static str,
    soft: bool,
    re: Regex,
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let r = |id, what, soft, re: &str| Rule {
            id,
            what,
            soft,
            re: Regex::new(re).expect("rule"),
        };
        vec![
            r("age-identity", "an age identity", false, r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
            r("pem-private-key", "a PEM private key", false, r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"),
            r(
                "aws-access-key-id",
                "an AWS access key id",
                false,
                r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
            ),
            r(
                "aws-secret-access-key",
                "an AWS secret access key",
                false,
                r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}"#,
            ),
            r(
                "gcp-service-account",
                "a GCP service-account key file",
                false,
                r#""(?:type"\s*:\s*"service_account|private_key_id"\s*:\s*"[0-9a-f]{16,})""#,
            ),
            r(
                "jwt",
                "a JSON web token",
                false,
                r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            ),
            r(
                "slack-token",
                "a Slack token or webhook",
                false,
                r"\bxox[abposr]-[0-9A-Za-z-]{10,}|hooks\.slack\.com/services/T[0-9A-Za-z]+/B[0-9A-Za-z]+/[0-9A-Za-z]+",
            ),
            r(
                "github-token",
                "a GitHub token",
                false,
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
            ),
            r(
                "tf-var-literal",
                "a TF_VAR_ variable set to a literal",
                false,
                r#"\bTF_VAR_[A-Za-z0-9_]+=(?:"[^"$\s][^"]*"|'[^']+'|[^\s"'$;|&)][^\s;|&)]*)"#,
            ),
            r(
                "email",
                "an e-mail address",
                true,
                r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            ),
            r("long-token", "a long base64 token", true, r"[A-Za-z0-9+/_-]{40,}={0,2}"),
        ]
    })
}

/// Spans blanked before the rules: ciphertext, recipients, lock hashes, SSH public keys.
fn blanks() -> &'static [Regex] {
    static B: OnceLock<Vec<Regex>> = OnceLock::new();
    B.get_or_init(|| {
        [
            r"ENC\[age:[A-Za-z0-9+/=\s]*\]",
            r"\bage1[0-9a-z]{58}\b",
            r"\b(?:h1|zh):[A-Za-z0-9+/=]+",
            r"\b(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+AAAA[A-Za-z0-9+/]+=*",
        ]
        .iter()
        .map(|s| Regex::new(s).expect("blank"))
        .collect()
    })
}

fn refused_name(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tfplan"
        || name.ends_with(".tfplan")
        || name.contains(".tfstate")
        || name.ends_with(".tfvars")
        || name.ends_with(".tfvars.json")
        || name == ".envrc"
        || name.ends_with(".pem")
        || name.starts_with(".private_key.")
        || name == ".public_key.json"
}

/// Prose and tests, where the soft rules do not apply.
fn prose_or_test(rel: &str) -> bool {
    let lower = rel.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    matches!(ext, "md" | "rst" | "txt" | "adoc")
        || name.starts_with("test_")
        || name.contains("_test.")
        || lower.split('/').rev().skip(1).any(|c| {
            matches!(
                c,
                "docs" | "doc" | "tests" | "test" | "testdata" | "fixtures"
            )
        })
}

/// An address of a reserved or non-public domain (RFC 2606, RFC 6761), or a
/// service's no-reply address: not a person.
fn example_address(addr: &str) -> bool {
    let a = addr.to_ascii_lowercase();
    let (local, domain) = a.rsplit_once('@').unwrap_or(("", &a));
    let public_example = ["example.com", "example.org", "example.net"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")));
    let tld = domain.rsplit('.').next().unwrap_or("");
    public_example
        || matches!(
            tld,
            "example" | "test" | "invalid" | "localhost" | "local" | "internal"
        )
        || domain.ends_with("users.noreply.github.com")
        || local == "git"
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = *c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn long_token(t: &str) -> bool {
    let core = t.trim_end_matches('=');
    core.len() >= 40
        && core.bytes().any(|b| b.is_ascii_uppercase())
        && core.bytes().any(|b| b.is_ascii_lowercase())
        && core.bytes().any(|b| b.is_ascii_digit())
        && entropy(core) >= 4.3
        // one base64 alphabet: `/` and `+` (standard) or `-` and `_` (URL-safe)
        && !(core.contains(['/', '+']) && core.contains(['-', '_']))
        // a path's segments are short; a token's `/` falls anywhere
        && core.split('/').map(str::len).max().unwrap_or(0) >= 16
}

/// The rules and `public_safe.allow`, compiled.
pub struct Scanner {
    allow: Vec<String>,
    allow_paths: GlobSet,
    allow_names: GlobSet,
    known: Vec<String>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Scanner(allow {}, known {})",
            self.allow.len(),
            self.known.len()
        )
    }
}

impl Scanner {
    /// `allow` is `public_safe.allow`; `known` the plaintexts to search for
    /// (values the tree carries encrypted; each at least 8 characters).
    pub fn new(allow: &[String], known: &[String]) -> Result<Scanner, String> {
        let mut paths = GlobSetBuilder::new();
        let mut names = GlobSetBuilder::new();
        let mut subs = Vec::new();
        for a in allow {
            if let Some(g) = a.strip_prefix("path:") {
                let g = g.trim().trim_start_matches("./");
                let glob = Glob::new(g).map_err(|e| format!("public_safe.allow `{a}`: {e}"))?;
                if g.contains('/') {
                    paths.add(glob);
                } else {
                    names.add(glob);
                }
            } else if !a.trim().is_empty() {
                subs.push(a.trim().to_lowercase());
            }
        }
        Ok(Scanner {
            allow: subs,
            allow_paths: paths.build().map_err(|e| e.to_string())?,
            allow_names: names.build().map_err(|e| e.to_string())?,
            known: known
                .iter()
                .filter(|k| k.chars().count() >= 8)
                .cloned()
                .collect(),
        })
    }

    fn path_allowed(&self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        self.allow_paths.is_match(rel)
            || self.allow_names.is_match(name)
            || self.allow_names.is_match(rel)
    }

    fn text_allowed(&self, flagged: &str) -> bool {
        let l = flagged.to_lowercase();
        self.allow.iter().any(|a| l.contains(a.as_str()))
    }

    /// Scan one file (`rel`, relative to the tree, `/`-separated) into `out`.
    pub fn scan(&self, rel: &str, bytes: &[u8], out: &mut ScanReport) {
        out.scanned += 1;
        if self.path_allowed(rel) {
            return;
        }
        let mut found: Vec<(Finding, String)> = Vec::new();
        let whole = |rule, what| Finding {
            file: rel.to_string(),
            line: None,
            column: None,
            field: None,
            rule,
            what,
        };
        if refused_name(rel) {
            found.push((
                whole(
                    "refused-name",
                    "a plan, state, tfvars, .envrc, PEM or key file (refused by name)",
                ),
                rel.to_string(),
            ));
        }
        if bytes.len() > MAX_SCAN_BYTES {
            found.push((
                whole("too-large", "a file too large to scan"),
                rel.to_string(),
            ));
        } else if !bytes[..bytes.len().min(8000)].contains(&0) {
            let text = String::from_utf8_lossy(bytes);
            self.scan_text(rel, &text, &mut found);
        }
        for (f, flagged) in found {
            if self.text_allowed(&flagged) {
                out.allowed += 1;
            } else {
                out.findings.push(f);
            }
        }
    }

    fn scan_text(&self, rel: &str, text: &str, found: &mut Vec<(Finding, String)>) {
        let soft = !prose_or_test(rel);
        let mut hits: Vec<(usize, usize, &'static str, &'static str, String)> = Vec::new();
        let mut line_start = 0usize;
        for (i, raw) in text.split_inclusive('\n').enumerate() {
            let line = raw.trim_end_matches(['\n', '\r']);
            // known plaintexts, before blanking (a plaintext may look like anything)
            for k in &self.known {
                if let Some(pos) = line.find(k.as_str()) {
                    hits.push((
                        i,
                        line_start + pos,
                        "plaintext",
                        "a value the tree carries encrypted, in clear",
                        k.clone(),
                    ));
                }
            }
            let mut blanked = line.to_string();
            for b in blanks() {
                let spans: Vec<(usize, usize)> = b
                    .find_iter(&blanked)
                    .map(|m| (m.start(), m.end()))
                    .collect();
                for (s, e) in spans {
                    blanked.replace_range(s..e, &" ".repeat(e - s));
                }
            }
            for r in rules() {
                if r.soft && !soft {
                    continue;
                }
                for m in r.re.find_iter(&blanked) {
                    let t = m.as_str();
                    let keep = match r.id {
                        "email" => !example_address(t),
                        "long-token" => long_token(t),
                        _ => true,
                    };
                    if keep {
                        hits.push((i, line_start + m.start(), r.id, r.what, t.to_string()));
                    }
                }
            }
            line_start += raw.len();
        }
        if hits.is_empty() {
            return;
        }
        // a soft match inside a hard one (a token's body) is the same finding
        let hard: Vec<(usize, usize)> = hits
            .iter()
            .filter(|h| !matches!(h.2, "email" | "long-token"))
            .map(|h| (h.1, h.1 + h.4.len()))
            .collect();
        hits.retain(|h| {
            !matches!(h.2, "email" | "long-token")
                || !hard.iter().any(|(s, e)| h.1 < *e && *s < h.1 + h.4.len())
        });
        let yaml = (rel.ends_with(".yml") || rel.ends_with(".yaml"))
            .then(|| YamlFile::from_text(Path::new(rel), rel.to_string(), text.to_string()).ok())
            .flatten();
        let scalars = yaml.as_ref().map(|y| y.scalars()).unwrap_or_default();
        for (line, off, rule, what, flagged) in hits {
            let ls = text[..off].rfind('\n').map(|p| p + 1).unwrap_or(0);
            let column = text[ls..off].chars().count() as u32 + 1;
            let field = scalars
                .iter()
                .find(|s| s.offset <= off && off < s.offset + s.len.max(1))
                .map(|s| s.path.clone());
            found.push((
                Finding {
                    file: rel.to_string(),
                    line: Some(line as u32 + 1),
                    column: Some(column),
                    field,
                    rule,
                    what,
                },
                flagged,
            ));
        }
    }
}

/// The scan can not run.
#[derive(Debug)]
pub enum SourceError {
    /// `--staged` outside a git work tree.
    NotGit(String),
    Other(String),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::NotGit(s) | SourceError::Other(s) => f.write_str(s),
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

fn in_git(dir: &Path) -> bool {
    git(dir, &["rev-parse", "--is-inside-work-tree"]).is_ok_and(|o| o.starts_with(b"true"))
}

fn nul_list(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The files of the tree at `dir`: in a git work tree, the tracked and the
/// untracked-not-ignored files under it (what could be committed); else
/// every file, skipping `.git/`, `.csis/` and `target/`.
pub fn tree_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    if in_git(dir) {
        let out = git(
            dir,
            &[
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
        )?;
        let mut v: Vec<String> = nul_list(&out);
        v.sort();
        v.dedup();
        return Ok(v
            .into_iter()
            .map(|r| {
                let p = dir.join(&r);
                (r, p)
            })
            .filter(|(_, p)| p.is_file())
            .collect());
    }
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir()
                    && matches!(e.file_name().to_str(), Some(".git" | ".csis" | "target")))
        })
    {
        let e = e.map_err(|e| e.to_string())?;
        if e.file_type().is_file() {
            out.push((super::display_path(e.path(), dir), e.into_path()));
        }
    }
    Ok(out)
}

/// Scan the tree at `dir`.
pub fn scan_tree(dir: &Path, scanner: &Scanner) -> Result<ScanReport, SourceError> {
    let mut report = ScanReport {
        source: "tree".into(),
        ..Default::default()
    };
    for (rel, p) in tree_files(dir).map_err(SourceError::Other)? {
        let bytes = match std::fs::metadata(&p) {
            Ok(m) if m.len() as usize > MAX_SCAN_BYTES => vec![0u8; MAX_SCAN_BYTES + 1],
            _ => std::fs::read(&p)
                .map_err(|e| SourceError::Other(format!("{rel}: cannot read: {e}")))?,
        };
        scanner.scan(&rel, &bytes, &mut report);
    }
    Ok(report)
}

/// Scan what a commit in the repository holding `dir` would publish: every
/// staged file (added, copied, modified, renamed, type-changed) as the index
/// holds it. Paths under `dir` are shown relative to it, others relative to
/// the repository's top.
pub fn scan_staged(dir: &Path, scanner: &Scanner) -> Result<ScanReport, SourceError> {
    if !in_git(dir) {
        return Err(SourceError::NotGit(format!(
            "--staged: {} is not in a git work tree",
            dir.display()
        )));
    }
    let top = String::from_utf8_lossy(
        &git(dir, &["rev-parse", "--show-toplevel"]).map_err(SourceError::Other)?,
    )
    .trim()
    .to_string();
    let top = PathBuf::from(top);
    let prefix = String::from_utf8_lossy(
        &git(dir, &["rev-parse", "--show-prefix"]).map_err(SourceError::Other)?,
    )
    .trim()
    .to_string();
    let names = git(
        &top,
        &[
            "diff",
            "--cached",
            "--name-only",
            "-z",
            "--diff-filter=ACMRT",
        ],
    )
    .map_err(SourceError::Other)?;
    let mut report = ScanReport {
        source: "staged".into(),
        ..Default::default()
    };
    for path in nul_list(&names) {
        let bytes =
            git(&top, &["cat-file", "blob", &format!(":{path}")]).map_err(SourceError::Other)?;
        let rel = path
            .strip_prefix(prefix.as_str())
            .unwrap_or(&path)
            .to_string();
        scanner.scan(&rel, &bytes, &mut report);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(rel: &str, text: &str, allow: &[&str]) -> ScanReport {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let s = Scanner::new(&allow, &[]).unwrap();
        let mut r = ScanReport::default();
        s.scan(rel, text.as_bytes(), &mut r);
        r
    }

    fn rules_of(r: &ScanReport) -> Vec<&str> {
        r.findings.iter().map(|f| f.rule).collect()
    }

    #[test]
    fn hard_rules_fire_everywhere_and_name_the_field() {
        let key = format!(
            "AGE-SECRET-KEY-1{}",
            "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
                .repeat(2)
                .get(..58)
                .unwrap()
        );
        let text = format!("---\nconfig:\n  note: fine\n  token: {key}\n");
        let r = scan("cfg/x.yml", &text, &[]);
        assert_eq!(rules_of(&r), vec!["age-identity"]);
        let f = &r.findings[0];
        assert_eq!(
            (f.line, f.column, f.field.as_deref()),
            (Some(4), Some(10), Some("config.token"))
        );
        assert!(!f.to_string().contains(&key));
        // in prose too
        let r = scan("docs/x.md", &format!("here: {key}\n"), &[]);
        assert_eq!(rules_of(&r), vec!["age-identity"]);
        let r = scan("a.sh", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nexport TF_VAR_token=hunter2\nTF_VAR_ok=\"$TOKEN\"\n", &[]);
        assert_eq!(rules_of(&r), vec!["aws-access-key-id", "tf-var-literal"]);
        let r = scan("k", "-----BEGIN OPENSSH PRIVATE KEY-----\n", &[]);
        assert_eq!(rules_of(&r), vec!["pem-private-key"]);
    }

    #[test]
    fn soft_rules_skip_prose_and_tests_and_example_domains() {
        let text = "owner: jane.doe@corp.io\nother: someone@example.com\n";
        assert_eq!(rules_of(&scan("groups/u.yaml", text, &[])), vec!["email"]);
        assert!(scan("README.md", text, &[]).ok());
        assert!(scan("tests/fixtures/u.yaml", text, &[]).ok());
        let tok = "q8Zr4TkP2mXv9WbN7cHs3LdF6gJy1UeA5oQiRt0K";
        assert_eq!(
            rules_of(&scan("cfg/a.yml", &format!("k: {tok}\n"), &[])),
            vec!["long-token"]
        );
        // a 40-hex commit id and a path are not tokens
        assert!(scan("cfg/a.yml", "k: 3f786850e387550fdab836ed7e6dc881de23001b\np: /usr/lib/x86_64-linux-gnu/libSomethingVeryLong2.so\n", &[]).ok());
    }

    #[test]
    fn ciphertext_recipients_and_ssh_keys_are_blanked() {
        let text = "r: age1hl95vsankapyxyyejhdejmywuwc4ddvpjmflj0hf0y8xjtuk3vystd9ang\nk: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\ne: ENC[age:YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBldi90NSswangvWFNJSWFSK2RWdjB2TjJF]\n";
        assert!(
            scan("cfg/a.yml", text, &[]).ok(),
            "{:?}",
            scan("cfg/a.yml", text, &[])
        );
    }

    #[test]
    fn allow_by_substring_and_by_path() {
        let text = "sa: runner@proj.iam.gserviceaccount.com\n";
        assert_eq!(rules_of(&scan("cfg/a.yml", text, &[])), vec!["email"]);
        let r = scan("cfg/a.yml", text, &[".IAM.gserviceaccount.com"]);
        assert!(r.ok());
        assert_eq!(r.allowed, 1);
        let r = scan(
            "secrets/.age-identity",
            "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6M\n",
            &["path:.age-identity"],
        );
        assert!(r.ok());
        assert_eq!(
            rules_of(&scan("x/plan.tfplan", "", &[])),
            vec!["refused-name"]
        );
        assert!(scan("x/plan.tfplan", "", &["path:x/*.tfplan"]).ok());
    }

    #[test]
    fn known_plaintexts_are_found_without_being_shown() {
        let s = Scanner::new(&[], &["correct horse battery".into(), "short".into()]).unwrap();
        let mut r = ScanReport::default();
        s.scan(
            "notes.md",
            b"it was: correct horse battery staple\nshort\n",
            &mut r,
        );
        assert_eq!(rules_of(&r), vec!["plaintext"]);
        assert_eq!(r.findings[0].line, Some(1));
        assert!(!format!("{:?}{}", r, r.findings[0]).contains("horse"));
    }
}
