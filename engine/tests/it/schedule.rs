//! The scheduler. Concurrency is asserted from event order and counters, never
//! from timings: actions that must overlap wait on a barrier (with a generous
//! timeout only so that a broken scheduler fails instead of hanging).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csis_engine::*;
use serde_json::json;
use tokio::sync::Barrier;

fn l(s: &str) -> Label {
    Label::parse(s).unwrap()
}

const SAFETY: Duration = Duration::from_secs(20);

/// A graph of bake nodes named by `names`, with `deps` as (node, dependency).
fn graph(names: &[&str], deps: &[(&str, &str)]) -> (Graph, Plan) {
    graph_with(names, deps, |n| n)
}

fn graph_with(names: &[&str], deps: &[(&str, &str)], f: impl Fn(Node) -> Node) -> (Graph, Plan) {
    let mut g = Graph::new();
    for n in names {
        g.add_node(f(
            Node::new(l(&format!("//{n}@rt")), "bake").with_inputs(json!({ "name": n }))
        ))
        .unwrap();
    }
    for (a, b) in deps {
        let a = g.find(&l(&format!("//{a}@rt:bake"))).unwrap();
        let b = g.find(&l(&format!("//{b}@rt:bake"))).unwrap();
        g.add_dep(a, b, Dep::hashed("parent")).unwrap();
    }
    let fps = g.fingerprints().unwrap();
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
        .unwrap();
    (g, plan)
}

fn name(l: &Label) -> String {
    l.path().to_string()
}

fn kinds(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| {
            let tag = serde_json::to_value(e).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string();
            e.label().map(|l| (tag, name(l)))
        })
        .collect()
}

fn position(ev: &[(String, String)], tag: &str, who: &str) -> usize {
    ev.iter()
        .position(|(t, n)| t == tag && n == who)
        .unwrap_or_else(|| panic!("no {tag} for {who} in {ev:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_independent_nodes_overlap() {
    let (g, plan) = graph(&["a", "b"], &[]);
    let barrier = Arc::new(Barrier::new(2));
    let (events, log) = Events::collect();
    let report = run(&g, &plan, RunOptions::new(2), events, move |_cx| {
        let barrier = barrier.clone();
        async move {
            tokio::time::timeout(SAFETY, barrier.wait())
                .await
                .map_err(|_| NodeError::new("the other node never started"))?;
            Ok(NodeOutput::none())
        }
    })
    .await;
    assert_eq!(report.summary.baked, 2);
    let ev = kinds(&log.lock().unwrap());
    let last_start = position(&ev, "started", "a").max(position(&ev, "started", "b"));
    let first_finish = position(&ev, "finished", "a").min(position(&ev, "finished", "b"));
    assert!(last_start < first_finish, "{ev:?}");
}

#[tokio::test]
async fn a_failure_stops_only_its_descendants() {
    // a -> b -> c ; d -> e ; b fails.
    let (g, plan) = graph(
        &["a", "b", "c", "d", "e"],
        &[("b", "a"), ("c", "b"), ("e", "d")],
    );
    let (events, log) = Events::collect();
    let report = run(
        &g,
        &plan,
        RunOptions::new(4).count_kind("bake"),
        events,
        |cx| {
            let fail = cx.label().path() == "b";
            async move {
                if fail {
                    Err(NodeError::new("exit status 2"))
                } else {
                    Ok(NodeOutput::none())
                }
            }
        },
    )
    .await;
    let s = &report.summary;
    assert_eq!((s.baked, s.failed, s.not_run, s.cancelled), (3, 1, 1, 0));
    assert!(!s.success());
    let out = |n: &str| {
        report
            .outcome(g.find(&l(&format!("//{n}@rt:bake"))).unwrap())
            .unwrap()
            .clone()
    };
    assert!(matches!(out("a"), NodeOutcome::Finished { .. }));
    assert!(matches!(out("b"), NodeOutcome::Failed { .. }));
    assert_eq!(
        out("c"),
        NodeOutcome::NotRun {
            reason: "//b@rt:bake failed".into()
        }
    );
    assert!(matches!(out("d"), NodeOutcome::Finished { .. }));
    assert!(matches!(out("e"), NodeOutcome::Finished { .. }));
    let log = log.lock().unwrap();
    let ev = kinds(&log);
    assert!(!ev.contains(&("started".into(), "c".into())));
    // The summary is last, and its JSON has the documented keys.
    let last = serde_json::to_value(log.last().unwrap()).unwrap();
    assert_eq!(last["event"], "summary");
    assert_eq!(
        (
            last["baked"].as_u64(),
            last["skipped"].as_u64(),
            last["failed"].as_u64(),
            last["not_run"].as_u64()
        ),
        (Some(3), Some(0), Some(1), Some(1))
    );
    assert!(log
        .iter()
        .any(|e| matches!(e, Event::Failed { error, .. } if error == "exit status 2")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_stops_everything() {
    // a fails, b runs until told to stop, c is ready but never starts (-j 2).
    let (g, plan) = graph_with(&["a", "b", "c"], &[], |n| {
        let cost = if n.label().path() == "c" { 1 } else { 10 };
        n.with_cost(cost)
    });
    let b_started = Arc::new(Barrier::new(2));
    let (events, log) = Events::collect();
    let opts = RunOptions::new(2).fail_fast(true);
    let report = run(&g, &plan, opts, events, move |cx| {
        let b_started = b_started.clone();
        async move {
            match cx.label().path() {
                "a" => {
                    // Fail only once b is surely running.
                    let _ = tokio::time::timeout(SAFETY, b_started.wait()).await;
                    Err(NodeError::new("boom"))
                }
                "b" => {
                    let _ = tokio::time::timeout(SAFETY, b_started.wait()).await;
                    tokio::time::timeout(SAFETY, cx.cancel().cancelled())
                        .await
                        .map_err(|_| NodeError::new("never told to stop"))?;
                    Err(NodeError::cancelled())
                }
                _ => Ok(NodeOutput::none()),
            }
        }
    })
    .await;
    let s = &report.summary;
    assert_eq!(
        (s.finished, s.failed, s.cancelled, s.not_run),
        (0, 1, 1, 1),
        "{s:?}"
    );
    assert!(s.interrupted);
    let c = g.find(&l("//c@rt:bake")).unwrap();
    assert_eq!(
        report.outcome(c),
        Some(&NodeOutcome::NotRun {
            reason: "stopped by fail-fast after //a@rt:bake failed".into()
        })
    );
    let ev = kinds(&log.lock().unwrap());
    assert!(!ev.contains(&("started".into(), "c".into())));
}

#[tokio::test]
async fn without_fail_fast_independent_nodes_go_on() {
    let (g, plan) = graph(&["a", "b", "c"], &[]);
    let report = run(&g, &plan, RunOptions::new(1), Events::none(), |cx| {
        let fail = cx.label().path() == "a";
        async move {
            if fail {
                Err(NodeError::new("boom"))
            } else {
                Ok(NodeOutput::none())
            }
        }
    })
    .await;
    assert_eq!((report.summary.finished, report.summary.failed), (2, 1));
    assert!(!report.summary.interrupted);
}

// current_thread: spawned actions run only while the scheduler waits, so the
// counters below see exactly what the scheduler runs at once.
#[tokio::test]
async fn per_pool_limits_are_respected() {
    // 8 nodes in pool p (limit 2), 4 in pool q (no limit), -j 5.
    let mut g = Graph::new();
    for i in 0..8 {
        g.add_node(Node::new(l(&format!("//p{i}@p")), "bake").with_pool("p"))
            .unwrap();
    }
    for i in 0..4 {
        g.add_node(Node::new(l(&format!("//q{i}@q")), "bake").with_pool("q"))
            .unwrap();
    }
    let fps = g.fingerprints().unwrap();
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
        .unwrap();
    // An action counts as running from the moment the scheduler calls it
    // (synchronously, when it starts the node) until its future completes.
    // The scheduler starts every node it may in one burst before it awaits a
    // completion (and on a current-thread runtime no action runs during the
    // burst), so a violated limit shows at once.
    let now_p = Arc::new(AtomicUsize::new(0));
    let max_p = Arc::new(AtomicUsize::new(0));
    let now_all = Arc::new(AtomicUsize::new(0));
    let max_all = Arc::new(AtomicUsize::new(0));
    let opts = RunOptions::new(5).pool_limit("p", 2);
    let (np, mp, na, ma) = (
        now_p.clone(),
        max_p.clone(),
        now_all.clone(),
        max_all.clone(),
    );
    let report = run(&g, &plan, opts, Events::none(), move |cx| {
        let (np, na) = (np.clone(), na.clone());
        let in_p = cx.node().pool() == Some("p");
        let a = na.fetch_add(1, Ordering::SeqCst) + 1;
        ma.fetch_max(a, Ordering::SeqCst);
        if in_p {
            let c = np.fetch_add(1, Ordering::SeqCst) + 1;
            mp.fetch_max(c, Ordering::SeqCst);
        }
        async move {
            tokio::task::yield_now().await;
            if in_p {
                np.fetch_sub(1, Ordering::SeqCst);
            }
            na.fetch_sub(1, Ordering::SeqCst);
            Ok(NodeOutput::none())
        }
    })
    .await;
    assert_eq!(report.summary.finished, 12);
    assert_eq!(max_p.load(Ordering::SeqCst), 2);
    assert_eq!(
        max_all.load(Ordering::SeqCst),
        5,
        "-j 5 is reached and respected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_leaves_finished_nodes_finished() {
    // a -> b -> c, and d independent; -j 1. a finishes, b is running when
    // the run is cancelled, c and d never start.
    let (g, plan) = graph_with(&["a", "b", "c", "d"], &[("b", "a"), ("c", "b")], |n| n);
    let token = CancellationToken::new();
    let t2 = token.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    // Cancel (as Ctrl-C would) as soon as b starts.
    let events = Events::new(move |e| {
        if let Event::Started { label, .. } = &e {
            if label.path() == "b" {
                t2.cancel();
            }
        }
        seen2.lock().unwrap().push(e);
    });
    let opts = RunOptions::new(1).cancel_token(token);
    let report = run(&g, &plan, opts, events, |cx| async move {
        if cx.label().path() == "b" {
            tokio::time::timeout(SAFETY, cx.cancel().cancelled())
                .await
                .map_err(|_| NodeError::new("never told to stop"))?;
            return Err(NodeError::cancelled());
        }
        Ok(NodeOutput::new(
            json!({"build_id": format!("id-{}", cx.label().path())}),
        ))
    })
    .await;
    let out = |n: &str| {
        report
            .outcome(g.find(&l(&format!("//{n}@rt:bake"))).unwrap())
            .unwrap()
            .clone()
    };
    assert!(matches!(out("a"), NodeOutcome::Finished { .. }));
    assert_eq!(
        report
            .output(g.find(&l("//a@rt:bake")).unwrap())
            .unwrap()
            .get_str("build_id"),
        Some("id-a")
    );
    assert!(matches!(out("b"), NodeOutcome::Cancelled { .. }));
    assert_eq!(
        out("c"),
        NodeOutcome::NotRun {
            reason: "//b@rt:bake was cancelled".into()
        }
    );
    assert_eq!(
        out("d"),
        NodeOutcome::NotRun {
            reason: "the run was cancelled".into()
        }
    );
    let s = &report.summary;
    assert_eq!((s.finished, s.cancelled, s.not_run, s.failed), (1, 1, 2, 0));
    assert!(s.interrupted);
    let seen = seen.lock().unwrap();
    let ev = kinds(&seen);
    assert_eq!(ev.iter().filter(|(t, _)| t == "not_run").count(), 2);
    assert!(seen.iter().any(|e| matches!(
        e,
        Event::Failed {
            cancelled: true,
            ..
        }
    )));
}

#[tokio::test]
async fn critical_path_first_with_one_job() {
    // Inserted first: short independent nodes. Then a chain x1 -> x2 -> x3,
    // and y1 -> y2. With -j 1 the head of the longest chain starts first.
    let (g, plan) = graph(
        &["s1", "s2", "y1", "y2", "x1", "x2", "x3"],
        &[("x2", "x1"), ("x3", "x2"), ("y2", "y1")],
    );
    let (events, log) = Events::collect();
    run(&g, &plan, RunOptions::new(1), events, |_cx| async {
        Ok(NodeOutput::none())
    })
    .await;
    let started: Vec<String> = kinds(&log.lock().unwrap())
        .into_iter()
        .filter(|(t, _)| t == "started")
        .map(|(_, n)| n)
        .collect();
    // x1 (path 3), then x2 (2) ties y1 (2): plan order decides (y1 was added first).
    assert_eq!(started[0], "x1");
    assert_eq!(&started[1..3], ["y1", "x2"]);
    assert_eq!(started.len(), 7);
    // Costs weigh the path: a single expensive node beats the chain.
    let (g, plan) = graph_with(
        &["s1", "x1", "x2", "x3", "heavy"],
        &[("x2", "x1"), ("x3", "x2")],
        |n| {
            if n.label().path() == "heavy" {
                n.with_cost(10)
            } else {
                n
            }
        },
    );
    let (events, log) = Events::collect();
    run(&g, &plan, RunOptions::new(1), events, |_cx| async {
        Ok(NodeOutput::none())
    })
    .await;
    let ev = kinds(&log.lock().unwrap());
    assert_eq!(ev.iter().find(|(t, _)| t == "started").unwrap().1, "heavy");
}

#[tokio::test]
async fn a_run_cost_overrides_the_graph_estimate() {
    // The graph says `heavy` is the long one; this run knows `light` took
    // longer last time (its recorded duration): `light` starts first.
    let (g, plan) = graph_with(&["light", "heavy"], &[], |n| {
        if n.label().path() == "heavy" {
            n.with_cost(10)
        } else {
            n
        }
    });
    let first = |opts: RunOptions| {
        let (g, plan) = (&g, &plan);
        async move {
            let (events, log) = Events::collect();
            run(g, plan, opts, events, |_cx| async {
                Ok(NodeOutput::none())
            })
            .await;
            let ev = kinds(&log.lock().unwrap());
            ev.iter().find(|(t, _)| t == "started").unwrap().1.clone()
        }
    };
    assert_eq!(first(RunOptions::new(1)).await, "heavy");
    let light = g.find(&l("//light@rt:bake")).unwrap();
    assert_eq!(first(RunOptions::new(1).cost(light, 50)).await, "light");
}

#[tokio::test]
async fn descendants_read_their_dependencies_outputs_and_logs_are_events() {
    let mut g = Graph::new();
    let os = l("//os/deb12@rt");
    let resolve = g
        .add_node(Node::new(os.clone(), "resolve").with_policy(RunPolicy::WhenDependentDue))
        .unwrap();
    let bake = g
        .add_node(Node::new(os, "bake").with_inputs(json!({"v": 1})))
        .unwrap();
    let retag = g
        .add_node(Node::new(l("//os/deb12@rt"), "retag").with_policy(RunPolicy::WhenDependencyDue))
        .unwrap();
    g.add_dep(bake, resolve, Dep::Order).unwrap();
    g.add_dep(retag, bake, Dep::Order).unwrap();
    let fps = g.fingerprints().unwrap();
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
        .unwrap();
    let seen_by_bake = Arc::new(Mutex::new(None));
    let seen_by_retag = Arc::new(Mutex::new(None));
    let (sb, sr) = (seen_by_bake.clone(), seen_by_retag.clone());
    let (events, log) = Events::collect();
    let report = run(
        &g,
        &plan,
        RunOptions::new(2).count_kind("bake"),
        events,
        move |cx| {
            let (sb, sr) = (sb.clone(), sr.clone());
            async move {
                cx.log(format!("{} step 1", cx.kind()));
                match cx.kind() {
                    "resolve" => Ok(NodeOutput::new(json!({"image_id": "vendor-123"}))),
                    "bake" => {
                        *sb.lock().unwrap() = cx
                            .dep_output("resolve")
                            .and_then(|o| o.get_str("image_id"))
                            .map(String::from);
                        Ok(NodeOutput::new(
                            json!({"build_id": "b-1", "fp": cx.fingerprint().short()}),
                        ))
                    }
                    _ => {
                        *sr.lock().unwrap() = cx.dep_output("bake").cloned();
                        Ok(NodeOutput::none())
                    }
                }
            }
        },
    )
    .await;
    assert_eq!(report.summary.baked, 1);
    assert_eq!(report.summary.finished, 3);
    assert_eq!(seen_by_bake.lock().unwrap().as_deref(), Some("vendor-123"));
    let retag_saw = seen_by_retag.lock().unwrap().clone().unwrap();
    assert_eq!(retag_saw.get_str("build_id"), Some("b-1"));
    assert_eq!(
        retag_saw.get_str("fp"),
        Some(fps.get(bake).short().as_str())
    );
    let log = log.lock().unwrap();
    assert!(log.iter().any(|e| matches!(e, Event::Log { label, line } if label.kind() == Some("bake") && line == "bake step 1")));
}

#[tokio::test]
async fn current_nodes_are_skipped_and_nothing_runs() {
    let (g, _) = graph(&["a", "b"], &[("b", "a")]);
    let fps = g.fingerprints().unwrap();
    let mut r = MemoryRecords::default();
    for id in g.ids() {
        r.insert(
            g.node(id).label().clone(),
            Record {
                fingerprint: Some(fps.get(id)),
                build: Some("b".into()),
                ..Default::default()
            },
        );
    }
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &r)
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let (events, log) = Events::collect();
    let report = run(&g, &plan, RunOptions::new(4), events, move |_cx| {
        c2.fetch_add(1, Ordering::SeqCst);
        async { Ok(NodeOutput::none()) }
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!((report.summary.baked, report.summary.skipped), (0, 2));
    assert!(report.summary.success());
    let ev = kinds(&log.lock().unwrap());
    assert_eq!(
        ev,
        [
            ("skipped".to_string(), "a".to_string()),
            ("skipped".into(), "b".into())
        ]
    );
}

#[tokio::test]
async fn a_panicking_action_is_a_failure() {
    let (g, plan) = graph(&["a", "b"], &[("b", "a")]);
    let report = run(&g, &plan, RunOptions::new(2), Events::none(), |cx| {
        let boom = cx.label().path() == "a";
        async move {
            if boom {
                panic!("bug in action");
            }
            Ok(NodeOutput::none())
        }
    })
    .await;
    assert_eq!((report.summary.failed, report.summary.not_run), (1, 1));
}

// Paused clock: the hour-long sleep and the grace period are virtual.
#[tokio::test(start_paused = true)]
async fn actions_ignoring_cancellation_are_aborted_after_the_grace_period() {
    let (g, plan) = graph(&["stubborn", "polite"], &[]);
    let token = CancellationToken::new();
    let t2 = token.clone();
    let started = Arc::new(AtomicUsize::new(0));
    let s2 = started.clone();
    let events = Events::new(move |e| {
        if matches!(e, Event::Started { .. }) && s2.fetch_add(1, Ordering::SeqCst) == 1 {
            t2.cancel(); // both running: Ctrl-C
        }
    });
    let opts = RunOptions::new(2)
        .cancel_token(token)
        .cancel_grace(Duration::from_secs(5));
    let t0 = tokio::time::Instant::now();
    let report = run(&g, &plan, opts, events, |cx| async move {
        if cx.label().path() == "stubborn" {
            tokio::time::sleep(Duration::from_secs(3600)).await; // ignores the token
            Ok(NodeOutput::none())
        } else {
            cx.cancel().cancelled().await;
            Err(NodeError::cancelled())
        }
    })
    .await;
    let stubborn = g.find(&l("//stubborn@rt:bake")).unwrap();
    match report.outcome(stubborn).unwrap() {
        NodeOutcome::Cancelled { error, .. } => {
            assert!(error.message.contains("grace period"), "{error}")
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(report.summary.cancelled, 2);
    assert_eq!(report.summary.finished, 0);
    assert!(t0.elapsed() < Duration::from_secs(3600));
}

#[tokio::test]
async fn a_rehearsal_runs_only_its_kinds_and_reports_the_others_as_would_run() {
    // a's emit -> a's bake -> b's bake (b's emit beside it), and c's bake
    // alone; only emits run.
    let mut g = Graph::new();
    for n in ["a", "b"] {
        for kind in ["emit", "bake"] {
            g.add_node(Node::new(l(&format!("//{n}@rt")), kind).with_inputs(json!({ "name": n })))
                .unwrap();
        }
        let emit = g.find(&l(&format!("//{n}@rt:emit"))).unwrap();
        let bake = g.find(&l(&format!("//{n}@rt:bake"))).unwrap();
        g.add_dep(bake, emit, Dep::hashed("emitted")).unwrap();
    }
    let (a, b) = (
        g.find(&l("//a@rt:bake")).unwrap(),
        g.find(&l("//b@rt:bake")).unwrap(),
    );
    g.add_dep(b, a, Dep::hashed("parent")).unwrap();
    // c: a bake that depends on nothing, ready at once were it run
    g.add_node(Node::new(l("//c@rt"), "bake").with_inputs(json!({ "name": "c" })))
        .unwrap();
    let fps = g.fingerprints().unwrap();
    let plan = Planner::standard()
        .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
        .unwrap();
    assert!(plan
        .nodes
        .iter()
        .filter(|n| n.kind == "bake")
        .all(|n| n.due));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (events, log) = Events::collect();
    let seen = ran.clone();
    let report = run(
        &g,
        &plan,
        RunOptions::new(2).count_kind("bake").rehearse(&["emit"]),
        events,
        move |cx| {
            seen.lock().unwrap().push(cx.label().to_string());
            async { Ok(NodeOutput::none()) }
        },
    )
    .await;
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["//a@rt:emit", "//b@rt:emit"]);
    let s = &report.summary;
    assert_eq!((s.baked, s.skipped, s.would_run, s.finished), (0, 0, 3, 2));
    assert_eq!(s.kinds["bake"].would_run, 3);
    assert!(s.success());
    assert_eq!(report.outcome(a), Some(&NodeOutcome::WouldRun));
    assert_eq!(report.outcome(b), Some(&NodeOutcome::WouldRun));
    let log = log.lock().unwrap();
    let would: Vec<&Event> = log
        .iter()
        .filter(|e| matches!(e, Event::WouldRun { .. }))
        .collect();
    assert_eq!(would.len(), 3, "{log:?}");
    assert!(
        would[0]
            .to_json_line()
            .starts_with(r#"{"event":"would_run","label":"//"#),
        "{:?}",
        would[0]
    );
    assert!(!log.iter().any(|e| matches!(e, Event::Skipped { .. })));
}
