//! State backends as a root uses them: the partial backend file
//! (`<builder>-<phase>.tfbackend.hcl`), the `data "terraform_remote_state"`
//! of a root that reads another, and the root's location in
//! `meta-state/state-locations.yaml` (one location per root: two roots at
//! one location, or a recorded root moved, is refused).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::hv::{label, quote};
use crate::{Result, RootsInput, TofuError};

/// A resolved state backend (the root's `state_configuration`, else its
/// runtime's, else the default one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateBackend {
    /// The backend's declared name (`s3-main`).
    pub name: String,
    pub kind: BackendKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BackendKind {
    /// Each root's state is `<key_prefix>/<root label>.tfstate`.
    S3 {
        bucket: String,
        key_prefix: String,
        region: String,
        profile: Option<String>,
        encrypt: bool,
        use_lockfile: bool,
        /// Every other declared backend argument, in the original's order
        /// (its `_PASS_THROUGH`): into the backend file, a consumer's
        /// remote state and the root's location.
        #[serde(default)]
        extra: Vec<BackendArg>,
    },
    /// `<dir>/<root label>.tfstate`, `dir` relative to the configuration root.
    Local {
        dir: String,
    },
    Gcs {
        bucket: String,
        prefix: String,
    },
}

/// A backend argument beyond the core: its name, its value as HCL and as
/// data (the state location's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendArg {
    pub name: String,
    pub hcl: String,
    pub value: serde_json::Value,
}

/// Where one root keeps its state (a `state-locations.yaml` entry; keys in
/// the original's sorted order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bucket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub encrypt: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub key: Option<String>,
    pub location: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub region: Option<String>,
    pub run: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub use_lockfile: Option<bool>,
    /// The backend's other declared arguments ([`BackendArg`]).
    #[serde(flatten, default)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn s3_key(prefix: &str, workspace: &str) -> String {
    let file = format!("{}.tfstate", label(workspace));
    if prefix.is_empty() {
        file
    } else if prefix.ends_with('/') {
        format!("{prefix}{file}")
    } else {
        format!("{prefix}/{file}")
    }
}

fn local_path(dir: &str, workspace: &str) -> String {
    format!("{}/{}.tfstate", dir.trim_end_matches('/'), label(workspace))
}

impl StateBackend {
    /// The location of `workspace`'s state.
    pub fn location(&self, workspace: &str, run: &str) -> Location {
        let mut l = Location {
            backend: self.name.clone(),
            bucket: None,
            encrypt: None,
            key: None,
            location: String::new(),
            path: None,
            prefix: None,
            profile: None,
            region: None,
            run: run.to_string(),
            type_: String::new(),
            use_lockfile: None,
            extra: BTreeMap::new(),
        };
        match &self.kind {
            BackendKind::S3 {
                bucket,
                key_prefix,
                region,
                profile,
                encrypt,
                use_lockfile,
                extra,
            } => {
                let key = s3_key(key_prefix, workspace);
                l.location = format!("s3://{bucket}/{key}");
                l.bucket = Some(bucket.clone());
                l.key = Some(key);
                l.region = Some(region.clone());
                l.profile = profile.clone();
                l.encrypt = Some(*encrypt);
                l.use_lockfile = Some(*use_lockfile);
                l.type_ = "s3".into();
                l.extra = extra
                    .iter()
                    .map(|a| (a.name.clone(), a.value.clone()))
                    .collect();
            }
            BackendKind::Local { dir } => {
                let path = local_path(dir, workspace);
                l.location = format!("local://{path}");
                l.path = Some(path);
                l.type_ = "local".into();
            }
            BackendKind::Gcs { bucket, prefix } => {
                let p = format!("{}/{}", prefix.trim_end_matches('/'), label(workspace));
                l.location = format!("gs://{bucket}/{p}");
                l.bucket = Some(bucket.clone());
                l.prefix = Some(p);
                l.type_ = "gcs".into();
            }
        }
        l
    }

    fn type_name(&self) -> &'static str {
        match self.kind {
            BackendKind::S3 { .. } => "s3",
            BackendKind::Local { .. } => "local",
            BackendKind::Gcs { .. } => "gcs",
        }
    }

    /// `backend "<type>" {\n    }` inside the root's `terraform` block.
    pub fn block(&self) -> String {
        format!("    backend \"{}\" {{\n    }}", self.type_name())
    }

    /// The settings of `workspace`'s state, as `key = value` lines; `up`
    /// leads from the root's directory to the configuration root. With
    /// `full`, the backend file's settings; else a remote state's `config`.
    fn settings(&self, workspace: &str, up: &str, full: bool) -> Vec<(String, String)> {
        let mut v = Vec::new();
        match &self.kind {
            BackendKind::S3 {
                bucket,
                key_prefix,
                region,
                profile,
                encrypt,
                use_lockfile,
                extra,
            } => {
                v.push(("bucket".into(), quote(bucket)));
                v.push(("key".into(), quote(&s3_key(key_prefix, workspace))));
                v.push(("region".into(), quote(region)));
                if full {
                    v.push(("encrypt".into(), encrypt.to_string()));
                    v.push(("use_lockfile".into(), use_lockfile.to_string()));
                }
                if let Some(p) = profile {
                    v.push(("profile".into(), quote(p)));
                }
                // a consumer reads the state the same way
                v.extend(extra.iter().map(|a| (a.name.clone(), a.hcl.clone())));
            }
            BackendKind::Local { dir } => {
                v.push((
                    "path".into(),
                    quote(&format!("{up}{}", local_path(dir, workspace))),
                ));
            }
            BackendKind::Gcs { bucket, prefix } => {
                v.push(("bucket".into(), quote(bucket)));
                let p = format!("{}/{}", prefix.trim_end_matches('/'), label(workspace));
                v.push(("prefix".into(), quote(&p)));
            }
        }
        v
    }

    /// The partial backend file of `workspace` (no trailing newline, as the original).
    pub fn backend_file(&self, workspace: &str, up: &str) -> String {
        let mut o = format!(
            "# Backend '{}' ({}) partial configuration for workspace {workspace}",
            self.name,
            self.type_name()
        );
        for (k, v) in self.settings(workspace, up, true) {
            o.push_str(&format!("\n{k} = {v}"));
        }
        o
    }

    /// `data "terraform_remote_state" "<label>"` reading `workspace`.
    pub fn remote_state(&self, workspace: &str, up: &str) -> String {
        let mut o = format!(
            "data \"terraform_remote_state\" \"{}\" {{\n    backend = \"{}\"\n    \n    config = {{\n",
            label(workspace),
            self.type_name()
        );
        for (k, v) in self.settings(workspace, up, false) {
            o.push_str(&format!("        {k} = {v}\n"));
        }
        o.push_str("    }\n}");
        o
    }
}

/// The location of every root, in order; two roots at one location (or
/// one builder twice) refused, naming both.
pub fn locations(input: &RootsInput) -> Result<Vec<Location>> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut builders: BTreeMap<&str, ()> = BTreeMap::new();
    let mut out = Vec::new();
    for root in &input.roots {
        crate::plain_name("builder", &root.builder)?;
        if builders.insert(&root.builder, ()).is_some() {
            return Err(TofuError::Invalid(format!(
                "builder {} has two roots: refused (one root per builder)",
                root.builder
            )));
        }
        let l = root.backend.location(&root.builder, &input.run);
        if let Some(other) = seen.insert(l.location.clone(), &root.builder) {
            return Err(TofuError::Invalid(format!(
                "roots {other} and {} would share the state location {}: refused (give one its own state_configuration)",
                root.builder, l.location
            )));
        }
        out.push(l);
    }
    Ok(out)
}

/// Record each root's location in `meta-state/state-locations.yaml`
/// (sorted keys; `migrations` and other roots' entries kept). Refused, and
/// nothing written: a location another recorded workspace holds, a
/// recorded workspace at another location (a move is a state migration).
pub fn record_locations(meta_state: &Path, entries: &[(String, Location)]) -> Result<bool> {
    let (path, doc) = merged_locations(meta_state, entries)?;
    let text = csis_schema::yaml::to_string(&doc).map_err(TofuError::Failed)?;
    crate::write_if_changed(&path, &text)
}

/// What [`record_locations`] refuses, checked without writing (before a
/// root is written).
pub fn check_locations(meta_state: &Path, entries: &[(String, Location)]) -> Result<()> {
    merged_locations(meta_state, entries).map(|_| ())
}

type Doc = BTreeMap<String, serde_json::Value>;

fn merged_locations(
    meta_state: &Path,
    entries: &[(String, Location)],
) -> Result<(std::path::PathBuf, Doc)> {
    let path = meta_state.join("state-locations.yaml");
    let mut doc: BTreeMap<String, serde_json::Value> = if path.exists() {
        csis_schema::yaml::read_file(&path).map_err(|d| TofuError::Invalid(format!("{d}")))?
    } else {
        BTreeMap::new()
    };
    let mut workspaces: BTreeMap<String, Location> = match doc.remove("workspaces") {
        Some(v) if !v.is_null() => serde_json::from_value(v)
            .map_err(|e| TofuError::Invalid(format!("{}: workspaces: {e}", path.display())))?,
        _ => BTreeMap::new(),
    };
    for (ws, l) in entries {
        if let Some(old) = workspaces.get(ws) {
            if old.location != l.location {
                return Err(TofuError::Invalid(format!(
                    "{}: workspace {ws} is recorded at {}, its root now says {}: refused (a move of state is a migration; move it first)",
                    path.display(), old.location, l.location
                )));
            }
        }
        if let Some((other, _)) = workspaces
            .iter()
            .find(|(o, x)| *o != ws && x.location == l.location)
        {
            return Err(TofuError::Invalid(format!(
                "{}: {} is workspace {other}'s state; root {ws} cannot use it: refused",
                path.display(),
                l.location
            )));
        }
        workspaces.insert(ws.clone(), l.clone());
    }
    let ws = serde_json::to_value(&workspaces).map_err(|e| TofuError::Failed(e.to_string()))?;
    doc.insert("workspaces".into(), ws);
    Ok((path, doc))
}
