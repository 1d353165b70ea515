//! The per-run bake logs: `.csis/logs/<run id>/<label>.log`, the last
//! runs kept, and the sink a bake writes its lines to (redacted, to the
//! file and to the progress bar).

use super::*;

/// How many runs' logs `.csis/logs/` keeps (this run's included).
pub const KEPT_RUN_LOGS: usize = 5;

/// The log of a bake: `.csis/logs/<run id>/<label-as-file>.log`.
pub fn run_log(local: &LocalDir, run_id: &str, label: &str) -> PathBuf {
    local
        .logs()
        .join(run_id)
        .join(format!("{}.log", csis_cache::label_as_file(label)))
}

/// Remove the log directories of all but the newest `keep - 1` earlier
/// runs (run ids sort chronologically), making room for this run's.
/// Anything in `.csis/logs/` that is not a run's directory stays.
pub fn prune_run_logs(local: &LocalDir, keep: usize) {
    let Ok(rd) = std::fs::read_dir(local.logs()) else {
        return;
    };
    let mut runs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| csis_cache::parse_run_id(n).is_some())
        })
        .map(|e| e.path())
        .collect();
    runs.sort();
    let extra = runs.len().saturating_sub(keep.saturating_sub(1));
    for old in runs.into_iter().take(extra) {
        let _ = std::fs::remove_dir_all(old);
    }
}

/// A bake's log: every line to its run's log file, the last one to the bar.
pub(super) struct BakeLog {
    pub(super) label: String,
    pub(super) file: Mutex<Option<File>>,
    pub(super) renderer: Arc<dyn Reporter>,
}

impl LogSink for BakeLog {
    fn line(&self, line: &str) {
        // what a script prints of a secret (a word of it, a line of a
        // multi-line one) is redacted too, not only the whole value
        let line = &*csis_schema::secret::redact_printed(line);
        if let Some(f) = self.file.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = writeln!(f, "{line}");
        }
        self.renderer.log_line(&self.label, line);
    }
}
