//! Release qualification (core.md §5.4): a build is released for a model
//! only when it is recorded, belongs to the series, passed its in-bake tests,
//! its mods' tests pass (when recorded, or required), its post-bake tests
//! passed where the image declares them and `require_image_tests` holds, and
//! it is not revoked. `releases.yaml` keeps the history and, per model, the
//! current build of each image.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lineage::{BuildRecord, Lineage};
use crate::record_files::{read_meta_file, write_meta_file};
use crate::releases::{Release, Releases};
use crate::revocations::{head_unrevoked, Revocations};
use crate::{CacheError, MetaState};

pub const IMAGE_TESTS_FILE: &str = "image-tests.yaml";
pub const MOD_TESTS_FILE: &str = "mod-tests.yaml";

/// `meta-state/image-tests.yaml`: `builds {build_id: {ok, run, instance,
/// runtime, time, checks[]}}` (the latest post-bake verification per build).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageTests {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub builds: BTreeMap<String, ImageTestRecord>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageTestRecord {
    /// A YAML boolean: `ok: 'yes'` (or any string) is refused at its line.
    #[serde(deserialize_with = "strict_bool")]
    pub ok: bool,
    #[serde(default)]
    pub run: Option<String>,
    /// The test machine (container name, instance id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// When the tests ran (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// One per check: `{name, ok, detail, ...}` (csis adds `command`,
    /// `exit_code`, `evidence`: the last lines of output).
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub checks: Vec<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A typed boolean field of a record: `true` or `false`, never a string
/// (`'yes'`, `"true"`): a record deciding a release is read as written or
/// refused, naming the file and line.
pub(crate) fn strict_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Strict;
    impl serde::de::Visitor<'_> for Strict {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a boolean (true or false), not a string")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
    }
    d.deserialize_any(Strict)
}

impl ImageTests {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, IMAGE_TESTS_FILE)
    }
    /// Write it atomically; false when unchanged.
    pub fn save(&self, meta: &MetaState) -> Result<bool, CacheError> {
        write_meta_file(meta, IMAGE_TESTS_FILE, self)
    }
    /// Record the latest post-bake result of a build (read, replace, write).
    pub fn record(
        meta: &MetaState,
        build_id: &str,
        rec: ImageTestRecord,
    ) -> Result<(), CacheError> {
        let mut all = ImageTests::load(meta)?;
        all.builds.insert(build_id.to_string(), rec);
        all.save(meta).map(drop)
    }
    /// Some(ok) when a post-bake record exists for the build.
    pub fn result(&self, build_id: &str) -> Option<bool> {
        self.builds.get(build_id).map(|r| r.ok)
    }
}

/// `meta-state/mod-tests.yaml`: `results {content_hash: {status, idempotent, ...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModTests {
    #[serde(default, deserialize_with = "crate::null_as_default")]
    pub results: BTreeMap<String, Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl ModTests {
    pub fn load(meta: &MetaState) -> Result<Self, CacheError> {
        read_meta_file(meta, MOD_TESTS_FILE)
    }
}

/// What the tree says about the image being released.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReleaseRules {
    /// The image declares `tests.post_bake`.
    pub post_bake_declared: bool,
    /// `config.require_image_tests` (default true).
    pub require_image_tests: bool,
    /// `config.require_mod_tests` (default false).
    pub require_mod_tests: bool,
}

/// The records release qualification reads.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseRecords<'a> {
    pub lineage: &'a Lineage,
    pub revocations: &'a Revocations,
    pub image_tests: &'a ImageTests,
    pub mod_tests: &'a ModTests,
}

/// Why a release was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseRefusal {
    #[error("build {0} is not recorded in lineage")]
    Unrecorded(String),
    #[error("build {build} belongs to series {actual}, not {image}")]
    WrongSeries {
        build: String,
        actual: String,
        image: String,
    },
    #[error(
        "build {0} has no passing in-bake test record (an imported build must be verified first)"
    )]
    NoInBake(String),
    #[error("build {build}: mod {name} has no passing mod test ({why})")]
    ModTest {
        build: String,
        name: String,
        why: String,
    },
    #[error("build {build}: the image declares post-bake tests and require_image_tests holds, but {why}")]
    PostBake { build: String, why: String },
    #[error("build {build} is revoked{reason}")]
    Revoked { build: String, reason: String },
    #[error("{image} has no build on {runtime} to release")]
    NoHead { image: String, runtime: String },
}

/// Check that `build_id` may be released as `image`.
pub fn qualify<'a>(
    recs: ReleaseRecords<'a>,
    image: &str,
    build_id: &str,
    rules: ReleaseRules,
) -> Result<&'a BuildRecord, ReleaseRefusal> {
    let rec = recs
        .lineage
        .find(build_id)
        .ok_or_else(|| ReleaseRefusal::Unrecorded(build_id.to_string()))?;
    if rec.series != image {
        return Err(ReleaseRefusal::WrongSeries {
            build: build_id.into(),
            actual: rec.series.clone(),
            image: image.into(),
        });
    }
    if let Some(r) = recs.revocations.get(build_id) {
        return Err(ReleaseRefusal::Revoked {
            build: build_id.into(),
            reason: r
                .reason
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default(),
        });
    }
    if !rec.tests.in_bake {
        return Err(ReleaseRefusal::NoInBake(build_id.into()));
    }
    for m in &rec.mods {
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let Some(hash) = m.get("content_hash").and_then(Value::as_str) else {
            continue;
        };
        match recs.mod_tests.results.get(hash) {
            None if rules.require_mod_tests => {
                return Err(ReleaseRefusal::ModTest {
                    build: build_id.into(),
                    name,
                    why: "none recorded and require_mod_tests holds: run csis test-mods".into(),
                })
            }
            None => {}
            Some(r) => {
                let status = r.get("status").and_then(Value::as_str).unwrap_or("");
                if status != "pass" {
                    return Err(ReleaseRefusal::ModTest {
                        build: build_id.into(),
                        name,
                        why: format!("status {status:?}"),
                    });
                }
                if r.get("idempotent") == Some(&Value::Bool(false)) {
                    return Err(ReleaseRefusal::ModTest {
                        build: build_id.into(),
                        name,
                        why: "not idempotent".into(),
                    });
                }
            }
        }
    }
    if rules.post_bake_declared && rules.require_image_tests {
        match recs.image_tests.result(build_id) {
            Some(true) => {}
            Some(false) => {
                return Err(ReleaseRefusal::PostBake {
                    build: build_id.into(),
                    why: "its post-bake tests FAILED".into(),
                })
            }
            None => {
                return Err(ReleaseRefusal::PostBake {
                    build: build_id.into(),
                    why: "no post-bake test record exists for it (csis test)".into(),
                })
            }
        }
    }
    Ok(rec)
}

/// The build `release --declared` would release for `image` on `runtime`:
/// the unrevoked series head, when it qualifies and is not already the
/// model's current release. `Ok(None)` = nothing to do.
pub fn declared_candidate<'a>(
    recs: ReleaseRecords<'a>,
    releases: &Releases,
    image: &str,
    runtime: &str,
    model: &str,
    rules: ReleaseRules,
) -> Result<Option<&'a BuildRecord>, ReleaseRefusal> {
    let Some(head) = head_unrevoked(recs.lineage, recs.revocations, image, runtime) else {
        return Err(ReleaseRefusal::NoHead {
            image: image.into(),
            runtime: runtime.into(),
        });
    };
    if releases.current.get(model).and_then(|m| m.get(image)) == Some(&head.build_id) {
        return Ok(None);
    }
    qualify(recs, image, &head.build_id, rules).map(Some)
}

/// Record a release: append to the history and make it the model's current
/// build of the image. Returns false when it already was current (nothing
/// appended).
pub fn record_release(
    releases: &mut Releases,
    rec: &BuildRecord,
    image: &str,
    model: &str,
    run: Option<&str>,
    note: Option<&str>,
) -> bool {
    let cur = releases.current.entry(model.to_string()).or_default();
    if cur.get(image) == Some(&rec.build_id) {
        return false;
    }
    cur.insert(image.to_string(), rec.build_id.clone());
    releases.releases.push(Release {
        image: image.to_string(),
        build_id: rec.build_id.clone(),
        model: model.to_string(),
        run: run.map(str::to_string),
        note: note.map(str::to_string),
        name: rec.name.clone(),
        capabilities: serde_json::to_value(&rec.capabilities).ok(),
        extra: BTreeMap::new(),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lineage() -> Lineage {
        let mut l = Lineage::default();
        let mut a = BuildRecord::new("a1", "app", "rt");
        a.mods = vec![json!({"name": "m", "content_hash": "h1"})];
        l.add_build(a);
        l.add_build(BuildRecord::new("a2", "app", "rt"));
        let mut imp = BuildRecord::new("a3", "app", "rt");
        imp.tests.in_bake = false;
        l.add_build(imp);
        l.add_build(BuildRecord::new("o1", "other", "rt"));
        l
    }

    #[test]
    fn a_string_never_passes_for_a_passing_test() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaState::at(dir.path());
        let path = dir.path().join(IMAGE_TESTS_FILE);
        for bad in ["'yes'", "\"no\"", "1"] {
            std::fs::write(
                &path,
                format!("builds:\n  b1:\n    ok: {bad}\n    run: r\n"),
            )
            .unwrap();
            let e = ImageTests::load(&meta).unwrap_err().to_string();
            assert!(e.contains("image-tests.yaml:3"), "{bad}: {e}");
            assert!(e.contains("boolean"), "{bad}: {e}");
        }
        std::fs::write(&path, "builds:\n  b1:\n    ok: true\n").unwrap();
        assert_eq!(ImageTests::load(&meta).unwrap().result("b1"), Some(true));
    }

    #[test]
    fn qualification_rules() {
        let l = lineage();
        let revs = Revocations::default();
        let it = ImageTests::default();
        let mt = ModTests::default();
        let recs = ReleaseRecords {
            lineage: &l,
            revocations: &revs,
            image_tests: &it,
            mod_tests: &mt,
        };
        let none = ReleaseRules {
            require_image_tests: true,
            ..Default::default()
        };
        assert!(qualify(recs, "app", "a1", none).is_ok());
        assert_eq!(
            qualify(recs, "app", "zz", none),
            Err(ReleaseRefusal::Unrecorded("zz".into()))
        );
        assert!(matches!(
            qualify(recs, "app", "o1", none),
            Err(ReleaseRefusal::WrongSeries { .. })
        ));
        assert!(matches!(
            qualify(recs, "app", "a3", none),
            Err(ReleaseRefusal::NoInBake(_))
        ));
        let post = ReleaseRules {
            post_bake_declared: true,
            require_image_tests: true,
            require_mod_tests: false,
        };
        assert!(matches!(
            qualify(recs, "app", "a2", post),
            Err(ReleaseRefusal::PostBake { .. })
        ));
        // require_image_tests false waives them
        let waived = ReleaseRules {
            require_image_tests: false,
            ..post
        };
        assert!(qualify(recs, "app", "a2", waived).is_ok());
        let mut it2 = it.clone();
        it2.builds.insert(
            "a2".into(),
            ImageTestRecord {
                ok: false,
                ..Default::default()
            },
        );
        let recs_f = ReleaseRecords {
            image_tests: &it2,
            ..recs
        };
        let e = qualify(recs_f, "app", "a2", post).unwrap_err();
        assert!(e.to_string().contains("FAILED"));
        let mut it3 = it2.clone();
        it3.builds.get_mut("a2").unwrap().ok = true;
        let recs = ReleaseRecords {
            image_tests: &it3,
            ..recs
        };
        assert!(qualify(recs, "app", "a2", post).is_ok());
        // mod tests
        let strict = ReleaseRules {
            require_mod_tests: true,
            ..none
        };
        assert!(matches!(
            qualify(recs, "app", "a1", strict),
            Err(ReleaseRefusal::ModTest { .. })
        ));
        let mut mt2 = ModTests::default();
        mt2.results
            .insert("h1".into(), json!({"status": "pass", "idempotent": false}));
        let recs2 = ReleaseRecords {
            mod_tests: &mt2,
            ..recs
        };
        assert!(qualify(recs2, "app", "a1", none)
            .unwrap_err()
            .to_string()
            .contains("idempotent"));
        // revoked
        let mut revs2 = Revocations::default();
        crate::revocations::revoke(&l, &mut revs2, "a1", false, Some("cve"), None).unwrap();
        let recs3 = ReleaseRecords {
            revocations: &revs2,
            ..recs
        };
        assert_eq!(
            qualify(recs3, "app", "a1", none).unwrap_err().to_string(),
            "build a1 is revoked: cve"
        );
    }

    #[test]
    fn declared_and_history() {
        let mut l = lineage();
        l.builds.retain(|b| b.build_id != "a3");
        let revs = Revocations::default();
        let it = ImageTests::default();
        let mt = ModTests::default();
        let recs = ReleaseRecords {
            lineage: &l,
            revocations: &revs,
            image_tests: &it,
            mod_tests: &mt,
        };
        let rules = ReleaseRules {
            require_image_tests: true,
            ..Default::default()
        };
        let mut rel = Releases::default();
        let c = declared_candidate(recs, &rel, "app", "rt", "stable", rules)
            .unwrap()
            .unwrap();
        assert_eq!(c.build_id, "a2");
        assert!(record_release(
            &mut rel,
            c,
            "app",
            "stable",
            Some("r1"),
            Some("n")
        ));
        assert!(!record_release(
            &mut rel,
            c,
            "app",
            "stable",
            Some("r2"),
            None
        ));
        assert_eq!(rel.releases.len(), 1);
        assert_eq!(rel.current["stable"]["app"], "a2");
        assert!(declared_candidate(recs, &rel, "app", "rt", "stable", rules)
            .unwrap()
            .is_none());
        assert!(matches!(
            declared_candidate(recs, &rel, "app", "nowhere", "stable", rules),
            Err(ReleaseRefusal::NoHead { .. })
        ));
        // a second model keeps its own current
        let a1 = l.find("a1").unwrap();
        assert!(record_release(&mut rel, a1, "app", "beta", None, None));
        assert_eq!(rel.current["stable"]["app"], "a2");
        assert_eq!(rel.current["beta"]["app"], "a1");
        assert!(rel.is_current("a1") && rel.is_current("a2"));
    }
}
