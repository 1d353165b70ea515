//! "a file a person can read, a function a person can hold": every Rust
//! file of the workspace is at most [`FILE_LINES`] lines, every product
//! function (in a library or binary source folder, not test code) at most
//! [`FN_LINES`], but for the entries of `tests/cli/tidy/allow.txt`, each with
//! its reason. An entry is `PATH -- reason` (a file), `PATH fn NAME --
//! reason` (every function of that name in that file), `PATH types --
//! reason` (a file that may name a runtime type, [`super::runtime_types`])
//! or `FOLDER loop A, B -- reason` (an import loop of the crate whose
//! source folder that is, its files or modules as the loop rules name
//! them, [`super::loops`]); an
//! entry without a reason, or one that no longer names anything it
//! allows, fails its rule, so the list says what is still wrong and why.

use std::collections::BTreeSet;

pub const FILE_LINES: usize = 800;
pub const FN_LINES: usize = 150;

/// What is over a bound: `(PATH, None)` a file, `(PATH, Some(NAME))` a
/// function; with what to say of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Over {
    pub path: String,
    pub func: Option<String>,
    pub what: String,
}

/// A file over [`FILE_LINES`].
pub fn file_over(path: &str, text: &str) -> Option<Over> {
    let n = text.lines().count();
    (n > FILE_LINES).then(|| Over {
        path: path.to_string(),
        func: None,
        what: format!("{path}: {n} lines (at most {FILE_LINES})"),
    })
}

/// The product functions of a file over [`FN_LINES`] (a test file's, and
/// the test code of any file, aside).
pub fn funcs_over(path: &str, scan: &super::rust::Scan) -> Vec<Over> {
    scan.funcs
        .iter()
        .filter(|f| !f.test && f.lines > FN_LINES)
        .map(|f| Over {
            path: path.to_string(),
            func: Some(format!("fn {}", f.name)),
            what: format!(
                "{path}:{}: fn {} is {} lines (at most {FN_LINES})",
                f.line, f.name, f.lines
            ),
        })
        .collect()
}

/// An allow-list entry: (path, what in it: `fn NAME`, `loop A, B`; reason).
pub type Entry = (String, Option<String>, String);

/// The entries of an allow list, or what is wrong with a line.
pub fn parse_allow(text: &str) -> (Vec<Entry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut bad = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (what, reason) = l.split_once(" -- ").unwrap_or((l, ""));
        let reason = reason.trim();
        if reason.is_empty() {
            bad.push(format!(
                "tests/cli/tidy/allow.txt:{}: `{l}` gives no reason (`PATH [fn NAME | loop A, B] -- reason`)",
                n + 1
            ));
            continue;
        }
        let (path, rest) = what.trim().split_once(' ').unwrap_or((what.trim(), ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        let func = match words.as_slice() {
            [] => None,
            ["fn", name] => Some(format!("fn {name}")),
            ["types"] => Some("types".to_string()),
            ["loop", _, ..] => Some(format!("loop {}", words[1..].join(" "))),
            _ => {
                bad.push(format!(
                    "tests/cli/tidy/allow.txt:{}: `{what}` is not `PATH`, `PATH fn NAME`, `PATH types` or `FOLDER loop A, B`",
                    n + 1
                ));
                continue;
            }
        };
        let path = path.to_string();
        entries.push((path, func, reason.to_string()));
    }
    (entries, bad)
}

/// Which entries a rule reads: the bounds (files, `fn`), the loops of
/// modules (`loop a, b`), the loops of files (`loop a.rs, b.rs`), the
/// files that may name a runtime type (`types`).
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Bounds,
    ModuleLoops,
    FileLoops,
    RuntimeTypes,
}

fn kind_of(what: Option<&str>) -> Kind {
    if what == Some("types") {
        return Kind::RuntimeTypes;
    }
    match what.and_then(|w| w.strip_prefix("loop ")) {
        None => Kind::Bounds,
        Some(l) if l.contains(".rs") => Kind::FileLoops,
        Some(_) => Kind::ModuleLoops,
    }
}

/// What breaks a rule: each thing found the list does not allow, each
/// list line without a reason, each entry of the rule's kind that allows
/// nothing found.
pub fn judge(over: &[Over], allow: &str, kind: Kind) -> Vec<String> {
    let (entries, mut out) = parse_allow(allow);
    let entries: Vec<Entry> = entries
        .into_iter()
        .filter(|(_, f, _)| kind_of(f.as_deref()) == kind)
        .collect();
    let allowed: BTreeSet<(&str, Option<&str>)> = entries
        .iter()
        .map(|(p, f, _)| (p.as_str(), f.as_deref()))
        .collect();
    for o in over {
        if !allowed.contains(&(o.path.as_str(), o.func.as_deref())) {
            out.push(o.what.clone());
        }
    }
    let found: BTreeSet<(&str, Option<&str>)> = over
        .iter()
        .map(|o| (o.path.as_str(), o.func.as_deref()))
        .collect();
    for (p, f, _) in &entries {
        if !found.contains(&(p.as_str(), f.as_deref())) {
            let what = match f {
                Some(f) => format!("{p} {f}"),
                None => p.clone(),
            };
            out.push(format!(
                "tests/cli/tidy/allow.txt allows {what}, which is not found now: remove the entry"
            ));
        }
    }
    out
}

#[cfg(test)]
mod checks {
    use super::*;

    #[test]
    fn bounds_fail_on_a_long_file_or_function_the_list_does_not_allow() {
        let long_fn = format!(
            "fn big() {{\n{}}}\nfn small() {{}}\n",
            "    x();\n".repeat(FN_LINES)
        );
        let scan = super::super::rust::scan(&super::super::rust::code(&long_fn));
        let mut over = funcs_over("a.rs", &scan);
        assert_eq!(over.len(), 1, "{over:?}");
        assert_eq!(
            over[0].what,
            format!(
                "a.rs:1: fn big is {} lines (at most {FN_LINES})",
                FN_LINES + 2
            )
        );
        over.extend(file_over("b.rs", &"\n".repeat(FILE_LINES + 1)));
        assert!(file_over("c.rs", &"\n".repeat(FILE_LINES)).is_none());
        assert_eq!(
            judge(&over, "", Kind::Bounds),
            [
                format!(
                    "a.rs:1: fn big is {} lines (at most {FN_LINES})",
                    FN_LINES + 2
                ),
                format!("b.rs: {} lines (at most {FILE_LINES})", FILE_LINES + 1),
            ]
        );
        assert!(judge(
            &over,
            "# why\na.rs fn big -- a table\nb.rs -- generated\n",
            Kind::Bounds
        )
        .is_empty());
        assert_eq!(
            judge(
                &over,
                "a.rs fn big\nb.rs -- generated\nc.rs fn gone -- was long\nd.rs fn -- x\nx/src loop a, b -- not a bound\n",
                Kind::Bounds
            ),
            [
                "tests/cli/tidy/allow.txt:1: `a.rs fn big` gives no reason (`PATH [fn NAME | loop A, B] -- reason`)",
                "tests/cli/tidy/allow.txt:4: `d.rs fn` is not `PATH`, `PATH fn NAME`, `PATH types` or `FOLDER loop A, B`",
                &format!("a.rs:1: fn big is {} lines (at most {FN_LINES})", FN_LINES + 2),
                "tests/cli/tidy/allow.txt allows c.rs fn gone, which is not found now: remove the entry",
            ]
        );
        // a loop entry allows that loop, and is stale without it
        let found = [Over {
            path: "x/src".into(),
            func: Some("loop a, b".into()),
            what: "x: a, b name each other".into(),
        }];
        assert!(judge(
            &found,
            "x/src loop a, b -- being reworked\n",
            Kind::ModuleLoops
        )
        .is_empty());
        assert_eq!(
            judge(&found, "", Kind::ModuleLoops),
            ["x: a, b name each other"]
        );
        assert_eq!(
            judge(&[], "x/src loop a, b -- being reworked\nx/src loop a.rs, b.rs -- files\na.rs -- a bound\n", Kind::ModuleLoops),
            ["tests/cli/tidy/allow.txt allows x/src loop a, b, which is not found now: remove the entry"]
        );
        // a test function is not product code
        let test_fn = format!("#[test]\n{long_fn}");
        let scan = super::super::rust::scan(&super::super::rust::code(&test_fn));
        assert!(funcs_over("t.rs", &scan).is_empty());
    }
}
