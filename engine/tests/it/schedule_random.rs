//! Randomized (seeded, deterministic) checks of the scheduler's invariants on
//! generated DAGs with random failures, job counts and pool limits:
//! - a node starts only after every due dependency finished;
//! - no descendant of a failed node starts;
//! - every due node ends exactly one of finished / failed / not run;
//! - never more than `jobs` actions at once, nor more than a pool's limit;
//! - the summary's counts match the events.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use csis_engine::*;
use serde_json::json;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test]
async fn scheduler_invariants_on_random_dags() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let n = 5 + rng.below(40) as usize;
        let mut g = Graph::new();
        let pools = ["a", "b", "c"];
        let ids: Vec<NodeId> = (0..n)
            .map(|i| {
                let pool = pools[rng.below(3) as usize];
                g.add_node(
                    Node::new(Label::parse(&format!("//n{i}@{pool}")).unwrap(), "bake")
                        .with_inputs(json!({ "i": i }))
                        .with_pool(pool)
                        .with_cost(1 + rng.below(5)),
                )
                .unwrap()
            })
            .collect();
        for i in 1..n {
            for _ in 0..rng.below(3) {
                let j = rng.below(i as u64) as usize;
                g.add_dep(ids[i], ids[j], Dep::Order).unwrap();
            }
        }
        let fps = g.fingerprints().unwrap();
        let plan = Planner::standard()
            .plan(&g, &g.select_all(), &fps, &MemoryRecords::default())
            .unwrap();
        let failing: HashSet<NodeId> = ids.iter().copied().filter(|_| rng.below(8) == 0).collect();
        let jobs = 1 + rng.below(4) as usize;
        let limit_a = 1 + rng.below(2) as usize;
        let opts = RunOptions::new(jobs).pool_limit("a", limit_a);

        let running = Arc::new(AtomicUsize::new(0));
        let running_a = Arc::new(AtomicUsize::new(0));
        let violations = Arc::new(Mutex::new(Vec::<String>::new()));
        let (events, log) = Events::collect();
        let (r, ra, v, f) = (
            running.clone(),
            running_a.clone(),
            violations.clone(),
            failing.clone(),
        );
        let report = run(&g, &plan, opts, events, move |cx| {
            // Counted from the call (made by the scheduler when it starts the
            // node) to the end of the future; current-thread runtime.
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            let in_a = cx.node().pool() == Some("a");
            let now_a = if in_a {
                ra.fetch_add(1, Ordering::SeqCst) + 1
            } else {
                0
            };
            if now > jobs || now_a > limit_a {
                v.lock()
                    .unwrap()
                    .push(format!("{now} running ({now_a} in a)"));
            }
            let fail = f.contains(&cx.id());
            let (r, ra) = (r.clone(), ra.clone());
            async move {
                tokio::task::yield_now().await;
                r.fetch_sub(1, Ordering::SeqCst);
                if in_a {
                    ra.fetch_sub(1, Ordering::SeqCst);
                }
                if fail {
                    Err(NodeError::new("injected"))
                } else {
                    Ok(NodeOutput::none())
                }
            }
        })
        .await;
        assert!(
            violations.lock().unwrap().is_empty(),
            "seed {seed}: {:?}",
            violations.lock().unwrap()
        );

        let log = log.lock().unwrap();
        let mut started: HashMap<String, usize> = HashMap::new();
        let mut finished: HashMap<String, usize> = HashMap::new();
        let mut failed: HashSet<String> = HashSet::new();
        let mut not_run: HashSet<String> = HashSet::new();
        for (i, e) in log.iter().enumerate() {
            match e {
                Event::Started { label, .. } => {
                    assert!(
                        started.insert(label.to_string(), i).is_none(),
                        "seed {seed}: started twice"
                    );
                }
                Event::Finished { label, .. } => {
                    finished.insert(label.to_string(), i);
                }
                Event::Failed { label, .. } => {
                    failed.insert(label.to_string());
                }
                Event::NotRun { label, .. } => {
                    not_run.insert(label.to_string());
                }
                _ => {}
            }
        }
        for &id in &ids {
            let me = g.node(id).label().to_string();
            let outcomes = [
                finished.contains_key(&me),
                failed.contains(&me),
                not_run.contains(&me),
            ];
            assert_eq!(
                outcomes.iter().filter(|&&b| b).count(),
                1,
                "seed {seed}: {me} {outcomes:?}"
            );
            if let Some(&s) = started.get(&me) {
                for (d, _) in g.deps(id) {
                    let dl = g.node(d).label().to_string();
                    let fin = finished.get(&dl).copied();
                    assert!(
                        fin.is_some_and(|f| f < s),
                        "seed {seed}: {me} started before {dl} finished"
                    );
                }
            }
            // Expected fate: not run iff some ancestor failed.
            let mut stack = vec![id];
            let mut seen = HashSet::new();
            let mut failed_ancestor = false;
            while let Some(v) = stack.pop() {
                for (d, _) in g.deps(v) {
                    if seen.insert(d) {
                        failed_ancestor |= failing.contains(&d);
                        stack.push(d);
                    }
                }
            }
            assert_eq!(not_run.contains(&me), failed_ancestor, "seed {seed}: {me}");
            assert_eq!(
                failed.contains(&me),
                !failed_ancestor && failing.contains(&id),
                "seed {seed}: {me}"
            );
        }
        let s = &report.summary;
        assert_eq!(
            (s.finished, s.failed, s.not_run, s.cancelled),
            (finished.len(), failed.len(), not_run.len(), 0),
            "seed {seed}"
        );
        assert!(matches!(log.last(), Some(Event::Summary(_))));
    }
}
