//! `CSIS_TIMING=1`: how long each phase of an operation took, said through
//! the `log` facade (the binary writes it to stderr). A leaf: every module
//! may time itself.

/// `CSIS_TIMING=1`: print how long each phase took (stderr).
pub fn timing(what: &str, t0: std::time::Instant) {
    if std::env::var_os("CSIS_TIMING").is_some() {
        // The resident memory so far (Linux), to see which phase holds it.
        let rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .map(|v| v.trim().to_string())
            })
            .map(|v| format!(" (rss {v})"))
            .unwrap_or_default();
        log::info!(
            target: "csis::timing",
            "timing: {what}: {:.1} ms{rss}",
            t0.elapsed().as_secs_f64() * 1000.0
        );
    }
}
