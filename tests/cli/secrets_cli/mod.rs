//! The operator's secrets commands against the loader: what `csis encrypt`
//! writes, `csis validate` (and the library's load) decrypts; `decrypt
//! --json` speaks Terraform's external protocol; `reencrypt` rotates to a new
//! recipient; `public-safe` finds planted material by file:line:field and
//! lets allowed values through; `mask` prints the CI mask lines.
//! This file keeps the tree, the runner and the commands the modules share;
//! each module holds one command or interface.

mod encrypt;
mod interface;
mod mask;
mod public_safe;
mod reencrypt;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use age::secrecy::ExposeSecret;
use csis_testkit::{with_stdin, Tree};

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyForTests admin@example";
const KEY2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAISecondKeyForTests ops@example";

struct Id {
    secret: String,
    public: String,
}

fn identity() -> Id {
    let id = age::x25519::Identity::generate();
    Id {
        secret: id.to_string().expose_secret().to_string(),
        public: id.to_public().to_string(),
    }
}

/// The valid fixture, encrypting to `recipients`, with `cfg/zz-keys.yml`
/// holding two admin keys in clear among comments and other fields.
fn tree(recipients: &[&Id]) -> Tree {
    let dir = avery(Tree::of("config/valid"));
    set_recipients(dir.path(), recipients);
    std::fs::write(dir.path().join("cfg/zz-keys.yml"), keys_yaml()).unwrap();
    dir
}

/// The commands of `t` run as the test user `avery`, with no identity but
/// the one a test gives.
fn avery(t: Tree) -> Tree {
    t.env_remove("CSIS_CONFIG_IDENTITY")
        .env("CSIS_TEST_USER", "avery")
}

fn keys_yaml() -> String {
    format!(
        "---\n# the admins' keys\nconfig:\n  admin_public_keys:   # both\n    - {KEY}\n    - \"{KEY2}\"\n  other_setting: stays   # in clear\n"
    )
}

fn set_recipients(root: &Path, recipients: &[&Id]) {
    let mut s = String::from("---\nencryption:\n  recipients:\n");
    for r in recipients {
        s.push_str(&format!("    - {}\n", r.public));
    }
    std::fs::write(root.join("cfg/zz-encryption.yml"), s).unwrap();
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn env() -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    e.insert("CSIS_TEST_USER".into(), "avery".into());
    e
}

/// The admin keys the library's load reads with `id`.
fn loaded_keys(root: &Path, id: &Id) -> Result<Vec<String>, String> {
    csis_rules::load(
        root,
        &csis_rules::LoadOptions {
            env: Some(env()),
            identity: Some(id.secret.clone()),
            ..Default::default()
        },
    )
    .map(|t| t.config.config.admin_public_keys.0.clone())
    .map_err(|d| {
        d.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn validate(root: &Tree, identity: Option<&str>) -> Output {
    let mut c = root.csis();
    c.args(["validate", "--offline"]);
    if let Some(i) = identity {
        c.env("CSIS_CONFIG_IDENTITY", i);
    }
    c.output().unwrap()
}

fn encrypt_keys(root: &Tree) -> Output {
    root.csis()
        .args(["encrypt", "--file"])
        .arg(root.join("cfg/zz-keys.yml"))
        .args(["--field", "admin_public_keys"])
        .output()
        .unwrap()
}

fn public_safe(root: &Tree, extra: &[&str], identity: Option<&str>) -> Output {
    let mut c = root.csis();
    c.arg("public-safe").args(extra);
    if let Some(i) = identity {
        c.env("CSIS_CONFIG_IDENTITY", i);
    }
    c.output().unwrap()
}
