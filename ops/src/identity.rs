//! `csis identity export-gids`: the gid query the opa-groups root runs as
//! Terraform's `data "external"` program (the original's DESIGN N7). It reads
//! the query csis writes into that root (a JSON object of strings:
//! `identity_type`, `org`, `team`, `api_host`, `groups` comma-separated), asks
//! OPA for each group's unix gid and answers `{group: "gid"}` (the external
//! protocol's values are strings; the root's output takes `tonumber`). Loads
//! no tree: tofu runs it in the root's directory.
//!
//! Credentials come from the environment, never from the query: the service
//! user's key id and secret the root's provider reads,
//! `TF_VAR_<team>_key` and `TF_VAR_<team>_secret` (`<team>` as the root names
//! its variables), else `OKTAPAM_KEY` / `OKTAPAM_SECRET`, the provider's own.

use std::collections::BTreeMap;

/// The query, as the root writes it.
#[derive(Debug, PartialEq)]
pub struct GidQuery {
    pub team: String,
    pub api_host: String,
    pub groups: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the query on stdin: {0}")]
    Query(String),
    #[error("no credentials for team {team}: set {key_var} and {secret_var} (or OKTAPAM_KEY and OKTAPAM_SECRET) to the service user's API key id and secret")]
    NoCredentials {
        team: String,
        key_var: String,
        secret_var: String,
    },
    #[cfg(feature = "opa")]
    #[error(transparent)]
    Opa(#[from] csis_opa::Error),
    #[cfg(not(feature = "opa"))]
    #[error("this csis was built without the `opa` feature, which asks Okta PAM for the gids (install it with `cargo install --path . --features opa`, or the default features)")]
    NotBuiltIn,
}

/// The most of stdin a query may be: input is bounded.
pub const QUERY_LIMIT: usize = 1 << 20;

/// Parse the external program's query.
pub fn parse_query(text: &str) -> Result<GidQuery, Error> {
    if text.len() > QUERY_LIMIT {
        return Err(Error::Query(format!("over {QUERY_LIMIT} bytes")));
    }
    let q: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| Error::Query(format!("not a JSON object: {e}")))?;
    let field = |k: &str| -> Result<String, Error> {
        match q.get(k) {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Some(serde_json::Value::String(_)) | None => {
                Err(Error::Query(format!("`{k}` is missing or empty")))
            }
            Some(_) => Err(Error::Query(format!("`{k}` is not a string"))),
        }
    };
    let kind = field("identity_type")?;
    if kind != "okta" {
        return Err(Error::Query(format!(
            "identity_type `{kind}`: csis asks OPA only (okta)"
        )));
    }
    let groups: Vec<String> = field("groups")?
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(String::from)
        .collect();
    Ok(GidQuery {
        team: field("team")?,
        api_host: field("api_host")?,
        groups,
    })
}

/// The service user's key for `team`, from `env`.
#[cfg(feature = "opa")]
pub fn credentials(
    team: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<csis_opa::Credentials, Error> {
    let label = csis_tofu::hv::label(team).to_lowercase();
    let key_var = format!("TF_VAR_{label}_key");
    let secret_var = format!("TF_VAR_{label}_secret");
    let get = |v: &str| env(v).filter(|s| !s.is_empty());
    let pair = get(&key_var)
        .zip(get(&secret_var))
        .or_else(|| get("OKTAPAM_KEY").zip(get("OKTAPAM_SECRET")));
    match pair {
        Some((key_id, key_secret)) => Ok(csis_opa::Credentials { key_id, key_secret }),
        None => Err(Error::NoCredentials {
            team: team.into(),
            key_var,
            secret_var,
        }),
    }
}

/// The answer for `query`: `{group: "gid"}` as one JSON object.
#[cfg(feature = "opa")]
pub fn export_gids(
    query_text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let q = parse_query(query_text)?;
    let creds = credentials(&q.team, env)?;
    let gids = crate::wiring::Runtimes::default().block_on(csis_opa::group_gids(
        &q.api_host,
        &q.team,
        &q.groups,
        &creds,
    ))?;
    let answer: BTreeMap<String, String> = gids
        .into_iter()
        .map(|(g, gid)| (g, gid.to_string()))
        .collect();
    Ok(serde_json::to_string(&answer).expect("a map of strings"))
}

/// A build without the `opa` feature parses the query and answers that
/// it cannot ask.
#[cfg(not(feature = "opa"))]
pub fn export_gids(
    query_text: &str,
    _env: impl Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    parse_query(query_text)?;
    Err(Error::NotBuiltIn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_the_root_writes_parses() {
        let q = parse_query(
            r#"{"identity_type":"okta","org":"REPLACE-ME-org","team":"REPLACE-ME-team","api_host":"https://REPLACE-ME-org.pam.okta.com","groups":"admins,team"}"#,
        )
        .unwrap();
        assert_eq!(
            q,
            GidQuery {
                team: "REPLACE-ME-team".into(),
                api_host: "https://REPLACE-ME-org.pam.okta.com".into(),
                groups: vec!["admins".into(), "team".into()],
            }
        );
    }

    #[test]
    fn a_bad_query_names_its_field() {
        for (text, word) in [
            ("[]", "not a JSON object"),
            (
                r#"{"identity_type":"okta","team":"t","api_host":"h"}"#,
                "`groups`",
            ),
            (
                r#"{"identity_type":"posix","team":"t","api_host":"h","groups":"g"}"#,
                "posix",
            ),
            (
                r#"{"identity_type":"okta","team":1,"api_host":"h","groups":"g"}"#,
                "`team` is not a string",
            ),
        ] {
            let e = parse_query(text).unwrap_err().to_string();
            assert!(e.contains(word), "{text}: {e}");
        }
    }

    #[cfg(feature = "opa")]
    #[test]
    fn credentials_are_the_roots_variables_then_the_providers() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = credentials(
            "REPLACE-ME-team",
            env(&[
                ("TF_VAR_replace_me_team_key", "k1"),
                ("TF_VAR_replace_me_team_secret", "s1"),
                ("OKTAPAM_KEY", "k2"),
                ("OKTAPAM_SECRET", "s2"),
            ]),
        )
        .unwrap();
        assert_eq!((c.key_id.as_str(), c.key_secret.as_str()), ("k1", "s1"));
        let c = credentials("t", env(&[("OKTAPAM_KEY", "k2"), ("OKTAPAM_SECRET", "s2")])).unwrap();
        assert_eq!(c.key_id, "k2");
        let e = credentials(
            "REPLACE-ME-team",
            env(&[("TF_VAR_replace_me_team_key", "k1")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("TF_VAR_replace_me_team_secret"), "{e}");
    }
}
