//! Patterns that select labels.
//!
//! | pattern | matches |
//! |---|---|
//! | `//...` | every label |
//! | `//images/...` | every label whose path is `images` or under `images/` |
//! | `//images/dask` | every node of `images/dask`, on every runtime, of every kind |
//! | `//images/dask@aws-east2` | every node of that target (emit, bake, retag, ...) |
//! | `//images/dask@aws-east2:bake` | that one node |
//! | `@aws-east2` | every label on runtime `aws-east2` |
//!
//! `...` may also take `@runtime` and/or `:kind` (`//images/...@aws-east2`).
//! A pattern that matches nothing is a [`SelectError`] naming the closest
//! labels by edit distance ([`closest`]).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::label::{check_word, split_parts, Label, LabelError};

/// Invalid pattern text.
pub type PatternError = LabelError;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum PathPat {
    /// No path given (`@runtime`).
    Any,
    /// `//prefix/...`; an empty prefix is `//...`.
    Under(Box<str>),
    /// `//exact/path`.
    Exact(Box<str>),
}

/// A parsed pattern; see the module docs for the syntax.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: Box<str>,
    path: PathPat,
    runtime: Option<Box<str>>,
    kind: Option<Box<str>>,
}

/// A pattern matched no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pattern `{pattern}` matches nothing{}", did_you_mean(.closest))]
pub struct SelectError {
    /// The pattern as written.
    pub pattern: String,
    /// The closest existing labels/patterns, best first (at most 3).
    pub closest: Vec<String>,
}

fn did_you_mean(c: &[String]) -> String {
    if c.is_empty() {
        String::new()
    } else {
        format!("; closest: {}", c.join(", "))
    }
}

impl Pattern {
    /// Parse a pattern (see the module docs).
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix('@') {
            let (rt, kind) = match rest.split_once(':') {
                Some((r, k)) => (r, Some(k)),
                None => (rest, None),
            };
            check_word(t, "runtime", rt)?;
            if let Some(k) = kind {
                check_word(t, "kind", k)?;
            }
            return Ok(Pattern {
                text: t.into(),
                path: PathPat::Any,
                runtime: Some(rt.into()),
                kind: kind.map(Into::into),
            });
        }
        let body = t.strip_prefix("//").ok_or_else(|| {
            LabelError::new(
                t,
                "a pattern starts with `//` or `@` (e.g. `//images/...`, `@aws-east2`)",
            )
        })?;
        if body.matches('@').count() > 1 || body.matches(':').count() > 1 {
            return Err(LabelError::new(t, "more than one `@` or `:`"));
        }
        let (path, runtime, kind) = split_parts(body);
        let path_pat = if path == "..." {
            PathPat::Under("".into())
        } else if let Some(prefix) = path.strip_suffix("/...") {
            for seg in prefix.split('/') {
                check_word(t, "path segment", seg)?;
            }
            PathPat::Under(prefix.into())
        } else {
            if path.split('/').any(|s| s == "...") {
                return Err(LabelError::new(t, "`...` may only end the path"));
            }
            for seg in path.split('/') {
                check_word(t, "path segment", seg)?;
            }
            PathPat::Exact(path.into())
        };
        if let Some(r) = runtime {
            check_word(t, "runtime", r)?;
        }
        if let Some(k) = kind {
            check_word(t, "kind", k)?;
        }
        Ok(Pattern {
            text: t.into(),
            path: path_pat,
            runtime: runtime.map(Into::into),
            kind: kind.map(Into::into),
        })
    }

    /// The pattern matching every label (`//...`).
    pub fn all() -> Pattern {
        Pattern::parse("//...").expect("valid")
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `label` matches.
    pub fn matches(&self, label: &Label) -> bool {
        let path_ok = match &self.path {
            PathPat::Any => true,
            PathPat::Exact(p) => label.path() == &**p,
            PathPat::Under(p) => {
                p.is_empty()
                    || label.path() == &**p
                    || (label.path().starts_with(&**p)
                        && label.path().as_bytes().get(p.len()) == Some(&b'/'))
            }
        };
        path_ok
            && self
                .runtime
                .as_deref()
                .is_none_or(|r| label.runtime() == Some(r))
            && self.kind.as_deref().is_none_or(|k| label.kind() == Some(k))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::parse(s)
    }
}

/// The (at most `n`) candidate texts closest to `pattern` by edit distance,
/// best first, ties broken alphabetically. Candidates are shaped like the
/// pattern: runtimes for `@rt`, `//dir/...` for `...` patterns, targets
/// (`//path@rt`, `//path`) and full labels otherwise.
pub fn closest<'a>(
    pattern: &Pattern,
    labels: impl IntoIterator<Item = &'a Label>,
    n: usize,
) -> Vec<String> {
    let mut cands: BTreeSet<String> = BTreeSet::new();
    for l in labels {
        match &pattern.path {
            PathPat::Any => {
                if let Some(r) = l.runtime() {
                    cands.insert(match &pattern.kind {
                        Some(_) => format!("@{r}:{}", l.kind().unwrap_or("")),
                        None => format!("@{r}"),
                    });
                }
            }
            PathPat::Under(_) => {
                let segs: Vec<&str> = l.segments().collect();
                for i in 1..=segs.len() {
                    cands.insert(format!("//{}/...", segs[..i].join("/")));
                }
            }
            PathPat::Exact(_) => {
                cands.insert(format!("//{}", l.path()));
                let t = l.target();
                if t.runtime().is_some() {
                    cands.insert(t.to_string());
                }
                if pattern.kind.is_some() {
                    cands.insert(l.to_string());
                }
            }
        }
    }
    let mut scored: Vec<(usize, String)> = cands
        .into_iter()
        .map(|c| (strsim::levenshtein(&pattern.text, &c), c))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Label {
        Label::parse(s).unwrap()
    }
    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }

    #[test]
    fn matching() {
        let bake = l("//images/dask@aws-east2:bake");
        let emit = l("//images/dask@aws-east2:emit");
        let other_rt = l("//images/dask@docker-local:bake");
        let os = l("//os/deb12@aws-east2:resolve");
        let nested = l("//images/ml/torch@aws-east2:bake");
        let prefix_trap = l("//imagesx/dask@aws-east2:bake");

        assert!(p("//...").matches(&bake) && p("//...").matches(&os));
        assert!(p("//images/...").matches(&bake));
        assert!(p("//images/...").matches(&nested));
        assert!(!p("//images/...").matches(&os));
        assert!(!p("//images/...").matches(&prefix_trap));
        assert!(p("//images/dask").matches(&bake) && p("//images/dask").matches(&other_rt));
        assert!(!p("//images/dask").matches(&nested));
        assert!(p("//images/dask@aws-east2").matches(&emit));
        assert!(!p("//images/dask@aws-east2").matches(&other_rt));
        assert!(p("//images/dask@aws-east2:bake").matches(&bake));
        assert!(!p("//images/dask@aws-east2:bake").matches(&emit));
        assert!(p("@aws-east2").matches(&os) && p("@aws-east2").matches(&bake));
        assert!(!p("@aws-east2").matches(&other_rt));
        assert!(p("@aws-east2:resolve").matches(&os));
        assert!(!p("@aws-east2:resolve").matches(&bake));
        assert!(p("//images/...@docker-local").matches(&other_rt));
        assert!(!p("//images/...@docker-local").matches(&bake));
        assert!(p("//images/ml/...").matches(&nested));
        assert!(
            p("//images/dask:bake").matches(&bake) && p("//images/dask:bake").matches(&other_rt)
        );
        assert!(!p("//images/dask:bake").matches(&emit));
        assert!(p("//...:resolve").matches(&os) && !p("//...:resolve").matches(&bake));
    }

    #[test]
    fn rejects_bad_patterns() {
        for s in ["images/...", "//.../x", "@", "//a@b@c", "//images/...:"] {
            assert!(Pattern::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn closest_names_the_near_labels() {
        let labels = [
            l("//images/dask@aws-east2:bake"),
            l("//images/dusk@aws-east2:bake"),
            l("//images/torch@aws-east2:bake"),
            l("//os/deb12@docker-local:resolve"),
        ];
        let c = closest(&p("//images/dask@aws-east3"), &labels, 2);
        assert_eq!(c, ["//images/dask@aws-east2", "//images/dusk@aws-east2"]);
        let c = closest(&p("@docker-locl"), &labels, 1);
        assert_eq!(c, ["@docker-local"]);
        let c = closest(&p("//imagez/..."), &labels, 1);
        assert_eq!(c, ["//images/..."]);
    }
}
