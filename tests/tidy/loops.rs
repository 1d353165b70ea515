//! "no import loop between files": within a crate, the files that name each
//! other through `crate::`, `super::` or `self::` paths, read as a graph of
//! files; a strongly connected component of more than one file is a loop. A
//! module and the modules inside it (`a/mod.rs` and `a/b.rs`, a file and its
//! `tests.rs`) may name each other: that is one idea split in files.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::DiGraph;

/// A source file's module path: `src/a/b.rs` and `src/a/b/mod.rs` are
/// `["a", "b"]`, `src/lib.rs` is `[]`.
pub fn module_path(rel: &str) -> Vec<String> {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The `ident::ident::...` path that starts at `s`, as segments.
fn path_at(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let n = rest.find(|c| !is_ident_char(c)).unwrap_or(rest.len());
        if n == 0 {
            break;
        }
        out.push(rest[..n].to_string());
        rest = &rest[n..];
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(is_ident_char) => rest = r,
            _ => break,
        }
    }
    out
}

/// The top-level entries of a `{a, b::c, d::{e, f}}` group at `s` (after the
/// `{`), each as its leading path.
fn group_at(s: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(path_at(s[start..i].trim_start()));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(path_at(s[start..i].trim_start()));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The module paths a file names, resolved against its own module path
/// `me`.
pub fn named_modules(me: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = match code.find(" //") {
            Some(i) => &code[..i],
            None => code,
        };
        let mut i = 0;
        while i < code.len() {
            let rest = &code[i..];
            let before_ok = i == 0 || !code[..i].ends_with(|c: char| is_ident_char(c) || c == ':');
            let (base, after) = if let Some(r) = rest.strip_prefix("crate::") {
                (Some(Vec::new()), r)
            } else if rest.starts_with("super::") {
                let mut base: Vec<String> = me.to_vec();
                let mut r = rest;
                while let Some(x) = r.strip_prefix("super::") {
                    base.pop();
                    r = x;
                }
                (Some(base), r)
            } else if let Some(r) = rest.strip_prefix("self::") {
                (Some(me.to_vec()), r)
            } else {
                (None, rest)
            };
            match base {
                Some(base) if before_ok => {
                    let tails = if let Some(g) = after.strip_prefix('{') {
                        group_at(g)
                    } else {
                        vec![path_at(after)]
                    };
                    for t in tails {
                        let mut p = base.clone();
                        p.extend(t);
                        out.push(p);
                    }
                    i += rest.len() - after.len();
                }
                _ => i += rest.chars().next().map_or(1, char::len_utf8),
            }
        }
    }
    out
}

/// The loops among `files` (relative path under `src/` -> text): each as the
/// sorted files of one strongly connected component.
pub fn loops(files: &BTreeMap<String, String>) -> Vec<Vec<String>> {
    let modules: BTreeMap<Vec<String>, &str> = files
        .keys()
        .map(|rel| (module_path(rel), rel.as_str()))
        .collect();
    let mut g = DiGraph::<&str, ()>::new();
    let ix: BTreeMap<&str, _> = files
        .keys()
        .map(|f| (f.as_str(), g.add_node(f.as_str())))
        .collect();
    let mut edges = BTreeSet::new();
    for (rel, text) in files {
        let me = module_path(rel);
        for mut p in named_modules(&me, text) {
            // the longest prefix that is a file of the crate
            while !p.is_empty() && !modules.contains_key(&p) {
                p.pop();
            }
            let Some(target) = modules.get(&p) else {
                continue;
            };
            let related = p.starts_with(&me) || me.starts_with(&p);
            if !related {
                edges.insert((rel.as_str(), *target));
            }
        }
    }
    for (a, b) in &edges {
        g.add_edge(ix[a], ix[b], ());
    }
    let mut out: Vec<Vec<String>> = petgraph::algo::tarjan_scc(&g)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut v: Vec<String> = c.iter().map(|n| g[*n].to_string()).collect();
            v.sort();
            v
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod checks {
    use super::*;

    fn files(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn paths_resolve_against_the_file() {
        assert_eq!(module_path("lib.rs"), Vec::<String>::new());
        assert_eq!(module_path("a/mod.rs"), ["a"]);
        assert_eq!(module_path("a/b.rs"), ["a", "b"]);
        let me = module_path("a/b.rs");
        assert_eq!(
            named_modules(
                &me,
                "use super::c::X;\nuse crate::{d::E, f};\n// crate::g::H\n"
            ),
            [vec!["a", "c", "X"], vec!["d", "E"], vec!["f"]]
        );
        assert_eq!(
            named_modules(&module_path("a/mod.rs"), "use super::z; use self::b::Y;"),
            [vec!["z"], vec!["a", "b", "Y"]]
        );
    }

    #[test]
    fn loop_rule_fails_on_two_files_that_name_each_other() {
        let looped = files(&[
            ("lib.rs", "mod diag; mod yaml;"),
            ("diag.rs", "use crate::yaml::Loc;"),
            ("yaml.rs", "use crate::diag::Diagnostic;"),
        ]);
        assert_eq!(loops(&looped), [vec!["diag.rs", "yaml.rs"]]);
        let chain = files(&[
            ("lib.rs", "pub use a::X;"),
            ("a/mod.rs", "mod b; use self::b::Y; use crate::c::Z;"),
            ("a/b.rs", "use super::X;"),
            ("c.rs", "pub struct Z;"),
        ]);
        assert!(loops(&chain).is_empty(), "{:?}", loops(&chain));
        let three = files(&[
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "fn f() { crate::c::g() }"),
            ("c.rs", "use super::a::A;"),
        ]);
        assert_eq!(loops(&three), [vec!["a.rs", "b.rs", "c.rs"]]);
    }
}
