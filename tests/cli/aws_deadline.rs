//! Every AWS call has a deadline and names the endpoint it went to: against
//! a loopback listener that accepts connections and never answers, the
//! commands that ask AWS (`validate`, `state query`, `preflight`, `empty`)
//! end with an error naming `http://127.0.0.1:PORT` instead of waiting for
//! ever. The call timeout is shortened for the test with `CSIS_AWS_TIMEOUT`
//! (seconds); the test's own bound is generous and only stops a hang.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use csis_testkit::Tree;

/// A listener on 127.0.0.1 that accepts every connection and holds it open,
/// reading nothing and answering nothing, for as long as the test runs.
fn silent_endpoint() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    url
}

/// The AWS fixture tree, its runtime talking to `endpoint`
/// (`AWS_ENDPOINT_URL`).
fn tree(endpoint: &str) -> Tree {
    Tree::copy(
        &csis_testkit::fixture("ops/aws"),
        &[("@SUBNET@", "subnet-0123abcd")],
    )
    .env("AWS_ENDPOINT_URL", endpoint)
    .env("CSIS_AWS_TIMEOUT", "2")
    .env("AWS_ACCESS_KEY_ID", "testing")
    .env("AWS_SECRET_ACCESS_KEY", "testing")
    .env("AWS_EC2_METADATA_DISABLED", "true")
    .env_remove("AWS_PROFILE")
}

/// Run `cmd` to its end, or kill it after `bound` and fail: (exit code,
/// stdout and stderr together, how long it took).
fn run_bounded(mut cmd: Command, bound: Duration) -> (i32, String, Duration) {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still running after {bound:?}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = start.elapsed();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text, took)
}

#[test]
fn an_endpoint_that_never_answers_fails_each_command_in_time_naming_it() {
    let endpoint = silent_endpoint();
    let t = tree(&endpoint);
    for args in [
        &["validate"][..],
        &["state", "query"],
        &["preflight"],
        &["empty", "--runtime", "aws-moto"],
    ] {
        let mut c = t.csis();
        c.args(args);
        let (code, out, took) = run_bounded(c, Duration::from_secs(180));
        // (state query reports an unavailable runtime and exits 0 unless
        // --strict; the others fail)
        if args[0] != "state" {
            assert_ne!(code, 0, "csis {args:?} ({took:?}):\n{out}");
        }
        // (a report may be wrapped to the terminal's width)
        let flat = out
            .replace('│', " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            flat.contains(&format!("no answer from {endpoint} within 2s")),
            "csis {args:?} ({took:?}) names the endpoint and the deadline:\n{out}"
        );
    }
    // preflight names the endpoint it asks, whatever the answer
    let (_, out, _) = run_bounded(
        {
            let mut c = t.csis();
            c.arg("preflight");
            c
        },
        Duration::from_secs(180),
    );
    assert!(
        out.lines()
            .any(|l| l.contains("aws aws-moto: endpoint") && l.contains(&endpoint)),
        "{out}"
    );
}
