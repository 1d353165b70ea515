//! What `csis empty`, `csis preflight` and `csis runtime describe` report
//! of a runtime, for people: leftovers, checks, an unknown runtime.

use csis_ops::inspect::{Check, Leftover, Status, UnknownRuntime};

/// A leftover in a few words (`image ID (SERIES)`, ...).
pub fn leftover(l: &Leftover) -> String {
    match l {
        Leftover::Image { build_id, series } => {
            format!("image {build_id} ({})", series.as_deref().unwrap_or("?"))
        }
        Leftover::Instance { name, power } => format!("instance {name} ({power})"),
        Leftover::Volume { id } => format!("volume {id}"),
        Leftover::KeptFailedBake {
            name,
            series,
            run,
            inspect,
        } => format!(
            "kept failed bake {name} ({} in run {}; inspect: `{inspect}`)",
            series.as_deref().unwrap_or("?"),
            run.as_deref().unwrap_or("?")
        ),
    }
}

/// A preflight line, its mark first (aligned as the original prints it).
pub fn check(c: &Check) -> String {
    let mark = match c.status {
        Status::Ok => "ok  ",
        Status::Fail => "FAIL",
        Status::Unknown => "??  ",
    };
    if c.subject == "runtimes" {
        return format!("{mark} runtimes: {}", c.detail);
    }
    if c.status == Status::Ok && c.subject == "executable" {
        // (aligned as the original prints it)
        return format!("ok   executable {}: {}", c.name, c.detail);
    }
    match &c.what {
        Some(w) => format!("{mark} {} {}: {w}: {}", c.subject, c.name, c.detail),
        None if c.status == Status::Unknown => {
            format!("??   {} {}: {}", c.subject, c.name, c.detail)
        }
        None => format!("{mark} {} {}: {}", c.subject, c.name, c.detail),
    }
}

/// No runtime of that name, and those the tree declares.
pub fn unknown_runtime(u: &UnknownRuntime) -> String {
    let declared = if u.declared.is_empty() {
        "none".to_string()
    } else {
        u.declared.join(", ")
    };
    format!("no runtime named `{}` (declared: {declared})", u.name)
}
