//! A fake of Okta Privileged Access's API on a loopback port: the service
//! token call and a group's attributes, the two calls of `csis identity
//! export-gids`. It answers only the key it was given and records every
//! request line with its body, so a test can say what was asked and that no
//! credential reached a URL.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

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
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().unwrap());
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
    });
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let state = state.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, &state);
            });
        }
    });
    FakeOpa { url, requests }
}

struct State {
    team: String,
    key_id: String,
    key_secret: String,
    groups: BTreeMap<String, Option<u64>>,
    requests: Arc<Mutex<Vec<String>>>,
}

const TOKEN: &str = "bearer-of-the-fake";

fn serve(conn: TcpStream, s: &State) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut len = 0usize;
        let mut auth = String::new();
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => len = value.trim().parse().unwrap_or(0),
                "authorization" => auth = value.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let body = String::from_utf8_lossy(&body).to_string();
        s.requests
            .lock()
            .unwrap()
            .push(format!("{method} {path}\n{body}").trim_end().to_string());
        let (status, answer) = answer(s, &method, &path, &auth, &body);
        write!(
            conn,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        )?;
        conn.flush()?;
    }
}

fn answer(s: &State, method: &str, path: &str, auth: &str, body: &str) -> (&'static str, String) {
    let team = format!("/v1/teams/{}", s.team);
    let Some(rest) = path.strip_prefix(&team) else {
        return ("404 Not Found", r#"{"error":"no such team"}"#.into());
    };
    if method == "POST" && rest == "/service_token" {
        let q: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if q["key_id"] == s.key_id.as_str() && q["key_secret"] == s.key_secret.as_str() {
            let t = serde_json::json!({"bearer_token": TOKEN, "expires_at": "2099-01-01T00:00:00Z", "team_name": s.team});
            return ("200 OK", t.to_string());
        }
        return ("401 Unauthorized", r#"{"error":"bad key"}"#.into());
    }
    if auth != format!("Bearer {TOKEN}") {
        return ("401 Unauthorized", r#"{"error":"no token"}"#.into());
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
            ("200 OK", serde_json::json!({"list": list}).to_string())
        }
        _ => ("404 Not Found", r#"{"error":"no such group"}"#.into()),
    }
}
