//! Refusals as data: every case file of `tests/fixtures/config/refusals/`
//! is added to the valid fixture tree (`cfg--x.yml` goes to
//! `cfg/zz-x.yml`, `images--x.yaml` to `images/zz-x.yaml`), loaded, and
//! every diagnostic it gets is rendered (severity, file:line:column, field
//! path, message, hint) into one insta snapshot per case
//! (`tests/cli/snapshots/refusal_cases__<case>.snap`). A new refusal is a
//! new case file and its reviewed snapshot; `refusals.rs` asserts the
//! chosen details by hand. Each case file also states where its first
//! refusal lands (`# expect: FILE:LINE:COL PATH`, its last lines), and
//! every diagnostic of every case names a file of the tree, a line, a
//! column and a field path.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use csis_rules::{load, LoadOptions};
use csis_schema::Diagnostic;

fn cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(csis_testkit::fixture("config/refusals"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The valid tree plus `case`, in a temp dir.
fn tree_with(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    csis_testkit::copy_dir(&csis_testkit::fixture("config/valid"), dir.path());
    let (place, rest) = case
        .split_once("--")
        .unwrap_or_else(|| panic!("{case}: a case is named <folder>--<file>"));
    std::fs::copy(
        csis_testkit::fixture("config/refusals").join(case),
        dir.path().join(place).join(format!("zz-{rest}")),
    )
    .unwrap();
    dir
}

/// Every diagnostic, one per line (and its hint on the next), with the
/// tree's temporary path as `[tree]`.
fn render(diags: &[Diagnostic], root: &Path) -> String {
    let mut out = String::new();
    for d in diags {
        let sev = if d.is_error() { "error" } else { "warning" };
        let _ = writeln!(out, "{sev} {}: {}: {}", d.location(), d.path, d.message);
        if let Some(h) = &d.hint {
            let _ = writeln!(out, "  hint: {h}");
        }
    }
    out.replace(&root.display().to_string(), "[tree]")
}

#[test]
fn every_case_renders_as_its_snapshot() {
    let cases = cases();
    assert!(cases.len() >= 20, "found the cases: {cases:?}");
    // each case its own snapshot (`case@FILE`): a mismatch is reported with
    // every other one, not in place of them
    let mut played = 0;
    insta::glob!("../fixtures/config/refusals", "*--*.{yml,yaml}", |path| {
        played += 1;
        let case = path.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tree_with(&case);
        let opts = LoadOptions {
            env: Some(BTreeMap::from([(
                "CSIS_TEST_USER".to_string(),
                "avery".to_string(),
            )])),
            // every runtime type's offline checks, as `csis validate` runs them
            runtime_checks: csis_ops::wiring::offline_checks(),
            ..Default::default()
        };
        let diags = match load(dir.path(), &opts) {
            Ok(tree) => tree.warnings.clone(),
            Err(d) => d,
        };
        assert!(!diags.is_empty(), "{case}: no diagnostic at all");
        for d in &diags {
            assert!(
                d.line >= 1 && d.column >= 1 && !d.path.is_empty(),
                "{case}: a diagnostic without line, column or field path: {d:?}"
            );
            assert!(
                dir.path().join(&d.file).is_file(),
                "{case}: a diagnostic naming no file of the tree: {d:?}"
            );
        }
        let text =
            std::fs::read_to_string(csis_testkit::fixture("config/refusals").join(&case)).unwrap();
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .collect();
        assert!(!expected.is_empty(), "{case}: states no `# expect:` line");
        for e in expected {
            let (at, path) = e.split_once(' ').expect("`# expect: FILE:LINE:COL PATH`");
            assert!(
                diags.iter().any(|d| d.location() == at && d.path == path),
                "{case}: no diagnostic at {at} {path}:\n{}",
                render(&diags, dir.path())
            );
        }
        insta::assert_snapshot!("case", render(&diags, dir.path()));
    });
    assert_eq!(played, cases.len(), "the glob played every case");
}
