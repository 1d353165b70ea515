//! A TEST DOUBLE FOR SSM ALONE. moto's SSM answers every command `Success`
//! with empty output at once, so the polling logic of `run_session_command`
//! and `verify_instance` is tested against this endpoint instead. It speaks
//! the AWS JSON 1.1 protocol for exactly two operations,
//! `AmazonSSM.SendCommand` and `AmazonSSM.GetCommandInvocation`, and really
//! runs each script with `sh -c` on this machine. The "instance" is a
//! directory: `/var/lib/csis/` in a script is rewritten to
//! `<root>/var/lib/csis/`, and `findmnt` is a stand-in that prints
//! `<root>/mounts`. EC2 (the instance lookups) stays with moto.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{serve, Handler, HttpRequest, HttpResponse};

/// How the double behaves for every command it receives.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// GetCommandInvocation answers `InvocationDoesNotExist` this many times first.
    pub invisible_polls: usize,
    /// Then answers `Pending` this many times before the script starts.
    pub pending_polls: usize,
    /// Never finishes: `InProgress` forever (the script is not run).
    pub hang: bool,
    /// Answer every invocation with `InvocationDoesNotExist`, forever.
    pub never_visible: bool,
}

#[derive(Debug, Default)]
struct Cmd {
    instance: String,
    script: String,
    polls: usize,
    started: bool,
    result: Option<(i32, String, String)>,
}

#[derive(Default)]
pub struct State {
    cmds: HashMap<String, Cmd>,
    pub behaviour: Behaviour,
    /// Every (operation) seen, in order.
    pub calls: Vec<String>,
    pub statuses: Vec<String>,
    next: u64,
}

pub struct SsmDouble {
    pub url: String,
    pub root: PathBuf,
    pub state: Arc<Mutex<State>>,
}

fn json_resp(v: Value) -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/x-amz-json-1.1".into())],
        body: v.to_string().into_bytes(),
    }
}

fn json_err(code: &str, msg: &str) -> HttpResponse {
    HttpResponse {
        status: 400,
        headers: vec![
            ("content-type".into(), "application/x-amz-json-1.1".into()),
            ("x-amzn-errortype".into(), code.into()),
        ],
        body: json!({"__type": code, "message": msg})
            .to_string()
            .into_bytes(),
    }
}

fn instance_script(root: &Path, script: &str) -> String {
    script.replace(
        "/var/lib/csis/",
        &format!("{}/var/lib/csis/", root.display()),
    )
}

impl SsmDouble {
    /// Start the double; `root` stands for the instance's file system.
    pub async fn start(root: &Path, behaviour: Behaviour) -> SsmDouble {
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let findmnt = bin.join("findmnt");
        csis_runtime::probe::write_executable(
            &findmnt,
            &format!(
                "#!/bin/sh\n# stand-in: the instance's mounts\ncat '{}/mounts' 2>/dev/null\n",
                root.display()
            ),
        )
        .unwrap();
        let state = Arc::new(Mutex::new(State {
            behaviour,
            ..Default::default()
        }));
        let st = state.clone();
        let root_c = root.to_path_buf();
        let h: Handler = Arc::new(move |req: HttpRequest| {
            let st = st.clone();
            let root = root_c.clone();
            Box::pin(async move { handle(st, root, req).await })
        });
        let url = serve(h).await;
        SsmDouble {
            url,
            root: root.to_path_buf(),
            state,
        }
    }

    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }
    pub fn statuses(&self) -> Vec<String> {
        self.state.lock().unwrap().statuses.clone()
    }
    pub fn scripts(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .cmds
            .values()
            .map(|c| c.script.clone())
            .collect()
    }
}

async fn handle(st: Arc<Mutex<State>>, root: PathBuf, req: HttpRequest) -> HttpResponse {
    let target = req.header("x-amz-target").unwrap_or("").to_string();
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    st.lock().unwrap().calls.push(target.clone());
    match target.as_str() {
        "AmazonSSM.SendCommand" => {
            if body["DocumentName"] != "AWS-RunShellScript" {
                return json_err("InvalidDocument", "only AWS-RunShellScript");
            }
            let instance = body["InstanceIds"][0].as_str().unwrap_or("").to_string();
            let script = body["Parameters"]["commands"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default();
            let mut s = st.lock().unwrap();
            s.next += 1;
            let id = format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), s.next);
            s.cmds.insert(
                id.clone(),
                Cmd {
                    instance: instance.clone(),
                    script,
                    ..Default::default()
                },
            );
            json_resp(
                json!({"Command": {"CommandId": id, "DocumentName": "AWS-RunShellScript",
                "InstanceIds": [instance], "Status": "Pending"}}),
            )
        }
        "AmazonSSM.GetCommandInvocation" => {
            let id = body["CommandId"].as_str().unwrap_or("").to_string();
            let inst = body["InstanceId"].as_str().unwrap_or("").to_string();
            let mut s = st.lock().unwrap();
            let b = s.behaviour.clone();
            let Some(c) = s.cmds.get_mut(&id) else {
                return json_err("InvalidCommandId", "Invalid command id.");
            };
            if c.instance != inst {
                return json_err("InvocationDoesNotExist", "no such invocation");
            }
            c.polls += 1;
            if b.never_visible || c.polls <= b.invisible_polls {
                s.statuses.push("InvocationDoesNotExist".into());
                return json_err(
                    "InvocationDoesNotExist",
                    "An error occurred (InvocationDoesNotExist)",
                );
            }
            let status;
            let mut out = json!({"CommandId": id, "InstanceId": inst, "DocumentName": "AWS-RunShellScript",
                "PluginName": "aws:runShellScript", "ResponseCode": -1,
                "StandardOutputContent": "", "StandardErrorContent": ""});
            if c.polls <= b.invisible_polls + b.pending_polls {
                status = "Pending".to_string();
            } else if b.hang {
                status = "InProgress".to_string();
            } else if let Some((rc, o, e)) = &c.result {
                status = if *rc == 0 {
                    "Success".into()
                } else {
                    "Failed".into()
                };
                out["ResponseCode"] = json!(rc);
                out["StandardOutputContent"] = json!(o);
                out["StandardErrorContent"] = json!(e);
            } else {
                if !c.started {
                    c.started = true;
                    let script = instance_script(&root, &c.script);
                    let st2 = st.clone();
                    let id2 = id.clone();
                    let path = format!(
                        "{}:{}",
                        root.join("bin").display(),
                        std::env::var("PATH").unwrap_or_default()
                    );
                    tokio::spawn(async move {
                        let o = tokio::process::Command::new("sh")
                            .arg("-c")
                            .arg(&script)
                            .env("PATH", path)
                            .output()
                            .await
                            .unwrap();
                        let r = (
                            o.status.code().unwrap_or(1),
                            String::from_utf8_lossy(&o.stdout).to_string(),
                            String::from_utf8_lossy(&o.stderr).to_string(),
                        );
                        if let Some(c) = st2.lock().unwrap().cmds.get_mut(&id2) {
                            c.result = Some(r);
                        }
                    });
                }
                status = "InProgress".into();
            }
            out["Status"] = json!(status);
            out["StatusDetails"] = json!(status);
            s.statuses.push(status);
            json_resp(out)
        }
        other => json_err(
            "UnknownOperationException",
            &format!("the SSM double knows no {other}"),
        ),
    }
}
