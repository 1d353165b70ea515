//! The CLI's output as data: every case file of `tests/cli_cases/` names a
//! tree (a fixture copied to a temporary directory), the edits made to it
//! and the `csis` commands run on it; the runner plays it and renders what
//! each shown command printed (exit code, stdout, stderr) into one insta
//! snapshot per case (`tests/cli/snapshots/cli_cases__<case>.snap`). The
//! snapshots are the spec: a new refusal or output is a new case file and
//! its reviewed snapshot.
//!
//! A case file, one directive a line (`#` starts a comment line, which
//! becomes the snapshot's description):
//!
//! - `tree FIXTURE`: the tree is a copy of `tests/fixtures/FIXTURE` (without
//!   it, an empty directory);
//! - `copy FIXTURE-FILE PATH`: a fixture file copied into the tree;
//! - `write PATH <<EOF` ... `EOF`, `append PATH <<EOF` ... `EOF`: a tree
//!   file written or extended with the lines between;
//! - `replace PATH: FROM => TO`: the first `FROM` of a tree file (which must
//!   hold it) replaced (`\n` is a newline in both);
//! - `rm PATH`; `env KEY=VALUE`; `unset KEY`;
//! - `pin instance NAME BUILD`, `unpin instance NAME`: `meta-state/pins.yaml`
//!   edited;
//! - `cd PATH`: later commands run on `<tree>/PATH` (`-C`);
//! - `> ARGS`: run `csis -C <tree> ARGS`, which must exit 0; not shown;
//! - `$ ARGS`: run it and show it;
//! - `show PATH`: a tree file's text shown; `ls PATH`: a directory's entries.
//!
//! In arguments (split at spaces; `'...'` keeps spaces), in the text that
//! `write` and `append` write and in `env` values, `{root}` is the tree's
//! path, `{fixtures}` `tests/fixtures/`, and `@SERIES.N` the N-th recorded
//! build of a series (oldest first; `@SERIES.last` its newest).
//! In what is shown, every build ever recorded reads `[SERIES.N]`, the
//! tree's path `[root]`, the fixtures' `[fixtures]`, a fingerprint `[fp]`;
//! other ids, times and run ids are redacted by [`csis_testkit::Redact`].
//!
//! Every command runs with `NO_COLOR=1`, `CSIS_TEST_USER=avery` and
//! without `CSIS_CONFIG_IDENTITY` or `CSIS_DUMMY_FAIL`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use csis_testkit::{Redact, Tree};

/// A case being played: its tree, what it has printed, the builds seen.
struct Play {
    /// The case's tree (`<tmp>/tree`), its commands run as the test user
    /// `avery`, with no identity, no colour.
    root: Tree,
    /// Where commands run (`cd`).
    dir: PathBuf,
    env: Vec<(String, Option<String>)>,
    out: String,
    /// Every build id recorded so far -> `[SERIES.N]`.
    named: BTreeMap<String, String>,
    redact: Redact,
}

/// `tests/fixtures`, without a trailing `/`.
fn fixtures() -> String {
    let f = csis_testkit::fixture("").display().to_string();
    f.trim_end_matches('/').to_string()
}

/// Fingerprints in text redacted: a word of 12, 16 or 64 hex digits, letters
/// and digits both (a fingerprint, whole or as `plan` shows it; not an
/// account id), becomes `[fp]`, and 8 hex digits cut short (`8a8a1e64..`,
/// `16715240..`) `[fp]..`. They follow the recipe, not the CLI.
fn fingerprints(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, next: Option<char>| {
        let hex = !word.is_empty() && word.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
        let mixed = word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_lowercase());
        let cut = word.len() == 8 && next == Some('.');
        if hex && ((mixed && matches!(word.len(), 12 | 16 | 64)) || cut) {
            out.push_str("[fp]");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out, Some(c));
            out.push(c);
        }
    }
    flush(&mut word, &mut out, None);
    out
}

fn cases_dir() -> PathBuf {
    csis_testkit::workspace().join("tests/cli_cases")
}

fn cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".case"))
        .collect();
    v.sort();
    v
}

/// Split at spaces; `'...'` keeps what it holds together.
fn words(s: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    v.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "an unclosed quote in {s:?}");
    if any {
        v.push(cur);
    }
    v
}

impl Play {
    fn new() -> Play {
        let root = Tree::empty()
            .env("NO_COLOR", "1")
            .env("CSIS_TEST_USER", "avery")
            .env_remove("CSIS_CONFIG_IDENTITY");
        std::fs::create_dir_all(root.path()).unwrap();
        let redact = Redact::new(root.path());
        Play {
            dir: root.path().to_path_buf(),
            root,
            env: Vec::new(),
            out: String::new(),
            named: BTreeMap::new(),
            redact,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The recorded builds of every series, oldest first.
    fn builds(&self) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Ok(l) = csis_cache::MetaState::of_tree(&self.root).lineage() {
            for b in l.builds {
                m.entry(b.series).or_default().push(b.build_id);
            }
        }
        m
    }

    /// Name every build recorded now (a name, once given, stays).
    fn learn(&mut self) {
        for (series, ids) in self.builds() {
            for (n, id) in ids.iter().enumerate() {
                if !self.named.contains_key(id) {
                    let name = format!("[{series}.{n}]");
                    self.redact.name(id, &name);
                    self.named.insert(id.clone(), name);
                }
            }
        }
    }

    /// `{root}`, `{fixtures}` and `@SERIES.N` replaced.
    fn expand(&self, text: &str) -> String {
        let s = text
            .replace("{root}", &self.root.display().to_string())
            .replace("{fixtures}", &fixtures());
        let builds = self.builds();
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find('@') {
            out.push_str(&rest[..i]);
            let tail = &rest[i + 1..];
            let name_end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(tail.len());
            let (series, after) = tail.split_at(name_end);
            let n_end = after
                .get(1..)
                .map(|a| {
                    a.find(|c: char| !c.is_ascii_alphanumeric())
                        .unwrap_or(a.len())
                })
                .unwrap_or(0);
            let n = after.get(1..=n_end).unwrap_or("");
            let index = match n {
                "last" => Some(usize::MAX),
                n => n.parse::<usize>().ok(),
            };
            match index {
                Some(index) if after.starts_with('.') && !series.is_empty() => {
                    let ids = builds
                        .get(series)
                        .unwrap_or_else(|| panic!("{text}: no build of {series}"));
                    let id = if index == usize::MAX {
                        ids.last()
                    } else {
                        ids.get(index)
                    };
                    out.push_str(id.unwrap_or_else(|| panic!("{text}: no {series}.{n}")));
                    rest = &after[1 + n_end..];
                }
                _ => {
                    out.push('@');
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn shown(&mut self, text: &str) -> String {
        let text = text.replace(&fixtures(), "[fixtures]");
        fingerprints(&self.redact.text(&text))
    }

    /// Run `csis -C <dir> ARGS`: exit code, stdout, stderr.
    fn csis(&self, args: &[String]) -> (i32, String, String) {
        let mut c = self.root.csis_in(&self.dir);
        c.args(args);
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        csis_testkit::output(&mut c)
    }

    fn edit_pins(&self, f: impl FnOnce(&mut csis_cache::Pins)) {
        let meta = csis_cache::MetaState::of_tree(&self.root);
        let mut pins = meta.pins().unwrap();
        f(&mut pins);
        meta.save_pins(&pins).unwrap();
    }

    /// Play one directive (`body`: the lines of a `<<EOF` block).
    fn directive(&mut self, case: &str, line: &str, body: Option<String>) {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        match verb {
            "tree" => {
                csis_testkit::copy_dir(&csis_testkit::fixture(rest), &self.root);
            }
            "copy" => {
                let w = words(rest);
                let to = self.path(&w[1]);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(csis_testkit::fixture(&w[0]), &to)
                    .unwrap_or_else(|e| panic!("{case}: copy {rest}: {e}"));
            }
            "write" | "append" => {
                let rel = rest.trim_end_matches("<<EOF").trim();
                let body = body.unwrap_or_else(|| panic!("{case}: {verb} needs <<EOF"));
                let body = self.expand(&body);
                let p = self.path(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                let before = if verb == "append" {
                    std::fs::read_to_string(&p).unwrap()
                } else {
                    String::new()
                };
                std::fs::write(&p, before + &body).unwrap();
            }
            "replace" => {
                let (rel, edit) = rest.split_once(": ").expect("replace PATH: FROM => TO");
                let (from, to) = edit.split_once(" => ").expect("replace PATH: FROM => TO");
                let (from, to) = (from.replace("\\n", "\n"), to.replace("\\n", "\n"));
                let p = self.path(rel);
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(text.contains(&from), "{case}: {rel} lacks {from:?}");
                std::fs::write(&p, text.replacen(&from, &to, 1)).unwrap();
            }
            "rm" => std::fs::remove_file(self.path(rest)).unwrap(),
            "env" => {
                let (k, v) = rest.split_once('=').expect("env KEY=VALUE");
                self.env.push((k.into(), Some(self.expand(v))));
            }
            "unset" => self.env.push((rest.into(), None)),
            "pin" | "unpin" => {
                let w = words(rest);
                assert_eq!(w[0], "instance", "{case}: {line}");
                let name = w[1].clone();
                let build = w.get(2).map(|b| self.expand(b));
                self.edit_pins(|p| match build {
                    Some(b) => {
                        p.instances.insert(name, b);
                    }
                    None => {
                        p.instances.remove(&name);
                    }
                });
            }
            "cd" => self.dir = self.path(rest),
            ">" | "$" => {
                let args: Vec<String> = words(rest).iter().map(|w| self.expand(w)).collect();
                let (code, out, err) = self.csis(&args);
                self.learn();
                if verb == ">" {
                    assert_eq!(code, 0, "{case}: csis {rest} failed:\n{out}\n{err}");
                    return;
                }
                let stdout = match serde_json::from_str::<serde_json::Value>(&out) {
                    Ok(v) if !out.trim().is_empty() => {
                        serde_json::to_string_pretty(&v).unwrap() + "\n"
                    }
                    _ => out,
                };
                let (stdout, stderr) = (self.shown(&stdout), self.shown(&err));
                let _ = writeln!(self.out, "$ csis {rest}\nexit {code}");
                for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
                    if !text.is_empty() {
                        let _ = write!(self.out, "--- {name}\n{text}");
                        if !text.ends_with('\n') {
                            self.out.push('\n');
                        }
                    }
                }
                self.out.push('\n');
            }
            "show" => {
                let text = std::fs::read_to_string(self.path(rest))
                    .unwrap_or_else(|e| panic!("{case}: show {rest}: {e}"));
                let text = self.shown(&text);
                let _ = writeln!(self.out, "--- {rest}\n{text}");
            }
            "ls" => {
                let mut names: Vec<String> = std::fs::read_dir(self.path(rest))
                    .unwrap_or_else(|e| panic!("{case}: ls {rest}: {e}"))
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                let _ = writeln!(self.out, "--- ls {rest}\n{}\n", names.join("\n"));
            }
            other => panic!("{case}: unknown directive {other:?} in {line:?}"),
        }
    }
}

/// Play a case file: the rendered output and the description (its comments).
fn play(case: &str, text: &str) -> (String, String) {
    let mut p = Play::new();
    let mut description = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_end();
        if let Some(c) = line.strip_prefix('#') {
            description.push(c.trim().to_string());
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let body = line.ends_with("<<EOF").then(|| {
            let mut b = String::new();
            for l in lines.by_ref() {
                if l == "EOF" {
                    return b;
                }
                b.push_str(l);
                b.push('\n');
            }
            panic!("{case}: no EOF after {line:?}");
        });
        p.directive(case, line, body);
    }
    (p.out, description.join("\n"))
}

/// Every case, each its own snapshot (`case@NAME.case`): a mismatch is
/// reported with every other one, not in place of them.
#[test]
fn every_case_renders_as_its_snapshot() {
    let cases = cases();
    assert!(!cases.is_empty(), "no case in {}", cases_dir().display());
    let mut played = 0;
    insta::glob!("../cli_cases", "*.case", |path| {
        played += 1;
        let case = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let (out, description) = play(&case, &text);
        insta::with_settings!({description => description, omit_expression => true}, {
            insta::assert_snapshot!("case", out);
        });
    });
    assert_eq!(played, cases.len(), "the glob played every case");
}

#[test]
fn case_words_split_at_spaces_outside_quotes() {
    assert_eq!(
        words("release tools --note 'the first one'  --dry-run"),
        ["release", "tools", "--note", "the first one", "--dry-run"]
    );
    assert_eq!(words("x ''"), ["x", ""]);
}

#[test]
fn fingerprints_are_redacted_and_other_words_stay() {
    assert_eq!(
        fingerprints("bake  //os/deb12@sim:bake  eb07d512904c  inputs (113da1867696 -> 8a8a1e64..) 16715240.. dummy-1a2b3c4d-12 abcdefabcdef 123456789012"),
        "bake  //os/deb12@sim:bake  [fp]  inputs ([fp] -> [fp]..) [fp].. dummy-1a2b3c4d-12 abcdefabcdef 123456789012"
    );
}

#[test]
fn build_references_expand_and_labels_stay() {
    let p = Play::new();
    let meta = csis_cache::MetaState::of_tree(&p.root);
    let mut l = csis_cache::Lineage::default();
    for id in ["dummy-aa-1", "dummy-bb-2"] {
        l.add_build(csis_cache::BuildRecord::new(id.to_string(), "web", "sim"));
    }
    meta.save_lineage(&l).unwrap();
    assert_eq!(
        p.expand("--build @web.1 //images/web@sim:bake @web.0, @web.last."),
        "--build dummy-bb-2 //images/web@sim:bake dummy-aa-1, dummy-bb-2."
    );
}
