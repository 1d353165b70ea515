//! "no import loop": within a crate, what names what, read from each `use`
//! (to its `;`) and each `crate::`/`super::`/`self::` path in code
//! ([`super::rust`]), every name followed through the re-exports and
//! imports of the module it is named in (`lib.rs`'s `pub use`, a module's
//! `use`, a glob) to the file that defines it. Two graphs:
//!
//! - files: a strongly connected component of more than one file is a loop;
//!   a module and the modules inside it (`a.rs`, `a/mod.rs` and `a/b.rs`, a
//!   file and its `tests.rs`) may name each other: that is one idea split
//!   in files ([`loops`]);
//! - modules: at every level, the sibling modules under one parent, each
//!   with every file inside it; two siblings that name each other, through
//!   any of their files, are a loop ([`module_loops`]).

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::DiGraph;

use super::rust::{self, Scan};

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

/// One crate's files, read.
pub struct Crate<'a> {
    /// module path -> relative file
    modules: BTreeMap<Vec<String>, &'a str>,
    scans: BTreeMap<&'a str, Scan>,
    /// (module path, name) -> the absolute path it stands for
    aliases: BTreeMap<(Vec<String>, String), Vec<String>>,
    /// module path -> the absolute paths it globs (`use x::*`)
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    /// The files that are test code (declared under `#[cfg(test)]`, and
    /// every file inside them).
    pub test_files: BTreeSet<&'a str>,
}

/// One file naming another: (from, to, line in `from`, the path as named).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub line: usize,
    pub named: String,
}

impl<'a> Crate<'a> {
    pub fn new(files: &'a BTreeMap<String, String>) -> Self {
        let modules: BTreeMap<Vec<String>, &str> = files
            .keys()
            .map(|rel| (module_path(rel), rel.as_str()))
            .collect();
        let scans: BTreeMap<&str, Scan> = files
            .iter()
            .map(|(rel, text)| (rel.as_str(), rust::scan(&rust::code(text))))
            .collect();
        let mut test_roots = Vec::new();
        for (rel, scan) in &scans {
            for (m, test) in &scan.child_mods {
                if *test {
                    let mut p = module_path(rel);
                    p.push(m.clone());
                    test_roots.push(p);
                }
            }
        }
        let test_files = modules
            .iter()
            .filter(|(m, _)| test_roots.iter().any(|r| m.starts_with(r)))
            .map(|(_, f)| *f)
            .collect();
        let mut c = Crate {
            modules,
            scans,
            aliases: BTreeMap::new(),
            globs: BTreeMap::new(),
            test_files,
        };
        let mut aliases = BTreeMap::new();
        let mut globs: BTreeMap<Vec<String>, Vec<Vec<String>>> = BTreeMap::new();
        for (rel, scan) in &c.scans {
            let me = module_path(rel);
            for u in scan.uses.iter().filter(|u| u.inline.is_empty()) {
                for l in &u.leaves {
                    let Some(abs) = c.absolute(&me, &l.path, true) else {
                        continue;
                    };
                    match &l.name {
                        None => globs.entry(me.clone()).or_default().push(abs),
                        Some(n) if n != "_" => {
                            let mut key = me.clone();
                            key.push(n.clone());
                            if key != abs && !c.modules.contains_key(&key) {
                                aliases.insert((me.clone(), n.clone()), abs);
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        c.aliases = aliases;
        c.globs = globs;
        c
    }

    /// A path as written in module `me`, made absolute (from the crate's
    /// root); `None` for a path outside the crate. In a `use`, a first
    /// segment that is a child module of `me` is relative to `me`.
    fn absolute(&self, me: &[String], path: &[String], in_use: bool) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => me.to_vec(),
            "super" => {
                let mut b = me.to_vec();
                b.pop();
                let mut rest = rest;
                while let Some((_, r)) = rest.split_first().filter(|(s, _)| *s == "super") {
                    b.pop();
                    rest = r;
                }
                b.extend(rest.iter().cloned());
                return Some(b);
            }
            _ if in_use => {
                let mut child = me.to_vec();
                child.push(first.clone());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                child
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file an absolute path names: the longest prefix that is a file's
    /// module, after following the names that module imports or re-exports
    /// (and its globs, to a module that defines the name).
    pub fn file_of(&self, path: &[String]) -> Option<&'a str> {
        self.file_of_depth(path, 0)
    }

    fn file_of_depth(&self, path: &[String], depth: usize) -> Option<&'a str> {
        let mut k = path.len();
        while !self.modules.contains_key(&path[..k]) {
            if k == 0 {
                return None;
            }
            k -= 1;
        }
        let module = &path[..k];
        let file = self.modules[module];
        if k == path.len() || depth > 16 {
            return Some(file);
        }
        let name = &path[k];
        let follow = |target: &[String]| {
            let mut q = target.to_vec();
            q.extend(path[k + 1..].iter().cloned());
            self.file_of_depth(&q, depth + 1)
        };
        if let Some(t) = self.aliases.get(&(module.to_vec(), name.clone())) {
            return follow(t).or(Some(file));
        }
        if !self.scans[file].defines.contains(name) {
            for g in self.globs.get(module).into_iter().flatten() {
                let Some(gfile) = self.modules.get(g) else {
                    continue;
                };
                if self.scans[gfile].defines.contains(name)
                    || self.aliases.contains_key(&(g.clone(), name.clone()))
                {
                    let mut t = g.clone();
                    t.push(name.clone());
                    return follow(&t).or(Some(file));
                }
            }
        }
        Some(file)
    }

    /// Every file naming another file of the crate (itself aside), from
    /// product code (test code, which may name its fixtures, aside).
    pub fn edges(&self) -> BTreeSet<Edge<'a>> {
        let mut out = BTreeSet::new();
        for (rel, scan) in &self.scans {
            if self.test_files.contains(rel) {
                continue;
            }
            let file_me = module_path(rel);
            let mut named: Vec<(Vec<String>, Vec<String>, usize, bool)> = Vec::new();
            for u in scan.uses.iter().filter(|u| !u.test) {
                for l in &u.leaves {
                    named.push((u.inline.clone(), l.path.clone(), l.line, true));
                }
            }
            for p in scan.paths.iter().filter(|p| !p.test) {
                named.push((p.inline.clone(), p.path.clone(), p.line, false));
            }
            for (inline, path, line, in_use) in named {
                let mut me = file_me.clone();
                me.extend(inline);
                let Some(abs) = self.absolute(&me, &path, in_use) else {
                    continue;
                };
                let Some(to) = self.file_of(&abs) else {
                    continue;
                };
                if to != *rel {
                    out.insert(Edge {
                        from: rel,
                        to,
                        line,
                        named: path.join("::"),
                    });
                }
            }
        }
        out
    }
}

/// The strongly connected components of more than one node, each sorted.
fn components(nodes: &BTreeSet<String>, edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut g = DiGraph::<&str, ()>::new();
    let ix: BTreeMap<&str, _> = nodes
        .iter()
        .map(|n| (n.as_str(), g.add_node(n.as_str())))
        .collect();
    for (a, b) in edges {
        g.add_edge(ix[a.as_str()], ix[b.as_str()], ());
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

/// The file loops among `files` (relative path under the crate's source
/// folder -> text): each as the sorted files of one component.
pub fn loops(files: &BTreeMap<String, String>) -> Vec<Vec<String>> {
    let c = Crate::new(files);
    let nodes: BTreeSet<String> = files.keys().cloned().collect();
    let edges: BTreeSet<(String, String)> = c
        .edges()
        .into_iter()
        .filter(|e| {
            let (a, b) = (module_path(e.from), module_path(e.to));
            !(a.starts_with(&b) || b.starts_with(&a))
        })
        .map(|e| (e.from.to_string(), e.to.to_string()))
        .collect();
    components(&nodes, &edges)
}

/// The module loops among `files`: per parent module, sibling modules
/// (with everything inside them) that name each other, each as its
/// modules' paths (`a, b`; `x::a, x::b` under `x`) and `in crate, the
/// modules a, b name each other (a/x.rs:12 names crate::b::Y; b.rs:3 names
/// crate::a::Z)`, one example per edge of the loop.
pub fn module_loops(files: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let c = Crate::new(files);
    let edges = c.edges();
    let mut parents: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for rel in files.keys() {
        let m = module_path(rel);
        for k in 0..m.len() {
            parents
                .entry(m[..k].to_vec())
                .or_default()
                .insert(m[k].clone());
        }
    }
    let mut out = Vec::new();
    for (parent, children) in &parents {
        let child_of = |rel: &str| -> Option<String> {
            let m = module_path(rel);
            (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone())
        };
        let mut example: BTreeMap<(String, String), String> = BTreeMap::new();
        for e in &edges {
            if let (Some(a), Some(b)) = (child_of(e.from), child_of(e.to)) {
                if a != b {
                    example
                        .entry((a, b))
                        .or_insert_with(|| format!("{}:{} names {}", e.from, e.line, e.named));
                }
            }
        }
        let pairs: BTreeSet<(String, String)> = example.keys().cloned().collect();
        for comp in components(children, &pairs) {
            let evidence: Vec<&str> = example
                .iter()
                .filter(|((a, b), _)| comp.contains(a) && comp.contains(b))
                .map(|(_, ex)| ex.as_str())
                .collect();
            let at = if parent.is_empty() {
                "crate".to_string()
            } else {
                format!("crate::{}", parent.join("::"))
            };
            let list: Vec<String> = comp
                .iter()
                .map(|m| {
                    let mut p = parent.clone();
                    p.push(m.clone());
                    p.join("::")
                })
                .collect();
            out.push((
                list.join(", "),
                format!(
                    "in {at}, the modules {} name each other ({})",
                    comp.join(", "),
                    evidence.join("; ")
                ),
            ));
        }
    }
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
        let f = files(&[
            ("lib.rs", "mod a; mod d; mod f;"),
            ("a/mod.rs", "mod b; mod c; mod z;"),
            (
                "a/b.rs",
                "use super::c::X;\nuse crate::{d::E, f};\n// crate::g::H\n",
            ),
            ("a/c.rs", ""),
            ("a/z.rs", ""),
            ("d.rs", ""),
            ("f.rs", ""),
        ]);
        let c = Crate::new(&f);
        let e: Vec<(&str, &str)> = c.edges().iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(
            e,
            [("a/b.rs", "a/c.rs"), ("a/b.rs", "d.rs"), ("a/b.rs", "f.rs")]
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

    #[test]
    fn grouped_and_multi_line_uses_count() {
        let grouped = files(&[
            ("a.rs", "use super::{b, c};\nfn f() { b::g() }"),
            ("b.rs", "use crate::{\n    a::A,\n};\n"),
            ("c.rs", ""),
        ]);
        assert_eq!(loops(&grouped), [vec!["a.rs", "b.rs"]]);
    }

    #[test]
    fn a_re_export_through_lib_rs_does_not_hide_a_loop() {
        let f = files(&[
            (
                "lib.rs",
                "mod a; mod b;\npub use a::{A, Other as O};\npub use b::*;",
            ),
            (
                "a.rs",
                "pub struct A; pub struct Other; fn f() { crate::B::new() }",
            ),
            ("b.rs", "pub struct B; use crate::O;"),
        ]);
        assert_eq!(loops(&f), [vec!["a.rs", "b.rs"]]);
        // the same names, no loop: b names a, a names nothing of b
        let fine = files(&[
            (
                "lib.rs",
                "mod a; mod b;\npub use a::{A, Other as O};\npub use b::*;",
            ),
            ("a.rs", "pub struct A; pub struct Other;"),
            ("b.rs", "pub struct B; use crate::O;"),
        ]);
        assert!(loops(&fine).is_empty());
        assert!(module_loops(&fine).is_empty());
    }

    #[test]
    fn module_rule_fails_on_sibling_modules_that_name_each_other() {
        // packer.rs names the runtime module, runtime/bake.rs names packer:
        // no two files name each other, the two modules do
        let f = files(&[
            ("lib.rs", "pub mod packer; pub mod runtime;"),
            ("packer.rs", "use crate::runtime::{Guard, Runtime};"),
            (
                "runtime.rs",
                "mod bake; mod guard;\npub struct Runtime;\npub use guard::Guard;",
            ),
            ("runtime/bake.rs", "fn b() {\n    crate::packer::bake()\n}"),
            ("runtime/guard.rs", "pub struct Guard;"),
        ]);
        assert!(loops(&f).is_empty(), "{:?}", loops(&f));
        assert_eq!(
            module_loops(&f),
            [(
                "packer, runtime".to_string(),
                "in crate, the modules packer, runtime name each other (packer.rs:1 names crate::runtime::Runtime; runtime/bake.rs:2 names crate::packer::bake)".to_string()
            )]
        );
        let nested = files(&[
            ("lib.rs", "mod x;"),
            ("x.rs", "mod a; mod b;"),
            ("x/a.rs", "use super::b::B;"),
            ("x/b/mod.rs", "mod c;"),
            ("x/b/c.rs", "fn f() { crate::x::a::g() }"),
        ]);
        assert_eq!(module_loops(&nested)[0].0, "x::a, x::b");
        // the guard below both: packer still names the runtime, which no
        // longer names packer back
        let fixed = files(&[
            ("lib.rs", "pub mod guard; pub mod packer; pub mod runtime;"),
            ("guard.rs", "pub struct Guard;"),
            ("packer.rs", "use crate::guard::Guard;"),
            ("runtime.rs", "mod bake;\npub struct Runtime;"),
            (
                "runtime/bake.rs",
                "use crate::guard::Guard; fn b() { crate::packer::bake() }",
            ),
        ]);
        assert!(
            module_loops(&fixed).is_empty(),
            "{:?}",
            module_loops(&fixed)
        );
    }
}
