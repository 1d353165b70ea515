//! `ENC[age:<base64 of an age file>]` values, decrypted at load with the
//! identity in `CSIS_CONFIG_IDENTITY`: a secret key string
//! (`AGE-SECRET-KEY-1...`), an identity file, or a directory of
//! `*.age-identity` files.

use std::io::Read;
use std::path::Path;

use base64::Engine;

pub const PREFIX: &str = "ENC[age:";

/// Is this whole value a marker?
pub fn is_marker(s: &str) -> bool {
    let t = s.trim();
    t.starts_with(PREFIX) && t.ends_with(']') && !t[PREFIX.len()..t.len() - 1].contains(']')
}

/// Does the string contain a marker somewhere (embedded or whole)?
pub fn contains_marker(s: &str) -> bool {
    s.contains(PREFIX)
}

/// The identities a load decrypts with.
pub struct Identities {
    ids: Vec<Box<dyn age::Identity + Send + Sync>>,
    /// Where they came from (for messages).
    pub source: String,
    /// The key of the tokens that stand for what these identities decrypt
    /// (the same for every identity: see [`csis_schema::secret::default_key`]).
    pub token_key: [u8; 32],
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identities({} from {})", self.ids.len(), self.source)
    }
}

impl Identities {
    /// Read `value` (the content of `CSIS_CONFIG_IDENTITY`): a key, a file, or a directory.
    pub fn from_setting(value: &str) -> Result<Identities, String> {
        let v = value.trim();
        if v.starts_with("AGE-SECRET-KEY-") {
            let mut ids: Vec<Box<dyn age::Identity + Send + Sync>> = Vec::new();
            for line in v
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                let id: age::x25519::Identity = line.parse().map_err(|e| {
                    format!("CSIS_CONFIG_IDENTITY is not a valid age secret key: {e}")
                })?;
                ids.push(Box::new(id));
            }
            return Ok(Identities {
                ids,
                source: "CSIS_CONFIG_IDENTITY (a key)".into(),
                token_key: csis_schema::secret::default_key(),
            });
        }
        let p = Path::new(v);
        if p.is_dir() {
            let mut ids: Vec<Box<dyn age::Identity + Send + Sync>> = Vec::new();
            let mut files: Vec<_> = std::fs::read_dir(p)
                .map_err(|e| format!("CSIS_CONFIG_IDENTITY {v}: {e}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "age-identity"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(format!(
                    "CSIS_CONFIG_IDENTITY {v}: the directory holds no *.age-identity file"
                ));
            }
            for f in files {
                ids.extend(read_identity_file(&f)?);
            }
            return Ok(Identities {
                ids,
                source: format!("CSIS_CONFIG_IDENTITY directory {v}"),
                token_key: csis_schema::secret::default_key(),
            });
        }
        if p.is_file() {
            return Ok(Identities {
                ids: read_identity_file(p)?,
                source: format!("CSIS_CONFIG_IDENTITY file {v}"),
                token_key: csis_schema::secret::default_key(),
            });
        }
        Err(format!(
            "CSIS_CONFIG_IDENTITY is neither an age secret key, an identity file nor a directory: {v}"
        ))
    }

    /// Decrypt one marker (`ENC[age:...]`) to its plaintext.
    pub fn decrypt(&self, marker: &str) -> Result<String, String> {
        let t = marker.trim();
        let b64 = &t[PREFIX.len()..t.len() - 1];
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("the marker is not valid base64: {e}"))?;
        let dec = age::Decryptor::new_buffered(&bytes[..])
            .map_err(|e| format!("the marker is not an age file: {e}"))?;
        let mut r = dec
            .decrypt(self.ids.iter().map(|i| i.as_ref() as &dyn age::Identity))
            .map_err(|e| format!("cannot decrypt with {}: {e}", self.source))?;
        let mut out = String::new();
        r.read_to_string(&mut out)
            .map_err(|e| format!("cannot decrypt with {}: {e}", self.source))?;
        Ok(out)
    }
}

fn read_identity_file(p: &Path) -> Result<Vec<Box<dyn age::Identity + Send + Sync>>, String> {
    let f = age::IdentityFile::from_file(p.to_string_lossy().to_string())
        .map_err(|e| format!("identity file {}: {e}", p.display()))?;
    f.into_identities()
        .map_err(|e| format!("identity file {}: {e}", p.display()))
}
