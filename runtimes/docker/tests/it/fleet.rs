//! The fleet hooks against this machine's real Docker daemon: instances as
//! containers, storages as volumes, the launch script in a busybox
//! container. Each test has its own config ids and names and removes what
//! it made, also when it fails.

use crate::common;
use crate::need_daemon;

use csis_runtime::fleet::{instance_labels, storage_labels};
use csis_runtime::{
    launch_script, LaunchRequest, LaunchScript, LaunchUser, MountRequest, Runtime, RuntimeError,
    StorageRequest, VerifyCheck,
};
use csis_runtime_docker::{volume_name, DockerRuntime};
use csis_schema::tags;
use csis_testkit::docker::docker;

use common::*;

/// Removes the volumes and containers a test made, even on panic.
#[derive(Default)]
struct Made {
    containers: std::sync::Mutex<Vec<String>>,
    volumes: std::sync::Mutex<Vec<String>>,
    images: std::sync::Mutex<Vec<String>>,
}

impl Made {
    fn container(&self, n: &str) {
        self.containers.lock().unwrap().push(n.into());
    }
    fn volume(&self, n: &str) {
        self.volumes.lock().unwrap().push(n.into());
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for c in self.containers.lock().unwrap().iter() {
            let _ = docker(&["rm", "-f", c]);
        }
        for v in self.volumes.lock().unwrap().iter() {
            let _ = docker(&["volume", "rm", "-f", v]);
        }
        for i in self.images.lock().unwrap().iter() {
            let _ = docker(&["rmi", "-f", i]);
        }
    }
}

/// A runtime of the tree whose id is `config`.
fn tree_runtime(tag: &str, config: &str) -> (DockerRuntime, Cleanup) {
    let config = config.to_string();
    runtime_with(tag, move |s| s.config = Some(config))
}

fn inspect(object: &str, format: &str) -> String {
    docker(&["inspect", "--format", format, object]).unwrap_or_default()
}

fn storage_request(config: &str, storage: &str, generation: u32) -> StorageRequest {
    StorageRequest {
        storage: storage.into(),
        generation,
        labels: storage_labels(storage, config, generation),
    }
}

fn mount(storage: &str, volume: &str, mount_point: &str, public_read: bool) -> MountRequest {
    MountRequest {
        storage: storage.into(),
        volume: volume.into(),
        mount_point: mount_point.into(),
        group: "team".into(),
        share_mode: "2770".into(),
        public_read,
    }
}

fn script(hostname: &str, mounts: &[MountRequest], userdata: &str) -> LaunchScript {
    LaunchScript {
        instance: "web".into(),
        hostname: hostname.into(),
        group: "team".into(),
        gid: Some(4200),
        admins: vec![LaunchUser {
            name: "ada".into(),
            uid: Some(4201),
            public_keys: vec!["ssh-ed25519 AAAAC3NzaTEST ada@example".into()],
        }],
        mounts: mounts.to_vec(),
        userdata: userdata.into(),
    }
}

/// A launch of `web` generation `generation` on `config`'s tree.
fn launch_request(
    prefix: &str,
    config: &str,
    build: &str,
    generation: u32,
    mounts: Vec<MountRequest>,
    userdata: &str,
) -> LaunchRequest {
    let hostname = format!("{prefix}-web-{generation:03}");
    LaunchRequest {
        instance: "web".into(),
        launch_script: launch_script(&script(&hostname, &mounts, userdata)),
        hostname,
        build_id: build.into(),
        generation,
        machine_type: None,
        mounts,
        labels: instance_labels("web", config, build, generation),
        ephemeral: false,
    }
}

fn check<'a>(checks: &'a [VerifyCheck], name: &str) -> &'a VerifyCheck {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}: {checks:?}"))
}

async fn sh(rt: &DockerRuntime, container: &str, cmd: &str) -> String {
    let r = rt.run_session_command(container, cmd, 30).await.unwrap();
    assert_eq!(r.exit_code, 0, "{cmd}: {}{}", r.stdout, r.stderr);
    r.stdout.trim().to_string()
}

/// An image of `base` whose own command leaves a trace before it waits.
fn image_with_command(base: &str, made: &Made, tag: &str) -> String {
    let c = format!("csis-fleet-cmd-{}", rand_suffix());
    made.container(&c);
    docker(&["create", "--name", &c, base, "true"]).expect("create");
    let img = format!("csis-test/fleet-cmd:{tag}");
    made.images.lock().unwrap().push(img.clone());
    let id = docker(&[
        "commit",
        "--change",
        r#"CMD ["sh", "-c", "echo own-command > /tmp/own; exec sleep 1000000"]"#,
        &c,
        &img,
    ])
    .expect("commit");
    let _ = docker(&["rm", "-f", &c]);
    id
}

#[tokio::test]
async fn the_launch_script_runs_twice_and_changes_nothing_the_second_time() {
    let d = need_daemon!();
    let base = busybox_image(&d).await;
    let (rt, _cleanup) = runtime("fls");
    let made = Made::default();
    let name = format!("csis-fleet-script-{}", rand_suffix());
    made.container(&name);
    docker(&["run", "-d", "--name", &name, &base, "sleep", "600"]).expect("run");
    sh(&rt, &name, "mkdir -p /mnt/data").await;
    let mounts = [
        mount("data", "unused", "/mnt/data", false),
        mount("pub", "unused", "/srv/pub", true),
    ];
    let s = launch_script(&script("web-001", &mounts, "echo ran >> /tmp/userdata"));
    let state = "cat /etc/group /etc/passwd /home/ada/.ssh/authorized_keys; \
                 stat -c '%n %a %u %g' /mnt/data/team /srv/pub/team /home/ada/.ssh /home/ada/.ssh/authorized_keys";
    let r = rt.run_session_command(&name, &s, 60).await.unwrap();
    assert_eq!(r.exit_code, 0, "{}{}\n{s}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("csis-mount: /srv/pub NOT mounted"),
        "{}",
        r.stdout
    );
    let first = sh(&rt, &name, state).await;
    let marker1 = sh(&rt, &name, "cat /var/lib/csis/launch-applied").await;
    // the group with its gid, the admin in it, its key; the subtrees' modes
    assert!(first.contains("team:x:4200:ada"), "{first}");
    assert!(
        first.contains("ada:x:4201:4200::/home/ada:/bin/sh"),
        "{first}"
    );
    assert!(first.contains("/mnt/data/team 2770 0 4200"), "{first}");
    assert!(first.contains("/srv/pub/team 2775 0 4200"), "{first}");
    assert!(
        first.contains("/home/ada/.ssh/authorized_keys 600 4201 4200"),
        "{first}"
    );
    assert!(marker1.ends_with('Z') && marker1.len() == 20, "{marker1}");
    // again, as a restart does: nothing changes but the marker's time
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let r = rt.run_session_command(&name, &s, 60).await.unwrap();
    assert_eq!(r.exit_code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(sh(&rt, &name, state).await, first);
    assert_eq!(sh(&rt, &name, "cat /tmp/userdata").await, "ran\nran");
    let marker2 = sh(&rt, &name, "cat /var/lib/csis/launch-applied").await;
    assert_ne!(marker1, marker2, "the marker is written last, each run");
    // a failing step stops the script before the marker
    sh(&rt, &name, "rm /var/lib/csis/launch-applied").await;
    let failing = launch_script(&script("web-001", &mounts, "false"));
    let r = rt.run_session_command(&name, &failing, 60).await.unwrap();
    assert_ne!(r.exit_code, 0);
    let r = rt
        .run_session_command(&name, "test -e /var/lib/csis/launch-applied", 10)
        .await
        .unwrap();
    assert_eq!(r.exit_code, 1, "no marker after a failed step");
}

#[tokio::test]
async fn an_instance_on_a_volume_verifies_and_its_data_outlives_it() {
    let d = need_daemon!();
    let base = busybox_image(&d).await;
    let suffix = rand_suffix();
    let config = format!("Fleet-Docker-{suffix}");
    let (rt, _cleanup) = tree_runtime("flv", &config);
    let made = Made::default();
    let build = image_with_command(&base, &made, &suffix);
    let vol = volume_name(&config, "data", 1);
    made.volume(&vol);
    assert_eq!(vol, format!("fleet-docker-{suffix}-data-1"));
    let s = rt
        .create_storage(&storage_request(&config, "data", 1))
        .await
        .unwrap();
    assert_eq!((s.storage.as_str(), s.id.as_str()), ("data", vol.as_str()));
    assert_eq!(s.labels[tags::CONFIG], config.to_lowercase());
    assert_eq!(s.generation(), Some(1));
    assert!(s.users.is_empty());
    // idempotent
    let again = rt
        .create_storage(&storage_request(&config, "data", 1))
        .await
        .unwrap();
    assert_eq!(again, s);
    // a volume labelled with the id as written (csis's earlier form) is ours too
    let earlier = format!("csis-fleet-earlier-{suffix}");
    made.volume(&earlier);
    let (st, cf) = (
        format!("{}=old", tags::STORAGE),
        format!("{}={config}", tags::CONFIG),
    );
    docker(&["volume", "create", "--label", &st, "--label", &cf, &earlier]).expect("volume");
    let seen: Vec<String> = rt
        .query_storages()
        .await
        .unwrap()
        .into_iter()
        .map(|f| format!("{} {}", f.storage, f.id))
        .collect();
    assert_eq!(seen, [format!("data {vol}"), format!("old {earlier}")]);
    assert!(rt.destroy_storage(&earlier).await.unwrap());

    let prefix = format!("csis-fleet-{suffix}");
    let mounts = vec![mount("data", &vol, "/mnt/data", false)];
    let req = launch_request(&prefix, &config, &build, 1, mounts.clone(), "");
    made.container(&req.hostname);
    let l = rt.launch_instance(&req).await.unwrap();
    assert_eq!(l.hostname, req.hostname);
    assert_eq!(l.id.len(), 64);
    launched_as_asked(&req, &build);
    verified(&rt, &req.hostname, &build, 1).await;
    assert_eq!(sh(&rt, &req.hostname, "cat /tmp/own").await, "own-command");
    assert_eq!(
        sh(&rt, &req.hostname, "stat -c '%a %g' /mnt/data/team").await,
        "2770 4200"
    );
    assert_eq!(sh(&rt, &req.hostname, "hostname").await, req.hostname);
    wrong_expectations_are_answers(&rt, &req.hostname, &base).await;
    // a launch repeated (a kill before it was recorded) answers the same machine
    assert_eq!(rt.launch_instance(&req).await.unwrap(), l);
    // a restart runs the launch script again: still verified
    rt.stop_instance(&req.hostname, 2).await.unwrap();
    rt.start_instance(&req.hostname, 20).await.unwrap();
    launch_logged(&req.hostname, 2).await;
    verified(&rt, &req.hostname, &build, 1).await;

    in_the_inventory(&rt, &req, &build, &vol).await;
    sh(&rt, &req.hostname, "echo kept > /mnt/data/team/f").await;
    in_use_then_replaced(&rt, &req, &vol, &prefix, &config, &build, &made).await;
}

/// The container's log says its launch script finished `n` times.
async fn launch_logged(name: &str, n: usize) {
    let mut logs = String::new();
    for _ in 0..120 {
        let out = std::process::Command::new("docker")
            .args(["logs", name])
            .output()
            .unwrap();
        logs = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if logs.matches("csis-launch: done").count() >= n {
            assert!(!logs.contains("failed"), "{logs}");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("the launch script did not finish {n} times: {logs}");
}

/// The inventory lists the instance and its volume with their labels; the
/// build it runs is in use and is not disposed.
async fn in_the_inventory(rt: &DockerRuntime, req: &LaunchRequest, build: &str, vol: &str) {
    let inv = rt.inventory().await.unwrap();
    let i = inv
        .instances
        .iter()
        .find(|i| i.name.as_deref() == Some(req.hostname.as_str()))
        .expect("the instance in the inventory");
    assert_eq!(i.labels, req.labels);
    assert_eq!(i.config, req.labels.get(tags::CONFIG).cloned());
    let v = inv
        .volumes
        .iter()
        .find(|v| v.name == vol)
        .expect("the volume");
    assert_eq!(v.labels[tags::STORAGE], "data");
    let users = rt.image_users(build).await.unwrap();
    assert!(
        users.iter().any(|u| u.starts_with(&req.hostname)),
        "{users:?}"
    );
    let e = rt.dispose_image(build).await.unwrap_err();
    assert!(e.to_string().contains("in use by container(s)"), "{e}");
}

/// The container is what the request asked for.
fn launched_as_asked(req: &LaunchRequest, build: &str) {
    let h = &req.hostname;
    assert_eq!(inspect(h, "{{.Image}}"), build);
    assert_eq!(
        inspect(h, "{{.HostConfig.RestartPolicy.Name}}"),
        "unless-stopped"
    );
    assert_eq!(inspect(h, "{{.HostConfig.NetworkMode}}"), "bridge");
    assert_eq!(inspect(h, "{{.HostConfig.NanoCpus}}"), "1000000000");
    assert_eq!(
        inspect(h, "{{.HostConfig.Memory}}"),
        (256 << 20).to_string()
    );
    assert_eq!(inspect(h, "{{.Config.Hostname}}"), *h);
    for (k, v) in &req.labels {
        assert_eq!(
            inspect(h, &format!("{{{{index .Config.Labels \"{k}\"}}}}")),
            *v
        );
    }
}

/// Every check passes, the marker and the one mount among them.
async fn verified(rt: &DockerRuntime, name: &str, build: &str, mounts: usize) {
    let checks = rt.verify_instance(name, build, mounts, 30).await.unwrap();
    assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    assert!(check(&checks, "startup scripts")
        .detail
        .starts_with("/var/lib/csis/launch-applied present"));
    assert_eq!(
        check(&checks, "data disks mounted").detail,
        format!("{mounts} volume(s) mounted, {mounts} declared")
    );
}

/// Another build expected, or more mounts: failed checks, as answers.
async fn wrong_expectations_are_answers(rt: &DockerRuntime, name: &str, other: &str) {
    let checks = rt.verify_instance(name, other, 1, 5).await.unwrap();
    let b = check(&checks, "booted image");
    assert!(!b.ok, "{checks:#?}");
    assert!(b.detail.ends_with(&format!("expected {other}")), "{b:?}");
    assert!(check(&checks, "startup scripts").ok);
    let checks = rt.verify_instance(name, other, 2, 5).await.unwrap();
    let m = check(&checks, "data disks mounted");
    assert!(
        !m.ok && m.detail == "1 volume(s) mounted, 2 declared",
        "{m:?}"
    );
    assert_eq!(m.evidence.len(), 1, "{m:?}");
    assert!(m.evidence[0].ends_with(" at /mnt/data: mounted"), "{m:?}");
}

/// Destroy refused while the instance mounts the volume; the instance
/// removed and launched again (generation 2) on it: the data is there;
/// then the volume goes.
async fn in_use_then_replaced(
    rt: &DockerRuntime,
    req: &LaunchRequest,
    vol: &str,
    prefix: &str,
    config: &str,
    build: &str,
    made: &Made,
) {
    let e = rt.destroy_storage(vol).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Refused(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains(&format!("in use by container(s) {}", req.hostname)),
        "{e}"
    );
    let st = rt.query_storages().await.unwrap();
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(st[0].users, std::slice::from_ref(&req.hostname));
    let inst = rt.query_instances().await.unwrap();
    assert_eq!(inst.len(), 1, "{inst:?}");
    assert_eq!(inst[0].name.as_deref(), Some(req.hostname.as_str()));
    assert_eq!(inst[0].labels[tags::GENERATION], "1");
    assert_eq!(inst[0].image.as_deref(), Some(build));

    assert!(rt.remove_instance(&req.hostname).await.unwrap());
    assert!(!rt.remove_instance(&req.hostname).await.unwrap(), "gone");
    let next = launch_request(prefix, config, build, 2, req.mounts.clone(), "");
    made.container(&next.hostname);
    rt.launch_instance(&next).await.unwrap();
    verified(rt, &next.hostname, build, 1).await;
    assert_eq!(sh(rt, &next.hostname, "cat /mnt/data/team/f").await, "kept");
    assert!(rt.remove_instance(&next.hostname).await.unwrap());
    assert!(rt.query_instances().await.unwrap().is_empty());
    assert!(rt.destroy_storage(vol).await.unwrap());
    assert!(!rt.destroy_storage(vol).await.unwrap(), "gone");
    assert!(docker(&["volume", "inspect", vol]).is_none());
}

#[tokio::test]
async fn another_trees_containers_and_volumes_are_invisible_and_untouched() {
    let d = need_daemon!();
    let base = busybox_image(&d).await;
    let suffix = rand_suffix();
    let (ours, theirs) = (format!("ours-{suffix}"), format!("theirs-{suffix}"));
    let (rt, _c1) = tree_runtime("flo", &ours);
    let (other, _c2) = tree_runtime("flt", &theirs);
    let made = Made::default();
    let their_vol = other
        .create_storage(&storage_request(&theirs, "data", 1))
        .await
        .unwrap()
        .id;
    made.volume(&their_vol);
    let prefix = format!("csis-fleet-{suffix}");
    let mounts = vec![mount("data", &their_vol, "/mnt/data", false)];
    let their = launch_request(&prefix, &theirs, &base, 1, mounts, "");
    made.container(&their.hostname);
    other.launch_instance(&their).await.unwrap();
    let id_before = inspect(&their.hostname, "{{.Id}}");

    // invisible to us
    assert!(rt.query_instances().await.unwrap().is_empty());
    assert!(rt.query_storages().await.unwrap().is_empty());
    assert_eq!(other.query_instances().await.unwrap().len(), 1);
    assert_eq!(other.query_storages().await.unwrap().len(), 1);
    // untouched: our launch of that name, a removal, a destroy, a mount of it
    let ours_req = launch_request(&prefix, &ours, &base, 1, vec![], "");
    assert_eq!(ours_req.hostname, their.hostname);
    let refused = |e: RuntimeError, what: &str| {
        assert!(matches!(e, RuntimeError::Refused(_)), "{e:?}");
        assert!(e.to_string().contains(what), "{e}");
    };
    refused(
        rt.launch_instance(&ours_req).await.unwrap_err(),
        "it is not touched",
    );
    refused(
        rt.remove_instance(&their.hostname).await.unwrap_err(),
        "is not an instance of this tree",
    );
    refused(
        rt.destroy_storage(&their_vol).await.unwrap_err(),
        "is not a storage of this tree",
    );
    let mut mounting = launch_request(&format!("{prefix}-b"), &ours, &base, 1, vec![], "");
    mounting.mounts = vec![mount("data", &their_vol, "/mnt/data", false)];
    refused(
        rt.launch_instance(&mounting).await.unwrap_err(),
        "is not storage data of this tree",
    );
    assert!(docker(&["inspect", &mounting.hostname]).is_none());
    assert_eq!(inspect(&their.hostname, "{{.Id}}"), id_before);
    assert_eq!(inspect(&their.hostname, "{{.State.Running}}"), "true");
    assert!(docker(&["volume", "inspect", &their_vol]).is_some());
    // a container csis did not make, of an instance's name: refused too
    let plain = launch_request(&format!("{prefix}-c"), &ours, &base, 1, vec![], "");
    made.container(&plain.hostname);
    docker(&["create", "--name", &plain.hostname, &base, "true"]).expect("create");
    refused(
        rt.launch_instance(&plain).await.unwrap_err(),
        "no csis labels",
    );
    refused(
        rt.remove_instance(&plain.hostname).await.unwrap_err(),
        "not removed",
    );
    // our storage of the same name is our own volume
    let our_vol = rt
        .create_storage(&storage_request(&ours, "data", 1))
        .await
        .unwrap();
    made.volume(&our_vol.id);
    assert_ne!(our_vol.id, their_vol);
    assert_eq!(rt.query_storages().await.unwrap(), vec![our_vol]);
    // a request for another tree than the runtime's is refused
    let foreign = launch_request(&format!("{prefix}-d"), &theirs, &base, 1, vec![], "");
    refused(
        rt.launch_instance(&foreign).await.unwrap_err(),
        &format!("serves tree {ours}"),
    );
    refused(
        rt.create_storage(&storage_request(&theirs, "logs", 1))
            .await
            .unwrap_err(),
        "is for tree",
    );
    assert!(docker(&["inspect", &foreign.hostname]).is_none());
    // a hostname that is not a label
    let mut bad = launch_request(&format!("{prefix}-e"), &ours, &base, 1, vec![], "");
    bad.hostname = format!("{prefix}_e.web");
    refused(
        rt.launch_instance(&bad).await.unwrap_err(),
        "is not a hostname label",
    );
    assert!(docker(&["inspect", &bad.hostname]).is_none());
    // a runtime that does not know its tree answers no fleet query
    let (bare, _c3) = runtime("flb");
    refused(bare.query_instances().await.unwrap_err(), "config id");
}

#[tokio::test]
async fn a_failed_launch_script_leaves_a_running_container_that_does_not_verify() {
    let d = need_daemon!();
    let base = busybox_image(&d).await;
    let suffix = rand_suffix();
    let config = format!("fail-{suffix}");
    let (rt, _cleanup) = tree_runtime("flf", &config);
    let made = Made::default();
    let req = launch_request(
        &format!("csis-fleet-{suffix}"),
        &config,
        &base,
        1,
        vec![],
        "echo userdata-broke >&2; exit 3",
    );
    made.container(&req.hostname);
    rt.launch_instance(&req).await.unwrap();
    // the launch script is in the container, not in its configuration
    let config = docker(&["inspect", &req.hostname]).unwrap();
    assert!(config.contains("csis-launch"), "{config}");
    assert!(!config.contains("userdata-broke"), "{config}");
    assert!(!config.contains("csis_group"), "{config}");
    let checks = rt
        .verify_instance(&req.hostname, &base, 0, 2)
        .await
        .unwrap();
    assert!(check(&checks, "running").ok, "{checks:#?}");
    assert!(check(&checks, "booted image").ok, "{checks:#?}");
    let s = check(&checks, "startup scripts");
    assert!(!s.ok, "{checks:#?}");
    assert_eq!(s.detail, "no completion marker within 2s");
    assert!(
        s.evidence.iter().any(|l| l == "userdata-broke"),
        "{checks:#?}"
    );
    assert!(rt.remove_instance(&req.hostname).await.unwrap());
}
