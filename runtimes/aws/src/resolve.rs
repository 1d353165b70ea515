//! The image query (`remap_for_image_query()` + `query_image()`) and the
//! lookup of a pinned `image_id` (`_query_by_ami_id`).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image};
use serde_json::Value;

/// Merge owners in the seed's order: the OS builder's, then the runtime's
/// `default_owners`, then the entry's own, deduplicated keeping the first.
pub fn merge_owners(os_builder: &[String], runtime: &[String], entry: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for o in os_builder.iter().chain(runtime).chain(entry) {
        let o = o.trim();
        if !o.is_empty() && !out.iter().any(|x| x == o) {
            out.push(o.to_string());
        }
    }
    out
}

/// The EC2 `DescribeImages` filter names, under their snake_case keys
/// (`AWS_DI_MAP`). A key already written the EC2 way maps to itself.
pub const DESCRIBE_IMAGES_FILTERS: &[&str] = &[
    "architecture",
    "block-device-mapping.delete-on-termination",
    "block-device-mapping.device-name",
    "block-device-mapping.snapshot-id",
    "block-device-mapping.volume-size",
    "block-device-mapping.volume-type",
    "block-device-mapping.encrypted",
    "boot-mode",
    "creation-date",
    "deprecation-time",
    "description",
    "ena-support",
    "free-tier-eligible",
    "hypervisor",
    "image-allowed",
    "image-id",
    "image-type",
    "imds-support",
    "is-public",
    "kernel-id",
    "manifest-location",
    "name",
    "owner-alias",
    "owner-id",
    "platform",
    "platform-details",
    "product-code",
    "product-code.type",
    "ramdisk-id",
    "root-device-name",
    "root-device-type",
    "source-image-id",
    "source-image-region",
    "source-instance-id",
    "sriov-net-support",
    "state",
    "state-reason-code",
    "state-reason-message",
    "tag-key",
    "usage-operation",
    "virtualization-type",
];

/// `snake_case` (or the EC2 name itself) -> the EC2 filter name; `tag:<key>` kept.
pub fn ec2_filter_name(key: &str) -> Option<String> {
    if let Some(rest) = key.strip_prefix("tag:") {
        if !rest.is_empty() {
            return Some(key.to_string());
        }
        return None;
    }
    let norm = key.replace('_', "-");
    DESCRIBE_IMAGES_FILTERS
        .iter()
        .find(|f| **f == key || **f == norm || f.replace('.', "-") == norm)
        .map(|f| f.to_string())
}

fn value_strings(v: &Value) -> Vec<String> {
    match v {
        Value::Null => Vec::new(),
        Value::Bool(b) => vec![b.to_string()],
        Value::Number(n) => vec![n.to_string()],
        Value::String(s) => {
            // booleans written as strings are lower-cased too
            if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") {
                vec![s.to_ascii_lowercase()]
            } else {
                vec![s.clone()]
            }
        }
        Value::Array(a) => a.iter().flat_map(value_strings).collect(),
        Value::Object(_) => vec![v.to_string()],
    }
}

/// The `DescribeImages` request built from one entry's query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageQuery {
    pub owners: Vec<String>,
    /// EC2 filter name -> values (sorted by name; `state` = `available` forced).
    pub filters: BTreeMap<String, Vec<String>>,
    /// Keys the map does not know: exact match on the result records.
    pub post_filters: BTreeMap<String, Vec<String>>,
}

impl ImageQuery {
    /// `remap_for_image_query()`: works on a copy; the declaration is untouched.
    pub fn from_declaration(owners: &[String], query: &Value) -> ImageQuery {
        let query = query.clone();
        let mut filters = BTreeMap::new();
        let mut post_filters = BTreeMap::new();
        if let Some(map) = query.get("filters").and_then(Value::as_object) {
            for (k, v) in map {
                let vals = value_strings(v);
                match ec2_filter_name(k) {
                    Some(name) => {
                        filters.insert(name, vals);
                    }
                    None => {
                        post_filters.insert(k.clone(), vals);
                    }
                }
            }
        }
        filters.insert("state".to_string(), vec!["available".to_string()]);
        ImageQuery {
            owners: merge_owners(owners, &[], &[]),
            filters,
            post_filters,
        }
    }

    pub fn ec2_filters(&self) -> Vec<Filter> {
        self.filters
            .iter()
            .map(|(k, v)| {
                Filter::builder()
                    .name(k)
                    .set_values(Some(v.clone()))
                    .build()
            })
            .collect()
    }

    /// Does a record agree with every post-query filter (exact match)?
    pub fn post_match(&self, image: &Image) -> bool {
        let facts = image_fields(image);
        self.post_filters.iter().all(|(k, want)| {
            let got = facts.get(k).or_else(|| facts.get(&snake(k))).cloned();
            match got {
                Some(g) => want.contains(&g),
                None => false,
            }
        })
    }
}

fn snake(k: &str) -> String {
    let mut out = String::new();
    for (i, c) in k.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c == '-' {
            out.push('_');
        } else {
            out.push(c);
        }
    }
    out
}

/// The scalar fields of an image record under snake_case names (the
/// post-query filter compares with these), e.g. `image_location`, `boot_mode`.
pub fn image_fields(i: &Image) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    };
    put("image_id", i.image_id.clone());
    put("name", i.name.clone());
    put("description", i.description.clone());
    put("image_location", i.image_location.clone());
    put("owner_id", i.owner_id.clone());
    put("image_owner_alias", i.image_owner_alias.clone());
    put("creation_date", i.creation_date.clone());
    put(
        "architecture",
        i.architecture.as_ref().map(|a| a.as_str().to_string()),
    );
    put(
        "image_type",
        i.image_type.as_ref().map(|a| a.as_str().to_string()),
    );
    put("state", i.state.as_ref().map(|a| a.as_str().to_string()));
    put("public", i.public.map(|b| b.to_string()));
    put("kernel_id", i.kernel_id.clone());
    put("ramdisk_id", i.ramdisk_id.clone());
    put(
        "platform",
        i.platform.as_ref().map(|a| a.as_str().to_string()),
    );
    put("platform_details", i.platform_details.clone());
    put("usage_operation", i.usage_operation.clone());
    put("root_device_name", i.root_device_name.clone());
    put(
        "root_device_type",
        i.root_device_type.as_ref().map(|a| a.as_str().to_string()),
    );
    put(
        "virtualization_type",
        i.virtualization_type
            .as_ref()
            .map(|a| a.as_str().to_string()),
    );
    put(
        "hypervisor",
        i.hypervisor.as_ref().map(|a| a.as_str().to_string()),
    );
    put("ena_support", i.ena_support.map(|b| b.to_string()));
    put("sriov_net_support", i.sriov_net_support.clone());
    put(
        "boot_mode",
        i.boot_mode.as_ref().map(|a| a.as_str().to_string()),
    );
    put(
        "tpm_support",
        i.tpm_support.as_ref().map(|a| a.as_str().to_string()),
    );
    put(
        "imds_support",
        i.imds_support.as_ref().map(|a| a.as_str().to_string()),
    );
    put("deprecation_time", i.deprecation_time.clone());
    put("source_instance_id", i.source_instance_id.clone());
    for t in i.tags() {
        if let (Some(k), Some(v)) = (&t.key, &t.value) {
            m.insert(format!("tag:{k}"), v.clone());
        }
    }
    m
}

/// The newest record by `CreationDate` (ISO 8601 strings compare in time order).
pub fn newest(images: Vec<Image>) -> Option<Image> {
    images
        .into_iter()
        .fold(None, |best: Option<Image>, i| match &best {
            Some(b)
                if b.creation_date.as_deref().unwrap_or("")
                    >= i.creation_date.as_deref().unwrap_or("") =>
            {
                best
            }
            _ => Some(i),
        })
}

/// `ImageOwnerAlias` else `OwnerId`.
pub fn owner_of(i: &Image) -> Option<String> {
    i.image_owner_alias
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| i.owner_id.clone().filter(|s| !s.is_empty()))
}

/// A short rendering of a record for error texts.
pub fn describe(i: &Image) -> String {
    let f = image_fields(i);
    format!("{f:?}")
}
