//! A storage's data `lifecycle`, as its storage type accepts it
//! (config.md C.8): efs and s3 take one, every other type none.

const EFS_IA_DAYS: &[u64] = &[1, 7, 14, 30, 60, 90, 180, 270, 365];
const EFS_ARCHIVE_DAYS: &[u64] = &[90, 180, 270, 365];
const S3_STORAGE_CLASSES: &[&str] = &[
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
];

/// What is wrong with a storage's `lifecycle` for its storage type
/// token: the key it concerns (`""`: the whole) and why.
pub fn lifecycle_problem(token: &str, l: &csis_schema::model::JsonMap) -> Option<(String, String)> {
    let int = |k: &str| l.get(k).map(|v| v.as_u64());
    let bad = |k: &str, m: String| Some((k.to_string(), m));
    let allowed: &[&str] = match token {
        "efs" => &["ia_days", "archive_days"],
        "s3" => &["transition_days", "storage_class", "expire_days", "prefix"],
        _ if l.is_empty() => return None,
        _ => {
            return bad(
                "",
                format!("a {token} storage takes no data lifecycle (only efs and s3 storages do)"),
            )
        }
    };
    if let Some(k) = l.keys().find(|k| !allowed.contains(&k.as_str())) {
        return bad(
            k,
            format!(
                "unknown lifecycle key `{k}` for a {token} storage (keys: {})",
                allowed.join(", ")
            ),
        );
    }
    let one_of = |k: &str, set: &[u64]| match int(k) {
        Some(Some(d)) if set.contains(&d) => None,
        Some(_) => Some((k.to_string(), format!("`{k}` is one of {set:?}"))),
        None => None,
    };
    let positive = |k: &str| match int(k) {
        Some(Some(d)) if d > 0 => None,
        Some(_) => Some((k.to_string(), format!("`{k}` is a positive number of days"))),
        None => None,
    };
    if token == "efs" {
        return one_of("ia_days", EFS_IA_DAYS).or_else(|| one_of("archive_days", EFS_ARCHIVE_DAYS));
    }
    if let Some(p) = positive("transition_days").or_else(|| positive("expire_days")) {
        return Some(p);
    }
    if let Some(c) = l.get("storage_class") {
        if !c.as_str().is_some_and(|c| S3_STORAGE_CLASSES.contains(&c)) {
            return bad(
                "storage_class",
                format!(
                    "`storage_class` is one of {}",
                    S3_STORAGE_CLASSES.join(", ")
                ),
            );
        }
        if !l.contains_key("transition_days") {
            return bad(
                "storage_class",
                "`storage_class` needs `transition_days`".into(),
            );
        }
    }
    if !l.contains_key("transition_days") && !l.contains_key("expire_days") {
        return bad(
            "",
            "an s3 lifecycle needs `transition_days` or `expire_days`".into(),
        );
    }
    None
}
