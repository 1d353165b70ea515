//! The original's shapes of the fleet's records (launch parameters,
//! instance state, storage state) read and written back with the keys
//! csis does not know, and a bad record refused at its line.

use super::*;

const LAUNCH_YAML: &str = "\
instances:
  lab-node:
    alias: otter
    build: unbound
    enrollment:
      enrollment: a-token
      server_label: x.group=lab
    ephemeral: false
    group: lab
    hostname: lab-node-001
    identity_type: okta
    image: lab-image
    launched: false
    machine_type: m.small
    mounts:
    - builder: ebs-b
      device: /dev/xvdf
      group: lab
      mount_point: /mnt/data
      public_read: false
      share_mode: '2770'
      storage: data
      type: ebs
      future_key: 7
    run: 2026_01_02t03_04_05_000006
    session: ssm
    user_data_sha256: 9f86d081884c7d65
written_by: someone
";

const INSTANCE_YAML: &str = "\
instances:
  lab-node:
    generation:
      durable: 2
      ephemeral: 1
    current:
      number: 2
      kind: durable
      how: observed
      opened_run: r2
      opened_at: '2026-01-02T03:04:05Z'
      instance_id: i-2
      provider_hostname: ip-10-0-0-2
      launch_params:
        build: b2
    history:
    - number: 1
      kind: durable
      how: adopted
      opened_run: r0
      opened_at: '2026-01-01T00:00:00Z'
      closed_run: r2
      closed_at: '2026-01-02T03:04:05Z'
      why: replaced-out-of-band
    - event: resized
      run: r1
      machine_type: m.large
";

const STORAGE_YAML: &str = "\
storages:
  arch:
    state: active
    generation: 1
    facts:
      builder: ebs-b
      type: ebs
      archive:
        snapshot: true
    history:
      - from: null
        to: active
        run: r0
  bucket:
    state: archived
    generation: 3
    note: kept
    facts:
      builder: s3-b
      type: s3
      bucket_name: some-bucket
    history:
      - from: null
        to: active
        run: r0
      - from: active
        to: archived
        run: r1
        generation: 3
        action: archive
        plugin_step: snapshot
";

fn parse(text: &str) -> serde_json::Value {
    csis_schema::yaml::from_str("t", text).unwrap()
}

#[test]
fn the_originals_shapes_round_trip_with_unknown_keys() {
    let t = tree();
    std::fs::create_dir_all(t.meta.dir()).unwrap();
    for (file, text) in [
        (LAUNCH_PARAMS_FILE, LAUNCH_YAML),
        (INSTANCE_STATE_FILE, INSTANCE_YAML),
        (STORAGE_STATE_FILE, STORAGE_YAML),
    ] {
        std::fs::write(t.meta.dir().join(file), text).unwrap();
    }
    let f = t.meta.fleet().unwrap();
    let lp = f.launch_record("lab-node").unwrap();
    assert_eq!((lp.build.as_str(), lp.bound_build()), ("unbound", None));
    assert_eq!(lp.mounts[0].share_mode, "2770");
    assert_eq!(lp.mounts[0].device.as_deref(), Some("/dev/xvdf"));
    assert!(lp.extra.contains_key("enrollment") && lp.extra.contains_key("alias"));
    let g = f.current_generation("lab-node").unwrap();
    assert_eq!((g.number, g.how), (2, How::Observed));
    let l = &f.instances.instances["lab-node"];
    assert_eq!(l.closed().next().unwrap().why, CloseWhy::ReplacedOutOfBand);
    assert_eq!(l.history.len(), 2, "the resized event is kept");
    assert_eq!(f.storage_state("bucket"), Some(StorageState::Archived));
    // Written back: the same documents (unknown keys kept), keys sorted.
    t.meta.save_fleet(&FleetRecords::default()).unwrap();
    t.meta.save_fleet(&f).unwrap();
    for (file, text) in [
        (LAUNCH_PARAMS_FILE, LAUNCH_YAML),
        (INSTANCE_STATE_FILE, INSTANCE_YAML),
        (STORAGE_STATE_FILE, STORAGE_YAML),
    ] {
        let out = std::fs::read_to_string(t.meta.dir().join(file)).unwrap();
        assert_eq!(parse(&out), parse(text), "{file}:\n{out}");
        assert!(out.contains("from: null") || file != STORAGE_STATE_FILE);
    }
    let out = std::fs::read_to_string(t.meta.dir().join(LAUNCH_PARAMS_FILE)).unwrap();
    let keys: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     ") && !l.starts_with("    -"))
        .map(|l| l.trim().split(':').next().unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted keys");
    let v = parse(&out);
    assert_eq!(
        v["instances"]["lab-node"]["mounts"][0]["share_mode"],
        serde_json::json!("2770"),
        "a string stays a string"
    );
}

#[test]
fn bad_records_are_refused_at_their_line() {
    let t = tree();
    std::fs::create_dir_all(t.meta.dir()).unwrap();
    std::fs::write(
        t.meta.dir().join(STORAGE_STATE_FILE),
        "storages:\n  s:\n    state: melted\n",
    )
    .unwrap();
    let e = t.meta.fleet().unwrap_err().to_string();
    assert!(e.contains("storage-state.yaml") && e.contains(":3"), "{e}");
    std::fs::write(
        t.meta.dir().join(LAUNCH_PARAMS_FILE),
        "instances:\n  a:\n    launched: 'yes'\n",
    )
    .unwrap();
    let e = LaunchParams::load(&t.meta).unwrap_err().to_string();
    assert!(e.contains("launch-params.yaml") && e.contains(":3"), "{e}");
}
