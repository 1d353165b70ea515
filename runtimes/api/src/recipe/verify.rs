//! The in-bake verification: one `set -e`-safe line per assertion, and the
//! verify step that closes a base or instance image's steps.

use super::shell::sq;
use super::types::{Step, StepKind};
use crate::TestCommand;

/// One in-bake assertion as a `set -e`-safe line that says what failed.
pub fn test_line(t: &TestCommand) -> String {
    let fail = |why: &str| sq(&format!("in-bake test failed: {}: {why}", t.description));
    let rc = format!(
        "[ $rc -eq {n} ] || {{ echo {} \"$rc\" >&2; exit 1; }}",
        fail(&format!("expected exit code {}, got", t.expect_rc)),
        n = t.expect_rc
    );
    match &t.contains {
        None => format!("rc=0; ( {} ) >/dev/null 2>&1 || rc=$?; {rc}", t.run),
        Some(c) => format!(
            "rc=0; out=$( ( {} ) 2>&1 ) || rc=$?; {rc}; printf '%s' \"$out\" | grep -qF -- {} || {{ echo {} >&2; exit 1; }}",
            t.run,
            sq(c),
            fail(&format!("output does not contain '{c}'"))
        ),
    }
}

pub(super) fn verify_step(
    kind: &str,
    image: &str,
    body: Vec<String>,
    tests: &[TestCommand],
) -> Option<Step> {
    let mut lines = vec!["set -e".to_string()];
    lines.extend(body);
    lines.extend(tests.iter().map(test_line));
    let n = lines
        .iter()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('#'))
        .count();
    if n == 0 {
        return None;
    }
    Some(Step {
        comment: format!("in-bake verification for {kind} {image}: {n} assertion(s)"),
        kind: StepKind::Verify {
            lines,
            assertions: n,
            private: None,
        },
    })
}
