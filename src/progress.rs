//! Rendering a build's events: JSON lines (with `--json`, or when stdout is
//! not a terminal), or for a terminal a bar per running bake with its
//! elapsed time and last log line (indicatif).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csis_engine::Event;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Where events go.
#[derive(Clone)]
pub enum Renderer {
    Json,
    Tty(Arc<Tty>),
}

pub struct Tty {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

impl Renderer {
    pub fn new(json: bool) -> Renderer {
        use std::io::IsTerminal;
        if json || !std::io::stdout().is_terminal() {
            Renderer::Json
        } else {
            Renderer::Tty(Arc::new(Tty {
                multi: MultiProgress::new(),
                bars: Mutex::new(HashMap::new()),
            }))
        }
    }

    pub fn is_json(&self) -> bool {
        matches!(self, Renderer::Json)
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
            Renderer::Json => eprintln!("{msg}"),
            Renderer::Tty(t) => {
                let _ = t.multi.println(msg);
            }
        }
    }

    /// Events already serialized (the no-op stamp's), shown as they were.
    pub fn raw_json_lines(&self, lines: &str) {
        if let Renderer::Json = self {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(lines.as_bytes());
            let _ = out.flush();
        }
    }

    pub fn event(&self, e: &Event) {
        match self {
            Renderer::Json => {
                if matches!(e, Event::Log { .. }) {
                    return;
                }
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", e.to_json_line());
                let _ = out.flush();
            }
            Renderer::Tty(t) => t.event(e),
        }
    }
}

impl Tty {
    fn event(&self, e: &Event) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        match e {
            Event::Started {
                label,
                kind,
                reason,
            } if kind == "bake" => {
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
            Event::Finished {
                label,
                kind,
                elapsed_ms,
                ..
            } => {
                if let Some(b) = bars.remove(&label.to_string()) {
                    b.finish_and_clear();
                }
                if kind == "bake" {
                    let _ = self.multi.println(format!(
                        "baked   {label} in {:.1}s",
                        *elapsed_ms as f64 / 1000.0
                    ));
                }
            }
            Event::Failed {
                label,
                error,
                cancelled,
                ..
            } => {
                if let Some(b) = bars.remove(&label.to_string()) {
                    b.finish_and_clear();
                }
                let what = if *cancelled { "stopped" } else { "FAILED " };
                let _ = self.multi.println(format!("{what} {label}: {error}"));
            }
            Event::NotRun { label, reason, .. } => {
                let _ = self.multi.println(format!("not run {label}: {reason}"));
            }
            Event::Summary(s) => {
                for (_, b) in bars.drain() {
                    b.finish_and_clear();
                }
                let _ = self.multi.println(format!(
                    "baked {}, skipped {}, failed {}, not run {}{}  ({:.1}s)",
                    s.baked,
                    s.skipped,
                    s.failed + s.cancelled,
                    s.not_run,
                    if s.interrupted { ", interrupted" } else { "" },
                    s.elapsed_ms as f64 / 1000.0
                ));
            }
            _ => {}
        }
    }
}

impl csis_ops::build::Reporter for Renderer {
    fn note(&self, msg: &str) {
        Renderer::note(self, msg)
    }
    fn event(&self, e: &Event) {
        Renderer::event(self, e)
    }
    fn log_line(&self, label: &str, line: &str) {
        Renderer::log_line(self, label, line)
    }
    fn dry_run_plan(&self, plan: &csis_engine::Plan) {
        let text = crate::render::plan_text(plan, false, false);
        if self.is_json() {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }
}
