//! A light reading of Rust source for the tidy rules, enough to hold them
//! and no more: the text with comments and literals blanked ([`code`]),
//! then one pass over its tokens ([`scan`]) for what the rules ask of a
//! file: each `use` read to its `;` (groups, `self`, `as`, globs, over as
//! many lines as rustfmt puts it on), every `crate::`/`super::`/`self::`
//! path in code, the items a module defines, the modules it declares
//! (`#[cfg(test)]` ones marked) and its functions with their length.

use std::collections::BTreeSet;

/// `text` with comments and the contents of string and char literals
/// blanked (spaces; newlines kept, so lines still count), quotes kept.
pub fn code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && !prev_ident && {
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            c.get(j) == Some(&'"')
        } {
            // a raw string: r"..", r#".."#, br".."
            let start = i + if c[i] == 'b' { 2 } else { 1 };
            let mut j = start;
            while c[j] == '#' {
                j += 1;
            }
            let hashes = j - start;
            for ch in &c[i..=j] {
                out.push(*ch);
            }
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|h| c.get(i + 1 + h) == Some(&'#')) {
                    out.push('"');
                    for _ in 0..hashes {
                        out.push('#');
                    }
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            if i < c.len() {
                out.push('"');
                i += 1;
            }
        } else if c[i] == '\'' {
            // a char literal ('x', '\n', '\u{..}'), else a lifetime
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len().min(i + 12)).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.push('\'');
                    for ch in &c[i + 1..e] {
                        blank(&mut out, *ch);
                    }
                    out.push('\'');
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// A token of blanked code: an identifier (or keyword, or number) or one
/// punctuation character (`::` is one token), with its line (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Tok {
    pub text: String,
    pub line: usize,
}

pub fn tokens(code: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut line = 1;
    let c: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok {
                text: c[s..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// One name a `use` brings in: its path as written (`crate`, `super`,
/// `self`, a child module or an external crate first), the name it takes
/// (`None`: a glob, `*`).
#[derive(Debug, Clone, PartialEq)]
pub struct UseLeaf {
    pub path: Vec<String>,
    pub name: Option<String>,
    pub line: usize,
}

/// A `use` item: the inline module it sits in (inside the file's own
/// module, `[]` at the file's top), whether it is `pub`, its leaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub inline: Vec<String>,
    /// In a `#[cfg(test)]` module.
    pub test: bool,
    pub public: bool,
    pub leaves: Vec<UseLeaf>,
}

/// A path in code that starts with `crate`, `super` or `self`, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct CodePath {
    pub inline: Vec<String>,
    pub test: bool,
    pub path: Vec<String>,
    pub line: usize,
}

/// A function with a body: its name, the line of `fn`, how many lines it
/// spans (to its closing brace), and whether it sits in test code (a
/// `#[cfg(test)]` module or item, a `#[test]` function).
#[derive(Debug, Clone, PartialEq)]
pub struct Func {
    pub name: String,
    pub line: usize,
    pub lines: usize,
    pub test: bool,
}

/// What the rules read of one file.
#[derive(Debug, Default)]
pub struct Scan {
    pub uses: Vec<Use>,
    pub paths: Vec<CodePath>,
    /// Item names the file defines at any depth (fn, struct, enum, const,
    /// static, type, trait, union, macro_rules).
    pub defines: BTreeSet<String>,
    /// Child modules the file's top declares as files (`mod x;`): (name,
    /// under `#[cfg(test)]`).
    pub child_mods: Vec<(String, bool)>,
    pub funcs: Vec<Func>,
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Parse a use tree at `toks[*i]` with `prefix` already read; leaves into
/// `out`. Stops before `,`, `}` or `;`.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut path = prefix;
    loop {
        let Some(t) = toks.get(*i) else { return };
        match t.text.as_str() {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| t.text.as_str()) {
                        None => return,
                        Some("}") => {
                            *i += 1;
                            return;
                        }
                        Some(",") => *i += 1,
                        Some(_) => use_tree(toks, i, path.clone(), out),
                    }
                }
            }
            "*" => {
                out.push(UseLeaf {
                    path: path.clone(),
                    name: None,
                    line: t.line,
                });
                *i += 1;
                return;
            }
            "as" => {
                *i += 1;
                let alias = toks.get(*i).map(|t| t.text.clone()).unwrap_or_default();
                *i += 1;
                if let Some(l) = out.last_mut().filter(|l| l.path == path) {
                    l.name = Some(alias);
                }
                return;
            }
            s if is_ident(s) => {
                path.push(s.to_string());
                let line = t.line;
                *i += 1;
                let next = toks.get(*i).map(|t| t.text.as_str());
                if next != Some("::") {
                    // a leaf: `self` in a group names its prefix
                    let (p, name) = if s == "self" && path.len() > 1 {
                        path.pop();
                        (path.clone(), path.last().cloned())
                    } else {
                        (path.clone(), Some(s.to_string()))
                    };
                    out.push(UseLeaf {
                        path: p,
                        name,
                        line,
                    });
                }
            }
            _ => return,
        }
    }
}

/// Read a file's blanked code.
pub fn scan(code: &str) -> Scan {
    let toks = tokens(code);
    let mut s = Scan::default();
    // inline modules open: (name, brace depth inside it, test)
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    // functions open: (index in s.funcs, brace depth of its body)
    let mut open_fns: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_test = false;
    let mut i = 0;
    let in_test = |inline: &[(String, usize, bool)]| inline.iter().any(|m| m.2);
    let here = |inline: &[(String, usize, bool)]| -> Vec<String> {
        inline.iter().map(|m| m.0.clone()).collect()
    };
    while i < toks.len() {
        let t = toks[i].text.as_str();
        match t {
            "#" if toks.get(i + 1).is_some_and(|t| t.text == "[") => {
                // an attribute: `#[cfg(test)]` or `#[test]` marks the next item
                let mut j = i + 2;
                let mut d = 1;
                let mut words = Vec::new();
                while j < toks.len() && d > 0 {
                    match toks[j].text.as_str() {
                        "[" => d += 1,
                        "]" => d -= 1,
                        w => words.push(w.to_string()),
                    }
                    j += 1;
                }
                let w: Vec<&str> = words.iter().map(String::as_str).collect();
                if w == ["cfg", "(", "test", ")"] || w == ["test"] || w == ["tokio", "::", "test"] {
                    pending_test = true;
                }
                i = j;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                if let Some(&(f, d)) = open_fns.last() {
                    if d == depth {
                        s.funcs[f].lines = toks[i].line - s.funcs[f].line + 1;
                        open_fns.pop();
                    }
                }
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            ";" => pending_test = false,
            "mod" => {
                if let (Some(name), Some(next)) = (toks.get(i + 1), toks.get(i + 2)) {
                    if next.text == "{" {
                        inline.push((name.text.clone(), depth + 1, pending_test));
                        pending_test = false;
                        depth += 1;
                        i += 3;
                        continue;
                    } else if next.text == ";" && inline.is_empty() {
                        s.child_mods.push((name.text.clone(), pending_test));
                    }
                }
            }
            "use" => {
                let public = i > 0
                    && (toks[i - 1].text == "pub"
                        || (toks[i - 1].text == ")"
                            && toks[..i].iter().rev().take(6).any(|t| t.text == "pub")));
                let mut leaves = Vec::new();
                i += 1;
                while i < toks.len() && toks[i].text != ";" {
                    let before = i;
                    use_tree(&toks, &mut i, Vec::new(), &mut leaves);
                    if i == before {
                        i += 1;
                    }
                }
                s.uses.push(Use {
                    inline: here(&inline),
                    test: in_test(&inline),
                    public,
                    leaves,
                });
                pending_test = false;
                continue;
            }
            "crate" | "super" | "self"
                if toks.get(i + 1).is_some_and(|t| t.text == "::")
                    && !(i > 0 && matches!(toks[i - 1].text.as_str(), "$" | "::")) =>
            {
                let line = toks[i].line;
                let mut path = vec![t.to_string()];
                let mut j = i + 1;
                while toks.get(j).is_some_and(|t| t.text == "::")
                    && toks.get(j + 1).is_some_and(|t| is_ident(&t.text))
                {
                    path.push(toks[j + 1].text.clone());
                    j += 2;
                }
                s.paths.push(CodePath {
                    inline: here(&inline),
                    test: in_test(&inline),
                    path,
                    line,
                });
                i = j;
                continue;
            }
            "fn" if toks.get(i + 1).is_some_and(|t| is_ident(&t.text)) => {
                let name = toks[i + 1].text.clone();
                s.defines.insert(name.clone());
                // a body, or `;` (a declaration)
                let mut j = i + 2;
                let mut paren = 0i32;
                while j < toks.len() {
                    match toks[j].text.as_str() {
                        "(" | "[" => paren += 1,
                        ")" | "]" => paren -= 1,
                        "{" | ";" if paren == 0 => break,
                        _ => {}
                    }
                    j += 1;
                }
                if toks.get(j).is_some_and(|t| t.text == "{") {
                    s.funcs.push(Func {
                        name,
                        line: toks[i].line,
                        lines: 0,
                        test: pending_test || in_test(&inline),
                    });
                    open_fns.push((s.funcs.len() - 1, depth + 1));
                }
                pending_test = false;
                i += 2;
                continue;
            }
            "struct" | "enum" | "const" | "static" | "type" | "trait" | "union" | "impl" => {
                match toks.get(i + 1) {
                    Some(n) if t != "impl" && is_ident(&n.text) => {
                        s.defines.insert(n.text.clone());
                    }
                    _ => {}
                }
                pending_test = false;
            }
            "macro_rules" if toks.get(i + 1).is_some_and(|t| t.text == "!") => {
                if let Some(n) = toks.get(i + 2) {
                    s.defines.insert(n.text.clone());
                }
            }
            _ => {}
        }
        i += 1;
    }
    s
}

#[cfg(test)]
mod checks {
    use super::*;

    #[test]
    fn comments_and_literals_are_blanked() {
        let c = code("let a = \"crate::x\"; // super::y\n/* self::z */ let b = r#\"crate::q\"#; 'a'; &'b str");
        assert!(!c.contains("crate::x") && !c.contains("super::y") && !c.contains("self::z"));
        assert!(!c.contains("crate::q"), "{c}");
        assert!(c.contains("&'b str") && c.contains('\n'), "{c}");
    }

    #[test]
    fn a_use_is_read_to_its_semicolon() {
        let s = scan(&code(
            "pub use crate::{\n    b::B,\n    c::{self, D as E},\n};\nuse super::*;\npub(crate) use x::Y;\nuse std::io;",
        ));
        let leaves: Vec<(Vec<&str>, Option<&str>)> = s
            .uses
            .iter()
            .flat_map(|u| &u.leaves)
            .map(|l| {
                (
                    l.path.iter().map(String::as_str).collect(),
                    l.name.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            leaves,
            [
                (vec!["crate", "b", "B"], Some("B")),
                (vec!["crate", "c"], Some("c")),
                (vec!["crate", "c", "D"], Some("E")),
                (vec!["super"], None),
                (vec!["x", "Y"], Some("Y")),
                (vec!["std", "io"], Some("io")),
            ]
        );
        assert_eq!(
            s.uses.iter().map(|u| u.public).collect::<Vec<_>>(),
            [true, false, true, false]
        );
    }

    #[test]
    fn functions_are_measured_and_test_code_marked() {
        let s = scan(&code(
            "fn a() {\n    let x = || { 1 };\n}\ntrait T { fn d(&self); }\n#[cfg(test)]\nmod tests {\n    fn b() {}\n}\nfn c<F: Fn() -> u8>(f: F) -> [u8; 2]\nwhere F: Copy\n{\n    [f(), f()]\n}\n",
        ));
        let f: Vec<(&str, usize, usize, bool)> = s
            .funcs
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines, f.test))
            .collect();
        assert_eq!(
            f,
            [("a", 1, 3, false), ("b", 7, 1, true), ("c", 9, 5, false)]
        );
        assert!(s.defines.contains("T") && s.defines.contains("d"));
        assert!(s.paths.is_empty());
    }
}
