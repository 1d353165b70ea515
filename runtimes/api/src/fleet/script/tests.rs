//! The launch script's unit tests: its order (the marker last), its POSIX
//! syntax, quoting, and what an empty part leaves out.

use super::*;

fn sample() -> LaunchScript {
    LaunchScript {
        instance: "web".into(),
        hostname: "web-001".into(),
        group: "team".into(),
        gid: Some(4100),
        admins: vec![LaunchUser {
            name: "ada".into(),
            uid: Some(4101),
            public_keys: vec!["ssh-ed25519 AAAAC3Nza ada@example".into()],
        }],
        mounts: vec![
            MountRequest {
                storage: "data".into(),
                volume: "t-data-1".into(),
                mount_point: "/mnt/data".into(),
                group: "team".into(),
                share_mode: "2770".into(),
                public_read: false,
            },
            MountRequest {
                storage: "pub".into(),
                volume: "t-pub-1".into(),
                mount_point: "/srv/pub/".into(),
                group: "team".into(),
                share_mode: "2775".into(),
                public_read: true,
            },
        ],
        userdata: "echo hello > /tmp/userdata-ran\n".into(),
    }
}

/// The line index of the first line containing `needle`.
fn at(script: &str, needle: &str) -> usize {
    script
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{script}"))
}

#[test]
fn steps_come_in_the_originals_order_and_the_marker_is_last() {
    let s = launch_script(&sample());
    assert!(s.starts_with("#!/bin/sh\n"), "{s}");
    let order = [
        "set -eu",
        "hostname 'web-001'",
        "csis_group 'team' '4100'",
        "csis_user 'ada' '4101' 'team'",
        "csis_key 'ada' 'ssh-ed25519 AAAAC3Nza ada@example'",
        "mkdir -p '/mnt/data'",
        "chmod '2770' '/mnt/data/team'",
        "mkdir -p '/srv/pub/'",
        "chmod '2775' '/srv/pub/team'",
        "chmod o+rx '/srv/pub/team'",
        "echo hello > /tmp/userdata-ran",
        "date -u +%FT%TZ > /var/lib/csis/launch-applied",
    ];
    let idx: Vec<usize> = order.iter().map(|n| at(&s, n)).collect();
    assert!(idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}\n{s}");
    assert_eq!(
        s.lines().last(),
        Some("date -u +%FT%TZ > /var/lib/csis/launch-applied")
    );
    // the private storage is not opened to others
    assert_eq!(s.matches("chmod o+rx").count(), 1, "{s}");
    // the runtime mounts the storage: the script formats nothing
    assert!(!s.contains("mkfs"), "{s}");
}

#[test]
fn it_is_a_posix_script_without_bashisms() {
    let mut unnumbered = sample();
    unnumbered.gid = None;
    unnumbered.admins[0].uid = None;
    for sc in [sample(), unnumbered] {
        let s = launch_script(&sc);
        for bashism in ["[[", "pipefail", "function ", "$'", "<<<", "source "] {
            assert!(!s.contains(bashism), "{bashism} in\n{s}");
        }
        // every shell here parses it (dash as /bin/sh, busybox's ash when present)
        for sh in ["sh", "busybox"] {
            let args: &[&str] = if sh == "busybox" {
                &["sh", "-n", "-c"]
            } else {
                &["-n", "-c"]
            };
            let out = match std::process::Command::new(sh).args(args).arg(&s).output() {
                Ok(o) => o,
                Err(_) if sh == "busybox" => continue,
                Err(e) => panic!("{sh}: {e}"),
            };
            assert!(
                out.status.success(),
                "{sh}: {}\n{s}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn values_cannot_break_out_of_their_quotes() {
    let mut sc = sample();
    sc.hostname = "x'; touch /tmp/pwned; '".into();
    sc.mounts[0].share_mode = "2770; reboot".into();
    sc.admins[0].public_keys = vec!["k'$(id)".into()];
    let s = launch_script(&sc);
    assert!(s.contains(r"'x'\''; touch /tmp/pwned; '\'''"), "{s}");
    assert!(s.contains("chmod '2770; reboot' '/mnt/data/team'"), "{s}");
    assert!(s.contains(r"csis_key 'ada' 'k'\''$(id)'"), "{s}");
    // a newline in a name does not open a line of its own in the comments
    sc.instance = "a\nrm -rf /".into();
    let s = launch_script(&sc);
    assert!(!s.lines().any(|l| l == "rm -rf /"), "{s}");
}

#[test]
fn no_userdata_no_subshell_and_no_gid_lets_the_machine_choose() {
    let mut sc = sample();
    sc.userdata = "  \n".into();
    sc.gid = None;
    sc.admins.clear();
    sc.mounts.clear();
    let s = launch_script(&sc);
    assert!(!s.contains("\n(\n"), "{s}");
    assert!(s.contains("csis_group 'team' ''"), "{s}");
    assert!(!s.contains("csis_user '"), "{s}");
}
