//! `csis lineage relabel --runtime RT [--build ID]... [--dry-run]`: re-tag
//! recorded builds whose tags disagree with their record (series, parent,
//! run, fingerprint prefix; a tag never carried is not drift). The record is
//! the truth; no meta-state change.
//!
//! `csis lineage restamp --runtime RT [--series S]... [--dry-run]`: for each
//! series head on RT whose recorded fingerprint differs from the tree's
//! current one, record the current fingerprint (the old one kept under
//! `fingerprint_restamped`) and re-tag `csis_fingerprint`. For recipe
//! changes only: `csis build --force-bake` is how to re-bake. Repeats until
//! no head moves (a pinned child hashes its parent's recorded fingerprint).

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::Result;
use csis_cache::drift::{record_tags, tag_disagreements, FINGERPRINT_TAG_LEN, TAG_FINGERPRINT};
use csis_cache::Restamp;

use csis_ops::state::{load_tree, tokio_rt};
use crate::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub enum LineageCommand {
    /// Re-tag builds whose tags disagree with their lineage record.
    Relabel(RelabelArgs),
    /// Record a fingerprint recipe change without re-baking.
    Restamp(RestampArgs),
}

#[derive(Debug, clap::Args)]
pub struct RelabelArgs {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
    /// Only these builds (repeatable).
    #[arg(long = "build", value_name = "ID")]
    pub builds: Vec<String>,
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct RestampArgs {
    #[arg(long, value_name = "RT")]
    pub runtime: String,
    /// Only these series (repeatable).
    #[arg(long = "series", value_name = "S")]
    pub series: Vec<String>,
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(global: &GlobalArgs, cmd: LineageCommand) -> Result<ExitCode> {
    match cmd {
        LineageCommand::Relabel(a) => relabel(global, a),
        LineageCommand::Restamp(a) => restamp(global, a),
    }
}

fn relabel(global: &GlobalArgs, args: RelabelArgs) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let Some(rt_decl) = tree.runtime(&args.runtime) else {
        eprintln!(
            "error: runtime {} is not declared in this tree",
            args.runtime
        );
        return Ok(ExitCode::from(1));
    };
    let rt_name = rt_decl.name.clone();
    let lineage = csis_ops::state::records(tree.root())?.0;
    let mut failed = false;
    for b in &args.builds {
        match lineage.find(b) {
            None => {
                eprintln!("error: build {b} is not recorded in lineage");
                failed = true;
            }
            Some(r) if r.runtime.as_deref().is_some_and(|x| x != rt_name) => {
                eprintln!(
                    "error: build {b} is on runtime {}, not {rt_name}",
                    r.runtime.as_deref().unwrap_or("?")
                );
                failed = true;
            }
            _ => {}
        }
    }
    if failed {
        return Ok(ExitCode::from(1));
    }
    let rt = csis_ops::wiring::runtime(&tree, &rt_name)?;
    let tokio = tokio_rt()?;
    let images = match tokio.block_on(rt.query_images()) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {rt_name} cannot list its images: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let only: BTreeSet<&str> = args.builds.iter().map(String::as_str).collect();
    let mut n = 0;
    for rec in lineage
        .builds
        .iter()
        .filter(|b| b.runtime.as_deref() == Some(rt_name.as_str()))
    {
        if !only.is_empty() && !only.contains(rec.build_id.as_str()) {
            continue;
        }
        let Some(img) = images.iter().find(|i| i.build_id == rec.build_id) else {
            if only.contains(rec.build_id.as_str()) {
                println!(
                    "{} is not on {rt_name} (the state query reports it missing)",
                    rec.build_id
                );
            }
            continue;
        };
        let d = tag_disagreements(rec, &img.tags);
        if d.is_empty() {
            continue;
        }
        n += 1;
        let what = d
            .iter()
            .map(|(f, r, t)| format!("{f}: {t} -> {r}"))
            .collect::<Vec<_>>()
            .join("; ");
        if args.dry_run {
            println!("would relabel {} ({}): {what}", rec.build_id, rec.series);
            continue;
        }
        match tokio.block_on(rt.retag_image(&rec.build_id, &record_tags(rec))) {
            Ok(()) => println!("relabelled {} ({}): {what}", rec.build_id, rec.series),
            Err(e) => {
                eprintln!("error: could not retag {}: {e}", rec.build_id);
                failed = true;
            }
        }
    }
    if n == 0 {
        println!("nothing to relabel: every recorded build's tags agree on {rt_name}");
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn restamp(global: &GlobalArgs, args: RestampArgs) -> Result<ExitCode> {
    let tree = load_tree(&global.tree())?;
    let Some(rt_decl) = tree.runtime(&args.runtime) else {
        eprintln!(
            "error: runtime {} is not declared in this tree",
            args.runtime
        );
        return Ok(ExitCode::from(1));
    };
    let rt_name = rt_decl.name.clone();
    let _lock = if args.dry_run {
        None
    } else {
        let l = crate::cmd::take_lock(tree.root())?;
        csis_ops::state::settle_journal(tree.root())?;
        Some(l)
    };
    let only: BTreeSet<String> = args
        .series
        .iter()
        .map(|s| csis_rules::normalize_name(s))
        .collect();
    let tokio = tokio_rt()?;
    let rt = if args.dry_run {
        None
    } else {
        Some(csis_ops::wiring::runtime(&tree, &rt_name)?)
    };
    let run = csis_cache::run_id_now();
    let mut total = 0usize;
    let mut failed = false;
    // Each pass restamps the heads that differ; a pinned child hashes its
    // parent's recorded fingerprint, so it can move in the next pass.
    for _pass in 0..32 {
        let session = csis_ops::session::open_tree(tree.clone())?;
        // The records themselves (the session's lineage is the planning
        // view, without revoked heads): what is rewritten.
        let mut lineage = csis_ops::state::records(tree.root())?.0;
        let revs = csis_cache::Revocations::load(&session.meta)?;
        let mut moved = Vec::new();
        for id in session.compiled.bake_nodes() {
            let Some(spec) = session.compiled.bake_spec(id) else {
                continue;
            };
            if spec.runtime != rt_name || (!only.is_empty() && !only.contains(&spec.series)) {
                continue;
            }
            let Some(head) = csis_cache::head_unrevoked(&lineage, &revs, &spec.series, &rt_name)
            else {
                continue;
            };
            let current = session.fps.get(id).to_hex();
            if head.input_fingerprint.as_deref() == Some(current.as_str()) {
                continue;
            }
            let canonical = session.compiled.graph.canonical(id, &session.fps);
            moved.push((
                head.build_id.clone(),
                spec.series.clone(),
                current,
                canonical,
            ));
        }
        if moved.is_empty() {
            break;
        }
        for (build, series, current, canonical) in &moved {
            let rec = lineage
                .builds
                .iter_mut()
                .find(|b| &b.build_id == build)
                .expect("head is recorded");
            let previous = rec.input_fingerprint.clone().unwrap_or_default();
            println!(
                "{} {build} ({series}): {} -> {}",
                if args.dry_run {
                    "would restamp"
                } else {
                    "restamped"
                },
                previous.chars().take(12).collect::<String>(),
                &current[..12]
            );
            total += 1;
            if args.dry_run {
                continue;
            }
            rec.fingerprint_restamped.push(Restamp {
                run: run.clone(),
                previous,
                reason: Some("lineage restamp (fingerprint recipe change)".into()),
                extra: Default::default(),
            });
            rec.input_fingerprint = Some(current.clone());
            if rec.inputs.is_some() {
                rec.inputs = Some(canonical.clone());
            }
        }
        if args.dry_run {
            println!("(a dry run shows the first pass only: children pinned to a restamped parent may follow)");
            break;
        }
        session.meta.save_lineage(&lineage)?;
        if let Some(rt) = &rt {
            for (build, _, current, _) in &moved {
                let tags = [(
                    TAG_FINGERPRINT.to_string(),
                    current
                        .chars()
                        .take(FINGERPRINT_TAG_LEN)
                        .collect::<String>(),
                )]
                .into();
                if let Err(e) = tokio.block_on(rt.retag_image(build, &tags)) {
                    eprintln!(
                        "error: could not retag {build}: {e} (csis lineage relabel repairs it)"
                    );
                    failed = true;
                }
            }
        }
    }
    if total == 0 {
        println!("nothing to restamp: every head on {rt_name} matches the tree's fingerprint");
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
