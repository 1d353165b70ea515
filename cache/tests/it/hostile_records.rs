//! meta-state files that are hostile or damaged: each is refused naming the
//! file and line, or recovered from, and nothing else is lost.

use std::time::Instant;

use csis_cache::{load_for_planning, LocalDir, MetaState};

/// Nine levels of nine aliases: 9^9 nodes once expanded.
fn alias_bomb(key: &str) -> String {
    let mut s = format!("{key}:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        s.push_str(&format!(
            "  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    s
}

#[test]
fn an_alias_bomb_in_lineage_or_pins_is_refused_naming_the_file() {
    for (file, key) in [("lineage.yaml", "builds"), ("pins.yaml", "images")] {
        let t = tempfile::tempdir().unwrap();
        let meta = t.path().join("meta-state");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join(file), alias_bomb(key)).unwrap();
        let m = MetaState::of_tree(t.path());
        let started = Instant::now();
        let err = if file == "lineage.yaml" {
            m.lineage().map(|_| ()).unwrap_err()
        } else {
            m.pins().map(|_| ()).unwrap_err()
        };
        let msg = err.to_string();
        assert!(msg.contains(file), "{msg}");
        assert!(
            msg.contains("aliases expand") || msg.contains("alias"),
            "{msg}"
        );
        assert!(msg.contains(&format!("{file}:")), "names a line: {msg}");
        let light = load_for_planning(&m, &LocalDir::of_tree(t.path()))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(light.contains(file), "{light}");
        assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    }
}

use std::collections::{BTreeMap, BTreeSet};

use csis_cache::drift::{self, RuntimeView};
use csis_cache::{BuildRecord, PinBinding, Recorder, Revocations};

fn rec(id: &str, series: &str, rt: &str, parent: &str) -> BuildRecord {
    let mut r = BuildRecord::new(id, series, rt);
    r.parent = Some(parent.to_string());
    r.input_fingerprint = Some("a".repeat(64));
    r.run = Some("2026_11_30t07_00_00_000000".into());
    r
}

fn journal_line(r: &BuildRecord) -> String {
    let mut s = serde_json::to_string(&serde_json::json!({"record": r, "pin": null})).unwrap();
    s.push('\n');
    s
}

#[test]
fn a_bad_journal_line_is_skipped_reported_and_kept_and_later_records_survive() {
    let t = tempfile::tempdir().unwrap();
    let j = t.path().join(".csis/lineage.journal");
    std::fs::create_dir_all(j.parent().unwrap()).unwrap();
    let mut text = journal_line(&rec("b1", "base", "rt", "vendor"));
    text.push_str("{\"record\": {\"this is\": \"not a record\"\n");
    for i in 2..6 {
        text.push_str(&journal_line(&rec(
            &format!("b{i}"),
            "base",
            "rt",
            "vendor",
        )));
    }
    // A torn last line (a kill mid-append) is no problem to report.
    text.push_str("{\"record\": {\"build_id\": \"b9");
    std::fs::write(&j, &text).unwrap();
    let m = MetaState::of_tree(t.path());
    let r = Recorder::open(m.clone(), &j).unwrap();
    let ids: Vec<String> = m
        .lineage()
        .unwrap()
        .builds
        .iter()
        .map(|b| b.build_id.clone())
        .collect();
    assert_eq!(ids, ["b1", "b2", "b3", "b4", "b5"]);
    let problems = r.journal_problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("lineage.journal:2"), "{problems:?}");
    let kept = std::fs::read_to_string(t.path().join(".csis/lineage.journal.rejected")).unwrap();
    assert!(kept.contains("not a record"), "{kept}");
}

#[test]
fn lost_pins_are_rebuilt_from_the_parents_lineage_names() {
    for damage in ["delete", "empty", "cut"] {
        let t = tempfile::tempdir().unwrap();
        let m = MetaState::of_tree(t.path());
        let j = t.path().join(".csis/lineage.journal");
        let r = Recorder::open(m.clone(), &j).unwrap();
        r.record(rec("os1", "deb", "rt", "vendor"), None).unwrap();
        for (id, img) in [("w1", "web"), ("a1", "app")] {
            r.record(
                rec(id, img, "rt", "os1"),
                Some(PinBinding {
                    image: img.into(),
                    runtime: "rt".into(),
                    parent_build: "os1".into(),
                }),
            )
            .unwrap();
        }
        r.flush().unwrap();
        drop(r);
        let pins = t.path().join("meta-state/pins.yaml");
        assert!(std::fs::read_to_string(&pins).unwrap().contains("app@rt"));
        match damage {
            "delete" => std::fs::remove_file(&pins).unwrap(),
            "empty" => std::fs::write(&pins, "").unwrap(),
            _ => std::fs::write(&pins, "images:\n  app@rt: os1\n").unwrap(),
        }
        let (_, p) = m.load_with_journal(&j).unwrap();
        assert_eq!(p.image_pin("web", "rt"), Some("os1"), "{damage}");
        assert_eq!(p.image_pin("app", "rt"), Some("os1"), "{damage}");
        let (_, p) = load_for_planning(&m, &LocalDir::of_tree(t.path())).unwrap();
        assert_eq!(p.image_pin("web", "rt"), Some("os1"), "{damage} (light)");
        // A recorder writes them back.
        let r = Recorder::open(m.clone(), &j).unwrap();
        r.record(rec("x1", "other", "rt", "vendor"), None).unwrap();
        assert!(
            r.journal_problems().iter().any(|l| l.contains("web on rt")),
            "{damage}: {:?}",
            r.journal_problems()
        );
        r.flush().unwrap();
        assert_eq!(
            m.pins().unwrap().image_pin("web", "rt"),
            Some("os1"),
            "{damage}"
        );
    }
}

#[test]
fn a_journal_that_cannot_be_written_refuses_every_later_record() {
    let t = tempfile::tempdir().unwrap();
    let m = MetaState::of_tree(t.path());
    let j = t.path().join(".csis/lineage.journal");
    std::fs::create_dir_all(&j).unwrap(); // a directory where the journal goes
    let r = Recorder::open(m.clone(), &j).unwrap();
    assert!(r.failure().is_none());
    assert!(r.record(rec("b1", "base", "rt", "vendor"), None).is_err());
    let f = r.failure().expect("the failure is kept");
    assert!(f.contains("lineage.journal"), "{f}");
    // Even once the journal could be written again, nothing more is
    // recorded in this run: the first failure stops it.
    std::fs::remove_dir(&j).unwrap();
    let e = r
        .record(rec("b2", "base", "rt", "vendor"), None)
        .unwrap_err();
    assert!(e.to_string().contains("earlier record"), "{e}");
}

#[test]
fn strict_fails_when_nothing_was_checked_and_the_report_says_so() {
    let l = csis_cache::Lineage::default();
    let p = csis_cache::Pins::default();
    let revs = Revocations::default();
    let parents = BTreeMap::new();
    let rep = drift::judge(
        drift::Records {
            lineage: &l,
            pins: &p,
            revocations: &revs,
            releases: &Default::default(),
            follow: &Default::default(),
            image_parents: &parents,
        },
        &[RuntimeView {
            held_tags: Vec::new(),
            runtime: "dock".into(),
            images: Err("the daemon cannot be reached".into()),
            instances: None,
        }],
        &BTreeSet::from(["dock".to_string()]),
        None,
    );
    assert!(rep.strict_fails(), "unavailable fails --strict");
    assert!(!rep.has_hard(), "but is no drift");
    assert!(
        rep.notes
            .iter()
            .any(|n| n.starts_with("nothing was checked")),
        "{:?}",
        rep.notes
    );
    assert!(rep
        .lines()
        .iter()
        .any(|l| l.contains("nothing was checked")));
}
