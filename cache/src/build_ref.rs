//! Builds people can name: resolving what a user typed as a build against
//! the lineage records, and the listing `csis builds` renders.
//!
//! A build is named by
//! - its full id (`sha256:…`, `ami-…`, `dummy-…`);
//! - a unique prefix of at least [`MIN_PREFIX`] characters of its hash, the
//!   id without its kind (`sha256:` for docker, as `docker images` shows
//!   short ids; `ami-` for an AMI; `dummy-` for the dummy runtime), with or
//!   without that kind in front (`0123abcd`, `sha256:0123abcd`, `ami-0123abcd`);
//! - its name: the record's `name` (the AMI name, the docker tag csis gave
//!   it); for docker also `REPOSITORY:TAG`.
//!
//! A reference that names more than one build is refused with the
//! candidates ([`BuildRefError::Ambiguous`]); a full id always wins.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde::Serialize;

use crate::lineage::{BuildRecord, Lineage};
use crate::pins::Pins;
use crate::releases::Releases;
use crate::revocations::Revocations;

/// The fewest characters of a hash a prefix must give.
pub const MIN_PREFIX: usize = 8;

/// How many characters of the hash a short id shows.
pub const SHORT_LEN: usize = 12;

/// The kinds of build id, as the runtimes write them.
const KINDS: [&str; 3] = ["sha256:", "ami-", "dummy-"];

/// The id without its kind: `sha256:abc…` -> `abc…`, `ami-0abc…` -> `0abc…`.
pub fn hash_part(build_id: &str) -> &str {
    KINDS
        .iter()
        .find_map(|k| strip_prefix_ci(build_id, k))
        .unwrap_or(build_id)
}

/// The first [`SHORT_LEN`] characters of the hash, as docker shows ids.
/// A dummy id (`dummy-<12 hex of the fingerprint>-<counter>`) is shown
/// whole without its kind: two bakes of the same inputs share the hex.
pub fn short_id(build_id: &str) -> String {
    if strip_prefix_ci(build_id, "dummy-").is_some() {
        return hash_part(build_id).to_string();
    }
    hash_part(build_id).chars().take(SHORT_LEN).collect()
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) {
        let (head, rest) = s.split_at(prefix.len());
        head.eq_ignore_ascii_case(prefix).then_some(rest)
    } else {
        None
    }
}

/// Limit the records a reference is resolved against.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildScope<'a> {
    pub series: Option<&'a str>,
    pub runtime: Option<&'a str>,
}

impl BuildScope<'_> {
    fn admits(&self, r: &BuildRecord) -> bool {
        self.series.is_none_or(|s| r.series == s) && self.runtime.is_none_or(|rt| r.on_runtime(rt))
    }

    fn describe(&self) -> String {
        match (self.series, self.runtime) {
            (None, None) => String::new(),
            (Some(s), None) => format!(" of series {s}"),
            (None, Some(r)) => format!(" on {r}"),
            (Some(s), Some(r)) => format!(" of series {s} on {r}"),
        }
    }
}

/// One build a reference could mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub build_id: String,
    pub short_id: String,
    pub series: String,
    pub runtime: Option<String>,
    pub name: Option<String>,
}

impl Candidate {
    fn of(r: &BuildRecord) -> Self {
        Candidate {
            build_id: r.build_id.clone(),
            short_id: short_id(&r.build_id),
            series: r.series.clone(),
            runtime: r.runtime.clone(),
            name: r.name.clone(),
        }
    }
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}@{} {}",
            self.short_id,
            self.series,
            self.runtime.as_deref().unwrap_or("any"),
            self.name.as_deref().unwrap_or("(no name)")
        )
    }
}

/// Why a reference names no single build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildRefError {
    #[error("no recorded build{scope} matches '{query}' (give a full id, at least {MIN_PREFIX} characters of its hash, or its name; `csis builds` lists them)")]
    NotFound { query: String, scope: String },
    #[error("'{query}' names {} recorded builds{scope}; give more characters or the full id:{}", candidates.len(), candidates.iter().map(|c| format!("\n  {c}")).collect::<String>())]
    Ambiguous {
        query: String,
        scope: String,
        candidates: Vec<Candidate>,
    },
    #[error("'{query}' is too short to name a build: give at least {MIN_PREFIX} characters of its hash, the full id or its name")]
    TooShort { query: String },
}

/// Resolve what a user typed as a build to its record (see the module doc).
pub fn resolve_build<'a>(
    lineage: &'a Lineage,
    query: &str,
    scope: BuildScope<'_>,
) -> Result<&'a BuildRecord, BuildRefError> {
    let q = query.trim();
    let in_scope = || lineage.builds.iter().filter(|r| scope.admits(r));
    // a full id always wins
    if let Some(r) = in_scope().find(|r| r.build_id == q) {
        return Ok(r);
    }
    let mut matches: Vec<&BuildRecord> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut push = |r: &'a BuildRecord, m: &mut Vec<&'a BuildRecord>| {
        if seen.insert(r.build_id.as_str()) {
            m.push(r);
        }
    };
    // by name (docker: also REPOSITORY:TAG)
    let tag = q
        .rsplit_once(':')
        .filter(|_| strip_prefix_ci(q, "sha256:").is_none())
        .map(|(_, t)| t);
    for r in in_scope() {
        if let Some(n) = r.name.as_deref() {
            if !n.is_empty() && (n == q || Some(n) == tag) {
                push(r, &mut matches);
            }
        }
    }
    // by a prefix of the hash, with or without the kind in front
    let (kind, hash) = match KINDS
        .iter()
        .find_map(|k| strip_prefix_ci(q, k).map(|rest| (Some(*k), rest)))
    {
        Some(x) => x,
        None => (None, q),
    };
    let hash = hash.to_ascii_lowercase();
    let long_enough = hash.chars().count() >= MIN_PREFIX;
    if long_enough {
        for r in in_scope() {
            let of_kind = kind.is_none_or(|k| strip_prefix_ci(&r.build_id, k).is_some());
            if of_kind
                && hash_part(&r.build_id)
                    .to_ascii_lowercase()
                    .starts_with(&hash)
            {
                push(r, &mut matches);
            }
        }
    }
    match matches.len() {
        1 => Ok(matches[0]),
        0 if !long_enough && looks_like_id(q) => Err(BuildRefError::TooShort { query: q.into() }),
        0 => Err(BuildRefError::NotFound {
            query: q.into(),
            scope: scope.describe(),
        }),
        _ => Err(BuildRefError::Ambiguous {
            query: q.into(),
            scope: scope.describe(),
            candidates: matches.into_iter().map(Candidate::of).collect(),
        }),
    }
}

/// Could this be (the start of) an id rather than a name: a kind in front,
/// or hex digits only (the empty string too).
fn looks_like_id(q: &str) -> bool {
    KINDS.iter().any(|k| strip_prefix_ci(q, k).is_some())
        || q.chars().all(|c| c.is_ascii_hexdigit())
}

/// One line of `csis builds` (also its `--json` element).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildRow {
    pub series: String,
    /// `null` for a record written without one (it counts on every runtime).
    pub runtime: Option<String>,
    pub build_id: String,
    pub short_id: String,
    pub name: Option<String>,
    /// The parent build id, or `vendor`.
    pub parent: Option<String>,
    pub parent_short: Option<String>,
    pub run: Option<String>,
    /// Seconds since the bake's run started (`null` when the run id does not parse).
    pub age_seconds: Option<u64>,
    /// The series head on its runtime (the last-appended record).
    pub head: bool,
    /// The models this build is the current release of.
    pub released: Vec<String>,
    /// Who is pinned to it: `image@runtime` (an image pinned to it as parent), `instance NAME`.
    pub pinned_by: Vec<String>,
    pub revoked: bool,
    pub revoked_reason: Option<String>,
    /// Its post-bake tests (`meta-state/image-tests.yaml`): passed, failed,
    /// or absent when none is recorded ([`mark_tested`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tested: Option<bool>,
    /// `csis builds --check`: whether the runtime still has it (absent
    /// without `--check`, null when the runtime cannot answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_runtime: Option<Option<bool>>,
}

/// Set each row's `tested` mark from the post-bake records.
pub fn mark_tested(rows: &mut [BuildRow], tests: &crate::release_rules::ImageTests) {
    for r in rows {
        r.tested = tests.result(&r.build_id);
    }
}

/// Does a series name match a `csis builds` pattern: a glob when it has
/// `*`, `?` or `[`, else a substring. An invalid glob matches nothing.
pub fn series_matches(pattern: &str, series: &str) -> bool {
    if pattern.contains(['*', '?', '[']) {
        globset::Glob::new(pattern)
            .map(|g| g.compile_matcher().is_match(series))
            .unwrap_or(false)
    } else {
        series.contains(pattern)
    }
}

/// Why a `csis builds` pattern cannot be used (an invalid glob), or `None`.
pub fn pattern_problem(pattern: &str) -> Option<String> {
    if pattern.contains(['*', '?', '[']) {
        globset::Glob::new(pattern)
            .err()
            .map(|e| format!("invalid series pattern '{pattern}': {}", e.kind()))
    } else {
        None
    }
}

/// The recorded builds grouped by series then runtime (sorted by name),
/// newest first within a group (reverse append order: the head first).
pub fn list_builds(
    lineage: &Lineage,
    pins: &Pins,
    releases: &Releases,
    revocations: &Revocations,
    pattern: Option<&str>,
    runtime: Option<&str>,
    now: SystemTime,
) -> Vec<BuildRow> {
    let mut rows: Vec<(usize, BuildRow)> = Vec::new();
    for (i, r) in lineage.builds.iter().enumerate() {
        if pattern.is_some_and(|p| !series_matches(p, &r.series)) {
            continue;
        }
        if runtime.is_some_and(|rt| !r.on_runtime(rt)) {
            continue;
        }
        let head = lineage
            .builds
            .iter()
            .rposition(|b| b.series == r.series && b.runtime == r.runtime)
            == Some(i);
        let released: Vec<String> = releases
            .current
            .iter()
            .filter(|(_, m)| m.values().any(|b| *b == r.build_id))
            .map(|(model, _)| model.clone())
            .collect();
        let mut pinned_by: Vec<String> = pins
            .images
            .iter()
            .filter(|(_, b)| **b == r.build_id)
            .map(|(k, _)| k.clone())
            .collect();
        pinned_by.extend(
            pins.instances
                .iter()
                .filter(|(_, b)| **b == r.build_id)
                .map(|(k, _)| format!("instance {k}")),
        );
        let rev = revocations.get(&r.build_id);
        rows.push((
            i,
            BuildRow {
                series: r.series.clone(),
                runtime: r.runtime.clone(),
                build_id: r.build_id.clone(),
                short_id: short_id(&r.build_id),
                name: r.name.clone(),
                parent_short: r.parent.as_deref().map(|p| {
                    if p == "vendor" {
                        p.to_string()
                    } else {
                        short_id(p)
                    }
                }),
                parent: r.parent.clone(),
                run: r.run.clone(),
                age_seconds: r
                    .run
                    .as_deref()
                    .and_then(crate::parse_run_id)
                    .map(|t| now.duration_since(t).unwrap_or_default().as_secs()),
                head,
                released,
                pinned_by,
                revoked: rev.is_some(),
                revoked_reason: rev.and_then(|v| v.reason.clone()),
                tested: None,
                on_runtime: None,
            },
        ));
    }
    rows.sort_by(|(ia, a), (ib, b)| {
        (&a.series, &a.runtime)
            .cmp(&(&b.series, &b.runtime))
            .then(ib.cmp(ia))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, series: &str, rt: &str, name: &str) -> BuildRecord {
        let mut r = BuildRecord::new(id, series, rt);
        r.name = Some(name.into());
        r
    }

    fn lineage() -> Lineage {
        Lineage {
            builds: vec![
                rec(
                    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                    "web",
                    "dock",
                    "web-dock-2026-11-30",
                ),
                rec(
                    "sha256:0123456799999999999999999999999999999999999999999999999999999999",
                    "web",
                    "dock",
                    "web-dock-2026-12-01",
                ),
                rec(
                    "ami-0fedcba9876543210",
                    "web",
                    "east",
                    "web-east-2026-12-01",
                ),
                rec(
                    "ami-0fedcba9111111111",
                    "app",
                    "east",
                    "app-east-2026-12-01",
                ),
            ],
            ..Default::default()
        }
    }

    const D1: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn full_id_prefix_and_name_name_the_same_build() {
        let l = lineage();
        let all = BuildScope::default();
        assert_eq!(resolve_build(&l, D1, all).unwrap().build_id, D1);
        for q in [
            "012345678",
            "sha256:0123456789a",
            "SHA256:0123456789AB",
            "web-dock-2026-11-30",
            "csis-images:web-dock-2026-11-30",
        ] {
            assert_eq!(resolve_build(&l, q, all).unwrap().build_id, D1, "{q}");
        }
        // AMI: the part after ami-, with or without it
        for q in ["0fedcba98", "ami-0fedcba98", "web-east-2026-12-01"] {
            assert_eq!(
                resolve_build(&l, q, all).unwrap().build_id,
                "ami-0fedcba9876543210",
                "{q}"
            );
        }
    }

    #[test]
    fn an_ambiguous_prefix_lists_the_candidates() {
        let l = lineage();
        let e = resolve_build(&l, "01234567", BuildScope::default()).unwrap_err();
        let BuildRefError::Ambiguous { candidates, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(candidates.len(), 2);
        let text = e.to_string();
        assert!(text.contains("names 2 recorded builds"), "{text}");
        assert!(
            text.contains("0123456789ab web@dock web-dock-2026-11-30"),
            "{text}"
        );
        assert!(
            text.contains("012345679999 web@dock web-dock-2026-12-01"),
            "{text}"
        );
        // ami-0fedcba matches two AMIs; the series scope settles it
        assert!(matches!(
            resolve_build(&l, "ami-0fedcba9", BuildScope::default()),
            Err(BuildRefError::Ambiguous { .. })
        ));
        let scoped = BuildScope {
            series: Some("app"),
            runtime: None,
        };
        assert_eq!(
            resolve_build(&l, "ami-0fedcba9", scoped).unwrap().build_id,
            "ami-0fedcba9111111111"
        );
    }

    #[test]
    fn a_name_of_two_builds_is_ambiguous() {
        let mut l = lineage();
        l.builds[1].name = l.builds[0].name.clone();
        let e = resolve_build(&l, "web-dock-2026-11-30", BuildScope::default()).unwrap_err();
        let BuildRefError::Ambiguous { candidates, .. } = e else {
            panic!("{e}")
        };
        assert_eq!(candidates.len(), 2);
    }

    #[test]
    fn a_kind_in_front_only_matches_that_kind() {
        let l = lineage();
        // 0fedcba9 is an AMI hash; with sha256: in front it names no docker build
        assert!(matches!(
            resolve_build(&l, "sha256:0fedcba98", BuildScope::default()),
            Err(BuildRefError::NotFound { .. })
        ));
    }

    #[test]
    fn too_short_and_not_found() {
        let l = lineage();
        let all = BuildScope::default();
        for q in ["0123456", "sha256:0123", "ami-0fe", ""] {
            assert!(
                matches!(
                    resolve_build(&l, q, all),
                    Err(BuildRefError::TooShort { .. })
                ),
                "{q}"
            );
        }
        let e = resolve_build(&l, "nope", all).unwrap_err();
        assert!(matches!(e, BuildRefError::NotFound { .. }));
        let text = e.to_string();
        assert!(!text.contains('\n') && text.contains("'nope'"), "{text}");
        // in scope only: the web AMI is not on dock
        let dock = BuildScope {
            series: None,
            runtime: Some("dock"),
        };
        let e = resolve_build(&l, "ami-0fedcba9876543210", dock).unwrap_err();
        assert!(e.to_string().contains(" on dock"), "{e}");
    }

    #[test]
    fn short_ids() {
        assert_eq!(short_id(D1), "0123456789ab");
        assert_eq!(short_id("ami-0fedcba9876543210"), "0fedcba98765");
        assert_eq!(short_id("dummy-0123456789ab-3"), "0123456789ab-3");
        assert!(pattern_problem("x[").is_some());
        assert!(pattern_problem("we*").is_none() && pattern_problem("web").is_none());
    }

    #[test]
    fn listing_groups_newest_first_with_marks() {
        let mut l = lineage();
        for (i, b) in l.builds.iter_mut().enumerate() {
            b.run = Some(format!("2026_12_01t0{i}_00_00_000000"));
            b.parent = Some("vendor".into());
        }
        l.builds[1].parent = Some(D1.into());
        let mut pins = Pins::default();
        pins.images.insert("app@dock".into(), D1.into());
        pins.instances.insert("vm-1".into(), D1.into());
        let mut rel = Releases::default();
        rel.current
            .entry("prod".into())
            .or_default()
            .insert("web".into(), "ami-0fedcba9876543210".into());
        let mut revs = Revocations::default();
        crate::revocations::revoke(&l, &mut revs, D1, false, Some("CVE"), None).unwrap();
        let now = crate::parse_run_id("2026_12_01t10_00_00").unwrap();
        let rows = list_builds(&l, &pins, &rel, &revs, None, None, now);
        let order: Vec<(&str, Option<&str>, &str)> = rows
            .iter()
            .map(|r| (r.series.as_str(), r.runtime.as_deref(), r.short_id.as_str()))
            .collect();
        assert_eq!(
            order,
            vec![
                ("app", Some("east"), "0fedcba91111"),
                ("web", Some("dock"), "012345679999"),
                ("web", Some("dock"), "0123456789ab"),
                ("web", Some("east"), "0fedcba98765"),
            ]
        );
        assert!(rows[1].head && !rows[2].head);
        assert_eq!(rows[1].parent_short.as_deref(), Some("0123456789ab"));
        assert_eq!(rows[2].pinned_by, vec!["app@dock", "instance vm-1"]);
        assert!(rows[2].revoked && rows[2].revoked_reason.as_deref() == Some("CVE"));
        assert_eq!(rows[3].released, vec!["prod"]);
        assert_eq!(rows[2].age_seconds, Some(10 * 3600));
        assert_eq!(rows[0].age_seconds, Some(7 * 3600));
        // patterns: substring, glob; runtime filter
        let web: Vec<_> = list_builds(&l, &pins, &rel, &revs, Some("we"), None, now);
        assert_eq!(web.len(), 3);
        let glob = list_builds(&l, &pins, &rel, &revs, Some("a*"), None, now);
        assert_eq!(glob.len(), 1);
        assert_eq!(glob[0].series, "app");
        let east = list_builds(&l, &pins, &rel, &revs, None, Some("east"), now);
        assert_eq!(east.len(), 2);
    }
}
