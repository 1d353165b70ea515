//! `examples/ci/csis.yml`, the GitHub Actions workflow users copy, is
//! checked here: it parses (with the project's YAML module), it has the
//! shape the README promises (plan on pull requests with the Markdown
//! comment, build on main with a matrix over shards, the store on S3, OIDC
//! role credentials, `.csis/cache` restored), and every `csis ...` command
//! its steps run exists with the flags it uses (asked of the real binary:
//! `csis <command> --help`).

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

/// Global options that take a value.
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "--directory",
    "--overlay",
    "--undeclare",
    "--meta-state",
];

fn workflow() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci/csis.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let node = csis_schema::yaml::parse_str("examples/ci/csis.yml", &path, &text)
        .unwrap_or_else(|d| panic!("the workflow does not parse: {}", d.message));
    csis_schema::yaml::from_node::<Value>(&node, "").unwrap_or_else(|d| panic!("{}", d.message))
}

fn help(path: &[String]) -> Option<String> {
    let out = Command::cargo_bin("csis")
        .unwrap()
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn has_subcommands(help: &str) -> bool {
    help.contains("\nCommands:\n")
}

/// Does the help text document `flag` (`--name` or `-x`)?
fn documents(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let before = help[..i].chars().last();
        let after = help[i + flag.len()..].chars().next();
        matches!(before, Some(' ' | ',' | '[' | '\n'))
            && matches!(after, None | Some(' ' | '=' | ',' | ']' | '\n' | '<'))
    })
}

/// One `csis` command line of a step: its subcommand path and the flags it uses.
#[derive(Debug)]
struct Invocation {
    line: String,
    path: Vec<String>,
    flags: Vec<String>,
}

/// The `csis ...` commands of a `run:` script: a line (continuations
/// joined) that starts with `csis`, up to the first shell operator.
fn invocations(script: &str) -> Vec<Invocation> {
    let joined = script.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if !line.starts_with("csis ") && line != "csis" {
            continue;
        }
        let mut tokens: Vec<String> = Vec::new();
        for t in line.split_whitespace() {
            if [">", ">>", "|", "||", "&&", ";", "2>", "2>&1", "&"].contains(&t)
                || t.starts_with('>')
            {
                break;
            }
            tokens.push(t.trim_matches('"').trim_matches('\'').to_string());
        }
        let mut path: Vec<String> = Vec::new();
        let mut flags = Vec::new();
        let mut i = 1;
        let mut want_sub = true;
        while i < tokens.len() {
            let t = &tokens[i];
            if t.starts_with('-') {
                let name = t.split('=').next().unwrap().to_string();
                if path.is_empty() && GLOBAL_WITH_VALUE.contains(&name.as_str()) && !t.contains('=')
                {
                    i += 1; // its value
                }
                flags.push(name);
            } else if want_sub && !t.starts_with('$') {
                path.push(t.clone());
                want_sub = help(&path).as_deref().is_some_and(has_subcommands);
            } else {
                want_sub = false; // a positional value: patterns, ids
            }
            i += 1;
        }
        out.push(Invocation {
            line: line.to_string(),
            path,
            flags,
        });
    }
    out
}

fn steps(wf: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (job, j) in wf["jobs"].as_object().expect("jobs") {
        for s in j["steps"].as_array().expect("steps") {
            out.push((job.clone(), s));
        }
    }
    out
}

#[test]
fn the_workflow_has_the_promised_shape() {
    let wf = workflow();
    // `on` is a string key in YAML 1.2 (a boolean in 1.1)
    let on = wf.get("on").or_else(|| wf.get("true")).expect("on:");
    assert!(on.get("pull_request").is_some(), "{on}");
    assert!(on["push"]["branches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b == "main"));
    assert_eq!(wf["permissions"]["id-token"], "write", "OIDC");
    let store = wf["env"]["CSIS_META_STATE"].as_str().unwrap();
    assert!(store.starts_with("s3://"), "{store}");

    let jobs = wf["jobs"].as_object().unwrap();
    assert!(jobs["plan"]["if"]
        .as_str()
        .unwrap()
        .contains("pull_request"));
    assert_eq!(jobs["plan"]["permissions"]["pull-requests"], "write");
    let build = &jobs["build"];
    assert!(build["needs"] == "shards" || build["needs"][0] == "shards");
    assert!(build["strategy"]["matrix"]["shard"]
        .as_str()
        .unwrap()
        .contains("needs.shards.outputs.matrix"));
    let all = steps(&wf);
    let uses = |job: &str, action: &str| -> Vec<&Value> {
        all.iter()
            .filter(|(j, s)| j == job && s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
            .map(|(_, s)| *s)
            .collect()
    };
    for job in ["plan", "shards", "build"] {
        let creds = uses(job, "aws-actions/configure-aws-credentials@");
        assert_eq!(creds.len(), 1, "{job}: OIDC role credentials");
        assert!(creds[0]["with"]["role-to-assume"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:iam::"));
        assert!(creds[0]["with"].get("aws-secret-access-key").is_none());
    }
    let cache = uses("build", "actions/cache@");
    assert_eq!(cache.len(), 1);
    assert_eq!(cache[0]["with"]["path"], ".csis/cache");
    let comment = uses("plan", "marocchino/sticky-pull-request-comment@");
    assert_eq!(comment[0]["with"]["path"], "plan.md");
    // what the jobs run, by job
    let runs = |job: &str| -> Vec<Invocation> {
        all.iter()
            .filter(|(j, _)| j == job)
            .filter_map(|(_, s)| s["run"].as_str())
            .flat_map(invocations)
            .collect()
    };
    let has = |job: &str, path: &[&str], flags: &[&str]| {
        runs(job)
            .iter()
            .any(|i| i.path == path && flags.iter().all(|f| i.flags.iter().any(|g| g == f)))
    };
    assert!(has("plan", &["validate"], &["--format"]));
    assert!(has(
        "plan",
        &["plan"],
        &["--format", "--detailed-exitcode", "--meta-state"]
    ));
    assert!(has(
        "shards",
        &["plan"],
        &["--shards", "--json", "--meta-state"]
    ));
    assert!(has("build", &["build"], &["--json", "--meta-state"]));
    assert!(has("build", &["state", "query"], &["--strict"]));
}

#[test]
fn every_csis_command_of_the_workflow_exists_with_its_flags() {
    // the check itself can fail: an unknown command and an unknown flag are caught
    assert!(help(&["no-such-command".into()]).is_none());
    let plan = help(&["plan".into()]).unwrap();
    assert!(!documents(&plan, "--no-such-flag"));
    assert!(documents(&plan, "--detailed-exitcode"));
    assert!(documents(&plan, "-C"), "global options are in every help");

    let wf = workflow();
    let mut checked = 0;
    for (job, step) in steps(&wf) {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        for inv in invocations(script) {
            assert!(!inv.path.is_empty(), "{job}: no command in `{}`", inv.line);
            let text = help(&inv.path).unwrap_or_else(|| {
                panic!(
                    "{job}: `csis {}` does not exist: {}",
                    inv.path.join(" "),
                    inv.line
                )
            });
            assert!(
                !has_subcommands(&text),
                "{job}: `csis {}` needs a subcommand: {}",
                inv.path.join(" "),
                inv.line
            );
            for f in &inv.flags {
                assert!(
                    documents(&text, f),
                    "{job}: `csis {}` has no flag {f}: {}",
                    inv.path.join(" "),
                    inv.line
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 7,
        "the workflow's csis commands were found ({checked})"
    );
}
