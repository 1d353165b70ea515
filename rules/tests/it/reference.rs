//! The original's starter trees load with only "not used by csis yet"
//! warnings, and those only for what lives on gcloud (skipped when
//! ../shared/reference is absent; their fleet: tests/it/fleet.rs). The `complete`
//! trees encrypt `admin_public_keys`: without an identity the refusal names
//! the value and the missing identity (with the TEST identity they load:
//! tests/cli/validate_reference.rs fetches it).

use std::collections::BTreeMap;
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

fn no_identity() -> LoadOptions {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("USER".into(), "tester".into());
    LoadOptions {
        env: Some(env),
        ..Default::default()
    }
}

#[test]
fn starters_without_encrypted_config_load_with_only_unused_warnings() {
    let Some(r) = reference() else { return };
    for s in ["standard-aws", "standard-aws-posix", "standard-gce"] {
        let p = r.join("cs-image-system-0.1.1-starters").join(s);
        match load(&p, &no_identity()) {
            Ok(t) => {
                assert_eq!(
                    t.warnings.is_empty(),
                    s != "standard-gce",
                    "{s}: only the GCE starter has what csis does not run: {:?}",
                    t.warnings
                );
                for w in &t.warnings {
                    assert!(
                        w.message.starts_with("not used by csis yet: "),
                        "{s}: unexpected warning {w}"
                    );
                }
                assert!(!t.images.is_empty() && !t.os_builders.is_empty(), "{s}");
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
fn complete_trees_without_the_identity_name_the_value_and_the_identity() {
    let Some(r) = reference() else { return };
    for s in [
        "cs-image-system-0.1.1-starters/complete",
        "cs-image-system-3/docs/examples/complete",
    ] {
        let d = load(&r.join(s), &no_identity()).expect_err(s);
        let errors: Vec<_> = d.iter().filter(|d| d.is_error()).collect();
        assert_eq!(errors.len(), 1, "{s}: {errors:?}");
        let e = errors[0];
        assert_eq!(e.file, "cfg/_config.yml", "{s}");
        assert_eq!(e.path, "config.admin_public_keys[0]", "{s}");
        assert!(e.message.contains("ENC[age:"), "{s}: {e}");
        assert!(e.message.contains("CSIS_CONFIG_IDENTITY"), "{s}: {e}");
        assert!(e.line > 0 && e.column > 0, "{s}: {e}");
    }
}

#[test]
fn the_fixture_tree_of_the_original_is_partial() {
    // tests/fixtures/config of the original lacks most of cfg/ (see spec §J);
    // it is not expected to load, but what it holds must parse.
    let Some(r) = reference() else { return };
    let p = r.join("cs-image-system-3/tests/fixtures/config");
    if let Err(d) = load(&p, &no_identity()) {
        assert!(
            d.iter().all(|d| !d.message.starts_with("invalid YAML")),
            "{d:?}"
        );
    }
}
