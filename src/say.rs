//! What the library crates tell people outside a report (a duplicate
//! record read once, a journal line skipped, a hook's warning, a timing
//! under `CSIS_TIMING`): they say it through the `log` facade, never by
//! printing, and this logger prints it on stderr: a warning as
//! `warning: MESSAGE`, anything else as its message. Only csis's own
//! crates are heard (a dependency's log records are not csis's to show).

struct Say;

static SAY: Say = Say;

impl log::Log for Say {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info && m.target().starts_with("csis")
    }

    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        match r.level() {
            log::Level::Error | log::Level::Warn => eprintln!("warning: {}", r.args()),
            _ => eprintln!("{}", r.args()),
        }
    }

    fn flush(&self) {}
}

/// Install the logger (once, first thing in `main`).
pub fn install() {
    if log::set_logger(&SAY).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}
