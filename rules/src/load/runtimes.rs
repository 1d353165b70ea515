//! Runtime entries (`runtime_builders:`): read into their common and
//! per-type models, and checked offline.

use super::{Item, Loader, Which};
use crate::crypt;
use crate::model::*;
use crate::tree::*;
use crate::yaml::{join_path, Loc, Node};

impl Loader<'_> {
    pub(super) fn load_runtime(&mut self, mut it: Item) -> Option<Runtime> {
        let (name, ty) = self.head(&it.node, &it.path, true)?;
        let ty = ty.unwrap_or_default();
        if UNUSED_RUNTIME_TYPES.contains(&ty.as_str()) {
            self.note_unused(&format!("{ty} runtimes"), &it.node, Which::Runtime);
            return None;
        }
        if !["aws", "docker", "dummy"].contains(&ty.as_str()) {
            let t = it.node.get("type").expect("type");
            self.d.error_hint(
                &t.loc,
                &join_path(&it.path, "type"),
                format!("unknown runtime type `{ty}`"),
                "csis implements the runtime types aws, docker and dummy (gcloud is read but not used yet)",
            );
            return None;
        }
        // A runtime's profile and credentials.profile_name are read raw.
        if let Some(c) = it.node.get("credentials") {
            if let Some(p) = c.get("profile_name") {
                if p.as_str().is_some_and(crypt::contains_marker) {
                    self.d.error(
                        &p.loc,
                        &format!("{}.credentials.profile_name", it.path),
                        "`profile_name` may not be encrypted (it is read before decryption)",
                    );
                    return None;
                }
            }
        }
        self.decrypt(&mut it.node, &it.path, &["name", "type", "profile"]);
        self.render_this(&mut it.node, &it.path, &[], false);
        let common_node = it.node.filter_map(|k| RUNTIME_COMMON_KEYS.contains(&k));
        let own_node = it.node.filter_map(|k| !RUNTIME_COMMON_KEYS.contains(&k));
        let common: Option<RuntimeCommon> = self.typed(&common_node, &it.path);
        let kind = match ty.as_str() {
            "aws" => self
                .typed::<AwsRuntime>(&own_node, &it.path)
                .map(RuntimeKind::Aws),
            "docker" => self
                .typed::<DockerRuntime>(&own_node, &it.path)
                .map(RuntimeKind::Docker),
            _ => self
                .typed::<DummyRuntime>(&own_node, &it.path)
                .map(RuntimeKind::Dummy),
        };
        let (common, kind) = (common?, kind?);
        let origin = Origin::of(&it.node, it.path.clone());
        self.check_runtime(&it.node, &it.path, &common, &kind);
        Some(Runtime {
            name: normalize_name(&name),
            display: name,
            common,
            kind,
            state_backend: None,
            executable: None,
            origin,
        })
    }

    pub(super) fn check_runtime(
        &mut self,
        node: &Node,
        path: &str,
        common: &RuntimeCommon,
        kind: &RuntimeKind,
    ) {
        let at = |key: &str| {
            node.get(key)
                .map(|n| n.loc.clone())
                .unwrap_or(node.loc.clone())
        };
        if common.default_machine_type.trim().is_empty() {
            self.d.error(
                &at("default_machine_type"),
                &join_path(path, "default_machine_type"),
                "default_machine_type may not be empty",
            );
        }
        if let Some(t) = &common.teardown_after {
            let ok = t.len() > 1
                && t[..t.len() - 1].chars().all(|c| c.is_ascii_digit())
                && t.ends_with(['m', 'h', 'd']);
            if !ok {
                self.d.error_hint(
                    &at("teardown_after"),
                    &join_path(path, "teardown_after"),
                    format!("`{t}` is not a duration"),
                    "write <number> then m, h or d (e.g. 2h)",
                );
            }
        }
        if common.max_parallel == Some(0) {
            self.d.error(
                &at("max_parallel"),
                &join_path(path, "max_parallel"),
                "max_parallel must be at least 1",
            );
        }
        match kind {
            RuntimeKind::Aws(a) => {
                if a.region.trim().is_empty() {
                    self.d.error(
                        &at("region"),
                        &join_path(path, "region"),
                        "region may not be empty",
                    );
                }
                if let Some(m) = &common.session_mechanism {
                    if !m.trim().eq_ignore_ascii_case("ssm") {
                        self.d.error_hint(
                            &at("session_mechanism"),
                            &join_path(path, "session_mechanism"),
                            format!(
                                "AWS runtime {}: unknown session mechanism '{m}' (supported: ssm)",
                                common.name
                            ),
                            "use `ssm`, or leave session_mechanism unset",
                        );
                    }
                }
                match &a.networking {
                    None => self.d.warn(
                        &node.loc,
                        path,
                        format!("No networking configuration provided for AWS cloud builder {} (image generation needs the VPC and subnet)", common.name),
                    ),
                    Some(n) => {
                        let nn = node.get("networking").expect("networking");
                        let np = join_path(path, "networking");
                        if n.name.as_deref().is_some_and(|s| s.trim().is_empty()) {
                            self.d.error(&nn.get("name").map(|x| x.loc.clone()).unwrap_or(nn.loc.clone()), &join_path(&np, "name"), format!("Networking configuration name cannot be empty for {}.", common.name));
                        }
                        if n.network.trim().is_empty() {
                            self.d.error(&nn.loc, &join_path(&np, "network"), "network may not be empty (`default` = the account's default VPC)");
                        }
                        let defaults = n.subnets.iter().filter(|s| s.is_default).count();
                        let sloc = nn.get("subnets").map(|x| x.loc.clone()).unwrap_or(nn.loc.clone());
                        if n.subnets.is_empty() {
                            self.d.error_hint(&sloc, &join_path(&np, "subnets"), "networking needs at least one subnet", "declare `subnets: [{name, subnet_id, is_default: true}]`");
                        } else if defaults != 1 {
                            self.d.error_hint(
                                &sloc,
                                &join_path(&np, "subnets"),
                                format!("exactly one subnet must have `is_default: true` (found {defaults})"),
                                "mark the subnet bakes and instances use with is_default: true",
                            );
                        }
                        if n.addl_security_groups.len() > 5 {
                            let gl = nn.get("addl_security_groups").map(|x| x.loc.clone()).unwrap_or(nn.loc.clone());
                            self.d.error(
                                &gl,
                                &join_path(&np, "addl_security_groups"),
                                format!(
                                    "Total number of security groups specified in networking configuration for AWS cloud builder {} is {}, more than the limit of 5",
                                    common.name,
                                    n.addl_security_groups.len()
                                ),
                            );
                        }
                    }
                }
            }
            RuntimeKind::Docker(dk) => {
                if dk.host.is_some() && dk.context.is_some() {
                    self.d.error_hint(&at("context"), &join_path(path, "context"), format!("docker runtime {}: declare `host` or `context`, not both", common.name), "keep one address: host (a DOCKER_HOST URL) or context (a docker context name)");
                }
                if !dk.machine_types.is_empty()
                    && !dk.machine_types.contains_key(&common.default_machine_type)
                {
                    let names: Vec<&str> = dk.machine_types.keys().map(String::as_str).collect();
                    self.d.error_hint(
                        &at("default_machine_type"),
                        &join_path(path, "default_machine_type"),
                        format!(
                            "default_machine_type `{}` names no declared machine type",
                            common.default_machine_type
                        ),
                        format!("declared machine_types: {}", names.join(", ")),
                    );
                }
                if let Some(r) = &dk.repository {
                    let ok = !r.is_empty()
                        && r.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c));
                    if !ok {
                        self.d.error(
                            &at("repository"),
                            &join_path(path, "repository"),
                            format!("`{r}` is not a valid repository name"),
                        );
                    }
                }
                for (k, v) in &common.tags {
                    self.check_label_key(k, &at("tags"), &join_path(path, &format!("tags.{k}")));
                    let _ = v;
                }
            }
            RuntimeKind::Dummy(_) => {}
        }
    }

    pub(super) fn check_label_key(&mut self, key: &str, loc: &Loc, path: &str) {
        if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c == '=') {
            self.d.error_hint(
                loc,
                path,
                format!("docker label key `{key}` carries whitespace or `=`"),
                "a label key carries neither whitespace nor `=`",
            );
        }
    }

    /// Docker: a build name longer than a tag, label keys it cannot carry.
    pub(super) fn check_docker_names(&mut self, t: &Tree) {
        for img in &t.images {
            for e in img.active_runtimes() {
                let Some(rt) = t.runtime(e.runtime.as_deref().unwrap_or("")) else {
                    continue;
                };
                if rt.docker().is_none() {
                    continue;
                }
                let made = t.image_final_name(img, e);
                if made.len() > 128 {
                    self.d.error_hint(
                        img.origin.field("name"),
                        &join_path(&img.origin.path, "name"),
                        format!(
                            "a docker tag is at most 128 characters: `{}...` is {} once made",
                            &made[..40],
                            made.len()
                        ),
                        "shorten the image name",
                    );
                }
                for k in t.image_tags(img, e).keys() {
                    if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '=') {
                        self.d.error_hint(
                            img.origin.field("tags"),
                            &join_path(&img.origin.path, &format!("tags.{k}")),
                            format!("docker label key `{k}` carries whitespace or `=`"),
                            "a label key carries neither whitespace nor `=`",
                        );
                    }
                }
            }
        }
        for os in &t.os_builders {
            for e in os.active_runtimes() {
                let Some(rt) = t.runtime(e.runtime.as_deref().unwrap_or("")) else {
                    continue;
                };
                if rt.docker().is_none() {
                    continue;
                }
                let made = t.os_final_name(os, e);
                if made.len() > 128 {
                    self.d.error_hint(
                        &os.origin.loc,
                        &join_path(&os.origin.path, "name"),
                        format!(
                            "a docker tag is at most 128 characters: `{}...` is {} once made",
                            &made[..40],
                            made.len()
                        ),
                        "shorten the OS builder name",
                    );
                }
                for k in t.os_tags(os, e).keys() {
                    if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '=') {
                        self.d.error_hint(
                            &os.origin.loc,
                            &join_path(&os.origin.path, &format!("tags.{k}")),
                            format!("docker label key `{k}` carries whitespace or `=`"),
                            "a label key carries neither whitespace nor `=`",
                        );
                    }
                }
            }
        }
    }
}
