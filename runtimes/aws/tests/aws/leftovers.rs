//! What csis leaves on an AWS runtime, against moto: the power states moto
//! never holds (`pending`, `stopping`, `shutting-down`: a proxy rewrites
//! moto's answer).

use std::sync::{Arc, Mutex};

use csis_runtime::{PowerState, Runtime};

use crate::common::{self, need_moto};

/// The fixture's vendor AMI (moto seeds it in every region).
const VENDOR: &str = "ami-0deb12000000000d2";
/// The proxy's rewrite: every `<name>running</name>` of DescribeInstances
/// becomes the state set in `state`.
fn rewrite_state(state: Arc<Mutex<String>>) -> common::Rewrite {
    Arc::new(move |action: &str, body: String| {
        if action == "DescribeInstances" {
            let to = state.lock().unwrap().clone();
            body.replace("<name>running</name>", &format!("<name>{to}</name>"))
        } else {
            body
        }
    })
}

#[tokio::test]
async fn power_states_in_transition_are_starting_and_stopping() {
    let url = need_moto!();
    let ec2 = common::ec2(&url).await;
    let name = common::unique("trans");
    let id = common::run_instance(&ec2, &name, VENDOR).await;
    let state = Arc::new(Mutex::new("running".to_string()));
    let proxy = common::rewriting_proxy(&url, rewrite_state(state.clone())).await;
    let rt = common::runtime(&proxy, "aws-trans");
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Running
    );
    for (ec2_state, want) in [
        ("pending", PowerState::Starting),
        ("stopping", PowerState::Stopping),
        ("shutting-down", PowerState::Stopping),
        ("stopped", PowerState::Stopped),
        ("terminated", PowerState::Absent),
    ] {
        *state.lock().unwrap() = ec2_state.to_string();
        assert_eq!(
            rt.query_instance_power_state(&name).await.unwrap(),
            want,
            "EC2 {ec2_state}"
        );
    }
    // the vocabulary as reports and JSON carry it
    assert_eq!(
        serde_json::to_value(PowerState::Starting).unwrap(),
        serde_json::json!("starting")
    );
    assert_eq!(
        serde_json::to_value(PowerState::Stopping).unwrap(),
        serde_json::json!("stopping")
    );
    // a state EC2 may add one day: unknown, and said so
    *state.lock().unwrap() = "hibernating".to_string();
    let _ = rt.take_warnings();
    assert_eq!(
        rt.query_instance_power_state(&name).await.unwrap(),
        PowerState::Unknown
    );
    assert!(rt
        .take_warnings()
        .iter()
        .any(|w| w.contains("reports unrecognised state 'hibernating'; treating it as unknown")),);
    ec2.terminate_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap();
}
