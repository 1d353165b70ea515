//! `examples/ci/csis.yml`, the GitHub Actions workflow users copy, is
//! checked here: it parses (with the project's YAML module), it has the
//! shape the README promises (plan on pull requests with the Markdown
//! comment, build on main with a matrix over shards, the store on S3, OIDC
//! role credentials, `.csis/cache` restored), and every `csis ...` command
//! its steps run exists with the flags it uses (asked of the real binary:
//! `csis <command> --help`).
//!
//! It installs csis as a released binary, not by compiling it: every job
//! that runs `csis` first downloads the release archive and checks it with
//! `sha256sum -c` against the pinned `CSIS_SHA256`. The release comes from
//! `.github/workflows/release.yml`, checked here too: it runs on `v*` tags,
//! builds the four targets, writes a `.sha256` for each archive and publishes
//! `SHA256SUMS`; and the archive name the example downloads is the one it
//! publishes (both read from the files, their variables resolved).

use std::path::Path;

use serde_json::Value;

/// Global options that take a value.
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "--directory",
    "--overlay",
    "--undeclare",
    "--meta-state",
];

/// The targets release.yml publishes a binary for.
const RELEASE_TARGETS: &[&str] = &[
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

/// A YAML file of the repository (`rel` from its root), as JSON.
fn load(rel: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let node = csis_schema::yaml::parse_str(rel, &path, &text)
        .unwrap_or_else(|d| panic!("{rel} does not parse: {}", d.message));
    csis_schema::yaml::from_node::<Value>(&node, "").unwrap_or_else(|d| panic!("{}", d.message))
}

fn workflow() -> Value {
    load("examples/ci/csis.yml")
}

fn release_workflow() -> Value {
    load(".github/workflows/release.yml")
}

/// A workflow's `on:` (a string key in YAML 1.2, a boolean in 1.1).
fn on_of(wf: &Value) -> &Value {
    wf.get("on").or_else(|| wf.get("true")).expect("on:")
}

fn help(path: &[String]) -> Option<String> {
    let out = csis_testkit::csis()
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

/// The steps of one job that use `action` (`owner/name@`).
fn uses<'a>(job: &'a Value, action: &str) -> Vec<&'a Value> {
    job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
        .collect()
}

/// Does this line of a script run csis (as [`invocations`] reads them)?
fn runs_csis(line: &str) -> bool {
    let line = line.trim();
    line == "csis" || line.starts_with("csis ")
}

/// The release archive names a script spells, variables unexpanded:
/// its words `csis-...tar.gz` (`csis-$CSIS_VERSION-x86_64-...tar.gz`,
/// `csis-${TAG}-${TARGET}.tar.gz`).
fn archive_templates(script: &str) -> Vec<String> {
    script
        .split(|c: char| !(c.is_ascii_alphanumeric() || "-_.${}".contains(c)))
        .filter(|w| w.starts_with("csis-") && w.ends_with(".tar.gz"))
        .map(str::to_string)
        .collect()
}

/// `template` with each `$NAME` and `${NAME}` replaced by `value(NAME)`.
fn expand(template: &str, value: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced
                    .find('}')
                    .unwrap_or_else(|| panic!("an unclosed ${{ in {template}"));
                (&braced[..end], &braced[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        assert!(!name.is_empty(), "a lone $ in {template}");
        out.push_str(&value(name));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Does the script install csis from a release, checked? It downloads
/// `"$CSIS_RELEASES/$CSIS_VERSION/csis-...tar.gz"` to a file, checks that
/// file with `echo "$CSIS_SHA256  FILE" | sha256sum -c -`, then unpacks it
/// into a folder it adds to `$GITHUB_PATH`, in that order.
fn installs_release(script: &str) -> bool {
    let lines: Vec<&str> = script.lines().map(str::trim).collect();
    let Some((check, file)) = lines.iter().enumerate().find_map(|(i, l)| {
        let rest = l.strip_prefix("echo \"$CSIS_SHA256  ")?;
        let (file, tail) = rest.split_once('"')?;
        (tail.trim() == "| sha256sum -c -").then_some((i, file))
    }) else {
        return false;
    };
    let download = lines.iter().position(|l| {
        l.starts_with("curl ")
            && l.contains(&format!(" -o {file} "))
            && archive_templates(l)
                .iter()
                .any(|t| l.contains(&format!("\"$CSIS_RELEASES/$CSIS_VERSION/{t}\"")))
    });
    let unpack = lines.iter().enumerate().find_map(|(i, l)| {
        let after = l.split_once(&format!("tar -xzf {file} -C "))?.1;
        Some((i, after.split_whitespace().next()?))
    });
    let (Some(download), Some((unpack, dir))) = (download, unpack) else {
        return false;
    };
    let on_path = lines
        .iter()
        .position(|l| *l == format!("echo {dir} >> \"$GITHUB_PATH\""));
    download < check && check < unpack && on_path.is_some_and(|p| p > unpack)
}

/// The targets release.yml's build matrix names.
fn release_targets(rel: &Value) -> Vec<String> {
    rel["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .expect("release.yml: jobs.build.strategy.matrix.include")
        .iter()
        .map(|e| {
            e["target"]
                .as_str()
                .expect("a matrix entry's target")
                .to_string()
        })
        .collect()
}

/// The name release.yml gives the archive of `target` built from the tag
/// `tag`: the one `csis-...tar.gz` its scripts spell, each variable read
/// from the step's, the job's or the workflow's `env` (the matrix's target,
/// or the pushed tag's name).
fn release_archive(rel: &Value, tag: &str, target: &str) -> String {
    let mut names = Vec::new();
    for (job_name, job) in rel["jobs"].as_object().expect("jobs") {
        for step in job["steps"].as_array().expect("steps") {
            let Some(script) = step["run"].as_str() else {
                continue;
            };
            for t in archive_templates(script) {
                let value = |name: &str| -> String {
                    let v = [&step["env"], &job["env"], &rel["env"]]
                        .into_iter()
                        .find_map(|env| env.get(name).and_then(Value::as_str))
                        .unwrap_or_else(|| panic!("{job_name}: ${name} of {t} is in no env"));
                    if v.trim() == "${{ matrix.target }}" {
                        target.to_string()
                    } else if v.contains("github.ref_name") {
                        tag.to_string()
                    } else {
                        panic!("{job_name}: ${name} of {t} is `{v}`: not the target or the tag")
                    }
                };
                names.push(expand(&t, &value));
            }
        }
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 1, "release.yml names one archive: {names:?}");
    names.remove(0)
}

#[test]
fn the_workflow_has_the_promised_shape() {
    let wf = workflow();
    let on = on_of(&wf);
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

#[test]
fn the_example_installs_a_checked_release_binary() {
    // the check itself can fail
    let good = "cd \"$RUNNER_TEMP\"\n\
        curl -fsSL -o c.tgz \"$CSIS_RELEASES/$CSIS_VERSION/csis-$CSIS_VERSION-x.tar.gz\"\n\
        echo \"$CSIS_SHA256  c.tgz\" | sha256sum -c -\n\
        tar -xzf c.tgz -C \"$HOME/bin\" csis\n\
        echo \"$HOME/bin\" >> \"$GITHUB_PATH\"\n";
    assert!(installs_release(good));
    assert!(!installs_release(
        &good.replace("$CSIS_SHA256  c.tgz", "$CSIS_SHA256  other.tgz")
    ));
    assert!(!installs_release(&good.replace("sha256sum -c -", "true")));
    assert!(!installs_release(&good.replace(">> \"$GITHUB_PATH\"", "")));
    assert!(!installs_release(
        &good.replace("$CSIS_VERSION/csis-", "$CSIS_VERSION/x-")
    ));

    let wf = workflow();
    let env = &wf["env"];
    assert!(
        env.get("CSIS_GIT").is_none(),
        "csis is not built from git: {env}"
    );
    let releases = env["CSIS_RELEASES"].as_str().expect("env.CSIS_RELEASES");
    assert!(
        releases.starts_with("https://") && releases.ends_with("/releases/download"),
        "a GitHub release's download URL, without the tag: {releases}"
    );
    let sum = env["CSIS_SHA256"]
        .as_str()
        .expect("env.CSIS_SHA256, a string (quoted: a hex of digits is a number)");
    assert!(
        sum.len() == 64 && sum.chars().all(|c| c.is_ascii_hexdigit()),
        "CSIS_SHA256 is a sha256: {sum}"
    );
    for (job, step) in steps(&wf) {
        let run = step["run"].as_str().unwrap_or_default();
        assert!(
            !run.contains("cargo install") && !run.contains("cargo build"),
            "{job}: csis is installed, not compiled: {run}"
        );
    }
    let jobs = wf["jobs"].as_object().expect("jobs");
    let mut checked = 0;
    for (name, job) in jobs {
        let steps = job["steps"].as_array().expect("steps");
        let is_run = |s: &Value, f: &dyn Fn(&str) -> bool| s["run"].as_str().is_some_and(f);
        let Some(first) = steps
            .iter()
            .position(|s| is_run(s, &|r: &str| r.lines().any(runs_csis)))
        else {
            continue;
        };
        let install = steps
            .iter()
            .position(|s| is_run(s, &installs_release))
            .unwrap_or_else(|| panic!("{name}: runs csis with no checked install of a release"));
        assert!(
            install < first,
            "{name}: installs csis (step {install}) after running it (step {first})"
        );
        checked += 1;
    }
    assert_eq!(checked, jobs.len(), "every job runs csis");
}

#[test]
fn the_release_workflow_builds_every_target_with_its_checksum() {
    let rel = release_workflow();
    let on = on_of(&rel);
    let tags = on["push"]["tags"].as_array().expect("on.push.tags");
    assert!(tags.iter().any(|t| t == "v*"), "{on}");
    assert!(on.get("workflow_dispatch").is_some(), "{on}");

    let build = &rel["jobs"]["build"];
    let mut targets = release_targets(&rel);
    targets.sort();
    let mut want: Vec<String> = RELEASE_TARGETS.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(targets, want);
    assert_eq!(build["runs-on"], "${{ matrix.os }}");
    for e in build["strategy"]["matrix"]["include"].as_array().unwrap() {
        let target = e["target"].as_str().unwrap();
        let os = e["os"].as_str().expect("a matrix entry's os");
        let family = if target.contains("-linux-") {
            "ubuntu-"
        } else {
            "macos-"
        };
        assert!(os.starts_with(family), "{target} builds on {os}");
    }
    assert_eq!(build["env"]["TARGET"], "${{ matrix.target }}");

    // every matrix entry runs the steps that have no `if:`
    let steps = build["steps"].as_array().expect("build.steps");
    let every = |s: &&Value| s.get("if").is_none();
    let runs = |s: &&Value| s["run"].as_str().unwrap_or_default().to_string();
    assert!(
        steps
            .iter()
            .filter(every)
            .any(|s| runs(&s).contains(" build --release --locked --bin csis --target ")),
        "the build"
    );
    let pack: Vec<&Value> = steps
        .iter()
        .filter(|s| runs(s).contains(".sha256"))
        .collect();
    assert_eq!(pack.len(), 1, "one step packs and sums");
    let pack = pack[0];
    assert!(every(&pack), "every build packs and sums: {pack}");
    let script = runs(&pack);
    assert!(!archive_templates(&script).is_empty(), "{script}");
    // a `.sha256` on each runner the matrix uses, `<hex>  <file>`
    for (os, tool) in [("Linux)", "sha256sum \""), ("macOS)", "shasum -a 256 \"")] {
        assert!(
            script
                .lines()
                .any(|l| l.trim().starts_with(os) && l.contains(tool) && l.contains(".sha256\"")),
            "{os} writes a .sha256 with {tool}: {script}"
        );
    }
    let upload = uses(build, "actions/upload-artifact@");
    assert_eq!(upload.len(), 1);
    assert!(every(&upload[0]));
    let paths = upload[0]["with"]["path"].as_str().expect("upload path");
    assert!(
        paths.contains(".tar.gz") || paths.contains("outputs.archive"),
        "{paths}"
    );
    assert!(paths.contains(".sha256"), "{paths}");

    // the release job: after every build, SHA256SUMS over the archives, published
    let release = &rel["jobs"]["release"];
    assert!(
        release["needs"] == "build" || release["needs"][0] == "build",
        "{}",
        release["needs"]
    );
    assert_eq!(release["permissions"]["contents"], "write");
    let download = uses(release, "actions/download-artifact@");
    assert_eq!(download.len(), 1);
    let dir = download[0]["with"]["path"].as_str().expect("download path");
    let sums: Vec<&Value> = release["steps"]
        .as_array()
        .expect("release.steps")
        .iter()
        .filter(|s| {
            s["run"].as_str().is_some_and(|r| {
                r.lines()
                    .any(|l| l.trim() == "sha256sum csis-*.tar.gz > SHA256SUMS")
            })
        })
        .collect();
    assert_eq!(sums.len(), 1, "one step writes SHA256SUMS");
    assert_eq!(
        sums[0]["working-directory"], dir,
        "in the downloaded artifacts"
    );
    let publish = uses(release, "softprops/action-gh-release@");
    assert_eq!(publish.len(), 1);
    let files: Vec<&str> = publish[0]["with"]["files"]
        .as_str()
        .expect("files")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for want in [
        format!("{dir}/SHA256SUMS"),
        format!("{dir}/*.tar.gz"),
        format!("{dir}/*.tar.gz.sha256"),
    ] {
        assert!(
            files.contains(&want.as_str()),
            "publishes {want}: {files:?}"
        );
    }
}

#[test]
fn the_example_downloads_the_archive_the_release_publishes() {
    let ex = workflow();
    let rel = release_workflow();
    let version = ex["env"]["CSIS_VERSION"]
        .as_str()
        .expect("env.CSIS_VERSION");
    assert!(
        version.starts_with('v'),
        "a tag release.yml runs on (v*): {version}"
    );

    let mut names = Vec::new();
    for (job, step) in steps(&ex) {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        for t in archive_templates(script) {
            let value = |name: &str| -> String {
                match name {
                    "CSIS_VERSION" => version.to_string(),
                    other => panic!("{job}: ${other} in {t} is not the release's tag"),
                }
            };
            names.push(expand(&t, &value));
        }
    }
    let jobs = ex["jobs"].as_object().expect("jobs");
    assert_eq!(names.len(), jobs.len(), "one download per job: {names:?}");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 1, "one archive: {names:?}");
    let name = &names[0];

    // the example's runners are x86_64 Linux: that target's archive
    for (job, j) in jobs {
        assert_eq!(j["runs-on"], "ubuntu-latest", "{job}");
    }
    let targets = release_targets(&rel);
    let target = "x86_64-unknown-linux-musl";
    assert!(targets.iter().any(|t| t == target), "{targets:?}");
    let published: Vec<String> = targets
        .iter()
        .map(|t| release_archive(&rel, version, t))
        .collect();
    assert_eq!(
        *name,
        release_archive(&rel, version, target),
        "published: {published:?}"
    );
    assert_ne!(
        *name,
        release_archive(&rel, "v0.0.0-other", target),
        "the tag is in the name"
    );
    assert_eq!(published.iter().filter(|p| *p == name).count(), 1);

    // the release of tag T is at .../releases/download/T/: CSIS_RELEASES/CSIS_VERSION/
    let tag = rel["env"]["TAG"].as_str().expect("release.yml env.TAG");
    assert!(tag.contains("github.ref_name"), "{tag}");
    let publish = uses(&rel["jobs"]["release"], "softprops/action-gh-release@");
    assert_eq!(publish[0]["with"]["tag_name"], "${{ env.TAG }}");
}
