//! Encrypting a value to the tree's `encryption.recipients`: the marker
//! `ENC[age:<base64 of a binary age file>]`, which [`crate::crypt`] opens
//! at load.

use std::io::Write;

use base64::Engine;

use crate::crypt::PREFIX;

/// The age X25519 recipients every marker is encrypted to.
pub struct Recipients {
    keys: Vec<age::x25519::Recipient>,
}

impl std::fmt::Debug for Recipients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recipients({})", self.keys.len())
    }
}

impl Recipients {
    /// Parse `encryption.recipients`. An empty list is refused: a marker
    /// nobody can open is worse than none.
    pub fn parse(list: &[String]) -> Result<Recipients, String> {
        if list.is_empty() {
            return Err(
                "encryption.recipients is empty: add the age public key (age1...) of every holder to cfg/_config.yml"
                    .into(),
            );
        }
        let mut keys = Vec::with_capacity(list.len());
        for (i, r) in list.iter().enumerate() {
            let k: age::x25519::Recipient = r.trim().parse().map_err(|e| {
                format!(
                    "encryption.recipients[{i}] `{}` is not an age X25519 public key: {e}",
                    r.trim()
                )
            })?;
            keys.push(k);
        }
        Ok(Recipients { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Encrypt `plaintext` to every recipient; the marker.
    pub fn encrypt(&self, plaintext: &str) -> Result<String, String> {
        let enc =
            age::Encryptor::with_recipients(self.keys.iter().map(|k| k as &dyn age::Recipient))
                .map_err(|e| format!("cannot encrypt: {e}"))?;
        let mut ct = Vec::with_capacity(plaintext.len() + 256);
        let mut w = enc
            .wrap_output(&mut ct)
            .map_err(|e| format!("cannot encrypt: {e}"))?;
        w.write_all(plaintext.as_bytes())
            .map_err(|e| format!("cannot encrypt: {e}"))?;
        w.finish().map_err(|e| format!("cannot encrypt: {e}"))?;
        Ok(format!(
            "{PREFIX}{}]",
            base64::engine::general_purpose::STANDARD.encode(&ct)
        ))
    }
}

/// How many X25519 recipient stanzas a marker's age header holds (age headers do
/// not name their recipients; the count is all a marker tells without an
/// identity). None when the marker is not an age file.
pub fn stanza_count(marker: &str) -> Option<usize> {
    let t = marker.trim();
    let b64 = t.strip_prefix(PREFIX)?.strip_suffix(']')?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let header_end = bytes.windows(4).position(|w| w == b"\n---")?;
    let header = std::str::from_utf8(&bytes[..header_end]).ok()?;
    if !header.starts_with("age-encryption.org/v1\n") {
        return None;
    }
    // age adds a random "grease" stanza; recipients are the X25519 ones
    Some(
        header
            .lines()
            .filter(|l| l.starts_with("-> X25519 "))
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::secrecy::ExposeSecret;

    #[test]
    fn a_marker_opens_with_each_recipients_identity() {
        let a = age::x25519::Identity::generate();
        let b = age::x25519::Identity::generate();
        let r = Recipients::parse(&[a.to_public().to_string(), b.to_public().to_string()]).unwrap();
        let m = r.encrypt("s3cret value").unwrap();
        assert!(crate::crypt::is_marker(&m), "{m}");
        assert_eq!(stanza_count(&m), Some(2));
        for id in [&a, &b] {
            let ids =
                crate::crypt::Identities::from_setting(id.to_string().expose_secret()).unwrap();
            assert_eq!(ids.decrypt(&m).unwrap(), "s3cret value");
        }
        let other = age::x25519::Identity::generate();
        let ids =
            crate::crypt::Identities::from_setting(other.to_string().expose_secret()).unwrap();
        assert!(ids.decrypt(&m).is_err());
    }

    #[test]
    fn bad_recipients_are_refused_by_index() {
        assert!(Recipients::parse(&[]).unwrap_err().contains("empty"));
        let e = Recipients::parse(&["age1nope".into()]).unwrap_err();
        assert!(e.contains("encryption.recipients[0]"), "{e}");
    }
}
