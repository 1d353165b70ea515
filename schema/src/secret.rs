//! Secret values: what a decrypted `ENC[age:...]` marker or a template's
//! `ENV` lookup produced. Each is registered here the moment it is produced
//! (at decryption; at the end of rendering for the environment values the
//! templates read) and gets a token, `<secret:HEX16>`, where HEX16 is a
//! salted scrypt of the plaintext (the same salt for every tree and every
//! identity: see [`default_key`]), so that:
//!
//! - everything csis writes or prints about the tree goes through
//!   [`redact`] / [`redact_json`]: the bake inputs (so records, journals,
//!   `.csis/parsed/` and `plan --explain` hold the token), diagnostics,
//!   runtime descriptions and reports;
//! - a fingerprint still changes when a secret changes (the token does);
//! - the bake itself still gets the plaintext: the tree's models keep it,
//!   only the copies that leave the process are redacted.
//!
//! Taint through templates is tracked by content: a rendered string that
//! contains a registered plaintext is redacted wherever it is written, so a
//! template that copies a secret into another field needs no mark of its
//! own. Values shorter than [`MIN_LEN`] characters are redacted only where
//! they are a whole string (a substring that short would redact innocent
//! text).
//!
//! What a program prints (a bake's log, a test's evidence) may hold a piece
//! of a secret rather than the whole: a script line `echo $TOKEN-xyz`
//! prints its argument, a multi-line key prints line by line.
//! [`redact_printed`] also replaces each [fragment](fragments) of a secret
//! (each line of a multi-line value, each word of at least
//! [`FRAGMENT_MIN`] characters) by the secret's token. Records and
//! fingerprint inputs use [`redact`] (whole values only), so a fragment
//! that happens to occur in innocent text never moves a fingerprint.

use std::borrow::Cow;
use std::sync::RwLock;

/// The start of every token.
pub const TOKEN_PREFIX: &str = "<secret:";

/// Values at least this long are redacted wherever they occur in a string.
pub const MIN_LEN: usize = 4;

/// A word of a secret at least this long is redacted where it is printed
/// on its own ([`redact_printed`]).
pub const FRAGMENT_MIN: usize = 8;

struct Registry {
    /// (plaintext, token), longest plaintext first (so a secret holding
    /// another is replaced whole).
    values: Vec<(String, String)>,
    /// (fragment, token of its secret), longest first: see [`fragments`].
    fragments: Vec<(String, String)>,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry {
    values: Vec::new(),
    fragments: Vec::new(),
});

/// The pieces of a secret a program may print on their own: each line of
/// a multi-line value (trimmed, at least [`MIN_LEN`] characters), and each
/// word of at least [`FRAGMENT_MIN`] characters, words being separated by
/// white space, quotes, shell punctuation (`;|&()<>{}[]$,`) and `=`. A
/// word that starts with `-` (an option) or `/` (a path) is not one: they
/// are the vocabulary of commands, not their secret part.
pub fn fragments(plain: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        if f != plain && !out.iter().any(|x| x == f) {
            out.push(f.to_string());
        }
    };
    if plain.contains('\n') {
        for l in plain.lines().map(str::trim) {
            if l.chars().count() >= MIN_LEN {
                add(l);
            }
        }
    }
    let sep = |c: char| c.is_whitespace() || "'\"`;|&()<>{}[]$,=".contains(c);
    for w in plain.split(sep) {
        if w.chars().count() >= FRAGMENT_MIN && !w.starts_with('-') && !w.starts_with('/') {
            add(w);
        }
    }
    out
}

/// The salt of every token: one for every tree and every identity, so that
/// holders of different identities (a developer, CI) and a rotation of the
/// recipients see the same tokens, hence the same fingerprints; only a new
/// plaintext moves them.
pub fn default_key() -> [u8; 32] {
    blake3::derive_key("csis secret token v1 (no identity)", b"")
}

/// A key derived from identity material (the text of an age secret key or
/// identity file).
pub fn key_from(material: &[u8]) -> [u8; 32] {
    blake3::derive_key("csis secret token v1", material)
}

/// The token of `plain` under `key`: scrypt (2^12 x 8: about 4 MiB and a
/// few milliseconds) of the plaintext salted with the key, so a token found
/// in a record costs a guesser that much per guess, not one blake3 call.
pub fn token(plain: &str, key: &[u8; 32]) -> String {
    let mut out = [0u8; 16];
    let params = scrypt::Params::new(12, 8, 1, out.len()).expect("valid scrypt parameters");
    scrypt::scrypt(plain.as_bytes(), key, &params, &mut out).expect("16 bytes is a valid output");
    let hex: String = out[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{TOKEN_PREFIX}{hex}>")
}

/// Register a secret value; returns its token. Empty values are ignored.
pub fn register(plain: &str, key: &[u8; 32]) -> Option<String> {
    if plain.is_empty() || plain.trim().is_empty() {
        return None;
    }
    let mut r = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = r.values.iter().find(|(p, _)| p == plain) {
        return Some(t.clone());
    }
    let t = token(plain, key);
    r.values.push((plain.to_string(), t.clone()));
    r.values
        .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    for f in fragments(plain) {
        if !r.fragments.iter().any(|(x, _)| *x == f) {
            r.fragments.push((f, t.clone()));
        }
    }
    r.fragments
        .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    Some(t)
}

/// How many secrets are registered (it only grows): what a memo of
/// redacted results is valid for.
pub fn count() -> usize {
    REGISTRY
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .values
        .len()
}

/// Is any secret registered?
pub fn any() -> bool {
    !REGISTRY
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .values
        .is_empty()
}

/// `s` with every registered secret replaced by its token.
pub fn redact(s: &str) -> Cow<'_, str> {
    let r = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    if r.values.is_empty() {
        return Cow::Borrowed(s);
    }
    let mut out: Cow<str> = Cow::Borrowed(s);
    for (plain, tok) in &r.values {
        if plain.chars().count() < MIN_LEN {
            if out.as_ref() == plain.as_str() {
                out = Cow::Owned(tok.clone());
            }
            continue;
        }
        if out.contains(plain.as_str()) {
            out = Cow::Owned(out.replace(plain.as_str(), tok));
        }
    }
    out
}

/// What a program printed (a line of a bake's log, a test's evidence),
/// with every registered secret and every [fragment](fragments) of one
/// replaced by the secret's token.
pub fn redact_printed(s: &str) -> Cow<'_, str> {
    let mut out = redact(s);
    let r = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    for (frag, tok) in &r.fragments {
        if out.contains(frag.as_str()) {
            out = Cow::Owned(out.replace(frag.as_str(), tok));
        }
    }
    out
}

/// Where registered secrets (of at least [`MIN_LEN`] characters) occur in
/// `s`: byte ranges, in no particular order.
pub fn occurrences(s: &str) -> Vec<std::ops::Range<usize>> {
    let r = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for (plain, _) in &r.values {
        if plain.chars().count() < MIN_LEN {
            continue;
        }
        out.extend(s.match_indices(plain.as_str()).map(|(i, m)| i..i + m.len()));
    }
    out
}

/// Does `s` hold a registered secret?
pub fn contains(s: &str) -> bool {
    matches!(redact(s), Cow::Owned(_))
}

/// Redact every string (and object key) of a JSON value in place.
pub fn redact_json(v: &mut serde_json::Value) {
    if !any() {
        return;
    }
    match v {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_json),
        serde_json::Value::Object(m) => {
            let keys_secret = m.keys().any(|k| contains(k));
            if keys_secret {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    redact_json(&mut x);
                    m.insert(redact(&k).into_owned(), x);
                }
            } else {
                m.values_mut().for_each(redact_json);
            }
        }
        _ => {}
    }
}

/// A JSON value, redacted (in place: no copy when nothing is secret).
pub fn redacted(mut v: serde_json::Value) -> serde_json::Value {
    redact_json(&mut v);
    v
}

/// A redacted copy of a JSON value.
pub fn redacted_json(v: &serde_json::Value) -> serde_json::Value {
    let mut c = v.clone();
    redact_json(&mut c);
    c
}

/// Does this text hold a token (a redacted secret)?
pub fn has_token(s: &str) -> bool {
    s.contains(TOKEN_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_replaced_by_a_keyed_token() {
        let k = key_from(b"unit-test");
        let t = register("hunter2-unit-secret", &k).unwrap();
        assert!(t.starts_with(TOKEN_PREFIX));
        assert_eq!(t, token("hunter2-unit-secret", &k));
        assert_ne!(t, token("hunter3-unit-secret", &k));
        assert_ne!(t, token("hunter2-unit-secret", &default_key()));
        let s = redact("pw=hunter2-unit-secret;");
        assert_eq!(s, format!("pw={t};"));
        let mut j = serde_json::json!({"a": ["x hunter2-unit-secret"], "hunter2-unit-secret": 1});
        redact_json(&mut j);
        assert!(!j.to_string().contains("hunter2-unit-secret"), "{j}");
        assert!(contains("hunter2-unit-secret"));
        assert!(!contains("nothing"));
        // Short values: whole strings only.
        let s = register("xyz", &k).unwrap();
        assert_eq!(redact("xyz"), s);
        assert_eq!(redact("xyzzy"), "xyzzy");
    }

    #[test]
    fn what_a_program_prints_of_a_secret_is_redacted() {
        let k = key_from(b"unit-test");
        let t = register("echo 'fragment-unit-91ac' --flag=/usr/local/bin", &k).unwrap();
        // The script printed its argument: not the whole value.
        assert_eq!(redact("fragment-unit-91ac"), "fragment-unit-91ac");
        assert_eq!(
            redact_printed("out: fragment-unit-91ac."),
            format!("out: {t}.")
        );
        // Options, paths and short words stay.
        assert_eq!(
            redact_printed("--flag /usr/local/bin echo"),
            "--flag /usr/local/bin echo"
        );
        // A multi-line secret, printed line by line.
        let key = "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5P\nUFFSU1RV\n-----END KEY-----";
        let t = register(key, &k).unwrap();
        assert_eq!(redact_printed("  UFFSU1RV"), format!("  {t}"));
        assert_eq!(redact_printed("-----END KEY-----"), t);
        assert_eq!(redact_printed(key), t);
        assert!(fragments(key).contains(&"QUJDREVGR0hJSktMTU5P".to_string()));
    }
}
