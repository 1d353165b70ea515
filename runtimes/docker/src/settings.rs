//! What a docker runtime is constructed from: a plain struct, independent of
//! the configuration tree's models ([`DockerSettings::from_model`] makes one
//! from a runtime entry of the schema); and the offline checks of a docker
//! runtime entry that `validate` and every load run ([`entry_problems`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use csis_schema::entry::{ExecutableEntry, ImageBuilder};
use csis_schema::model::{DockerFields, ImageBuilderKind, RuntimeCommon};
use csis_schema::{Problem, RuntimeEntry};
use serde::{Deserialize, Serialize};

use crate::names;

/// One machine type: `{cpus, memory}` (`--cpus 2`, `--memory 4g`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineType {
    /// `--cpus` (none: no limit).
    pub cpus: Option<f64>,
    /// `--memory`, a docker memory size: `512m`, `1g`, `4GiB`, bytes (none: no limit).
    pub memory: Option<String>,
}

/// TLS material for a `tcp://` host, by path (`DOCKER_CERT_PATH`,
/// `DOCKER_TLS_VERIFY`): the directory holds `ca.pem`, `cert.pem`, `key.pem`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsSettings {
    pub cert_path: Option<PathBuf>,
    pub verify: bool,
}

/// A docker runtime entry, as the runtime needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DockerSettings {
    /// The runtime entry's name (`docker-local`).
    pub name: String,
    /// A `DOCKER_HOST` URL (`unix:///var/run/docker.sock`, `tcp://h:2376`, `ssh://u@h`).
    pub host: Option<String>,
    /// A docker CLI context name, resolved from the context store.
    pub context: Option<String>,
    /// Declared repository; `None` = `csis/<name>`.
    pub repository: Option<String>,
    /// `networking.network` (default `bridge`): referenced, never created.
    pub network: String,
    pub machine_types: BTreeMap<String, MachineType>,
    pub default_machine_type: Option<String>,
    pub tls: TlsSettings,
    /// The `docker` CLI binary (the `binary` of the `executables:` entry the
    /// runtime's `executable` names): ansible's docker connection and the
    /// release commands run it.
    pub docker_binary: String,
    /// The version floor of that executable (`>=24`).
    pub docker_version: Option<String>,
    /// Image builders of type `packer-docker` on this runtime, with the packer
    /// binary each runs: `emit` writes a packer root for bakes by these and
    /// `bake` runs packer on it; every other builder bakes natively.
    pub packer_builders: BTreeMap<String, String>,
    /// The tree's id (`cfg/_config.yml` `id`): the fleet containers and
    /// volumes whose `csis_config` is this tree's are its own
    /// (`query_instances`, `query_storages`, and what `remove_instance` and
    /// `destroy_storage` may touch). None: the fleet queries are refused.
    #[serde(default)]
    pub config: Option<String>,
}

impl DockerSettings {
    /// A runtime reaching the local daemon (`DOCKER_HOST` or the default socket).
    pub fn new(name: impl Into<String>) -> Self {
        DockerSettings {
            name: name.into(),
            host: None,
            context: None,
            repository: None,
            network: "bridge".to_string(),
            machine_types: BTreeMap::new(),
            default_machine_type: None,
            tls: TlsSettings::default(),
            docker_binary: "docker".to_string(),
            docker_version: Some(crate::version::DOCKER_VERSION_FLOOR.to_string()),
            packer_builders: BTreeMap::new(),
            config: None,
        }
    }

    /// The repository builds are tagged in, made valid.
    pub fn repository(&self) -> Result<String, String> {
        names::repository_name(&self.name, self.repository.as_deref())
    }

    /// The environment every tool a bake runs gets (`tool_environment()`):
    /// `DOCKER_HOST` (+ `DOCKER_CERT_PATH`, `DOCKER_TLS_VERIFY`) or `DOCKER_CONTEXT`.
    pub fn tool_environment(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(h) = &self.host {
            env.push(("DOCKER_HOST".to_string(), h.clone()));
            if let Some(p) = &self.tls.cert_path {
                env.push(("DOCKER_CERT_PATH".to_string(), p.display().to_string()));
            }
            if self.tls.verify {
                env.push(("DOCKER_TLS_VERIFY".to_string(), "1".to_string()));
            }
        } else if let Some(c) = &self.context {
            env.push(("DOCKER_CONTEXT".to_string(), c.clone()));
        }
        env
    }

    /// The machine type a bake uses: the request's, else the default.
    pub fn machine_type(&self, requested: Option<&str>) -> Result<Option<&MachineType>, String> {
        let name = requested.or(self.default_machine_type.as_deref());
        match name {
            None => Ok(None),
            Some(n) => self.machine_types.get(n).map(Some).ok_or_else(|| {
                format!(
                    "docker runtime {}: machine type '{n}' is not declared in machine_types",
                    self.name
                )
            }),
        }
    }
}

impl DockerSettings {
    /// The settings of the docker runtime entry `rt` of a loaded tree: its
    /// model (`host`, `context`, `repository`, `tls_cert_path` (relative to
    /// the tree's `root`), `tls_verify`, `networking.network`,
    /// `machine_types`, `default_machine_type`), the `executables:` entry it
    /// runs (binary and version floor; `docker` when undeclared), looked up
    /// by `executable` (name or alias), and the `packer-docker` builders of
    /// `image_builders` bound to it. The caller lends what the tree holds
    /// around the entry, so this crate reads the schema, not the loader.
    /// `Err` when `rt` is not a docker runtime.
    pub fn from_model<'t>(
        rt: &RuntimeEntry,
        root: &Path,
        executable: impl Fn(&str) -> Option<&'t ExecutableEntry>,
        image_builders: &[ImageBuilder],
    ) -> Result<Self, String> {
        let d = rt.docker().ok_or_else(|| {
            format!(
                "runtime {} is of type {}, not docker",
                rt.display,
                rt.type_name()
            )
        })?;
        let mut s = DockerSettings::new(rt.name.clone());
        s.host = d.host.clone();
        s.context = d.context.clone();
        s.repository = d.repository.clone();
        s.network = d.network().to_string();
        s.tls = TlsSettings {
            cert_path: d.tls_cert_path.as_ref().map(|p| {
                let p = Path::new(p);
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    root.join(p)
                }
            }),
            verify: d.tls_verify,
        };
        s.machine_types = d
            .machine_types
            .iter()
            .map(|(k, m)| {
                (
                    k.clone(),
                    MachineType {
                        cpus: m.cpus,
                        memory: m.memory.clone(),
                    },
                )
            })
            .collect();
        let dmt = rt.common.default_machine_type.trim();
        s.default_machine_type = (!dmt.is_empty()
            && (s.machine_types.contains_key(dmt) || !s.machine_types.is_empty()))
        .then(|| dmt.to_string());
        let exe_name = rt
            .executable
            .clone()
            .or_else(|| rt.common.executable.clone())
            .unwrap_or_else(|| "docker".to_string());
        match executable(&exe_name) {
            Some(e) => {
                s.docker_binary = e.model.binary.clone().unwrap_or_else(|| e.name.clone());
                s.docker_version = e.model.version.clone();
            }
            None => {
                s.docker_binary = exe_name;
            }
        }
        s.packer_builders = image_builders
            .iter()
            .filter(|b| b.runtime == rt.name && b.kind == ImageBuilderKind::PackerDocker)
            .map(|b| {
                let exe = b.executable.clone().unwrap_or_else(|| "packer".to_string());
                let binary = executable(&exe)
                    .map(|e| e.model.binary.clone().unwrap_or_else(|| e.name.clone()))
                    .unwrap_or(exe);
                (b.name.clone(), binary)
            })
            .collect();
        Ok(s)
    }
}

/// Why a runtime declaring both `host` and `context` is refused.
fn both_addresses(runtime: &str) -> String {
    format!("docker runtime {runtime}: declare `host` or `context`, not both")
}

/// The offline problems of a docker runtime entry, as the load reports
/// them (paths relative to the entry): both `host` and `context`, a
/// `default_machine_type` naming no declared machine type, a repository
/// with characters no repository carries, tag keys no label carries.
pub fn entry_problems(common: &RuntimeCommon, docker: &DockerFields) -> Vec<Problem> {
    let mut out = Vec::new();
    if docker.host.is_some() && docker.context.is_some() {
        out.push(
            Problem::error("context", both_addresses(&common.name)).with_hint(
                "keep one address: host (a DOCKER_HOST URL) or context (a docker context name)",
            ),
        );
    }
    if !docker.machine_types.is_empty()
        && !docker
            .machine_types
            .contains_key(&common.default_machine_type)
    {
        let names: Vec<&str> = docker.machine_types.keys().map(String::as_str).collect();
        out.push(
            Problem::error(
                "default_machine_type",
                format!(
                    "default_machine_type `{}` names no declared machine type",
                    common.default_machine_type
                ),
            )
            .with_hint(format!("declared machine_types: {}", names.join(", "))),
        );
    }
    if let Some(r) = &docker.repository {
        let ok = !r.is_empty()
            && r.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c));
        if !ok {
            out.push(Problem::error(
                "repository",
                format!("`{r}` is not a valid repository name"),
            ));
        }
    }
    if let Some(h) = &docker.host {
        if !["unix://", "tcp://", "ssh://", "http://", "https://"]
            .iter()
            .any(|p| h.starts_with(p))
        {
            out.push(
                Problem::error("host", "host is not a DOCKER_HOST URL").with_hint(
                    "a unix://, tcp:// or ssh:// URL; or context: NAME for a docker context",
                ),
            );
        }
        if let Some(p) = ssh_port_problem(h) {
            out.push(Problem::error("host", p));
        }
    }
    for (n, m) in &docker.machine_types {
        if let Some(Err(e)) = m.memory.as_deref().map(parse_memory) {
            out.push(Problem::error(format!("machine_types.{n}.memory"), e));
        }
        if m.cpus.is_some_and(|c| c.is_nan() || c <= 0.0) {
            out.push(Problem::error(
                format!("machine_types.{n}.cpus"),
                "cpus must be more than 0",
            ));
        }
    }
    if docker.tls_verify && docker.tls_cert_path.is_none() {
        out.push(
            Problem::error("tls_verify", "tls_verify needs tls_cert_path")
                .with_hint("tls_cert_path: the directory of ca.pem, cert.pem and key.pem"),
        );
    }
    for k in common.tags.keys() {
        if let Some(p) = names::label_key_refusal(k) {
            out.push(p);
        }
    }
    out
}

/// A docker memory size in bytes (go-units `RAMInBytes`: binary multiples,
/// `512m`, `1g`, `1.5GiB`, `1024`).
pub fn parse_memory(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let n: f64 = num
        .parse()
        .map_err(|_| format!("memory '{s}' is not a size docker reads (like 512m, 1g)"))?;
    let mult: f64 = match unit.trim_end_matches('b').trim_end_matches('i') {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0f64.powi(2),
        "g" => 1024.0f64.powi(3),
        "t" => 1024.0f64.powi(4),
        "p" => 1024.0f64.powi(5),
        _ => {
            return Err(format!(
                "memory '{s}' is not a size docker reads (like 512m, 1g)"
            ))
        }
    };
    let bytes = (n * mult) as i64;
    if bytes < 6 * 1024 * 1024 {
        return Err(format!(
            "memory '{s}' is below the 6m docker allows for a container"
        ));
    }
    Ok(bytes)
}

/// bollard's ssh transport hands the URL's authority (`user@host:port`) to
/// ssh as the destination without the `ssh://` scheme, so ssh reads
/// `host:port` as a host name and the port is never used (bollard 0.21,
/// openssh 0.11: `SessionBuilder::resolve` splits a port only from an
/// `ssh://` destination). A port is therefore refused, with the
/// `~/.ssh/config` alias that reaches the same daemon (the docker CLI,
/// ansible and packer read that alias too). `None`: no port.
pub fn ssh_port_problem(host: &str) -> Option<String> {
    let rest = host.strip_prefix("ssh://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (name, port) = if let Some(r) = hostport.strip_prefix('[') {
        let (n, after) = r.split_once(']').unwrap_or((r, ""));
        (n, after.strip_prefix(':')?)
    } else {
        let (n, p) = hostport.split_once(':')?;
        (n, p)
    };
    let alias: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    let port_desc = if port.is_empty() {
        "an empty port".to_string()
    } else if port.parse::<u16>().is_ok() {
        format!("port {port}")
    } else {
        format!("port '{port}' (not a port number)")
    };
    let alias = if port.parse::<u16>().is_ok() {
        format!("{alias}-{port}")
    } else {
        alias
    };
    let port_line = port
        .parse::<u16>()
        .map(|p| format!(", Port {p}"))
        .unwrap_or_default();
    let user_part = user.map(|u| format!("{u}@")).unwrap_or_default();
    Some(format!(
        "daemon address {host}: {port_desc} in an ssh:// address is not supported (the Engine API client gives ssh `{authority}` as a host name, so the port would never be used); declare `Host {alias}` with `HostName {name}{port_line}` in ~/.ssh/config and use host: ssh://{user_part}{alias}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("1g").unwrap(), 1 << 30);
        assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
        assert_eq!(parse_memory("4GiB").unwrap(), 4i64 << 30);
        assert_eq!(parse_memory("1.5g").unwrap(), 3i64 << 29);
        assert!(parse_memory("lots").is_err());
        assert!(parse_memory("1x").is_err());
        assert!(parse_memory("1k").unwrap_err().contains("6m"));
    }

    fn entry(docker: serde_json::Value) -> (RuntimeCommon, DockerFields) {
        let common: RuntimeCommon = serde_json::from_value(serde_json::json!({
            "name": "d", "type": "docker", "default_machine_type": "small"
        }))
        .unwrap();
        (common, serde_json::from_value(docker).unwrap())
    }

    fn paths(p: &[Problem]) -> Vec<&str> {
        p.iter().map(|p| p.path.as_str()).collect()
    }

    #[test]
    fn problems_of_an_entry() {
        let (c, d) = entry(serde_json::json!({}));
        assert!(entry_problems(&c, &d).is_empty());
        let (c, d) = entry(serde_json::json!({
            "host": "unix:///var/run/docker.sock",
            "context": "orbstack",
            "machine_types": {"big": {"cpus": 1.0, "memory": "1g"}},
        }));
        let p = entry_problems(&c, &d);
        assert!(
            p.iter()
                .any(|p| p.path == "context" && p.message.contains("not both")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|p| p.path == "default_machine_type"
                && p.message.contains("`small` names no declared")),
            "{p:?}"
        );
        let (c, d) = entry(serde_json::json!({
            "host": "docker.example:2375",
            "machine_types": {"small": {"cpus": 0.0, "memory": "lots"}},
            "tls_verify": true,
        }));
        let p = entry_problems(&c, &d);
        assert_eq!(
            paths(&p),
            [
                "host",
                "machine_types.small.memory",
                "machine_types.small.cpus",
                "tls_verify"
            ],
            "{p:?}"
        );
        assert!(p[0].message.contains("not a DOCKER_HOST URL"), "{p:?}");
        let (c, d) = entry(serde_json::json!({
            "host": "tcp://127.0.0.1:2376",
            "machine_types": {"small": {"cpus": 1.5, "memory": "1g"}},
            "tls_verify": true, "tls_cert_path": "certs",
        }));
        assert!(entry_problems(&c, &d).is_empty());
    }

    #[test]
    fn tool_environment() {
        let mut s = DockerSettings::new("d");
        assert!(s.tool_environment().is_empty());
        s.context = Some("orbstack".into());
        assert_eq!(
            s.tool_environment(),
            vec![("DOCKER_CONTEXT".to_string(), "orbstack".to_string())]
        );
        s.context = None;
        s.host = Some("tcp://h:2376".into());
        s.tls = TlsSettings {
            cert_path: Some("/certs".into()),
            verify: true,
        };
        let env = s.tool_environment();
        assert!(env.contains(&("DOCKER_HOST".into(), "tcp://h:2376".into())));
        assert!(env.contains(&("DOCKER_CERT_PATH".into(), "/certs".into())));
        assert!(env.contains(&("DOCKER_TLS_VERIFY".into(), "1".into())));
    }

    #[test]
    fn machine_type_selection() {
        let mut s = DockerSettings::new("d");
        assert_eq!(s.machine_type(None).unwrap(), None);
        s.machine_types.insert(
            "small".into(),
            MachineType {
                cpus: Some(1.0),
                memory: Some("1g".into()),
            },
        );
        s.default_machine_type = Some("small".into());
        assert_eq!(
            s.machine_type(None).unwrap().unwrap().memory.as_deref(),
            Some("1g")
        );
        assert!(s.machine_type(Some("huge")).is_err());
    }
}
