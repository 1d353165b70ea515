//! `csis revoke BUILD [--descendants] [--reason T] [--dry-run] [--json]`

use std::process::ExitCode;

use anyhow::Result;
use csis_ops::Access;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The build to revoke: its full id, a unique hash prefix (8+), or its name.
    pub build: String,
    /// Also revoke every recorded build that descends from it.
    #[arg(long)]
    pub descendants: bool,
    /// Why (kept in revocations.yaml, shown by the state query).
    #[arg(long, value_name = "T")]
    pub reason: Option<String>,
    /// Print what would be revoked; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (`{build_id, dry_run, refused, revoked, unrevoked_descendants, releases, pins}`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: Args) -> Result<ExitCode> {
    let cx = csis_ops::Context::records_only(
        &global.dir,
        Access::writing_unless(args.dry_run),
        super::say_waiting,
    )?;
    let build = match super::build_id(&cx, &args.build, None)? {
        Ok(id) => id,
        Err(code) => return Ok(code),
    };
    let r = csis_ops::revoke::revoke(
        &cx,
        &build,
        args.descendants,
        args.reason.as_deref(),
        args.dry_run,
    )?;
    if args.json {
        crate::render::json(&r)?;
        return Ok(ExitCode::from(r.exit_code()));
    }
    if let Some(why) = &r.refused {
        eprintln!("refused: {why}");
        return Ok(ExitCode::from(r.exit_code()));
    }
    let verb = if r.dry_run { "would revoke" } else { "revoked" };
    for b in &r.revoked {
        println!(
            "{verb} {} ({} on {})",
            b.build_id,
            b.series.as_deref().unwrap_or("?"),
            b.runtime.as_deref().unwrap_or("any runtime")
        );
    }
    if r.revoked.is_empty() {
        println!("{} is already revoked", r.build_id);
    }
    let (is, pinned) = if r.dry_run {
        ("would be", "would stay pinned")
    } else {
        ("is", "stays pinned")
    };
    for h in &r.releases {
        println!(
            "warning: {} {is} the {} release of {} and revoked: release another build (`csis release {} --model {}`)",
            h.build_id, h.model, h.image, h.image, h.model
        );
    }
    for p in &r.pins {
        let what = match &p.runtime {
            Some(rt) => format!("{} {}@{rt}", p.kind, p.name),
            None => format!("{} {}", p.kind, p.name),
        };
        println!(
            "warning: {what} {pinned} to revoked build {}: `csis upgrade {}` moves it",
            p.build_id, p.upgrade
        );
    }
    if !r.unrevoked_descendants.is_empty() {
        println!(
            "note: {} recorded build(s) descend from it and are not revoked ({}); --descendants revokes them",
            r.unrevoked_descendants.len(),
            r.unrevoked_descendants.join(", ")
        );
    }
    Ok(ExitCode::from(r.exit_code()))
}
