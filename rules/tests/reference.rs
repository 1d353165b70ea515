//! The original's starter trees load with only "not used by csis yet"
//! warnings (skipped when ../shared/reference is absent).

use std::path::{Path, PathBuf};

use csis_rules::{load, LoadOptions};

fn reference() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipped: {} does not exist", p.display());
        None
    }
}

fn check(
    tree: &Path,
    identity: Option<String>,
) -> Result<csis_rules::Tree, Vec<csis_rules::Diagnostic>> {
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    env.remove("CSIS_CONFIG_IDENTITY");
    env.insert("USER".into(), "tester".into());
    load(
        tree,
        &LoadOptions {
            env: Some(env),
            identity,
            ..Default::default()
        },
    )
}

#[test]
fn starters_without_encrypted_config_load() {
    let Some(r) = reference() else { return };
    for s in ["standard-aws", "standard-aws-posix", "standard-gce"] {
        let p = r.join("cs-image-system-0.1.1-starters").join(s);
        match check(&p, None) {
            Ok(t) => {
                for w in &t.warnings {
                    assert!(
                        w.message.starts_with("not used by csis yet"),
                        "{s}: unexpected warning {w}"
                    );
                }
            }
            Err(d) => panic!(
                "{s} did not load:\n{}",
                d.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }
}

#[test]
fn debug_dump() {
    let Some(r) = reference() else { return };
    for s in [
        "cs-image-system-0.1.1-starters/standard-aws",
        "cs-image-system-0.1.1-starters/standard-gce",
        "cs-image-system-0.1.1-starters/complete",
        "cs-image-system-3/docs/examples/complete",
    ] {
        match check(&r.join(s), std::env::var("TEST_ID").ok()) {
            Ok(t) => {
                eprintln!(
                    "{s}: {} runtimes {} os {} ib {} mb {} images",
                    t.runtimes.len(),
                    t.os_builders.len(),
                    t.image_builders.len(),
                    t.mod_builders.len(),
                    t.images.len()
                );
                for w in &t.warnings {
                    eprintln!("  {w}");
                }
            }
            Err(d) => {
                eprintln!("{s}: FAILED");
                for x in d {
                    eprintln!("  {x}");
                }
            }
        }
    }
}
