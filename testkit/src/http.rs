//! A tiny HTTP/1.1 server on a loopback port for the fakes of this crate
//! (OPA, SSM): one thread per connection, keep-alive, bodies by
//! `content-length`. Enough for reqwest and the AWS SDK, nothing more.

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
    pub status: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(status: &'static str, content_type: &str, body: String) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body,
        }
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
        conn.write_all(r.body.as_bytes())?;
        conn.flush()?;
    }
}
