//! `csis identity export-gids`, the opa-groups root's `data "external"`
//! program, against a fake OPA on a loopback port: the query the root writes
//! on stdin, `{group: "gid"}` on stdout, the key from the environment and
//! never in an error, a failure on stderr with exit 1 (what tofu shows).

use csis_testkit::{opa, with_stdin};

const KEY: &str = "kid-4f1c2";
const SECRET: &str = "opa-secret-9e7d31";

/// Run the command with `query` on stdin and `env` set (every OPA variable
/// of the caller's environment removed first).
fn export_gids(query: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = csis_testkit::csis();
    c.args(["identity", "export-gids"])
        .env_remove("OKTAPAM_KEY")
        .env_remove("OKTAPAM_SECRET")
        .envs(env.iter().copied());
    let out = with_stdin(c, query);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The query as the opa-groups root writes it (runtimes/tofu, files.rs),
/// pointed at `api_host`.
fn query(api_host: &str, groups: &str) -> String {
    serde_json::json!({
        "identity_type": "okta",
        "org": "REPLACE-ME-org",
        "team": "REPLACE-ME-team",
        "api_host": api_host,
        "groups": groups,
    })
    .to_string()
}

const ROOT_KEY: [(&str, &str); 2] = [
    ("TF_VAR_replace_me_team_key", KEY),
    ("TF_VAR_replace_me_team_secret", SECRET),
];

#[test]
fn the_gids_of_the_queried_groups_come_from_opa() {
    let fake = opa::start(
        "REPLACE-ME-team",
        KEY,
        SECRET,
        &[
            ("admins", Some(63001)),
            ("team", Some(63002)),
            ("other", Some(1)),
        ],
    );
    let (code, out, err) = export_gids(&query(&fake.url, "team,admins"), &ROOT_KEY);
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // strings, as the external protocol wants; only the groups asked for
    assert_eq!(
        answer,
        serde_json::json!({"admins": "63001", "team": "63002"})
    );
    let reqs = fake.requests.lock().unwrap().clone();
    assert!(
        reqs[0].starts_with("POST /v1/teams/REPLACE-ME-team/service_token"),
        "{reqs:?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r == "GET /v1/teams/REPLACE-ME-team/groups/team/attributes"),
        "{reqs:?}"
    );
    // the key travels in the token request's body only
    assert!(
        reqs.iter()
            .skip(1)
            .all(|r| !r.contains(SECRET) && !r.contains(KEY)),
        "{reqs:?}"
    );
}

#[test]
fn the_providers_own_variables_serve_too() {
    let fake = opa::start("REPLACE-ME-team", KEY, SECRET, &[("team", Some(70000))]);
    let (code, out, err) = export_gids(
        &query(&fake.url, "team"),
        &[("OKTAPAM_KEY", KEY), ("OKTAPAM_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), r#"{"team":"70000"}"#);
}

#[test]
fn each_failure_is_one_line_on_stderr_with_exit_1_and_no_secret() {
    let fake = opa::start(
        "REPLACE-ME-team",
        KEY,
        SECRET,
        &[("team", Some(63002)), ("nogid", None)],
    );
    let wrong = [
        ("TF_VAR_replace_me_team_key", KEY),
        ("TF_VAR_replace_me_team_secret", "not-the-secret"),
    ];
    for (q, env, says) in [
        (
            query(&fake.url, "team"),
            &wrong[..],
            "HTTP 401 (the key id and secret were refused)",
        ),
        (
            query(&fake.url, "absent"),
            &ROOT_KEY[..],
            "group absent on team REPLACE-ME-team: HTTP 404 (no such group)",
        ),
        (
            query(&fake.url, "nogid"),
            &ROOT_KEY[..],
            "group nogid on team REPLACE-ME-team carries no unix_gid",
        ),
        (
            query(&fake.url, "team"),
            &[][..],
            "set TF_VAR_replace_me_team_key and TF_VAR_replace_me_team_secret",
        ),
        (
            // plain http to another host is refused too (csis-opa's unit
            // test, which sends nothing); here no traffic leaves loopback
            query("ftp://127.0.0.1:1", "team"),
            &ROOT_KEY[..],
            "not an https URL",
        ),
        (
            "{".to_string(),
            &ROOT_KEY[..],
            "the query on stdin: not a JSON object",
        ),
    ] {
        let (code, out, err) = export_gids(&q, env);
        assert_eq!(code, 1, "{q}: {err}");
        assert!(out.is_empty(), "{q}: {out}");
        assert!(err.contains(says), "{q}: {err}");
        assert!(
            !err.contains(SECRET) && !err.contains("not-the-secret") && !err.contains(KEY),
            "{err}"
        );
    }
}

/// OPA answers a list a page at a time: the gid on a later page is found
/// by following `Link: rel="next"`, and a next page off the API host is
/// refused (the bearer token goes to the API host only) with no request
/// sent there.
#[test]
fn the_gid_on_a_later_page_is_found_and_a_page_off_the_host_refused() {
    let fake = opa::start_paged(
        "REPLACE-ME-team",
        KEY,
        SECRET,
        &[("team", Some(63002)), ("admins", Some(63001))],
        1,
        None,
    );
    let (code, out, err) = export_gids(&query(&fake.url, "team,admins"), &ROOT_KEY);
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({"admins": "63001", "team": "63002"})
    );
    let reqs = fake.requests.lock().unwrap().clone();
    assert!(
        reqs.iter()
            .any(|r| r == "GET /v1/teams/REPLACE-ME-team/groups/team/attributes?offset=1"),
        "the second page was asked: {reqs:?}"
    );

    // a second fake stands for another host: its pages are never asked
    let elsewhere = opa::start("REPLACE-ME-team", KEY, SECRET, &[("team", Some(1))]);
    let fake = opa::start_paged(
        "REPLACE-ME-team",
        KEY,
        SECRET,
        &[("team", Some(63002))],
        1,
        Some(&elsewhere.url.replace("127.0.0.1", "localhost")),
    );
    let (code, out, err) = export_gids(&query(&fake.url, "team"), &ROOT_KEY);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("not on the API host"), "{err}");
    assert!(!err.contains(SECRET) && !err.contains("bearer"), "{err}");
    assert!(
        elsewhere.requests.lock().unwrap().is_empty(),
        "nothing went to the other host"
    );
}
