//! A fake of Okta Privileged Access's API on a loopback port: the service
//! token call and a group's attributes, the two calls of `csis identity
//! export-gids`. It answers only the key it was given and records every
//! request line with its body, so a test can say what was asked and that no
//! credential reached a URL.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::http::{serve, Handler, Request, Response};

pub struct FakeOpa {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// Every request: `METHOD PATH`, then its body when it has one.
    pub requests: Arc<Mutex<Vec<String>>>,
}

/// One team's groups: name to `unix_gid` (None: the group has no such
/// attribute).
pub fn start(
    team: &str,
    key_id: &str,
    key_secret: &str,
    groups: &[(&str, Option<u64>)],
) -> FakeOpa {
    start_paged(team, key_id, key_secret, groups, usize::MAX, None)
}

/// [`start`], answering a group's attributes `page` at a time (its
/// `unix_group_name` first, its `unix_gid` next), each page but the last
/// naming the next in a `Link: <...>; rel="next"` header: a path on this
/// fake, or on `next_origin` when given (a page off the API host).
pub fn start_paged(
    team: &str,
    key_id: &str,
    key_secret: &str,
    groups: &[(&str, Option<u64>)],
    page: usize,
    next_origin: Option<&str>,
) -> FakeOpa {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = Arc::new(State {
        team: team.into(),
        key_id: key_id.into(),
        key_secret: key_secret.into(),
        groups: groups
            .iter()
            .map(|(g, gid)| (g.to_string(), *gid))
            .collect(),
        requests: requests.clone(),
        page: page.max(1),
        next_origin: next_origin.map(str::to_string),
    });
    let handler: Handler = Arc::new(move |r: Request| {
        let body = r.text();
        state.requests.lock().unwrap().push(
            format!("{} {}\n{body}", r.method, r.path)
                .trim_end()
                .to_string(),
        );
        let auth = r.header("authorization").unwrap_or("");
        let (path, offset) = match r.path.split_once("?offset=") {
            Some((p, o)) => (p.to_string(), o.parse().unwrap_or(0)),
            None => (r.path.clone(), 0),
        };
        let (status, answer, more) = answer(&state, &r.method, &path, auth, &body, offset);
        let mut resp = Response::json(status, "application/json", answer);
        if let Some(next) = more {
            let origin = state.next_origin.as_deref().unwrap_or("");
            resp.headers.push((
                "link".into(),
                format!("<{origin}{path}?offset={next}>; rel=\"next\""),
            ));
        }
        resp
    });
    FakeOpa {
        url: serve(handler),
        requests,
    }
}

struct State {
    team: String,
    key_id: String,
    key_secret: String,
    groups: BTreeMap<String, Option<u64>>,
    requests: Arc<Mutex<Vec<String>>>,
    page: usize,
    next_origin: Option<String>,
}

const TOKEN: &str = "bearer-of-the-fake";

/// The status, the body, and the offset of the next page when there is one.
fn answer(
    s: &State,
    method: &str,
    path: &str,
    auth: &str,
    body: &str,
    offset: usize,
) -> (&'static str, String, Option<usize>) {
    let team = format!("/v1/teams/{}", s.team);
    let Some(rest) = path.strip_prefix(&team) else {
        return ("404 Not Found", r#"{"error":"no such team"}"#.into(), None);
    };
    if method == "POST" && rest == "/service_token" {
        let q: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if q["key_id"] == s.key_id.as_str() && q["key_secret"] == s.key_secret.as_str() {
            let t = serde_json::json!({"bearer_token": TOKEN, "expires_at": "2099-01-01T00:00:00Z", "team_name": s.team});
            return ("200 OK", t.to_string(), None);
        }
        return ("401 Unauthorized", r#"{"error":"bad key"}"#.into(), None);
    }
    if auth != format!("Bearer {TOKEN}") {
        return ("401 Unauthorized", r#"{"error":"no token"}"#.into(), None);
    }
    let group = rest
        .strip_prefix("/groups/")
        .and_then(|r| r.strip_suffix("/attributes"));
    match (
        method,
        group.and_then(|g| s.groups.get(g).map(|gid| (g, gid))),
    ) {
        ("GET", Some((g, gid))) => {
            let mut list = vec![
                serde_json::json!({"id": "a1", "attribute_name": "unix_group_name", "attribute_value": g}),
            ];
            if let Some(gid) = gid {
                list.push(serde_json::json!({"id": "a2", "attribute_name": "unix_gid", "attribute_value": gid}));
            }
            let end = offset.saturating_add(s.page).min(list.len());
            let more = (end < list.len()).then_some(end);
            let page: Vec<_> = list.get(offset..end).unwrap_or_default().to_vec();
            (
                "200 OK",
                serde_json::json!({"list": page}).to_string(),
                more,
            )
        }
        _ => ("404 Not Found", r#"{"error":"no such group"}"#.into(), None),
    }
}
