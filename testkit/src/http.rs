//! A tiny HTTP/1.1 server on a loopback port for the fakes and proxies of
//! the tests (OPA, SSM, the AWS runtime's counting and rewriting proxies in
//! front of moto): one thread per connection, keep-alive, bodies by
//! `content-length`; and [`forward`], one request sent on to an upstream.
//! Enough for reqwest and the AWS SDK, nothing more.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// An answer: the status (`200 OK`), its headers, its body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: &str, content_type: &str, body: String) -> Response {
        Response {
            status: status.to_string(),
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into_bytes(),
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// Send `req` on to `upstream` (`host:port`, a loopback one), one
/// connection per request, and give back its answer (the hop-by-hop and
/// length headers dropped: the server writes its own).
pub fn forward(upstream: &str, req: &Request) -> Response {
    let mut s = TcpStream::connect(upstream).expect("the upstream answers");
    let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.path);
    for (k, v) in &req.headers {
        if k == "connection" {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&req.body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status = (lines.next().unwrap_or("").split_once(' '))
        .map_or("502 Bad Gateway".to_string(), |(_, st)| st.to_string());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| {
            !k.eq_ignore_ascii_case("content-length")
                && !k.eq_ignore_ascii_case("connection")
                && !k.eq_ignore_ascii_case("transfer-encoding")
        })
        .collect();
    Response {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

pub type Handler = Arc<dyn Fn(Request) -> Response + Send + Sync>;

/// Serve `handler` on 127.0.0.1; answers `http://127.0.0.1:PORT`.
pub fn serve(handler: Handler) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let handler = handler.clone();
            std::thread::spawn(move || {
                let _ = connection(conn, &handler);
            });
        }
    });
    url
}

fn connection(conn: TcpStream, handler: &Handler) -> std::io::Result<()> {
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
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                len = value.trim().parse().unwrap_or(0);
            }
            headers.push((name, value.trim().to_string()));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let r = handler(Request {
            method,
            path,
            headers,
            body,
        });
        let mut head = format!(
            "HTTP/1.1 {}\r\ncontent-length: {}\r\n",
            r.status,
            r.body.len()
        );
        for (k, v) in &r.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        conn.write_all(head.as_bytes())?;
        conn.write_all(&r.body)?;
        conn.flush()?;
    }
}
