//! `csis build --dry-run` of the original's standard-aws-posix and complete
//! starters against moto, their tofu roots (identity, storage,
//! instance-image: every `.tf`, `.tfbackend.hcl` and `.tftpl`) and
//! `meta-state/state-locations.yaml` compared attribute by attribute with
//! what the original 0.1.1 itself writes for the same tree with the same
//! ids, but for what ARCHITECTURE.md lists as deliberate differences.
//!
//! The reference holds the original's emission of standard-aws only; the
//! original's emission of these two is made at test time by
//! `tests/support/original_emission.sh` (cs-image-system 0.1.1 from PyPI in
//! a cached venv, Python 3.13, run dry against the same moto with stand-in
//! packer and tofu). Skipped loudly when moto or the original is not there;
//! a failure under `CSIS_REQUIRE_MOTO` (CI).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use hcl::structure::Body;
use serde_json::Value;

use super::files;
use crate::aws_support::*;

/// The Ubuntu 24.04 of runtimes/aws/tests/fixtures/amis.json, which the
/// complete starter's `ubuntu-24` finds.
const MOTO_UBUNTU_AMI: &str = "ami-0ub2404000000u241";

/// The original's emission of `starter`, made in `out`; `None` (skipped, or
/// a failure under `CSIS_REQUIRE_MOTO`) when moto or the original cannot run
/// here. A run of the original that fails is a failure.
fn original(reference: &Path, starter: &str, out: &Path) -> Option<()> {
    if !moto_with_fixtures(MOTO_AMI) || !moto_with_fixtures(MOTO_UBUNTU_AMI) {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/original_emission.sh");
    let run = Std::new("bash")
        .arg(&script)
        .arg(starter)
        .arg(out)
        .env("CSIS_MOTO_URL", moto_url())
        .env("CSIS_REFERENCE", reference)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    match run.status.code() {
        Some(0) => Some(()),
        Some(3) => {
            skip(&format!(
                "the original cs-image-system 0.1.1 cannot be installed: {err}"
            ));
            None
        }
        _ => panic!("the original's dry run of {starter} did not complete:\n{err}"),
    }
}

/// The tree the original ran on, copied, and csis's dry build of it with the
/// same ids, profile files and age identity.
fn csis_on(out: &Path, starter: &str) -> Starter {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(starter);
    csis_testkit::copy_dir(&out.join("input"), &root);
    let t = Starter {
        _tmp: tmp,
        root,
        aws: out.join("aws"),
        net: Value::Null,
        identity: Some(out.join("identity")),
    };
    let (code, o, e) = t.csis(&["build", "--dry-run"]);
    assert_eq!(code, 0, "{o}\n{e}");
    t
}

/// One difference: the file, where in it, ours, the original's, and what
/// ours opens to when it is a sealed value (`local.sensitive["k"]`).
#[derive(Debug)]
struct Diff {
    file: String,
    at: String,
    mine: String,
    theirs: String,
    opened: Option<String>,
}

/// The plaintext of each sealed value of csis's roots, by root directory and
/// key: each root's `data "external" "sensitive"` query, opened with the
/// starter's TEST identity.
fn sealed_plaintexts(tree: &Path, identity: &Path) -> BTreeMap<PathBuf, BTreeMap<String, String>> {
    use std::str::FromStr;
    let key = std::fs::read_to_string(identity).unwrap();
    let key = key
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .unwrap();
    let id = age::x25519::Identity::from_str(key).unwrap();
    let mut out: BTreeMap<PathBuf, BTreeMap<String, String>> = BTreeMap::new();
    for f in compared(tree).iter().filter(|f| f.ends_with(".tf")) {
        let p = tree.join(f);
        let body = hcl::parse(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for b in body.blocks().filter(|b| {
            b.identifier() == "data"
                && b.labels()
                    .iter()
                    .map(|l| l.as_str())
                    .eq(["external", "sensitive"])
        }) {
            for a in b.body().attributes().filter(|a| a.key.as_str() == "query") {
                let hcl::Expression::Object(m) = &a.expr else {
                    continue;
                };
                for (k, v) in m {
                    let marker = show(v);
                    let b64 = marker
                        .strip_prefix("ENC[age:")
                        .and_then(|x| x.strip_suffix(']'))
                        .unwrap_or_else(|| panic!("{f}: {} is no marker", key_of(k)));
                    use base64::Engine;
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .unwrap();
                    let plain = String::from_utf8(age::decrypt(&id, &raw).unwrap()).unwrap();
                    out.entry(p.parent().unwrap().to_path_buf())
                        .or_default()
                        .insert(key_of(k), plain);
                }
            }
        }
    }
    out
}

/// `local.sensitive["k"]` or `nonsensitive(local.sensitive["k"])`: `k`.
fn sealed_key(e: &str) -> Option<&str> {
    let e = e
        .strip_prefix("nonsensitive(")
        .and_then(|x| x.strip_suffix(')'))
        .unwrap_or(e);
    e.strip_prefix("local.sensitive[\"")?.strip_suffix("\"]")
}

fn show(e: &hcl::Expression) -> String {
    match e {
        hcl::Expression::String(s) => s.clone(),
        other => hcl::format::to_string(other).unwrap_or_else(|_| format!("{other:?}")),
    }
}

fn key_of(k: &hcl::ObjectKey) -> String {
    match k {
        hcl::ObjectKey::Identifier(i) => i.to_string(),
        hcl::ObjectKey::Expression(e) => show(e),
        other => format!("{other:?}"),
    }
}

/// Two expressions: objects key by key, arrays item by item, anything else
/// whole.
fn expr_diffs(
    at: &str,
    m: Option<&hcl::Expression>,
    t: Option<&hcl::Expression>,
    out: &mut Vec<(String, String, String)>,
) {
    use hcl::Expression as E;
    match (m, t) {
        (Some(E::Object(a)), Some(E::Object(b))) => {
            let (a, b): (BTreeMap<_, _>, BTreeMap<_, _>) = (
                a.iter().map(|(k, v)| (key_of(k), v)).collect(),
                b.iter().map(|(k, v)| (key_of(k), v)).collect(),
            );
            for k in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
                expr_diffs(
                    &format!("{at}.{k}"),
                    a.get(k).copied(),
                    b.get(k).copied(),
                    out,
                );
            }
        }
        (Some(E::Array(a)), Some(E::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                expr_diffs(&format!("{at}[{i}]"), Some(x), Some(y), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push((
            at.to_string(),
            a.map(show).unwrap_or_default(),
            b.map(show).unwrap_or_default(),
        )),
    }
}

/// Two HCL bodies, attribute by attribute and block by block (a block
/// named by its identifier and labels, the n-th of that name matched with
/// the n-th).
fn body_diffs(at: &str, m: &Body, t: &Body, out: &mut Vec<(String, String, String)>) {
    let attrs = |b: &Body| -> BTreeMap<String, hcl::Expression> {
        b.attributes()
            .map(|a| (a.key.to_string(), a.expr.clone()))
            .collect()
    };
    let (ma, ta) = (attrs(m), attrs(t));
    for k in ma.keys().chain(ta.keys()).collect::<BTreeSet<_>>() {
        expr_diffs(&format!("{at}{k}"), ma.get(k), ta.get(k), out);
    }
    let blocks = |b: &Body| -> BTreeMap<String, Vec<Body>> {
        let mut by: BTreeMap<String, Vec<Body>> = BTreeMap::new();
        for x in b.blocks() {
            let name = std::iter::once(x.identifier().to_string())
                .chain(x.labels().iter().map(|l| format!("{:?}", l.as_str())))
                .collect::<Vec<_>>()
                .join(" ");
            by.entry(name).or_default().push(x.body().clone());
        }
        by
    };
    let (mb, tb) = (blocks(m), blocks(t));
    for k in mb.keys().chain(tb.keys()).collect::<BTreeSet<_>>() {
        let (x, y) = (
            mb.get(k).map(Vec::as_slice).unwrap_or_default(),
            tb.get(k).map(Vec::as_slice).unwrap_or_default(),
        );
        for i in 0..x.len().max(y.len()) {
            let here = if x.len().max(y.len()) > 1 {
                format!("{at}{k}#{i}.")
            } else {
                format!("{at}{k}.")
            };
            match (x.get(i), y.get(i)) {
                (Some(a), Some(b)) => body_diffs(&here, a, b, out),
                (a, b) => out.push((
                    format!("{at}{k}"),
                    a.map(|_| "(a block)".to_string()).unwrap_or_default(),
                    b.map(|_| "(a block)".to_string()).unwrap_or_default(),
                )),
            }
        }
    }
}

/// The differences of one file: HCL structurally, a template or YAML line
/// by line (a `run:` line, the run's id, aside).
fn file_diffs(rel: &str, mine: &str, theirs: &str, sealed: &BTreeMap<String, String>) -> Vec<Diff> {
    let mut raw = Vec::new();
    if rel.ends_with(".tf") || rel.ends_with(".hcl") {
        let m = hcl::parse(mine)
            .unwrap_or_else(|e| panic!("ours of {rel} does not parse: {e}\n{mine}"));
        let t = hcl::parse(theirs)
            .unwrap_or_else(|e| panic!("the original's {rel} does not parse: {e}"));
        body_diffs("", &m, &t, &mut raw);
    } else {
        // sections: a template is one; the state locations one per
        // workspace (a top-level `  <name>:` line), so a missing one is one
        // difference, not every line after it
        let sections = |s: &str| -> BTreeMap<String, Vec<String>> {
            let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut at = String::from("line");
            for l in s.lines().filter(|l| !l.trim_start().starts_with("run: ")) {
                if rel.ends_with(".yaml") && l.starts_with("  ") && !l.starts_with("   ") {
                    at = format!("workspaces.{}", l.trim().trim_end_matches(':'));
                }
                // a YAML scalar's quotes are its writer's style
                let l = if rel.ends_with(".yaml") {
                    l.replace(['\'', '"'], "")
                } else {
                    l.to_string()
                };
                out.entry(at.clone()).or_default().push(l);
            }
            out
        };
        let (ms, ts) = (sections(mine), sections(theirs));
        for k in ms.keys().chain(ts.keys()).collect::<BTreeSet<_>>() {
            let (m, t) = (ms.get(k), ts.get(k));
            let (Some(m), Some(t)) = (m, t) else {
                let some = |x: Option<&Vec<String>>| x.map(|v| v.join("\n")).unwrap_or_default();
                raw.push((k.clone(), some(m), some(t)));
                continue;
            };
            for i in 0..m.len().max(t.len()) {
                if m.get(i) != t.get(i) {
                    raw.push((
                        format!("{k} {}", i + 1),
                        m.get(i).cloned().unwrap_or_default(),
                        t.get(i).cloned().unwrap_or_default(),
                    ));
                }
            }
        }
    }
    raw.into_iter()
        .map(|(at, mine, theirs)| Diff {
            opened: sealed_key(&mine).and_then(|k| sealed.get(k)).cloned(),
            file: rel.to_string(),
            at,
            mine,
            theirs,
        })
        .collect()
}

/// The files compared: the tofu roots' under `generated/` and the state
/// locations, relative to the tree.
fn compared(tree: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in ["identity", "storage", "instance-image"] {
        let d = tree.join("generated").join(dir);
        if !d.is_dir() {
            continue;
        }
        for p in files(&d) {
            let s = p.strip_prefix(tree).unwrap().to_string_lossy().into_owned();
            if s.ends_with(".tf") || s.ends_with(".tfbackend.hcl") || s.ends_with(".tftpl") {
                out.insert(s);
            }
        }
    }
    out.insert("meta-state/state-locations.yaml".into());
    out
}

/// csis's dry build of `starter` against the original's emission: every
/// difference not listed as deliberate fails the test.
fn compare(starter: &str, least: usize) {
    let Some(reference) = reference() else {
        eprintln!("\n*** SKIPPED: ../shared/reference is not there ***\n");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("original");
    if original(&reference, starter, &out).is_none() {
        return;
    }
    let theirs_root = out.join("original");
    let t = csis_on(&out, starter);
    let (mine, theirs) = (compared(&t.root), compared(&theirs_root));
    let mut diffs = Vec::new();
    let written = |root: &Path, f: &str| {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let empty = (f.ends_with(".tf") || f.ends_with(".hcl"))
            && hcl::parse(&text)
                .is_ok_and(|b| b.attributes().next().is_none() && b.blocks().next().is_none());
        if empty {
            COMMENT_ONLY.to_string()
        } else {
            "written".to_string()
        }
    };
    for f in mine.symmetric_difference(&theirs) {
        diffs.push(Diff {
            file: f.clone(),
            at: "(the file)".into(),
            mine: if mine.contains(f) {
                written(&t.root, f)
            } else {
                String::new()
            },
            theirs: if theirs.contains(f) {
                written(&theirs_root, f)
            } else {
                String::new()
            },
            opened: None,
        });
    }
    let sealed = sealed_plaintexts(&t.root, &out.join("identity"));
    let none = BTreeMap::new();
    for f in mine.intersection(&theirs) {
        let m = std::fs::read_to_string(t.root.join(f)).unwrap();
        let o = std::fs::read_to_string(theirs_root.join(f)).unwrap();
        let dir = t.root.join(f).parent().unwrap().to_path_buf();
        diffs.extend(file_diffs(f, &m, &o, sealed.get(&dir).unwrap_or(&none)));
    }
    assert!(theirs.len() >= least, "the original wrote only {theirs:#?}");
    if std::env::var_os("CSIS_SHOW_DIFFS").is_some() {
        for d in &diffs {
            eprintln!(
                "{} | {} | {:?}\n  mine:   {}\n  theirs: {}\n  opened: {:?}",
                deliberate(d).unwrap_or("-"),
                d.file,
                d.at,
                d.mine,
                d.theirs,
                d.opened
            );
        }
    }
    let unexplained: Vec<String> = diffs
        .iter()
        .filter(|d| deliberate(d).is_none())
        .map(|d| {
            format!(
                "{}: {}\n  mine:   {}\n  theirs: {}",
                d.file, d.at, d.mine, d.theirs
            )
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "{starter}: {} differences from the original's tofu roots that ARCHITECTURE.md does not list:\n{}",
        unexplained.len(),
        unexplained.join("\n")
    );
}

/// The deliberate differences of csis's tofu roots from the original's
/// (ARCHITECTURE.md, after the packer ones; docs/migrating.md), with why.
fn deliberate(d: &Diff) -> Option<&'static str> {
    if d.opened.as_deref() == Some(d.theirs.as_str()) {
        return Some("a value declared ENC[...] is written by reference (local.sensitive), opened at plan time");
    }
    if d.at.starts_with("data \"external\" \"sensitive\".query.")
        && d.mine.starts_with("ENC[age:")
        && d.theirs.is_empty()
    {
        return Some("the ciphertext of a value written by reference, queried at plan time");
    }
    if d.at.ends_with(".program[0]") && d.mine == "csis" && d.theirs == "cs-image-system" {
        return Some("the data sources run csis's CLI");
    }
    if d.at.ends_with(".count") && d.mine == "var.ephemeral_present ? 1 : 0" && d.theirs == "0" {
        return Some("an ephemeral instance stands while the root's ephemeral pass says so");
    }
    if d.at == "(the file)" && d.mine.is_empty() && d.theirs == COMMENT_ONLY {
        return Some("no file where nothing is emitted (the original writes a comment)");
    }
    if d.at == "removed"
        && d.mine == "(a block)"
        && d.theirs.is_empty()
        && d.file.contains("-group-")
    {
        return Some("an unmanaged group is forgotten by a `removed` block, never destroyed");
    }
    None
}

/// What a file of the original holds that is only a comment (a tombstone).
const COMMENT_ONLY: &str = "written, a comment only";

#[test]
fn dry_run_of_the_posix_starter_writes_the_originals_tofu_roots() {
    compare("standard-aws-posix", 5);
}

#[test]
fn dry_run_of_the_complete_starter_writes_the_originals_tofu_roots() {
    compare("complete", 30);
}
