//! Okta Privileged Access (OPA, the former Advanced Server Access), read
//! only: the gid of each managed group, which the `oktapam` provider does
//! not expose (the original's DESIGN N7). The opa-groups root asks for it
//! through `data "external"`, which runs `csis identity export-gids`.
//!
//! Two calls of the team's API (<https://developer.okta.com/docs/api/openapi/opa>):
//! `POST /v1/teams/{team}/service_token` with the service user's key id and
//! secret gives a bearer token; `GET /v1/teams/{team}/groups/{group}/attributes`
//! lists a group's attributes, among them `unix_gid`, a page at a time (the
//! next page named by the answer's `Link: <...>; rel="next"`, followed on
//! the API host only, at most [`MAX_PAGES`]). The key, the secret and
//! the token are never part of an error or a log; credentials travel over
//! https only (plain http is for a loopback address, where tests answer).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// The most one answer may weigh: input is hostile.
const ANSWER_LIMIT: usize = 4 << 20;
/// The most pages of one list followed: input is hostile.
pub const MAX_PAGES: usize = 100;
/// A call that takes longer is an error, not a hung `tofu plan`.
const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("api_host {0}: not an https URL (credentials go over https only; http is for a loopback address)")]
    Insecure(String),
    #[error("{what}: {detail}")]
    Call { what: String, detail: String },
    #[error("{what}: HTTP {status}{hint}")]
    Status {
        what: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{what}: the next page is at {next}, not on the API host (credentials go to the API host only)")]
    OffHost { what: String, next: String },
    #[error("{what}: more than {MAX_PAGES} pages")]
    TooManyPages { what: String },
    #[error("group {group} on team {team} carries no unix_gid attribute (give it a gid, or let OPA assign one)")]
    NoGid { group: String, team: String },
}

/// The service user's API key: from the environment, never from the query.
pub struct Credentials {
    pub key_id: String,
    pub key_secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials { .. }")
    }
}

/// `{group: gid}` for each of `groups` of `team` at `api_host`.
pub async fn group_gids(
    api_host: &str,
    team: &str,
    groups: &[String],
    creds: &Credentials,
) -> Result<BTreeMap<String, u64>, Error> {
    let base = base_url(api_host)?;
    // rustls on ring (the workspace builds reqwest without a provider);
    // a provider already installed is kept
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| Error::Call {
            what: "the HTTP client".into(),
            detail: e.to_string(),
        })?;
    let team_path = format!("{base}/v1/teams/{}", segment(team));
    let what = format!("a service token for team {team} at {base}");
    let body = serde_json::json!({"key_id": creds.key_id, "key_secret": creds.key_secret});
    let resp = http
        .post(format!("{team_path}/service_token"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    #[derive(Deserialize)]
    struct Token {
        bearer_token: String,
    }
    let token: Token = answer(&what, resp, " (the key id and secret were refused)", "").await?;

    let mut gids = BTreeMap::new();
    for g in groups {
        let what = format!("the attributes of group {g} on team {team}");
        let mut url = format!("{team_path}/groups/{}/attributes", segment(g));
        let mut gid = None;
        for page in 0.. {
            if page == MAX_PAGES {
                return Err(Error::TooManyPages { what });
            }
            let resp = http.get(&url).bearer_auth(&token.bearer_token).send().await;
            let next = resp.as_ref().ok().and_then(next_page);
            let list: AttributeList = answer(
                &what,
                resp,
                " (the service user may not read it)",
                " (no such group)",
            )
            .await?;
            gid = list
                .list
                .iter()
                .find(|a| a.attribute_name == "unix_gid")
                .and_then(|a| match &a.attribute_value {
                    serde_json::Value::Number(n) => n.as_u64(),
                    serde_json::Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                });
            match next {
                Some(n) if gid.is_none() => {
                    url = on_host(&base, &n).ok_or_else(|| Error::OffHost {
                        what: what.clone(),
                        next: n.clone(),
                    })?;
                }
                _ => break,
            }
        }
        let gid = gid.ok_or_else(|| Error::NoGid {
            group: g.clone(),
            team: team.into(),
        })?;
        gids.insert(g.clone(), gid);
    }
    Ok(gids)
}

/// The `rel="next"` target of an answer's `Link` header (RFC 8288), if any.
fn next_page(resp: &reqwest::Response) -> Option<String> {
    let links = resp.headers().get_all(reqwest::header::LINK);
    links
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|link| {
            let (target, params) = link.trim().split_once(';')?;
            let next = params.split(';').any(|p| {
                let p = p.trim().replace(' ', "");
                p == "rel=next" || p == "rel=\"next\""
            });
            let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
            next.then(|| target.to_string())
        })
}

/// `next` as a URL on the API host `base` (a path is taken on it); None
/// when it names another scheme, host or port.
fn on_host(base: &str, next: &str) -> Option<String> {
    let origin = |u: &str| -> Option<String> {
        let (scheme, rest) = u.split_once("://")?;
        let host = rest.split(['/', '?', '#']).next()?;
        Some(format!(
            "{}://{}",
            scheme.to_ascii_lowercase(),
            host.to_ascii_lowercase()
        ))
    };
    let home = origin(base)?;
    if next.starts_with('/') && !next.starts_with("//") {
        return Some(format!("{home}{next}"));
    }
    (origin(next)? == home).then(|| next.to_string())
}

#[derive(Deserialize)]
struct AttributeList {
    #[serde(default)]
    list: Vec<Attribute>,
}

#[derive(Deserialize)]
struct Attribute {
    attribute_name: String,
    #[serde(default)]
    attribute_value: serde_json::Value,
}

/// The answer of one call as `T`, or an error naming the call (never the
/// credentials: the request is not part of it) with what a 401/403
/// (`refused`) or a 404 (`missing`) means for it.
async fn answer<T: serde::de::DeserializeOwned>(
    what: &str,
    resp: reqwest::Result<reqwest::Response>,
    refused: &'static str,
    missing: &'static str,
) -> Result<T, Error> {
    let call = |detail: String| Error::Call {
        what: what.into(),
        detail,
    };
    let resp = resp.map_err(|e| call(without_url(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        let hint = match status.as_u16() {
            401 | 403 => refused,
            404 => missing,
            _ => "",
        };
        return Err(Error::Status {
            what: what.into(),
            status: status.as_u16(),
            hint,
        });
    }
    if resp
        .content_length()
        .is_some_and(|n| n > ANSWER_LIMIT as u64)
    {
        return Err(call(format!("the answer is over {ANSWER_LIMIT} bytes")));
    }
    let bytes = resp.bytes().await.map_err(|e| call(without_url(&e)))?;
    if bytes.len() > ANSWER_LIMIT {
        return Err(call(format!("the answer is over {ANSWER_LIMIT} bytes")));
    }
    serde_json::from_slice(&bytes).map_err(|e| call(format!("not the answer OPA gives: {e}")))
}

/// reqwest's error text without its URL (the URL is named by `what`).
fn without_url(e: &reqwest::Error) -> String {
    let mut detail = e.to_string();
    if let Some(u) = e.url() {
        detail = detail.replace(&format!(" ({u})"), "");
    }
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        src = s.source();
    }
    detail
}

/// `api_host` without a trailing slash; https, or http to a loopback address.
fn base_url(api_host: &str) -> Result<String, Error> {
    let h = api_host.trim_end_matches('/');
    if h.starts_with("https://") {
        return Ok(h.into());
    }
    if let Some(rest) = h.strip_prefix("http://") {
        let host = rest.split('/').next().unwrap_or("");
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.split(']').next())
            .unwrap_or_else(|| host.split(':').next().unwrap_or(""));
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if loopback {
            return Ok(h.into());
        }
    }
    Err(Error::Insecure(api_host.into()))
}

/// One path segment, percent-encoded (a group name is the tree's, not a path).
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_over_https_or_to_loopback_only() {
        assert_eq!(
            base_url("https://org.pam.okta.com/").unwrap(),
            "https://org.pam.okta.com"
        );
        assert!(base_url("http://127.0.0.1:8080").is_ok());
        assert!(base_url("http://[::1]:8080").is_ok());
        assert!(base_url("http://localhost:1").is_ok());
        for bad in [
            "http://org.pam.okta.com",
            "http://10.0.0.1",
            "ftp://x",
            "org.pam.okta.com",
        ] {
            assert!(matches!(base_url(bad), Err(Error::Insecure(_))), "{bad}");
        }
    }

    #[test]
    fn the_next_page_stays_on_the_api_host() {
        let base = "https://acme.pam.okta.com";
        assert_eq!(
            on_host(base, "/v1/teams/t/groups/g/attributes?offset=a2").as_deref(),
            Some("https://acme.pam.okta.com/v1/teams/t/groups/g/attributes?offset=a2")
        );
        assert_eq!(
            on_host(base, "https://ACME.pam.okta.com/v1/x?offset=1").as_deref(),
            Some("https://ACME.pam.okta.com/v1/x?offset=1")
        );
        assert_eq!(on_host(base, "https://evil.example/v1/x"), None);
        assert_eq!(on_host(base, "http://acme.pam.okta.com/v1/x"), None);
        assert_eq!(on_host(base, "https://acme.pam.okta.com:8443/v1/x"), None);
        assert_eq!(on_host(base, "//evil.example/v1/x"), None);
        // a path is taken on the host, not under api_host's own path
        assert_eq!(
            on_host("https://acme.pam.okta.com/api", "/v1/x").as_deref(),
            Some("https://acme.pam.okta.com/v1/x")
        );
    }

    #[test]
    fn a_group_name_is_one_path_segment() {
        assert_eq!(segment("team"), "team");
        assert_eq!(segment("a/../b c"), "a%2F..%2Fb%20c");
    }

    #[test]
    fn credentials_are_not_printed_by_debug() {
        let c = Credentials {
            key_id: "kid-123".into(),
            key_secret: "s3cret".into(),
        };
        let d = format!("{c:?}");
        assert!(!d.contains("kid-123") && !d.contains("s3cret"), "{d}");
    }
}
