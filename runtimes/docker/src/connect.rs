//! Reaching the daemon: the runtime's `host` or `context` becomes an endpoint,
//! the endpoint a bollard client with a negotiated API version.

use std::path::{Path, PathBuf};

use bollard::{Docker, API_DEFAULT_VERSION};
use sha2::{Digest, Sha256};

use crate::settings::{ssh_port_problem, DockerSettings};

/// Request timeout (seconds) of API calls; long calls (exec streams) are not bounded by it.
const TIMEOUT_S: u64 = 600;

/// Where a daemon is: a `DOCKER_HOST` URL and its TLS material.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub host: String,
    /// Directory of `ca.pem`, `cert.pem`, `key.pem` when TLS is used.
    pub tls_dir: Option<PathBuf>,
    /// Where the endpoint came from, for messages (`host`, `context 'x'`, `DOCKER_HOST`, default).
    pub origin: String,
}

/// The default local daemon: `$DOCKER_HOST` or the unix socket.
pub fn default_endpoint() -> Endpoint {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => Endpoint {
            tls_dir: std::env::var("DOCKER_TLS_VERIFY")
                .ok()
                .filter(|v| !v.is_empty() && v != "0")
                .map(|_| {
                    std::env::var_os("DOCKER_CERT_PATH")
                        .map(PathBuf::from)
                        .or_else(docker_config_dir)
                        .unwrap_or_default()
                }),
            host: h,
            origin: "DOCKER_HOST".to_string(),
        },
        _ => Endpoint {
            host: "unix:///var/run/docker.sock".to_string(),
            tls_dir: None,
            origin: "the default socket".to_string(),
        },
    }
}

/// A docker context's endpoint, read from the CLI's context store:
/// `<config>/contexts/meta/<sha256 of name>/meta.json`, TLS material in
/// `<config>/contexts/tls/<sha256>/docker/`. `default` is the default daemon.
pub fn context_endpoint(name: &str, config_dir: Option<&Path>) -> Result<Endpoint, String> {
    if name == "default" {
        let mut e = default_endpoint();
        e.origin = "context 'default'".to_string();
        return Ok(e);
    }
    let dir = config_dir
        .map(Path::to_path_buf)
        .or_else(docker_config_dir)
        .ok_or_else(|| {
            format!("docker context '{name}': no docker config directory (HOME is not set)")
        })?;
    let id = hex::encode(Sha256::digest(name.as_bytes()));
    let meta = dir
        .join("contexts")
        .join("meta")
        .join(&id)
        .join("meta.json");
    let text = std::fs::read_to_string(&meta).map_err(|e| {
        format!(
            "docker context '{name}' is not in the context store ({}: {e}); `docker context ls` lists the contexts",
            meta.display()
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "docker context '{name}': {} is not JSON: {e}",
            meta.display()
        )
    })?;
    let host = v
        .pointer("/Endpoints/docker/Host")
        .and_then(|h| h.as_str())
        .ok_or_else(|| {
            format!(
                "docker context '{name}' has no docker endpoint host ({})",
                meta.display()
            )
        })?
        .to_string();
    let skip_verify = v
        .pointer("/Endpoints/docker/SkipTLSVerify")
        .and_then(|b| b.as_bool())
        .unwrap_or(false);
    let tls = dir.join("contexts").join("tls").join(&id).join("docker");
    let tls_dir = (tls.join("ca.pem").exists()
        || (host.starts_with("tcp://") && !skip_verify && tls.exists()))
    .then_some(tls);
    Ok(Endpoint {
        host,
        tls_dir,
        origin: format!("context '{name}'"),
    })
}

/// The endpoint a runtime's settings name.
pub fn endpoint(settings: &DockerSettings) -> Result<Endpoint, String> {
    match (&settings.host, &settings.context) {
        (Some(_), Some(_)) => Err(format!(
            "docker runtime {}: declare `host` or `context`, not both",
            settings.name
        )),
        (Some(h), None) => Ok(Endpoint {
            host: h.clone(),
            tls_dir: if settings.tls.verify || settings.tls.cert_path.is_some() {
                settings.tls.cert_path.clone().or_else(docker_config_dir)
            } else {
                None
            },
            origin: "host".to_string(),
        }),
        (None, Some(c)) => context_endpoint(c, None),
        (None, None) => Ok(default_endpoint()),
    }
}

/// A client for an endpoint (no request made yet).
pub fn client(e: &Endpoint) -> Result<Docker, String> {
    let h = e.host.as_str();
    let r = if h.starts_with("unix://") {
        Docker::connect_with_unix(h, TIMEOUT_S, API_DEFAULT_VERSION)
    } else if h.starts_with("tcp://") || h.starts_with("http://") || h.starts_with("https://") {
        match &e.tls_dir {
            Some(d) => Docker::connect_with_ssl(
                h,
                &d.join("key.pem"),
                &d.join("cert.pem"),
                &d.join("ca.pem"),
                TIMEOUT_S,
                API_DEFAULT_VERSION,
            ),
            None if h.starts_with("https://") => {
                return Err(format!(
                    "daemon address {h} needs TLS material: set tls_cert_path"
                ))
            }
            None => Docker::connect_with_http(h, TIMEOUT_S, API_DEFAULT_VERSION),
        }
    } else if h.starts_with("ssh://") {
        if let Some(p) = ssh_port_problem(h) {
            return Err(p);
        }
        Docker::connect_with_ssh(h, TIMEOUT_S, API_DEFAULT_VERSION, None)
    } else {
        return Err(format!(
            "daemon address '{h}' is not a DOCKER_HOST URL this runtime speaks (unix://, tcp://, ssh://)"
        ));
    };
    r.map_err(|err| format!("daemon address {h}: {err}"))
}

/// The docker CLI's config directory: `$DOCKER_CONFIG` or `~/.docker`.
pub fn docker_config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker"))
}

/// What to check when the daemon does not answer, per endpoint kind.
pub fn remedy(e: &Endpoint) -> &'static str {
    if e.host.starts_with("ssh://") {
        "check the ssh login (key, known_hosts) and that the daemon runs on that host"
    } else if e.host.starts_with("tcp://") || e.host.starts_with("https://") {
        "check the daemon listens there and the TLS material (tls_cert_path, tls_verify)"
    } else {
        "start it (OrbStack, Docker Desktop, the engine on the host) or fix the runtime's host/context; `csis preflight` shows which daemon answers"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_store_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let id = hex::encode(Sha256::digest(b"orbstack"));
        let meta = dir.path().join("contexts/meta").join(&id);
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"orbstack","Metadata":{},"Endpoints":{"docker":{"Host":"unix:///Users/me/.orbstack/run/docker.sock","SkipTLSVerify":false}}}"#,
        )
        .unwrap();
        let e = context_endpoint("orbstack", Some(dir.path())).unwrap();
        assert_eq!(e.host, "unix:///Users/me/.orbstack/run/docker.sock");
        assert_eq!(e.tls_dir, None);
        assert_eq!(e.origin, "context 'orbstack'");
        let err = context_endpoint("nope", Some(dir.path())).unwrap_err();
        assert!(
            err.contains("docker context 'nope' is not in the context store"),
            "{err}"
        );
    }

    #[test]
    fn context_with_tls() {
        let dir = tempfile::tempdir().unwrap();
        let id = hex::encode(Sha256::digest(b"remote"));
        std::fs::create_dir_all(dir.path().join("contexts/meta").join(&id)).unwrap();
        std::fs::write(
            dir.path().join("contexts/meta").join(&id).join("meta.json"),
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"tcp://h:2376"}}}"#,
        )
        .unwrap();
        let tls = dir.path().join("contexts/tls").join(&id).join("docker");
        std::fs::create_dir_all(&tls).unwrap();
        std::fs::write(tls.join("ca.pem"), "x").unwrap();
        let e = context_endpoint("remote", Some(dir.path())).unwrap();
        assert_eq!(e.tls_dir.as_deref(), Some(tls.as_path()));
    }

    #[test]
    fn host_and_context_refused() {
        let mut s = DockerSettings::new("d");
        s.host = Some("unix:///x".into());
        s.context = Some("c".into());
        assert!(endpoint(&s).unwrap_err().contains("not both"));
    }

    #[test]
    fn ssh_ports_refused_with_the_way_around() {
        assert_eq!(
            ssh_port_problem("ssh://deploy@build.example:2222").unwrap(),
            "daemon address ssh://deploy@build.example:2222: port 2222 in an ssh:// address is not supported (the Engine API client gives ssh `deploy@build.example:2222` as a host name, so the port would never be used); declare `Host build.example-2222` with `HostName build.example, Port 2222` in ~/.ssh/config and use host: ssh://deploy@build.example-2222"
        );
        // no user, a path after the authority
        let p = ssh_port_problem("ssh://h:22/x").unwrap();
        assert!(
            p.starts_with(
                "daemon address ssh://h:22/x: port 22 in an ssh:// address is not supported"
            ),
            "{p}"
        );
        assert!(
            p.ends_with(
                "`Host h-22` with `HostName h, Port 22` in ~/.ssh/config and use host: ssh://h-22"
            ),
            "{p}"
        );
        // IPv6 literals: the port after the bracket
        let p = ssh_port_problem("ssh://u@[::1]:2200").unwrap();
        assert!(p.contains("port 2200 in an ssh:// address"), "{p}");
        assert!(p.contains("`HostName ::1, Port 2200`"), "{p}");
        assert!(p.ends_with("use host: ssh://u@1-2200"), "{p}");
        // an empty or non-numeric port is named as such
        assert!(ssh_port_problem("ssh://u@h:")
            .unwrap()
            .contains(": an empty port in an ssh:// address is not supported"));
        assert!(ssh_port_problem("ssh://u@h:ssh")
            .unwrap()
            .contains(": port 'ssh' (not a port number) in an ssh:// address"));
        // no port: nothing to say
        assert_eq!(ssh_port_problem("ssh://u@h"), None);
        assert_eq!(ssh_port_problem("ssh://h"), None);
        assert_eq!(ssh_port_problem("ssh://u@[::1]"), None);
        assert_eq!(ssh_port_problem("tcp://h:2376"), None);
        // the client refuses it before any ssh runs, with the same words
        let e = client(&Endpoint {
            host: "ssh://u@h:2222".into(),
            tls_dir: None,
            origin: "host".into(),
        })
        .err()
        .unwrap();
        assert_eq!(e, ssh_port_problem("ssh://u@h:2222").unwrap());
    }

    #[test]
    fn unknown_scheme_refused() {
        let e = Endpoint {
            host: "npipe:////./pipe/docker".into(),
            tls_dir: None,
            origin: "host".into(),
        };
        assert!(client(&e).unwrap_err().contains("not a DOCKER_HOST URL"));
    }
}
