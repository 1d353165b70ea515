//! A bounded mutation fuzzer over the YAML parser and the loader: every
//! file of `fuzz_corpus/` is mutated (bytes flipped, cut, spliced, and
//! tokens that stress the parser, the alias expansion, the templates and
//! the decryption inserted) and handed to `yaml::parse_str`, then placed in
//! the valid fixture tree and loaded. Whatever the input, the answer is a
//! tree or diagnostics: no panic, no abort, and no hang (every case runs
//! under a generous deadline).
//!
//! `FUZZ_CASES=N` runs more cases (the default keeps the tests quick).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;

use csis_rules::{load, LoadOptions};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(v.len() >= 4, "the corpus is in the repository");
    v
}

/// Tokens worth inserting: YAML structure, anchors and aliases, merge
/// keys, templates (loops too), markers, bad bytes, deep nesting.
const TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "&b [*a, *a, *a, *a]",
    "<<: *a\n",
    "<<: ",
    "- ",
    ": ",
    "\n",
    "\n  ",
    "\t",
    "[",
    "]",
    "{",
    "}",
    ",",
    "? ",
    "!!str ",
    "!!int ",
    "!custom ",
    "---\n",
    "...\n",
    "|\n  ",
    ">-\n  ",
    "\"",
    "'",
    "#",
    "%YAML 1.2\n",
    "{{ ",
    " }}",
    "{{ this.name }}",
    "{{ ENV.HOME }}",
    "{% for i in range(1000) %}",
    "{% endfor %}",
    "{{ 'x' * 100000 }}",
    "{{ this }}",
    "{{ undefined.x.y }}",
    "{% if %}",
    "ENC[age:",
    "ENC[age:AAAA]",
    "ENC[age:ÄÖÜäöüßéèêëïîôûùç€]",
    "\u{feff}",
    "\u{0}",
    "ÿ",
    "漢字",
    "0x",
    "0o17",
    "1e999",
    "-.inf",
    ".nan",
    "0644",
    "~",
    "null",
    "true",
    "name",
    "name: x",
    "source_image",
    "runtimes",
    "image_builder",
    "modifications",
    "default",
    "self",
];

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize, usize),
    Insert(usize, usize),
    Splice(usize, usize, usize),
    Nest(usize, usize),
    Repeat(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Flip(a, b)),
        (any::<usize>(), 0usize..64).prop_map(|(a, n)| Mutation::Cut(a, n)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<usize>(), any::<usize>(), 0usize..200)
            .prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
        (any::<usize>(), 1usize..400).prop_map(|(a, n)| Mutation::Nest(a, n)),
        (any::<usize>(), 1usize..40, 1usize..40).prop_map(|(a, l, n)| Mutation::Repeat(a, l, n)),
    ]
}

fn apply(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *m {
            Mutation::Flip(i, x) => {
                if !b.is_empty() {
                    let n = b.len();
                    b[i % n] = x;
                }
            }
            Mutation::Cut(i, n) => {
                let s = at(i, b.len());
                let e = (s + n).min(b.len());
                b.drain(s..e);
            }
            Mutation::Insert(i, t) => {
                let s = at(i, b.len());
                b.splice(s..s, TOKENS[t].bytes());
            }
            Mutation::Splice(i, j, n) => {
                let src = at(j, b.len());
                let piece: Vec<u8> = b[src..(src + n).min(b.len())].to_vec();
                let s = at(i, b.len());
                b.splice(s..s, piece);
            }
            Mutation::Nest(i, n) => {
                let s = at(i, b.len());
                let mut x = "[".repeat(n).into_bytes();
                x.extend("]".repeat(n).bytes());
                b.splice(s..s, x);
            }
            Mutation::Repeat(i, l, n) => {
                let s = at(i, b.len());
                let piece: Vec<u8> = b[s..(s + l).min(b.len())].to_vec();
                let rep: Vec<u8> = piece.repeat(n);
                b.splice(s..s, rep);
            }
        }
        if b.len() > 256 * 1024 {
            b.truncate(256 * 1024);
        }
    }
    b
}

/// Run `f` on another thread; a case that takes longer than the deadline
/// is a hang (the deadline is generous: a busy machine is not a hang).
fn within_deadline(what: String, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            f();
            let _ = tx.send(());
        })
        .unwrap();
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // the thread panicked: re-raise with its message
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p)
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: {what}"),
    }
}

fn cases(default: u32) -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(300),
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn the_parser_never_panics_or_hangs(
        pick in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..8),
    ) {
        let c = corpus();
        let (name, text) = &c[pick % c.len()];
        let bytes = apply(text.clone(), &muts);
        let name = name.clone();
        within_deadline(format!("{name} with {muts:?}"), move || {
            let text = match csis_schema::yaml::decode_utf8(&name, bytes) {
                Ok(t) => t,
                Err(d) => {
                    assert!(d.line > 0, "UTF-8 errors are located: {d}");
                    return;
                }
            };
            match csis_schema::yaml::parse_str(&name, Path::new(&name), &text) {
                Ok(n) => {
                    // What a later walk does: no overflow on what parsed.
                    let _ = n.to_json();
                }
                Err(d) => assert!(d.line > 0 || d.message.contains("YAML"), "{d}"),
            }
            // The typed path of the cache crate (meta-state files).
            let _ = csis_schema::yaml::from_str::<serde_json::Value>(&name, &text);
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(40),
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn the_loader_never_panics_or_hangs(
        pick in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let c = corpus();
        let (name, text) = &c[pick % c.len()];
        let bytes = apply(text.clone(), &muts);
        let dir = tempfile::tempdir().unwrap();
        csis_testkit::copy_dir(&csis_testkit::fixture("config/valid"), dir.path());
        let place: PathBuf = if name.starts_with("cfg-") {
            dir.path().join("cfg/zz-fuzz.yml")
        } else {
            dir.path().join("images/zz-fuzz.yaml")
        };
        std::fs::write(&place, &bytes).unwrap();
        let root = dir.path().to_path_buf();
        within_deadline(format!("{name} with {muts:?}"), move || {
            let opts = LoadOptions {
                env: Some(BTreeMap::from([("CSIS_TEST_USER".into(), "avery".into())])),
                ..Default::default()
            };
            match load(&root, &opts) {
                Ok(t) => { let _ = t.images.len(); }
                Err(d) => {
                    assert!(!d.is_empty());
                    for x in &d {
                        let _ = x.to_string();
                        let _ = x.to_report();
                    }
                }
            }
        });
        drop(dir);
    }
}
