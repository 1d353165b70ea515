//! Questions to runtimes: `empty` (does a runtime hold nothing beyond
//! released builds, and does a strict state query of it agree),
//! `preflight` (does every runtime answer; is every executable on PATH),
//! `verify_instance` (the runtime's `verify_instance` hook).

use std::path::PathBuf;

use anyhow::Result;
use csis_cache::drift::{self, RuntimeView};
use csis_cache::Revocations;
use csis_runtime::RuntimeError;
use csis_schema::tags;
use serde::Serialize;

use crate::state::{declared_runtimes, image_parents, view_of};
use crate::Context;

/// Something a runtime holds beyond released builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Leftover {
    Image {
        build_id: String,
        series: Option<String>,
    },
    Instance {
        name: String,
        power: String,
    },
    Volume {
        id: String,
    },
    /// A failed bake's machine `csis build --keep-failed` kept.
    KeptFailedBake {
        name: String,
        series: Option<String>,
        run: Option<String>,
        /// The command that opens a shell in it.
        inspect: String,
    },
}

/// A drift entry of the strict query of one runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftLine {
    pub kind: String,
    pub name: String,
    pub drift: String,
    pub detail: String,
}

/// The answer of `csis empty`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EmptyReport {
    pub runtime: String,
    /// Why there is no answer (the runtime is undeclared or cannot be asked).
    pub cannot_answer: Option<String>,
    pub leftovers: Vec<Leftover>,
    pub drift: Vec<DriftLine>,
    /// `--remove`: the kept failed bakes removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

impl EmptyReport {
    pub fn empty(&self) -> bool {
        self.cannot_answer.is_none() && self.leftovers.is_empty() && self.drift.is_empty()
    }

    /// 0 empty, 1 leftovers or drift, 2 cannot answer.
    pub fn exit_code(&self) -> u8 {
        if self.cannot_answer.is_some() {
            crate::exit::CANNOT_ANSWER
        } else if self.empty() {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILURE
        }
    }
}

/// `csis empty --runtime RT [--remove]`: `remove` takes this tree's kept
/// failed bakes off the runtime first (what `csis build --keep-failed`
/// kept), then answers.
pub fn empty(cx: &Context, runtime: &str, remove: bool) -> Result<EmptyReport> {
    let tree = cx.tree();
    let mut report = EmptyReport {
        runtime: runtime.to_string(),
        cannot_answer: None,
        leftovers: Vec::new(),
        drift: Vec::new(),
        removed: Vec::new(),
    };
    let Some(name) = cx.runtime_name(runtime) else {
        report.cannot_answer = Some(format!("runtime {runtime} is not declared in this tree"));
        return Ok(report);
    };
    report.runtime = name.clone();
    let rt = match cx.runtime(&name) {
        Ok(r) => r,
        Err(e) => {
            report.cannot_answer = Some(format!("{name} cannot answer: {e:#}"));
            return Ok(report);
        }
    };
    let inventory = match cx.block_on(rt.inventory()) {
        Ok(i) => i,
        Err(e) => {
            report.cannot_answer = Some(format!("{name} cannot list its inventory ({e})"));
            return Ok(report);
        }
    };
    let view: RuntimeView = cx.block_on(view_of(&name, Ok(&rt), &tree.config.id));
    let images = match &view.images {
        Ok(i) => i.clone(),
        Err(e) => {
            report.cannot_answer = Some(format!("{name} cannot list its images ({e})"));
            return Ok(report);
        }
    };
    let releases = cx.meta.releases()?;
    for img in &images {
        if !releases.is_current(&img.build_id) {
            report.leftovers.push(Leftover::Image {
                build_id: img.build_id.clone(),
                series: img.tags.get(tags::SERIES).cloned(),
            });
        }
    }
    // Only this tree's: a daemon or account is shared with other trees
    // and with whatever else runs there. An instance is this tree's by
    // its config id, or, carrying none, when it runs one of this tree's
    // images; a volume by its config id.
    let id = &tree.config.id;
    let ours = |c: Option<&String>| c.is_some_and(|c| tags::is_config_of(c, id));
    for i in inventory.instances.iter().filter(|i| match &i.config {
        Some(c) => ours(Some(c)),
        None => i
            .image
            .as_ref()
            .is_some_and(|b| images.iter().any(|img| &img.build_id == b)),
    }) {
        report.leftovers.push(Leftover::Instance {
            name: i.name.clone().unwrap_or_else(|| i.id.clone()),
            power: format!("{:?}", i.power),
        });
    }
    for k in inventory
        .kept_failed
        .iter()
        .filter(|k| ours(k.config.as_ref()))
    {
        if remove {
            match cx.block_on(rt.remove_kept_bake(&k.name)) {
                Ok(_) => {
                    report.removed.push(k.name.clone());
                    continue;
                }
                Err(e) => {
                    report.cannot_answer = Some(format!("{name} cannot remove {} ({e})", k.name));
                    return Ok(report);
                }
            }
        }
        report.leftovers.push(Leftover::KeptFailedBake {
            name: k.name.clone(),
            series: k.series.clone(),
            run: k.run.clone(),
            inspect: k.inspect.clone(),
        });
    }
    for v in inventory.volumes.iter().filter(|v| ours(v.config.as_ref())) {
        report
            .leftovers
            .push(Leftover::Volume { id: v.to_string() });
    }
    // A strict query of this runtime must agree too.
    let (lineage, pins) = cx.records()?;
    let revs = Revocations::load(&cx.meta)?;
    let releases = cx.meta.releases()?;
    let parents = image_parents(tree);
    let judged = drift::judge(
        drift::Records {
            lineage: &lineage,
            pins: &pins,
            revocations: &revs,
            releases: &releases,
            follow: &crate::state::follow_images(tree),
            image_parents: &parents,
        },
        std::slice::from_ref(&view),
        &declared_runtimes(tree),
        None,
    );
    report.drift = judged
        .drift_on(&name)
        .into_iter()
        .filter(|d| d.hard || matches!(d.drift.as_str(), "missing" | "foreign" | "changed"))
        .map(|d| DriftLine {
            kind: d.kind.to_string(),
            name: d.name.clone(),
            drift: d.drift.to_string(),
            detail: d.detail.clone(),
        })
        .collect();
    Ok(report)
}

/// The status of one preflight check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Fail,
    /// The runtime cannot check this (not a failure).
    Unknown,
}

/// One preflight line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `runtimes`, `runtime` or `executable`.
    pub subject: String,
    pub name: String,
    pub status: Status,
    /// What was checked, where the runtime says.
    pub what: Option<String>,
    pub detail: String,
}

/// The answer of `csis preflight`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreflightReport {
    pub ok: bool,
    pub checks: Vec<Check>,
}

impl PreflightReport {
    /// 0 all answer, 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.ok {
            crate::exit::SUCCESS
        } else {
            crate::exit::CANNOT_ANSWER
        }
    }

    /// `--strict` (the original's CI gate): 1 when any check failed or
    /// could not be judged, else 0.
    pub fn strict_exit_code(&self) -> u8 {
        if self.ok && !self.checks.iter().any(|c| c.status == Status::Unknown) {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILURE
        }
    }
}

/// `csis preflight`.
pub fn preflight(cx: &Context) -> Result<PreflightReport> {
    let tree = cx.tree();
    crate::validate::use_probe_cache(tree);
    let mut checks = Vec::new();
    let check = |subject: &str, name: &str, status, what: Option<String>, detail: String| Check {
        subject: subject.into(),
        name: name.into(),
        status,
        what,
        detail,
    };
    if tree.runtimes.is_empty() {
        checks.push(check(
            "runtimes",
            "",
            Status::Fail,
            None,
            "the tree declares none".into(),
        ));
    }
    for decl in &tree.runtimes {
        let rt = match cx.runtime(&decl.name) {
            Ok(r) => r,
            Err(e) => {
                checks.push(check(
                    "runtime",
                    &decl.name,
                    Status::Fail,
                    None,
                    format!("{e:#}"),
                ));
                continue;
            }
        };
        match cx.block_on(rt.preflight()) {
            Ok(lines) => {
                for l in lines {
                    let status = if l.ok { Status::Ok } else { Status::Fail };
                    checks.push(check("runtime", &decl.name, status, Some(l.what), l.detail));
                }
            }
            Err(e @ RuntimeError::Unsupported { .. }) => checks.push(check(
                "runtime",
                &decl.name,
                Status::Unknown,
                None,
                format!("cannot check ({e})"),
            )),
            Err(e) => checks.push(check(
                "runtime",
                &decl.name,
                Status::Fail,
                None,
                e.to_string(),
            )),
        }
    }
    for exe in &tree.executables {
        let binary = exe.model.binary();
        checks.push(match csis_runtime::probe::resolve(binary) {
            // found: its version read by its checker, against its floor,
            // as validate and every build check it
            Some(p) => match crate::validate::check_executable(&exe.model) {
                Ok(_) => check(
                    "executable",
                    &exe.name,
                    Status::Ok,
                    None,
                    p.display().to_string(),
                ),
                Err(msg) => check(
                    "executable",
                    &exe.name,
                    Status::Fail,
                    None,
                    msg.strip_prefix(&format!("{}: ", exe.name))
                        .unwrap_or(&msg)
                        .to_string(),
                ),
            },
            None => check(
                "executable",
                &exe.name,
                Status::Fail,
                None,
                format!("binary '{binary}' not found (an absolute path, or a name on PATH)"),
            ),
        });
    }
    let ok = !checks.iter().any(|c| c.status == Status::Fail);
    Ok(PreflightReport { ok, checks })
}

/// The answer of `csis runtime verify-instance`.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub runtime: String,
    pub instance: String,
    pub expected_build: String,
    pub ok: bool,
    pub checks: Vec<csis_runtime::VerifyCheck>,
    /// Written to `meta-state/verifications.yaml` (a context opened to write).
    pub recorded: bool,
}

impl VerifyReport {
    /// Exit 0 verified, 1 a check failed.
    pub fn exit_code(&self) -> u8 {
        if self.ok {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILURE
        }
    }
}

/// Why `verify_instance` has no report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum VerifyRefusal {
    /// Exit 2: the runtime is undeclared, the instance has no pin, or the
    /// runtime cannot verify.
    CannotAnswer { reason: String },
    /// Exit 1: the hook failed.
    Failed { reason: String },
}

impl VerifyRefusal {
    /// Why, in one line.
    pub fn reason(&self) -> &str {
        match self {
            VerifyRefusal::CannotAnswer { reason } | VerifyRefusal::Failed { reason } => reason,
        }
    }

    /// Exit 2 cannot answer, 1 failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            VerifyRefusal::CannotAnswer { .. } => crate::exit::CANNOT_ANSWER,
            VerifyRefusal::Failed { .. } => crate::exit::FAILURE,
        }
    }
}

/// `csis verify instance` (and its alias `csis runtime verify-instance`):
/// the instance against `expect` (default: its pin, the journal merged).
/// With a context opened to write, the verdict (each check with its last
/// 20 lines of evidence) is appended to `meta-state/verifications.yaml`.
pub fn verify_instance(
    cx: &Context,
    runtime: &str,
    instance: &str,
    expect: Option<String>,
    mounts: usize,
    timeout: u64,
) -> Result<std::result::Result<VerifyReport, VerifyRefusal>> {
    let cannot = |reason: String| Ok(Err(VerifyRefusal::CannotAnswer { reason }));
    let Some(name) = cx.runtime_name(runtime) else {
        return cannot(format!("runtime {runtime} is not declared in this tree"));
    };
    // A launched instance is verified as the machine standing now: its
    // hostname, the build it was launched from, its declared mounts.
    let launched = csis_cache::fleet::FleetRecords::load(&cx.meta)?
        .launch_record(instance)
        .filter(|r| r.launched)
        .cloned();
    let mounts = match cx.tree().instance(instance) {
        Some(i) => mounts.max(i.mounts.len()),
        None => mounts,
    };
    let machine = launched
        .as_ref()
        .map_or(instance.to_string(), |r| r.hostname.clone());
    let expected = match expect.or_else(|| launched.as_ref().and_then(|r| r.bound_build().map(str::to_string))) {
        Some(b) => b,
        None => match cx.records()?.1.instances.get(instance) {
            Some(b) => b.clone(),
            None => {
                return cannot(format!(
                    "instance {instance} has no pin in meta-state/pins.yaml; name the build with --expect"
                ))
            }
        },
    };
    let rt = cx.runtime(&name)?;
    let checks = match cx.block_on(rt.verify_instance(&machine, &expected, mounts, timeout)) {
        Ok(c) => c,
        Err(e @ (RuntimeError::Unsupported { .. } | RuntimeError::Unavailable(_))) => {
            return cannot(format!("{name} cannot verify {instance}: {e}"))
        }
        Err(e) => {
            return Ok(Err(VerifyRefusal::Failed {
                reason: format!("{instance} on {name}: {e}"),
            }))
        }
    };
    let mut checks = checks;
    for c in &mut checks {
        let n = c.evidence.len();
        c.evidence = c
            .evidence
            .drain(n.saturating_sub(EVIDENCE_LINES)..)
            .map(|l| csis_schema::secret::redact(&l).into_owned())
            .collect();
    }
    let report = VerifyReport {
        runtime: name,
        instance: instance.into(),
        expected_build: expected,
        ok: checks.iter().all(|c| c.ok),
        checks,
        recorded: cx.access() == crate::Access::Write,
    };
    if report.recorded {
        csis_cache::verifications::Verifications::append(&cx.meta, report.entry())?;
    }
    Ok(Ok(report))
}

/// How many lines of evidence a verification keeps per check.
pub const EVIDENCE_LINES: usize = 20;

impl VerifyReport {
    /// The entry `meta-state/verifications.yaml` keeps.
    pub fn entry(&self) -> serde_json::Value {
        serde_json::json!({
            "instance": self.instance,
            "runtime": self.runtime,
            "expected_build": self.expected_build,
            "ok": self.ok,
            "run": csis_cache::run_id_now(),
            "time": crate::image_test::now_rfc3339(),
            "checks": self.checks,
        })
    }
}

/// `csis runtime describe`: one runtime, its type, address, defaults, and
/// what is bound to it.
#[derive(Debug, Clone, Serialize)]
pub struct Description {
    pub runtime: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub declared_at: String,
    pub aliases: Vec<String>,
    pub is_default: bool,
    pub region: Option<String>,
    pub host: Option<String>,
    pub context: Option<String>,
    pub repository: Option<String>,
    pub account_id: Option<String>,
    /// Where it is reached (`host/context` for docker).
    #[serde(skip)]
    pub address: String,
    /// The lines its type shows of itself, in order.
    #[serde(skip)]
    pub shown: &'static [crate::wiring::Shown],
    pub default_machine_type: String,
    pub ephemeral: bool,
    pub retention_keep: Option<u32>,
    pub max_parallel: Option<u32>,
    pub session_mechanism: Option<String>,
    pub state_backend: Option<String>,
    pub image_builders: Vec<String>,
    pub base_images: Vec<String>,
    pub images: Vec<String>,
}

/// No runtime of that name or alias is declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownRuntime {
    pub name: String,
    /// The runtimes the tree declares.
    pub declared: Vec<String>,
}

/// Describe the runtime `name` (or alias).
pub fn describe(
    tree: &csis_rules::Tree,
    name: &str,
) -> Result<std::result::Result<Description, UnknownRuntime>> {
    let Some(rt) = tree.runtime(name) else {
        return Ok(Err(UnknownRuntime {
            name: name.into(),
            declared: tree.runtimes.iter().map(|r| r.display.clone()).collect(),
        }));
    };
    let ty = crate::wiring::runtime_type(rt)?;
    let f = (ty.fields)(rt);
    Ok(Ok(Description {
        runtime: rt.display.clone(),
        type_: rt.type_name().into(),
        declared_at: rt.origin.display(),
        aliases: rt.common.aliases.clone(),
        is_default: rt.common.is_default,
        region: f.region,
        host: f.host,
        context: f.context,
        repository: f.repository,
        account_id: f.account_id,
        address: rt.address(),
        shown: ty.shown,
        default_machine_type: rt.common.default_machine_type.clone(),
        ephemeral: rt.common.ephemeral,
        retention_keep: rt.common.retention_keep,
        max_parallel: rt.common.max_parallel,
        session_mechanism: rt.common.session_mechanism.clone(),
        state_backend: rt.state_backend.clone(),
        image_builders: tree
            .image_builders
            .iter()
            .filter(|b| b.runtime == rt.name)
            .map(|b| format!("{} ({})", b.display, b.kind.as_str()))
            .collect(),
        base_images: tree
            .os_builders
            .iter()
            .filter(|o| o.runtime_entry(&rt.name).is_some())
            .map(|o| o.display.clone())
            .collect(),
        images: tree
            .images
            .iter()
            .filter(|i| i.runtime_entry(&rt.name).is_some())
            .map(|i| i.display.clone())
            .collect(),
    }))
}

/// `csis builds --check`: whether each listed build is still on its
/// runtime (`query_images`, asked once per runtime). A runtime that cannot
/// be asked leaves its rows `null` and is named in the returned notes.
pub fn check_builds(cx: &Context, rows: &mut [csis_cache::build_ref::BuildRow]) -> Vec<String> {
    let mut notes = Vec::new();
    let mut held: std::collections::BTreeMap<String, Option<std::collections::BTreeSet<String>>> =
        std::collections::BTreeMap::new();
    for r in rows.iter_mut() {
        let Some(rt) = r.runtime.clone() else {
            r.on_runtime = Some(None);
            continue;
        };
        let ids = held.entry(rt.clone()).or_insert_with(|| {
            let answer = match cx.runtime_name(&rt) {
                None => Err(format!("runtime {rt} is not declared in this tree")),
                Some(name) => cx
                    .runtime(&name)
                    .map_err(|e| format!("{e:#}"))
                    .and_then(|r| cx.block_on(r.query_images()).map_err(|e| e.to_string())),
            };
            match answer {
                Ok(images) => Some(images.into_iter().map(|i| i.build_id).collect()),
                Err(e) => {
                    notes.push(format!("{rt}: cannot check its builds: {e}"));
                    None
                }
            }
        });
        r.on_runtime = Some(ids.as_ref().map(|ids| ids.contains(&r.build_id)));
    }
    notes
}

/// The runtime of a declared instance, for the original's `verify instance
/// NAME` (csis compiles no instances yet): its entry in `instances/`
/// (`instances: [{name, image, runtime?}]`) names its runtime, else its
/// image's, when the image bakes on exactly one runtime. The error says
/// why not, in one line.
pub fn instance_runtime(
    tree: &csis_rules::Tree,
    name: &str,
) -> std::result::Result<String, String> {
    if let Some(i) = tree.instance(name) {
        return Ok(i.runtime.clone());
    }
    let root = tree.root();
    let dir = root.join("instances");
    let files: Vec<PathBuf> = csis_rules::load::tree_files(root)
        .into_iter()
        .filter(|p| p.starts_with(&dir))
        .collect();
    for f in files {
        let Ok(node) = csis_schema::yaml::parse_file(&f, root) else {
            continue;
        };
        let Some(items) = node.get("instances").and_then(|n| n.as_seq()) else {
            continue;
        };
        for it in items {
            if it.get_str("name").as_deref() != Some(name) {
                continue;
            }
            let at = format!(
                "{}:{}",
                f.strip_prefix(root).unwrap_or(&f).display(),
                it.loc.line
            );
            if let Some(rt) = it
                .get_str("runtime")
                .filter(|r| !r.is_empty() && r != "default")
            {
                return tree.runtime(&rt).map(|r| r.name.clone()).ok_or_else(|| {
                    format!("{at}: instance {name}: runtime `{rt}` is not declared")
                });
            }
            let Some(image) = it.get_str("image") else {
                return Err(format!(
                    "{at}: instance {name} names no image, so its runtime is not known"
                ));
            };
            let Some(img) = tree
                .images
                .iter()
                .find(|i| i.name == image || i.display == image)
            else {
                return Err(format!(
                    "{at}: instance {name}: image `{image}` is not declared in images/"
                ));
            };
            let rts: Vec<&str> = img
                .active_runtimes()
                .filter_map(|r| r.runtime.as_deref())
                .collect();
            return match rts.as_slice() {
                [rt] => Ok(rt.to_string()),
                [] => Err(format!(
                    "{at}: instance {name}: its image {image} bakes on no runtime csis runs"
                )),
                many => Err(format!(
                    "{at}: instance {name}: its image {image} bakes on {} runtimes ({})",
                    many.len(),
                    many.join(", ")
                )),
            };
        }
    }
    Err(format!("instance {name} is not declared in instances/"))
}
