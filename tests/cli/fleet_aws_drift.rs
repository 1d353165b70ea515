//! The fleet's drift on AWS (issue 22): the state query reads this tree's
//! machines and volumes on EC2 (`query_instances`, `query_storages`), so a
//! launched instance or an active storage removed behind csis is `missing`
//! (hard), as on Docker, and a build relaunches the missing machine through
//! its tofu root (`-replace`, the next generation). Run as the last step
//! of `fleet_aws`, on the tree it built.

use std::path::Path;

use crate::aws_support;
use aws_support::*;
use serde_json::Value;

/// `csis state query --json`'s exit code and its fleet drift, each as
/// `[kind, name, drift]`.
pub(crate) fn fleet_drift(t: &Starter) -> (i32, Vec<[String; 3]>) {
    let (code, out, err) = t.csis(&["state", "query", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let s = |d: &Value, k: &str| d[k].as_str().unwrap_or_default().to_string();
    let drift = (r["drift"].as_array().unwrap().iter())
        .filter(|d| d["kind"] == "instance" || d["kind"] == "storage")
        .map(|d| [s(d, "kind"), s(d, "name"), s(d, "drift")])
        .collect();
    (code, drift)
}

/// `fleet_aws`'s tree, converged: its durable machine `team-node-1` and its
/// storage `data` (volume `vol`) standing.
pub(crate) fn missing_machine_relaunched(
    t: &Starter,
    env: &[(&str, String)],
    plan_json: &Path,
    record: &Path,
    vol: Option<String>,
) {
    let named = || -> Vec<String> {
        serde_json::from_value(py(&["named", "team-node-1"]).unwrap()).unwrap()
    };
    let is = |d: &[String; 3], what: [&str; 3]| d == &what;
    assert_eq!(fleet_drift(t), (0, vec![]));
    py(&["terminate", &Value::from(named()).to_string()]);
    let (code, d) = fleet_drift(t);
    assert!(
        code == 1 && is(&d[0], ["instance", "team-node-1", "missing"]),
        "{d:?}"
    );
    let m = "module.instance_team_node_1.aws_instance.this";
    // its refresh finds the machine gone: a create (the stand-in shows the
    // one plan to every root, identity roots included)
    let plan = crate::fleet_aws::plan_doc(&[(m, &["create"])]);
    std::fs::write(plan_json, plan).unwrap();
    let (code, out, err) = t.csis_with(&["build"], env);
    assert_eq!(code, 0, "{out}\n{err}");
    let calls = recorded_calls(record);
    let replace = format!("-replace={m}");
    assert!(calls.iter().any(|(_, a)| a.contains(&replace)), "{calls:?}");
    let fleet = csis_cache::MetaState::of_tree(&t.root).fleet().unwrap();
    let gen = fleet.current_generation("team-node-1").unwrap();
    assert_eq!(
        (gen.number, gen.instance_id.clone()),
        (2, named().first().cloned())
    );
    assert_eq!(fleet_drift(t), (0, vec![]));
    py(&["terminate", &Value::from(named()).to_string()]);
    if let Some(v) = vol {
        py(&["delete_volume", &v]);
    }
    let (code, d) = fleet_drift(t);
    assert_eq!(code, 1, "hard drift: {d:?}");
    assert!(
        d.iter()
            .any(|d| is(d, ["instance", "team-node-1", "missing"])),
        "{d:?}"
    );
    assert!(
        d.iter().any(|d| is(d, ["storage", "data", "missing"])),
        "{d:?}"
    );
}
