//! "ops words no report": the English people read of a report or a notice
//! is the binary's (`src/render/<operation>.rs`); csis-ops implements
//! `Display` only for its errors (a type it derives `thiserror::Error` for
//! or implements `std::error::Error` for), so what an operation returns
//! carries data, not sentences.

use std::collections::{BTreeMap, BTreeSet};

use super::rust;

/// The types the files make errors: `impl ... Error for T`, or a
/// `#[derive(...)]` naming `Error` on `struct T` / `enum T`.
fn errors(files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for text in files.values() {
        let toks = rust::tokens(&rust::code(text));
        let mut derived = false;
        for (i, t) in toks.iter().enumerate() {
            let next = |k: usize| toks.get(i + k).map(|t| t.text.as_str());
            match t.text.as_str() {
                "Error" if next(1) == Some("for") => {
                    out.extend(next(2).map(String::from));
                }
                "derive" if next(1) == Some("(") => {
                    derived = (toks[i..].iter())
                        .take_while(|t| t.text != ")")
                        .any(|t| t.text == "Error");
                }
                // (the guard takes the mark: the next item is no longer marked)
                "struct" | "enum" if std::mem::take(&mut derived) => {
                    out.extend(next(1).map(String::from));
                }
                _ => {}
            }
        }
    }
    out
}

/// Each `impl Display for T` outside test code where `T` is no error of
/// the crate, as `file:line: T`.
pub fn worded(files: &BTreeMap<String, String>) -> Vec<String> {
    let errors = errors(files);
    let mut out = Vec::new();
    for (rel, text) in files {
        let code = rust::code(text);
        let scan = rust::scan(&code);
        let toks = rust::tokens(&code);
        for w in toks.windows(3) {
            if w[0].text != "Display" || w[1].text != "for" || errors.contains(&w[2].text) {
                continue;
            }
            // (the impl's first function tells whether it is test code)
            let test = (scan.funcs.iter())
                .find(|f| f.line >= w[0].line)
                .is_some_and(|f| f.test);
            if !test {
                out.push(format!("{rel}:{}: {}", w[0].line, w[2].text));
            }
        }
    }
    out
}

#[test]
fn ops_implements_display_only_for_its_errors() {
    let folders = super::source_folders(&super::cargo_metadata());
    let (_, dir) = (folders.iter())
        .find(|(name, _)| name == "csis-ops")
        .expect("csis-ops");
    let text = super::files_under(dir);
    let tests = super::loops::Crate::new(&text).test_files;
    let product: BTreeMap<String, String> = (text.iter())
        .filter(|(f, _)| !tests.contains(f.as_str()))
        .map(|(f, t)| (format!("ops/src/{f}"), t.clone()))
        .collect();
    assert!(
        product.len() > 30,
        "found the files of ops: {}",
        product.len()
    );
    let v = worded(&product);
    assert!(
        v.is_empty(),
        "a report or notice of ops words itself (its English goes in the binary's src/render/):\n{}",
        v.join("\n")
    );
}

#[cfg(test)]
mod checks {
    use super::worded;

    #[test]
    fn the_words_rule_fails_on_a_report_that_words_itself() {
        let files = [
            (
                "report.rs",
                "//! x\n\
                 pub struct Report { pub n: u32 }\n\
                 impl std::fmt::Display for Report {\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, \"{}\", self.n) }\n}\n\
                 #[derive(Debug, thiserror::Error)]\n#[error(\"bad\")]\npub enum Bad { A }\n\
                 #[derive(Debug)]\npub struct Failed;\n\
                 impl fmt::Display for Failed {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(\"failed\") }\n}\n\
                 impl std::error::Error for Failed {}\n\
                 #[cfg(test)]\nmod tests {\n    struct T;\n    impl std::fmt::Display for T {\n        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { Ok(()) }\n    }\n}\n",
            ),
            (
                "notice.rs",
                "//! y\n#[derive(Debug, Clone, Serialize)]\npub enum Notice { A }\n\
                 impl Display for Notice {\n    fn fmt(&self, f: &mut Formatter<'_>) -> Result { Ok(()) }\n}\n",
            ),
        ]
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .into_iter()
        .collect();
        assert_eq!(
            worded(&files),
            ["notice.rs:4: Notice", "report.rs:3: Report"]
        );
    }
}
