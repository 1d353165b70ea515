//! A TEST DOUBLE FOR SSM ALONE. moto's SSM answers every command `Success`
//! with empty output at once, so the polling of `run_session_command` and
//! `verify_instance` is tested against this endpoint instead (the AWS
//! runtime's `ssm_endpoint_url`, or `AWS_ENDPOINT_URL_SSM` for the binary).
//! It speaks the AWS JSON 1.1 protocol for exactly two operations,
//! `AmazonSSM.SendCommand` and `AmazonSSM.GetCommandInvocation`, and really
//! runs each script with `sh -c` on this machine. The "instance" is a
//! directory: `/var/lib/csis/` in a script is rewritten to
//! `<root>/var/lib/csis/`, and `findmnt` is a stand-in that prints
//! `<root>/mounts`. EC2 (the instance lookups) stays with moto.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::http::{serve, Handler, Request, Response};

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
struct State {
    cmds: HashMap<String, Cmd>,
    behaviour: Behaviour,
    /// Every operation seen, in order.
    calls: Vec<String>,
    /// Every status answered, in order.
    statuses: Vec<String>,
    next: u64,
}

pub struct SsmDouble {
    pub url: String,
    pub root: PathBuf,
    state: Arc<Mutex<State>>,
}

const JSON_11: &str = "application/x-amz-json-1.1";

fn ok(v: Value) -> Response {
    Response::json("200 OK", JSON_11, v.to_string())
}

fn err(code: &str, msg: &str) -> Response {
    let mut r = Response::json(
        "400 Bad Request",
        JSON_11,
        json!({"__type": code, "message": msg}).to_string(),
    );
    r.headers.push(("x-amzn-errortype".into(), code.into()));
    r
}

fn instance_script(root: &Path, script: &str) -> String {
    script.replace(
        "/var/lib/csis/",
        &format!("{}/var/lib/csis/", root.display()),
    )
}

impl SsmDouble {
    /// Start the double; `root` stands for the instance's file system.
    pub fn start(root: &Path, behaviour: Behaviour) -> SsmDouble {
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        crate::write_executable(
            &bin.join("findmnt"),
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
        let (st, at) = (state.clone(), root.to_path_buf());
        let h: Handler = Arc::new(move |req: Request| handle(&st, &at, &req));
        SsmDouble {
            url: serve(h),
            root: root.to_path_buf(),
            state,
        }
    }

    /// Write the launch script's last act into the instance.
    pub fn mark_launched(&self) {
        let dir = self.root.join("var/lib/csis");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("launch-applied"), "2026-01-01T00:00:00Z\n").unwrap();
    }

    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }
    pub fn statuses(&self) -> Vec<String> {
        self.state.lock().unwrap().statuses.clone()
    }
    pub fn scripts(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.cmds.values().map(|c| c.script.clone()).collect()
    }
}

fn handle(st: &Arc<Mutex<State>>, root: &Path, req: &Request) -> Response {
    let target = req.header("x-amz-target").unwrap_or("").to_string();
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    st.lock().unwrap().calls.push(target.clone());
    match target.as_str() {
        "AmazonSSM.SendCommand" => send(st, &body),
        "AmazonSSM.GetCommandInvocation" => poll(st, root, &body),
        other => err(
            "UnknownOperationException",
            &format!("the SSM double knows no {other}"),
        ),
    }
}

fn send(st: &Arc<Mutex<State>>, body: &Value) -> Response {
    if body["DocumentName"] != "AWS-RunShellScript" {
        return err("InvalidDocument", "only AWS-RunShellScript");
    }
    let instance = body["InstanceIds"][0].as_str().unwrap_or("").to_string();
    let script = body["Parameters"]["commands"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
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
    ok(
        json!({"Command": {"CommandId": id, "DocumentName": "AWS-RunShellScript",
        "InstanceIds": [instance], "Status": "Pending"}}),
    )
}

fn poll(st: &Arc<Mutex<State>>, root: &Path, body: &Value) -> Response {
    let id = body["CommandId"].as_str().unwrap_or("").to_string();
    let inst = body["InstanceId"].as_str().unwrap_or("").to_string();
    let mut s = st.lock().unwrap();
    let b = s.behaviour.clone();
    let Some(c) = s.cmds.get_mut(&id) else {
        return err("InvalidCommandId", "Invalid command id.");
    };
    if c.instance != inst {
        return err("InvocationDoesNotExist", "no such invocation");
    }
    c.polls += 1;
    if b.never_visible || c.polls <= b.invisible_polls {
        s.statuses.push("InvocationDoesNotExist".into());
        return err(
            "InvocationDoesNotExist",
            "An error occurred (InvocationDoesNotExist)",
        );
    }
    let mut out = json!({"CommandId": id, "InstanceId": inst, "DocumentName": "AWS-RunShellScript",
        "PluginName": "aws:runShellScript", "ResponseCode": -1,
        "StandardOutputContent": "", "StandardErrorContent": ""});
    let status = if c.polls <= b.invisible_polls + b.pending_polls {
        "Pending"
    } else if b.hang {
        "InProgress"
    } else if let Some((rc, o, e)) = &c.result {
        out["ResponseCode"] = json!(rc);
        out["StandardOutputContent"] = json!(o);
        out["StandardErrorContent"] = json!(e);
        if *rc == 0 {
            "Success"
        } else {
            "Failed"
        }
    } else {
        if !c.started {
            c.started = true;
            run(
                st.clone(),
                root,
                id.clone(),
                instance_script(root, &c.script),
            );
        }
        "InProgress"
    };
    out["Status"] = json!(status);
    out["StatusDetails"] = json!(status);
    s.statuses.push(status.into());
    ok(out)
}

/// Run the script in the background; its result answers later polls.
fn run(st: Arc<Mutex<State>>, root: &Path, id: String, script: String) {
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::thread::spawn(move || {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("PATH", path)
            .output();
        let r = match o {
            Ok(o) => (
                o.status.code().unwrap_or(1),
                String::from_utf8_lossy(&o.stdout).to_string(),
                String::from_utf8_lossy(&o.stderr).to_string(),
            ),
            Err(e) => (127, String::new(), e.to_string()),
        };
        if let Some(c) = st.lock().unwrap().cmds.get_mut(&id) {
            c.result = Some(r);
        }
    });
}
