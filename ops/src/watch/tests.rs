//! The watcher's tests: edits, records, pins, and its plans against the
//! plain plan.

use super::*;
use crate::test_tree::ops_basic;

#[test]
fn an_edited_image_moves_its_bake_alone_and_a_broken_file_is_refused() {
    let (_t, tree) = ops_basic();
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    let first = first.unwrap();
    assert_eq!(first.total, 4, "{first:?}");
    assert_eq!(first.due, 4, "nothing is built yet: {first:?}");
    assert!(!w.changed(), "nothing was edited");
    // an editor's temporary file beside the tree's: seen, not planned
    let plans = w.plans;
    std::fs::write(tree.dir.join("images/.images.yaml.swp"), "x").unwrap();
    assert!(w.changed());
    assert!(
        w.replan().unwrap().is_none(),
        "nothing the plan reads moved"
    );
    assert_eq!(w.plans, plans);
    // a comment: the tree's text moved, planned, the plan is the same
    let im = tree.dir.join("images/images.yaml");
    let text = std::fs::read_to_string(&im).unwrap();
    std::fs::write(&im, format!("{text}# a comment\n")).unwrap();
    assert!(w.changed());
    assert_eq!(w.replan().unwrap(), Some(Vec::new()));
    assert_eq!(w.plans, plans + 1);
    std::fs::write(&im, &text).unwrap();
    assert_eq!(w.replan().unwrap(), Some(Vec::new()));

    let edited = text.replace(
        "  - name: tools\n",
        "  - name: tools\n    primary_disk_size: 30\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&im, edited).unwrap();
    assert!(w.changed());
    let changes = w.replan().unwrap().expect("planned");
    let labels: Vec<&str> = changes
        .iter()
        .map(|c| match c {
            PlanChange::Changed { label, due, .. } => {
                assert!(due, "{c:?}");
                label.as_str()
            }
            other => panic!("only changed bakes: {other:?}"),
        })
        .collect();
    assert_eq!(labels, ["//images/tools@sim:bake"], "{changes:?}");

    std::fs::write(&im, "images: [").unwrap();
    assert!(w.changed());
    let e = w.replan().unwrap_err();
    let nl = e
        .downcast_ref::<NotLoaded>()
        .expect("a tree that does not load");
    assert!(!nl.diagnostics.is_empty());
    // still broken: said again, not taken for the last good plan
    std::fs::write(tree.dir.join("images/.images.yaml.swp"), "y").unwrap();
    assert!(w.changed());
    assert!(w.replan().is_err());
}

/// Reading the tree's files (as the watcher itself does at every look
/// and plan) wakes it for nothing: inotify reports every open, and a
/// watcher that looked at the tree for each would look for ever.
#[test]
fn a_file_opened_and_not_written_does_not_wake_the_watcher() {
    let (_t, tree) = ops_basic();
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    first.unwrap();
    if w.events.is_none() {
        eprintln!("skipped: the OS gives no file events here");
        return;
    }
    let im = tree.dir.join("images/images.yaml");
    // what the open and the first plan read may still be queued
    while w.wait(Duration::from_millis(200)) {}
    let looks = w.looks;
    std::fs::read_to_string(&im).unwrap();
    std::fs::read_dir(tree.dir.join("images"))
        .unwrap()
        .for_each(drop);
    assert!(!w.wait(Duration::from_secs(30)), "nothing changed");
    assert_eq!(w.looks, looks, "an open is not a change: no look taken");
    // a write still wakes it, and is seen
    std::fs::write(&im, std::fs::read_to_string(&im).unwrap() + "# c\n").unwrap();
    let mut seen = false;
    for _ in 0..20 {
        if w.wait(Duration::from_secs(30)) {
            seen = true;
            break;
        }
    }
    assert!(seen, "the write is seen");
    assert!(w.looks > looks);
}

/// The watcher reads `meta-state/` again only when one of its files
/// moved, and never keeps what it read from a file changed in the last
/// second: a build recorded behind it (another terminal) shows at the
/// next plan.
#[test]
fn the_records_are_read_again_when_their_files_move() {
    let (_t, tree) = ops_basic();
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    assert_eq!(first.unwrap().due, 4);
    let kept = |w: &Watcher| w.records.as_ref().map(|r| r.read.1.builds.len());
    assert_eq!(kept(&w), Some(0), "no records yet: their absence is kept");

    // every bake recorded as built from today's inputs, behind the watcher
    let meta = MetaState::of_tree(&tree.dir);
    let lineage = every_bake_built(&tree);
    let n = lineage.builds.len();
    meta.save_lineage(&lineage).unwrap();
    let path = meta.dir().join(csis_cache::LINEAGE_FILE);
    let age = |secs: u64| {
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    };

    // just written: read, and not kept (racy)
    w.replan().unwrap();
    assert_eq!(kept(&w), None);
    let due = |w: &Watcher| w.last.as_ref().unwrap().due_count(NodeKind::Bake.as_str());
    assert!(due(&w) < 4, "the recorded bakes count: {}", due(&w));
    // older than a second: kept
    age(30);
    w.replan().unwrap();
    assert_eq!(kept(&w), Some(n));

    // the records emptied again (older still: not racy); the kept
    // read is not used, the bakes are due again
    meta.save_lineage(&Lineage::default()).unwrap();
    age(20);
    w.replan().unwrap();
    assert_eq!(kept(&w), Some(0));
    assert_eq!(due(&w), 4);

    // another record file appears (a fleet record the plan reads
    // beside the lineage): planned again, not taken for nothing
    let plans = w.plans;
    std::fs::write(meta.dir().join("launch-params.yaml"), "instances: {}\n").unwrap();
    assert!(w.replan().unwrap().is_some());
    assert_eq!(w.plans, plans + 1);
}

/// An image made pinned by an edit, while the records do not move, is
/// compiled with its pin (and its recorded fingerprint) as `csis plan`
/// compiles it.
#[test]
fn an_image_made_pinned_finds_its_pin_in_kept_records() {
    let (_t, tree) = ops_basic();
    let meta = MetaState::of_tree(&tree.dir);
    // web's build b-web, recorded with a fingerprint that is not today's
    let mut lineage = Lineage::default();
    let mut b = csis_cache::BuildRecord::new("b-web", "web", "sim");
    b.input_fingerprint = Some("ab".repeat(32));
    b.run = Some("2026_12_04t00_00_00_000000".into());
    lineage.add_build(b);
    meta.save_lineage(&lineage).unwrap();
    let mut pins = Pins::default();
    pins.images
        .insert(csis_cache::image_key("app", "sim"), "b-web".into());
    meta.save_pins(&pins).unwrap();
    for f in [csis_cache::LINEAGE_FILE, csis_cache::PINS_FILE] {
        let f = std::fs::File::options()
            .write(true)
            .open(meta.dir().join(f))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(30))
            .unwrap();
    }
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    first.unwrap();
    assert!(w.records.is_some(), "old enough to be kept");

    // app (follow) becomes pinned: its pin is b-web
    let im = tree.dir.join("images/images.yaml");
    let text = std::fs::read_to_string(&im).unwrap();
    let edited = text.replace(
        "    source_image: web\n    parent_policy: follow\n",
        "    source_image: web\n    parent_policy: pinned\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&im, edited).unwrap();
    w.replan().unwrap().expect("planned");
    assert!(w.records.is_some(), "the records did not move");
    let plain = crate::session::open(&tree.dir, &tree.load_options()).unwrap();
    let want = plain
        .plan(&plain.select(&[]).unwrap(), &ForceBake::default())
        .unwrap();
    let fp = |p: &Plan| {
        p.nodes
            .iter()
            .find(|n| n.label.to_string() == "//images/app@sim:bake")
            .map(|n| n.fingerprint)
            .unwrap()
    };
    assert_eq!(fp(w.last.as_ref().unwrap()), fp(&want));
}

/// Records of a build of every bake of the tree, from today's inputs.
fn every_bake_built(tree: &TreeArgs) -> Lineage {
    let session = crate::session::open(&tree.dir, &tree.load_options()).unwrap();
    let mut lineage = Lineage::default();
    for (i, ((series, rt), (fp, _))) in session.bake_fingerprints().into_iter().enumerate() {
        let mut b = csis_cache::BuildRecord::new(format!("b{i}"), series, rt);
        b.input_fingerprint = Some(fp);
        b.run = Some(format!("2026_12_04t00_00_0{i}_000000"));
        lineage.add_build(b);
    }
    lineage
}

/// Each change as `+label`, `~label` or `-label`.
fn labels(c: &[PlanChange]) -> Vec<String> {
    c.iter()
        .map(|c| match c {
            PlanChange::Added { label, .. } => format!("+{label}"),
            PlanChange::Changed { label, .. } => format!("~{label}"),
            PlanChange::Removed { label } => format!("-{label}"),
        })
        .collect()
}

/// Each node of a plan: label, due, reason, code, fingerprint, decision.
fn plan_view(p: &Plan) -> Vec<String> {
    let mut v: Vec<String> = p
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{} {} {:?} {} {} {:?} {:?} {:?}",
                n.label, n.due, n.reason, n.code, n.fingerprint, n.decision, n.series, n.runtime
            )
        })
        .collect();
    v.sort();
    v
}

/// The watcher's plan (carried over from the last one where nodes did
/// not move) is the plain `csis plan`'s, after every kind of edit, and
/// its changes are those of the bakes that moved.
#[test]
fn every_watched_plan_is_the_plain_plan() {
    let (_t, tree) = ops_basic();
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    first.unwrap();
    let plain = |w: &Watcher| {
        let s = crate::session::open(&tree.dir, &tree.load_options()).unwrap();
        let want = s
            .plan(&s.select(&[]).unwrap(), &ForceBake::default())
            .unwrap();
        assert_eq!(plan_view(w.last.as_ref().unwrap()), plan_view(&want));
    };
    plain(&w);
    let im = tree.dir.join("images/images.yaml");
    let text = std::fs::read_to_string(&im).unwrap();

    // every bake recorded as built from today's inputs (old enough to be kept)
    let meta = MetaState::of_tree(&tree.dir);
    let lineage = every_bake_built(&tree);
    meta.save_lineage(&lineage).unwrap();
    std::fs::File::options()
        .write(true)
        .open(meta.dir().join(csis_cache::LINEAGE_FILE))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(30))
        .unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(c.len(), 4, "every bake now current: {c:?}");
    assert_eq!(w.last.as_ref().unwrap().due().count(), 0);
    plain(&w);

    // tools edited in place: the graph keeps its shape, tools moves alone
    // and every other node is carried over
    let edited = text.replace(
        "  - name: tools\n",
        "  - name: tools\n    primary_disk_size: 30\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&im, &edited).unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(labels(&c), ["~//images/tools@sim:bake"]);
    let n = w.last.as_ref().unwrap().nodes.len();
    assert!(
        w.carried > 0 && w.carried < n,
        "the nodes that did not move are carried over: {} of {n}",
        w.carried
    );
    plain(&w);
    // and back: tools is current again
    std::fs::write(&im, &text).unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(labels(&c), ["~//images/tools@sim:bake"]);
    assert_eq!(w.last.as_ref().unwrap().due().count(), 0);
    plain(&w);

    // an image added (another shape), then removed
    let extra = tree.dir.join("images/extra.yaml");
    std::fs::write(
        &extra,
        "images:\n  - name: extra\n    source_image: app\n    runtimes: [{image_builder: sim-bake}]\n",
    )
    .unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(labels(&c), ["+//images/extra@sim:bake"]);
    assert_eq!(w.carried, 0, "a graph of another shape");
    plain(&w);
    std::fs::remove_file(&extra).unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(labels(&c), ["-//images/extra@sim:bake"]);
    plain(&w);

    // a tree that does not load, then loads again: the changes are said
    // against the last plan that succeeded
    std::fs::write(&im, &edited).unwrap();
    std::fs::write(tree.dir.join("images/broken.yaml"), "images: [").unwrap();
    assert!(w.replan().is_err());
    std::fs::remove_file(tree.dir.join("images/broken.yaml")).unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert_eq!(labels(&c), ["~//images/tools@sim:bake"]);
    plain(&w);
}

/// Records that move no decision but what the plan says of a bake (its
/// only build revoked: still due for want of a build, and now saying which
/// was revoked) are said, though the planner carried the bake over.
#[test]
fn a_bake_the_records_rename_is_said_though_its_decision_holds() {
    let (_t, tree) = ops_basic();
    let (mut w, first) = Watcher::open(&tree, Vec::new());
    assert_eq!(first.unwrap().due, 4);
    let meta = MetaState::of_tree(&tree.dir);
    let mut lineage = Lineage::default();
    let mut b = csis_cache::BuildRecord::new("b-tools", "tools", "sim");
    b.input_fingerprint = Some("ab".repeat(32));
    b.run = Some("2026_12_04t00_00_00_000000".into());
    lineage.add_build(b);
    meta.save_lineage(&lineage).unwrap();
    let revs = Revocations {
        revocations: vec![csis_cache::revocations::Revocation {
            build_id: "b-tools".into(),
            series: Some("tools".into()),
            runtime: Some("sim".into()),
            reason: Some("a bad disk".into()),
            run: None,
            via: None,
            extra: Default::default(),
        }],
        extra: Default::default(),
    };
    revs.save(&meta).unwrap();
    let c = w.replan().unwrap().expect("planned");
    assert!(w.carried > 0, "tools' decision holds: carried over");
    assert_eq!(labels(&c), ["~//images/tools@sim:bake"], "{c:?}");
    match &c[0] {
        PlanChange::Changed { reason, due, .. } => {
            assert!(due);
            assert!(reason.contains("b-tools revoked"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let s = crate::session::open(&tree.dir, &tree.load_options()).unwrap();
    let want = s
        .plan(&s.select(&[]).unwrap(), &ForceBake::default())
        .unwrap();
    assert_eq!(plan_view(w.last.as_ref().unwrap()), plan_view(&want));
}
