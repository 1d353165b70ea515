//! The event-based YAML builder (fast path) gives the same values and the
//! same locations as serde-saphyr's `Spanned` deserialization, on every YAML
//! file of the repository's fixtures, the starters and the reference trees.
//! One difference is by design: the YAML 1.1 words `on`/`off`/`yes`/`no`
//! stay strings in the tree (YAML 1.2); a field declared boolean still reads
//! them as booleans (see `yaml11_boolean_words`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use csis_schema::yaml::{self, Node, SourceFile, Value};

fn same(a: &Node, b: &Node, at: &str, diffs: &mut Vec<String>) {
    if (a.loc.line, a.loc.column) != (b.loc.line, b.loc.column) {
        diffs.push(format!(
            "{at}: location {}:{} vs {}:{}",
            a.loc.line, a.loc.column, b.loc.line, b.loc.column
        ));
    }
    match (&a.value, &b.value) {
        (Value::Seq(x), Value::Seq(y)) => {
            if x.len() != y.len() {
                diffs.push(format!("{at}: {} vs {} items", x.len(), y.len()));
            }
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                same(p, q, &format!("{at}[{i}]"), diffs);
            }
        }
        (Value::Map(x), Value::Map(y)) => {
            let norm = |k: &str| {
                if k == "on" {
                    "true".to_string()
                } else {
                    k.to_string()
                }
            };
            let kx: Vec<String> = x.iter().map(|e| norm(&e.key)).collect();
            let ky: Vec<String> = y.iter().map(|e| norm(&e.key)).collect();
            if kx != ky {
                diffs.push(format!("{at}: keys {kx:?} vs {ky:?}"));
                return;
            }
            for (p, q) in x.iter().zip(y) {
                if (p.key_loc.line, p.key_loc.column) != (q.key_loc.line, q.key_loc.column) {
                    diffs.push(format!("{at}.{}: key location differs", p.key));
                }
                same(&p.value, &q.value, &format!("{at}.{}", p.key), diffs);
            }
        }
        (Value::Float(x), Value::Float(y)) if x.is_nan() && y.is_nan() => {}
        (Value::Str(w), Value::Bool(_))
            if [
                "on", "off", "yes", "no", "On", "Off", "Yes", "No", "ON", "OFF", "YES", "NO",
            ]
            .contains(&w.as_str()) => {}
        (x, y) => {
            if format!("{x:?}") != format!("{y:?}") {
                diffs.push(format!("{at}: {x:?} vs {y:?}"));
            }
        }
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            out.push(p);
        }
    }
}

#[test]
fn event_builder_matches_serde_saphyr() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    yaml_files(&root.join("tests/fixtures/config"), &mut files);
    yaml_files(&root.join("src/cmd/starters"), &mut files);
    yaml_files(&root.join("../shared/reference"), &mut files);
    assert!(files.len() > 30, "{} files", files.len());
    let mut compared = 0;
    let mut diffs = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let file = Arc::new(SourceFile {
            path: f.display().to_string(),
            abs: f.clone(),
            text: Arc::from(text.as_str()),
        });
        let Ok(Some(slow)) = yaml::parse_source_serde(file.clone()) else {
            continue;
        };
        let fast = yaml::parse_source(file).unwrap_or_else(|d| panic!("{}: {d}", f.display()));
        same(&fast, &slow, &f.display().to_string(), &mut diffs);
        compared += 1;
    }
    assert!(compared > 30);
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn yaml11_boolean_words() {
    #[derive(serde::Deserialize)]
    struct T {
        a: bool,
        b: bool,
        c: String,
    }
    let t: T = yaml::from_str("t.yml", "a: yes\nb: off\nc: on\n").unwrap();
    assert!(t.a);
    assert!(!t.b);
    assert_eq!(t.c, "on");
}
