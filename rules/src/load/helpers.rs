//! Small helpers of the load: absent references (`default`, `self`, empty),
//! the "declared ..." hint, private key material, shell globs.

pub(super) fn is_absent(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || t.eq_ignore_ascii_case("default") || t.eq_ignore_ascii_case("self")
}

pub(super) fn known<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        format!("no {what} are declared")
    } else {
        format!("declared {what}: {}", v.join(", "))
    }
}

/// Does a value look like private key material?
pub fn looks_private(s: &str) -> bool {
    let t = s.trim();
    t.contains("PRIVATE KEY")
        || t.starts_with("AGE-SECRET-KEY-")
        || t.contains("-----BEGIN OPENSSH")
        || t.starts_with("PuTTY-User-Key-File")
}

/// A shell glob (`*`, `?`) match.
pub(super) fn glob_match(pat: &str, s: &str) -> bool {
    let re = format!(
        "^{}$",
        regex::escape(pat).replace(r"\*", ".*").replace(r"\?", ".")
    );
    regex::Regex::new(&re)
        .map(|r| r.is_match(s))
        .unwrap_or(false)
}
