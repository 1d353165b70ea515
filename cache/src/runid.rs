//! Run ids: the run start as an ISO time with every separator turned into
//! `_` (`2026_11_30t07_44_28_123456`), so lexicographic order is
//! chronological order (retention relies on that), and back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The run id of a moment (UTC).
pub fn run_id(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let micros = d.subsec_micros();
    let (y, m, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}_{m:02}_{day:02}t{:02}_{:02}_{:02}_{micros:06}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// The run id of now.
pub fn run_id_now() -> String {
    run_id(SystemTime::now())
}

/// A moment as RFC 3339 UTC, to the second (`2026-11-30T08:04:28Z`).
pub fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Now as RFC 3339 UTC.
pub fn rfc3339_now() -> String {
    rfc3339(SystemTime::now())
}

/// Parse a run id back to a moment (`%Y_%m_%dt%H_%M_%S_%f`). Lenient: the
/// fraction may be missing, `T` may be upper case.
pub fn parse_run_id(run: &str) -> Option<SystemTime> {
    let lower = run.to_ascii_lowercase();
    let (date, time) = lower.split_once('t')?;
    let dp: Vec<&str> = date.split(['_', '-']).collect();
    let tp: Vec<&str> = time.split(['_', ':', '.']).collect();
    if dp.len() != 3 || tp.len() < 3 {
        return None;
    }
    let y: i64 = dp[0].parse().ok()?;
    let m: u32 = dp[1].parse().ok()?;
    let d: u32 = dp[2].parse().ok()?;
    let hh: i64 = tp[0].parse().ok()?;
    let mm: i64 = tp[1].parse().ok()?;
    let ss: i64 = tp[2].parse().ok()?;
    let frac: u64 = tp
        .get(3)
        .and_then(|f| {
            let f: String = f
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .take(6)
                .collect();
            if f.is_empty() {
                None
            } else {
                format!("{f:0<6}").parse().ok()
            }
        })
        .unwrap_or(0);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    if secs < 0 {
        return None;
    }
    Some(UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_micros(frac))
}

/// Whole days between a run id and `now` (None if it does not parse).
pub fn age_days(run: &str, now: SystemTime) -> Option<u64> {
    let t = parse_run_id(run)?;
    Some(now.duration_since(t).unwrap_or_default().as_secs() / 86_400)
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order() {
        let t = UNIX_EPOCH + Duration::from_micros(1_796_025_868_123_456);
        let id = run_id(t);
        assert_eq!(id, "2026_11_30t08_04_28_123456");
        assert_eq!(parse_run_id(&id), Some(t));
        let later = run_id(t + Duration::from_secs(3600 * 24 * 40));
        assert!(later > id);
        assert_eq!(
            age_days(&id, t + Duration::from_secs(86_400 * 3 + 5)),
            Some(3)
        );
        assert_eq!(
            parse_run_id("2024_02_29T10_00_00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_709_200_800))
        );
        assert_eq!(parse_run_id("garbage"), None);
        assert_eq!(rfc3339(t), "2026-11-30T08:04:28Z");
    }
}
