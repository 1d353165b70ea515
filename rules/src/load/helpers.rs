//! Small helpers of the load: absent references (`default`, `self`, empty),
//! the "declared ..." hint, private key material and the SSH public key
//! format, shell globs.

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

/// The SSH public key types `admin_public_keys` accepts (OpenSSH's).
pub const PUBLIC_KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
];

/// Why a value is not an SSH public key as `authorized_keys` takes one
/// (`<type> <base64 blob> [comment]`: a known type, a blob that decodes and
/// whose embedded type is that type); None when it is one, or blank. The
/// reason never quotes the value (it may have been decrypted).
pub fn public_key_problem(s: &str) -> Option<String> {
    use base64::Engine;
    let t = s.trim();
    // blank, or a marker no identity opened (the decryption refuses it)
    if t.is_empty() || t.starts_with("ENC[") {
        return None;
    }
    let mut words = t.split_whitespace();
    let ty = words.next().unwrap_or_default();
    if !PUBLIC_KEY_TYPES.contains(&ty) {
        return Some(format!(
            "not an SSH public key: `<type> <base64 key> [comment]` expected, and the first word is not a key type ({})",
            PUBLIC_KEY_TYPES[..3].join(", ") + ", ..."
        ));
    }
    let Some(blob) = words.next() else {
        return Some(format!(
            "not an SSH public key: {ty} and no key after it (`{ty} <base64 key> [comment]`)"
        ));
    };
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let Ok(bytes) = lenient.decode(blob) else {
        return Some(format!(
            "not an SSH public key: the key after {ty} is not base64"
        ));
    };
    let embedded = bytes
        .get(..4)
        .map(|n| u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
        .and_then(|n| bytes.get(4..4 + n));
    if embedded != Some(ty.as_bytes()) {
        return Some(format!(
            "not an SSH public key: the key after {ty} is not a {ty} key (its blob names another type, or none)"
        ));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::public_key_problem;

    #[test]
    fn public_keys_are_checked_for_their_format() {
        let ok =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@x";
        assert_eq!(public_key_problem(ok), None);
        assert_eq!(
            public_key_problem("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample"),
            None
        );
        assert_eq!(public_key_problem(""), None);
        for bad in [
            "ssh-rsa hello",
            "admin@example.com",
            "/home/me/.ssh/id_ed25519.pub",
            "ssh-ed25519",
            "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
            "ssh-ed25519 AAAA",
        ] {
            let why = public_key_problem(bad).unwrap_or_else(|| panic!("{bad} is accepted"));
            assert!(why.starts_with("not an SSH public key"), "{why}");
            for w in bad.split_whitespace().filter(|w| !w.starts_with("ssh-")) {
                assert!(!why.contains(w), "{why} quotes the value");
            }
        }
    }
}
