//! Many runners, one catalogue: concurrent `csis build`
//! processes on one tree whose records live on a shared store, against
//! moto's S3 (conditional writes: If-None-Match / If-Match answer 412) and
//! against a `file://` store.
//!
//! Afterwards every bake that reported success has exactly one record,
//! nothing is baked twice (the dummy runtime's own count of bakes), no
//! lease is left; a `kill -9` of a runner leaves a lease the next one takes
//! over after its term (`CSIS_LEASE_SECONDS`), and says so.
//!
//! moto: `runtimes/aws/tests/moto.sh` (CSIS_MOTO_URL, default
//! http://127.0.0.1:5000).

use crate::build_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Output, Stdio};

use build_support::*;
use csis_schema::model::MetaStateSpec;
use serde_json::Value;

const N: usize = 8;

fn moto_url() -> String {
    std::env::var("CSIS_MOTO_URL").unwrap_or_else(|_| "http://127.0.0.1:5000".into())
}

/// Create a bucket on moto (an unsigned path-style PUT; moto accepts it).
fn create_bucket(name: &str) {
    let url = moto_url();
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s =
        std::net::TcpStream::connect(hostport).expect("moto answers (runtimes/aws/tests/moto.sh)");
    write!(
        s,
        "PUT /{name} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200"),
        "create bucket {name}: {resp}"
    );
}

fn s3_env(c: &mut std::process::Command) {
    c.env("AWS_ENDPOINT_URL", moto_url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("AWS_ENDPOINT");
}

struct Shared {
    tree: Tree,
    url: String,
    s3: bool,
    /// For file:// stores.
    _dir: Option<tempfile::TempDir>,
}

const OS: &str = "os_builders:
  - name: deb12
    type: debian
    family: debian
    family_version: \"12\"
    is_default: true
    runtimes:
      - image_builder: sim-bake
";

/// Images a0..a7 on deb12; `version` enters every fingerprint (a test line).
fn write_images(dir: &Path, version: u32) {
    let mut s = String::from("images:\n");
    for i in 0..N {
        s.push_str(&format!(
            "  - name: a{i}\n    source_image: deb12\n    runtimes: [{{image_builder: sim-bake}}]\n    tests:\n      commands:\n        - run: \"echo v{version}\"\n"
        ));
    }
    std::fs::write(dir.join("images/images.yaml"), s).unwrap();
}

fn set_runtime_seconds(dir: &Path, secs: f64) {
    std::fs::write(
        dir.join("cfg/runtime-builders.yml"),
        format!("runtime_builders:\n  - name: sim\n    type: dummy\n    is_default: true\n    default_machine_type: small\n    bake_seconds: {secs}\n"),
    )
    .unwrap();
}

impl Shared {
    fn new(s3: bool) -> Shared {
        let tree = tree("basic");
        let d = &tree;
        std::fs::write(d.join("cfg/os-builders.yml"), OS).unwrap();
        for f in ["playbooks/web.yml", "scripts/app.sh"] {
            let _ = std::fs::remove_file(d.join(f));
        }
        write_images(d, 1);
        set_runtime_seconds(d, 0.3);
        let (url, dir) = if s3 {
            static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let bucket = format!(
                "csis-store-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            );
            create_bucket(&bucket);
            (format!("s3://{bucket}/team/records"), None)
        } else {
            let t = tempfile::tempdir().unwrap();
            (format!("file://{}", t.path().display()), Some(t))
        };
        // The store is named in the tree (`meta_state:`), as users do.
        let cfg = d.join("cfg/_config.yml");
        let c = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, format!("{c}\nmeta_state: {url}\n")).unwrap();
        Shared {
            tree,
            url,
            s3,
            _dir: dir,
        }
    }

    fn dir(&self) -> &Path {
        self.tree.path()
    }

    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.tree.csis();
        if self.s3 {
            s3_env(&mut c);
        }
        c.env("CSIS_LEASE_SECONDS", "2")
            .env("CSIS_LEASE_POLL_MS", "100")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args).spawn().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn store(&self) -> csis_cache::objstore::Store {
        let spec = MetaStateSpec::parse(&self.url).unwrap();
        // (this test process reads the store the runners write, from its
        // moto, without changing its own environment)
        let moto = moto_url();
        let env = |k: &str| match k {
            "AWS_ENDPOINT_URL" if self.s3 => Some(moto.clone()),
            "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" if self.s3 => Some("testing".into()),
            "AWS_REGION" if self.s3 => Some("us-east-1".into()),
            _ => std::env::var(k).ok(),
        };
        csis_cache::objstore::Store::open_with(&spec, &env)
            .unwrap()
            .unwrap()
    }

    /// [`Shared::run`] that must succeed.
    fn ok(&self, args: &[&str]) {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "csis {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The records on the store.
    fn lineage(&self) -> csis_cache::Lineage {
        self.ok(&["builds", "--json"]);
        // `state pull` writes the store's records into meta-state/: read them there.
        self.ok(&["state", "pull", "--json"]);
        csis_cache::MetaState::at(self.dir().join("meta-state"))
            .lineage()
            .unwrap()
    }

    fn leases_left(&self) -> Vec<String> {
        self.store().list(csis_cache::lease::LEASE_DIR).unwrap()
    }
}

/// The build ids of the bakes a `build --json` reported finished, by series.
fn finished_bakes(out: &Output) -> Vec<(String, String)> {
    events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "finished" && e["kind"] == "bake")
        .map(|e| {
            let label = e["label"].as_str().unwrap().to_string();
            let id = e["output"]["build_id"]
                .as_str()
                .unwrap_or_else(|| panic!("a finished bake names its build: {e}"))
                .to_string();
            (label, id)
        })
        .collect()
}

fn wait_all(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

/// Every bake reported finished has exactly one record; every series was
/// baked by the dummy runtime as often as `expect` says; no lease is left.
fn check(sh: &Shared, outs: &[Output], expect: &BTreeMap<String, usize>) {
    for o in outs {
        assert_eq!(
            o.status.code(),
            Some(0),
            "every runner succeeds:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let lineage = sh.lineage();
    let mut seen = BTreeMap::new();
    for o in outs {
        for (label, id) in finished_bakes(o) {
            let n = lineage.builds.iter().filter(|b| b.build_id == id).count();
            assert_eq!(n, 1, "{label} ({id}) has exactly one record");
            *seen.entry(id).or_insert(0) += 1;
        }
    }
    assert!(
        seen.values().all(|&n| n == 1),
        "no build reported by two runners: {seen:?}"
    );
    let counts = bake_counts(sh.dir());
    assert_eq!(
        &counts, expect,
        "bakes per series (the dummy runtime's count)"
    );
    let mut recorded: BTreeMap<String, usize> = BTreeMap::new();
    for b in &lineage.builds {
        *recorded.entry(b.series.clone()).or_insert(0) += 1;
    }
    assert_eq!(&recorded, expect, "one record per bake");
    assert_eq!(sh.leases_left(), Vec::<String>::new(), "no lease is left");
}

fn suite(s3: bool) {
    let sh = Shared::new(s3);
    let mut expect: BTreeMap<String, usize> = BTreeMap::new();

    // The base first, alone.
    let out = sh.run(&["build", "--json", "//os/deb12"]);
    check(&sh, &[out], &BTreeMap::from([("deb12".to_string(), 1)]));
    expect.insert("deb12".into(), 1);

    // Disjoint: runner i bakes a_i, all at once.
    let kids: Vec<Child> = (0..N)
        .map(|i| sh.spawn(&["build", "--json", &format!("//images/a{i}")]))
        .collect();
    let outs = wait_all(kids);
    for i in 0..N {
        expect.insert(format!("a{i}"), 1);
    }
    check(&sh, &outs, &expect);
    for (i, o) in outs.iter().enumerate() {
        let labels: Vec<String> = finished_bakes(o).into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, [format!("//images/a{i}@sim:bake")], "runner {i}");
    }

    // Overlapping, repeated: runner i wants a_i and a_(i+1); one wants all.
    for version in [2, 3] {
        write_images(sh.dir(), version);
        let mut kids: Vec<Child> = (0..N - 1)
            .map(|i| {
                sh.spawn(&[
                    "build",
                    "--json",
                    &format!("//images/a{i}"),
                    &format!("//images/a{}", (i + 1) % N),
                ])
            })
            .collect();
        kids.push(sh.spawn(&["build", "--json", "//images/..."]));
        let outs = wait_all(kids);
        for i in 0..N {
            *expect.get_mut(&format!("a{i}")).unwrap() += 1;
        }
        check(&sh, &outs, &expect);
        let waited = outs
            .iter()
            .any(|o| said(o).contains("waiting for the lease"));
        assert!(waited, "overlapping runners waited for each other's leases");
    }

    // kill -9 of a runner in the middle of a bake: its lease stays; while it
    // lives `--no-wait` exits 75; the next runner takes the lease over after
    // its term and says so.
    write_images(sh.dir(), 4);
    set_runtime_seconds(sh.dir(), 600.0);
    let mut victim = sh.spawn(&["build", "--json", "//images/a0"]);
    let key = csis_cache::lease::lease_key("a0", "sim");
    let store = sh.store();
    let mut started = false;
    // Wait for the lease to exist (an event, not a time: the cap is generous).
    for _ in 0..6000 {
        if store.get(&key).unwrap().is_some() {
            started = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started, "the victim took its lease");
    let busy = sh.run(&["build", "--json", "--no-wait", "//images/a0"]);
    assert_eq!(
        busy.status.code(),
        Some(75),
        "--no-wait on a held lease: {}",
        String::from_utf8_lossy(&busy.stderr)
    );
    assert!(String::from_utf8_lossy(&busy.stderr).contains("a0@sim"));
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    assert!(
        store.get(&key).unwrap().is_some(),
        "a killed runner leaves its lease"
    );
    set_runtime_seconds(sh.dir(), 0.3);
    let next = sh.run(&["build", "--json", "//images/a0"]);
    let err = said(&next);
    assert!(err.contains("took over the lease of a0@sim"), "{err}");
    *expect.get_mut("a0").unwrap() += 1;
    check(&sh, &[next], &expect);
}

#[test]
fn concurrent_builds_on_moto_s3() {
    suite(true);
}

#[test]
fn concurrent_builds_on_a_file_store() {
    suite(false);
}

/// `csis -C DIR ARGS` that must succeed: its stdout as one JSON document.
fn json_ok(dir: &Tree, args: &[&str]) -> Value {
    let out = dir.csis().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "csis {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("csis {args:?}: not one JSON document: {e}"))
}

/// `state push` migrates a local tree's records to a store; `state pull`
/// brings them back, in the original's schema.
#[test]
fn state_push_and_pull() {
    let t = tree("basic");
    let d = &t;
    let out = d
        .csis()
        .args(["build", "--json", "//os/..."])
        .output()
        .unwrap();
    assert!(out.status.success());
    let local = csis_cache::MetaState::at(d.join("meta-state"))
        .lineage()
        .unwrap();
    assert_eq!(local.builds.len(), 2);
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}", store.path().display());
    let push = ["--meta-state", &url, "state", "push", "--json"];
    assert_eq!(json_ok(d, &push)["added"], 2);
    // A second push adds nothing.
    assert_eq!(json_ok(d, &push)["added"], 0);
    // The store plans like the local records: nothing due on the bases.
    let p = json_ok(d, &["--meta-state", &url, "plan", "--json", "//os/..."]);
    assert!(due_bakes(p["nodes"].as_array().unwrap()).is_empty(), "{p}");
    // pull into a fresh copy of the tree
    let t2 = tree("basic");
    json_ok(&t2, &["--meta-state", &url, "state", "pull", "--json"]);
    let pulled = csis_cache::MetaState::at(t2.path().join("meta-state"))
        .lineage()
        .unwrap();
    let ids = |l: &csis_cache::Lineage| {
        let mut v: Vec<String> = l.builds.iter().map(|b| b.build_id.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&pulled), ids(&local));
}
