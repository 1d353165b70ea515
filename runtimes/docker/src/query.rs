//! The image query: the keys a daemon answers, translated to an image
//! reference; and the offline check of a base image's entry on a docker
//! runtime ([`base_entry_problems`]).

use csis_schema::{BaseEntry, Problem};
use serde_json::Value;

/// The query keys a docker runtime answers.
pub const QUERY_KEYS: [&str; 5] = [
    "name",
    "version",
    "publisher",
    "architecture",
    "native.image",
];

/// The offline problems of an OS builder's entry on a docker runtime, as
/// the load reports them: an `image_id` that is not a digest reference, a
/// query key (or filter) a daemon cannot answer.
pub fn base_entry_problems(base: &BaseEntry) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Some(id) = &base.image_id {
        if !id.contains("@sha256:") {
            out.push(
                Problem::error("image_id", format!("image_id '{id}' is not a digest reference"))
                    .with_hint("pin `<repository>@sha256:<digest>` (docker image inspect --format '{{index .RepoDigests 0}}')"),
            );
        }
    }
    // `native` (the mapping of `native.image`) is asked as a whole.
    let answered = |k: &str| QUERY_KEYS.contains(&k) || k == "native";
    let q = &base.query;
    let filters = q
        .get("filters")
        .and_then(|f| f.as_object())
        .cloned()
        .unwrap_or_default();
    for k in filters.keys().chain(q.keys().filter(|k| *k != "filters")) {
        if !answered(k) {
            out.push(
                Problem::error(
                    "query",
                    format!("query key `{k}` cannot be answered by a docker daemon"),
                )
                .with_hint(
                    "docker queries use name, version, publisher, architecture and native.image",
                ),
            );
        }
    }
    out
}

/// What a query asks the daemon for.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageQuery {
    /// The reference to look up / pull (`debian:12`, `quay.io/x/y:1`).
    pub reference: String,
    /// The platform (`linux/amd64`), when an architecture was given.
    pub platform: Option<String>,
}

/// `x86_64` -> `linux/amd64`, `aarch64` -> `linux/arm64`, else `linux/<arch>`
/// (an already written platform is kept).
pub fn platform_of(architecture: &str) -> String {
    let a = architecture.trim();
    if a.contains('/') {
        return a.to_string();
    }
    let arch = match a {
        "x86_64" | "amd64" | "x64" => "amd64",
        "aarch64" | "arm64" => "arm64",
        "armv7l" | "armhf" | "arm" => "arm/v7",
        "i386" | "i686" | "x86" => "386",
        other => other,
    };
    format!("linux/{arch}")
}

/// Flatten the query: top-level keys and `filters:` keys; `native: {image: x}`
/// becomes `native.image`.
fn flatten(query: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let Some(obj) = query.as_object() else {
        return out;
    };
    for (k, v) in obj {
        match (k.as_str(), v) {
            ("filters", Value::Object(f)) => {
                out.extend(flatten(&Value::Object(f.clone())));
            }
            ("native", Value::Object(n)) => {
                for (nk, nv) in n {
                    out.push((format!("native.{nk}"), nv.clone()));
                }
            }
            _ => out.push((k.clone(), v.clone())),
        }
    }
    out
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(a) if a.len() == 1 => as_text(&a[0]),
        _ => None,
    }
}

/// The keys of a query the daemon cannot answer, as refusals (validate).
pub fn query_problems(query: &Value) -> Vec<String> {
    flatten(query)
        .into_iter()
        .filter_map(|(k, v)| {
            if !QUERY_KEYS.contains(&k.as_str()) {
                Some(format!(
                    "query key '{k}' cannot be answered by a docker runtime (it answers {})",
                    QUERY_KEYS.join(", ")
                ))
            } else if as_text(&v).is_none() {
                Some(format!("query key '{k}' must be one text value"))
            } else {
                None
            }
        })
        .collect()
}

/// Translate a query (with the OS builder's family/version/architecture as
/// fallbacks for `name`/`version`/`architecture`) into an image reference.
pub fn image_query(
    query: &Value,
    family: &str,
    family_version: &str,
    architecture: &str,
) -> Result<ImageQuery, String> {
    let problems = query_problems(query);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let get = |key: &str| -> Option<String> {
        flatten(query)
            .into_iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| as_text(&v))
            .filter(|s| !s.trim().is_empty())
    };
    let arch = get("architecture")
        .or_else(|| (!architecture.trim().is_empty()).then(|| architecture.to_string()));
    let platform = arch.map(|a| platform_of(&a));
    if let Some(r) = get("native.image") {
        return Ok(ImageQuery {
            reference: r,
            platform,
        });
    }
    let name = get("name")
        .or_else(|| (!family.is_empty()).then(|| family.to_string()))
        .ok_or_else(|| "the query names no image: give `name` or `native.image`".to_string())?;
    let version = get("version")
        .or_else(|| (!family_version.is_empty()).then(|| family_version.to_string()))
        .unwrap_or_else(|| "latest".to_string());
    let publisher = get("publisher").filter(|p| p != "library");
    let repo = match publisher {
        Some(p) => format!("{}/{}", p.trim_end_matches('/'), name),
        None => name,
    };
    Ok(ImageQuery {
        reference: format!("{repo}:{version}"),
        platform,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base_entry_problems_name_the_field() {
        let mut base = BaseEntry {
            image_id: Some(format!("debian@sha256:{}", "a".repeat(64))),
            query: [
                ("name".to_string(), json!("debian")),
                ("native".to_string(), json!({"image": "debian:12"})),
            ]
            .into_iter()
            .collect(),
        };
        assert!(base_entry_problems(&base).is_empty());
        base.image_id = Some("debian:12".into());
        base.query.insert("root_device_type".into(), json!("ebs"));
        let p = base_entry_problems(&base);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].path, "image_id");
        assert!(p[0].message.contains("is not a digest reference"));
        assert_eq!(p[1].path, "query");
        assert!(p[1]
            .message
            .contains("`root_device_type` cannot be answered"));
    }

    #[test]
    fn name_version_publisher() {
        let q = image_query(
            &json!({"name": "debian", "version": "12", "publisher": "library", "architecture": "x86_64"}),
            "",
            "",
            "",
        )
        .unwrap();
        assert_eq!(q.reference, "debian:12");
        assert_eq!(q.platform.as_deref(), Some("linux/amd64"));
        let q = image_query(
            &json!({"name": "almalinux", "version": 10, "publisher": "quay.io/almalinuxorg"}),
            "",
            "",
            "aarch64",
        )
        .unwrap();
        assert_eq!(q.reference, "quay.io/almalinuxorg/almalinux:10");
        assert_eq!(q.platform.as_deref(), Some("linux/arm64"));
    }

    #[test]
    fn native_image_verbatim() {
        let q = image_query(
            &json!({"native": {"image": "debian@sha256:abc"}, "name": "x"}),
            "",
            "",
            "",
        )
        .unwrap();
        assert_eq!(q.reference, "debian@sha256:abc");
        assert_eq!(q.platform, None);
        let q = image_query(&json!({"native.image": "busybox:1"}), "", "", "").unwrap();
        assert_eq!(q.reference, "busybox:1");
        let q = image_query(
            &json!({"filters": {"native.image": "busybox:1"}}),
            "",
            "",
            "",
        )
        .unwrap();
        assert_eq!(q.reference, "busybox:1");
    }

    #[test]
    fn fallbacks_from_the_os_builder() {
        let q = image_query(&json!({}), "debian", "12", "x86_64").unwrap();
        assert_eq!(q.reference, "debian:12");
        assert_eq!(q.platform.as_deref(), Some("linux/amd64"));
        let q = image_query(&json!({"name": "alpine"}), "", "", "").unwrap();
        assert_eq!(q.reference, "alpine:latest");
        assert!(image_query(&json!({}), "", "", "").is_err());
    }

    #[test]
    fn unknown_keys_refused() {
        let e =
            image_query(&json!({"owner-alias": "amazon", "name": "x"}), "", "", "").unwrap_err();
        assert!(
            e.contains("query key 'owner-alias' cannot be answered by a docker runtime"),
            "{e}"
        );
        assert_eq!(
            query_problems(&json!({"name": "x", "version": "1"})),
            Vec::<String>::new()
        );
        assert_eq!(query_problems(&json!({"name": {"a": 1}})).len(), 1);
    }

    #[test]
    fn platforms() {
        assert_eq!(platform_of("x86_64"), "linux/amd64");
        assert_eq!(platform_of("arm64"), "linux/arm64");
        assert_eq!(platform_of("linux/s390x"), "linux/s390x");
        assert_eq!(platform_of("riscv64"), "linux/riscv64");
    }
}
