//! Who owns a bake machine: `<host>:<pid>` of the csis process that runs
//! it. A leftover bake container or builder instance is removed only when
//! its owner is gone on this host, or, from another host, after a generous
//! age ([`STALE_AFTER`]); never because its name matches.

use std::time::{Duration, SystemTime};

/// How old a bake machine of another host's csis (or of an unknown owner)
/// must be before it counts as left behind: a bake still running after a
/// day is not one to keep waiting on.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

/// The owner mark of this process.
pub fn bake_owner() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// Is the owner `<host>:<pid>` alive? `None` when it is another host's (or
/// unreadable): this host cannot tell.
pub fn owner_alive(owner: &str, this_host: &str) -> Option<bool> {
    let (host, pid) = owner.rsplit_once(':')?;
    let pid: u32 = pid.parse().ok()?;
    if host != this_host {
        return None;
    }
    if pid == std::process::id() {
        return Some(true);
    }
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return None;
    }
    Some(proc.join(pid.to_string()).exists())
}

/// The verdict on a bake machine: left behind when its owner is a process
/// of this host that is gone, or (another host's, or no owner mark) when it
/// is older than `stale_after`. A live owner keeps it.
pub fn is_left_behind(
    owner: Option<&str>,
    created: Option<SystemTime>,
    now: SystemTime,
    stale_after: Duration,
    this_host: &str,
) -> bool {
    if let Some(alive) = owner.and_then(|o| owner_alive(o, this_host)) {
        return !alive;
    }
    match created {
        Some(t) => now.duration_since(t).is_ok_and(|age| age > stale_after),
        None => false,
    }
}

/// A run id (`2026_11_30t06_26_25_779098`) as a time.
pub fn run_time(run: &str) -> Option<SystemTime> {
    let p: Vec<&str> = run.split(['_', 't', 'T']).collect();
    if p.len() < 6 {
        return None;
    }
    let n = |i: usize| p[i].parse::<i64>().ok();
    let (y, mo, d, h, mi, s) = (n(0)?, n(1)?, n(2)?, n(3)?, n(4)?, n(5)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // days from civil (Howard Hinnant)
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs)
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        let host = host_name();
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let me = bake_owner();
        assert!(!is_left_behind(Some(&me), None, now, day, &host));
        // a pid that cannot be alive on this host (above pid_max)
        let dead = format!("{host}:4294967294");
        assert!(is_left_behind(Some(&dead), None, now, day, &host));
        // another host: only by age
        let young = Some(now - Duration::from_secs(60));
        let old = Some(now - 2 * day);
        assert!(!is_left_behind(Some("elsewhere:1"), young, now, day, &host));
        assert!(is_left_behind(Some("elsewhere:1"), old, now, day, &host));
        assert!(!is_left_behind(None, None, now, day, &host));
        assert!(is_left_behind(None, old, now, day, &host));
    }

    #[test]
    fn run_times() {
        let t = run_time("2026_11_30t06_26_25_779098").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs % 86_400, 6 * 3600 + 26 * 60 + 25);
        assert!(run_time("nope").is_none());
    }
}
