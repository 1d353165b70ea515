//! Rendering a build's events: JSON lines (only with `--json`), for a
//! terminal a bar per running bake with its elapsed time and last log line
//! (indicatif), and when stdout is not a terminal (`csis build | tee`) the
//! same lines for people without the bars, one per started, finished,
//! failed and not-run node, on stdout.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csis_ops::build::NodeKind;
use csis_ops::build::{Event, Notice};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Where events go.
#[derive(Clone)]
pub enum Renderer {
    Json(Arc<Logs>),
    Tty(Arc<Tty>),
    /// Lines for people, no bars: stdout is not a terminal.
    Plain(Arc<Logs>),
}

/// The log file of each bake of the run, by label.
#[derive(Default)]
pub struct Logs(Mutex<HashMap<String, PathBuf>>);

impl Logs {
    fn get(&self, label: &str) -> Option<PathBuf> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(label)
            .cloned()
    }
    fn set(&self, label: &str, path: &Path) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(label.to_string(), path.to_path_buf());
    }
}

/// How many of a failed bake's last log lines a terminal shows.
const FAILED_TAIL: usize = 20;

/// The last `n` lines of a file (none when it cannot be read).
fn tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

pub struct Tty {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
    logs: Logs,
}

impl Renderer {
    /// JSON lines with `--json`; else bars on a terminal, plain lines
    /// when stdout is not one (the format never depends on it).
    pub fn new(json: bool) -> Renderer {
        use std::io::IsTerminal;
        if json {
            Renderer::Json(Arc::default())
        } else if !std::io::stdout().is_terminal() {
            Renderer::Plain(Arc::default())
        } else {
            Renderer::Tty(Arc::new(Tty {
                multi: MultiProgress::new(),
                bars: Mutex::new(HashMap::new()),
                logs: Logs::default(),
            }))
        }
    }

    pub fn is_json(&self) -> bool {
        matches!(self, Renderer::Json(_))
    }

    /// A line of a running node's output (the bar's message).
    pub fn log_line(&self, label: &str, line: &str) {
        if let Renderer::Tty(t) = self {
            if let Some(b) = t.bars.lock().unwrap_or_else(|p| p.into_inner()).get(label) {
                let line: String = line.chars().take(100).collect();
                b.set_message(line);
            }
        }
    }

    /// A message for people (stderr, or above the bars).
    pub fn note(&self, msg: &str) {
        match self {
            Renderer::Json(_) | Renderer::Plain(_) => eprintln!("{msg}"),
            Renderer::Tty(t) => {
                let _ = t.multi.println(msg);
            }
        }
    }

    /// A notice of the build: under `--json` a line of the event stream
    /// on stdout (`{"event":"notice","notice":KIND, its fields, "message":
    /// its line}`; a release or dispose node's, one `node_line` notice per
    /// line: `label`, `line`), else its lines as [`Renderer::note`] prints
    /// them.
    pub fn notice(&self, n: &Notice) {
        use crate::render::notice::{lines, words};
        let Renderer::Json(_) = self else {
            return lines(n).iter().for_each(|l| self.note(l));
        };
        let docs: Vec<serde_json::Value> = match n.label() {
            Some(label) => (words(n).into_iter())
                .map(|line| {
                    let message = format!("{label}: {line}");
                    serde_json::json!({
                        "notice": "node_line",
                        "label": label,
                        "line": line,
                        "message": message,
                    })
                })
                .collect(),
            None => {
                let mut v = serde_json::to_value(n).expect("notices serialize");
                v["message"] = serde_json::Value::from(lines(n).join("\n"));
                vec![v]
            }
        };
        let mut out = std::io::stdout().lock();
        for v in docs {
            let body = v.to_string();
            let fields = body.strip_prefix('{').unwrap_or(&body);
            let _ = writeln!(out, "{{\"event\":\"notice\",{fields}");
        }
        let _ = out.flush();
    }

    /// Events already serialized (the no-op stamp's), shown as they were.
    pub fn raw_json_lines(&self, lines: &str) {
        if let Renderer::Json(_) = self {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(lines.as_bytes());
            let _ = out.flush();
        }
    }

    pub fn event(&self, e: &Event) {
        match self {
            Renderer::Json(logs) => {
                if matches!(e, Event::Log { .. }) {
                    return;
                }
                let line = match e {
                    // A failed bake's event names its log.
                    Event::Failed { label, .. } => match logs.get(&label.to_string()) {
                        Some(path) => {
                            let mut v = serde_json::to_value(e).expect("events serialize");
                            v["log"] = serde_json::json!(path);
                            v.to_string()
                        }
                        None => e.to_json_line(),
                    },
                    _ => e.to_json_line(),
                };
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            Renderer::Tty(t) => t.event(e),
            Renderer::Plain(logs) => {
                if let Some(text) = human_lines(e, logs, true) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{text}");
                    let _ = out.flush();
                }
            }
        }
    }
}

/// What people read of an event (the bars aside), or nothing: a started
/// bake when `started` (plain lines have no bar to show it), a finished
/// bake, a failure (with its log's last lines), a node not run, a dry
/// run's node that would run, the summary.
fn human_lines(e: &Event, logs: &Logs, started: bool) -> Option<String> {
    Some(match e {
        Event::Started {
            label,
            kind,
            reason,
        } if started && *kind == NodeKind::Bake => format!("baking  {label}: {reason}"),
        Event::Finished {
            label,
            kind,
            elapsed_ms,
            ..
        } if *kind == NodeKind::Bake => {
            format!("baked   {label} in {:.1}s", *elapsed_ms as f64 / 1000.0)
        }
        Event::Failed {
            label,
            error,
            cancelled,
            ..
        } => {
            let what = if *cancelled { "stopped" } else { "FAILED " };
            let mut text = format!("{what} {label}: {error}");
            if let (false, Some(path)) = (*cancelled, logs.get(&label.to_string())) {
                text.push_str(&format!("\n        log: {}", path.display()));
                for l in tail(&path, FAILED_TAIL) {
                    text.push_str("\n        | ");
                    text.push_str(&l);
                }
            }
            text
        }
        Event::NotRun { label, reason, .. } => format!("not run {label}: {reason}"),
        // a dry run's due node: `would bake`, `would release`, ...
        Event::WouldRun {
            label,
            kind,
            reason,
        } => format!("would {kind} {label}: {reason}"),
        Event::Summary(s) => format!(
            "{}baked {}{}, skipped {}, failed {}, not run {}{}  ({:.1}s)",
            match s.kinds.get(NodeKind::Bake.as_str()) {
                _ if s.would_run == 0 => String::new(),
                k => format!(
                    "would bake {} ({} nodes would run), ",
                    k.map_or(0, |k| k.would_run),
                    s.would_run
                ),
            },
            s.baked,
            match s.reused {
                0 => String::new(),
                n => format!(", reinstated {n}"),
            },
            s.skipped,
            s.failed + s.cancelled,
            s.not_run,
            if s.interrupted { ", interrupted" } else { "" },
            s.elapsed_ms as f64 / 1000.0
        ),
        _ => return None,
    })
}

impl Tty {
    fn event(&self, e: &Event) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        match e {
            Event::Started {
                label,
                kind,
                reason,
            } if *kind == NodeKind::Bake => {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed:>4}] {prefix} {wide_msg:.dim}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b.set_prefix(label.to_string());
                b.set_message(reason.clone());
                b.enable_steady_tick(Duration::from_millis(200));
                bars.insert(label.to_string(), b);
            }
            Event::Finished { label, .. }
            | Event::Failed { label, .. }
            | Event::NotRun { label, .. } => {
                if let Some(b) = bars.remove(&label.to_string()) {
                    b.finish_and_clear();
                }
            }
            Event::Summary(_) => {
                for (_, b) in bars.drain() {
                    b.finish_and_clear();
                }
            }
            _ => {}
        }
        if let Some(text) = human_lines(e, &self.logs, false) {
            let _ = self.multi.println(text);
        }
    }
}

impl csis_ops::build::Reporter for Renderer {
    fn note(&self, notice: &Notice) {
        Renderer::notice(self, notice)
    }
    fn words(&self, notice: &Notice) -> Vec<String> {
        crate::render::notice::words(notice)
    }
    fn event(&self, e: &Event) {
        Renderer::event(self, e)
    }
    fn log_line(&self, label: &str, line: &str) {
        Renderer::log_line(self, label, line)
    }
    fn bake_log(&self, label: &str, path: &Path) {
        match self {
            Renderer::Json(logs) | Renderer::Plain(logs) => logs.set(label, path),
            Renderer::Tty(t) => t.logs.set(label, path),
        }
    }
    fn dry_run_plan(&self, plan: &csis_ops::build::Plan) {
        let text = crate::render::plan_text(plan, false, false);
        if self.is_json() {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }
}
