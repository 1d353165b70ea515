//! The local modification bundle (`csis-mods/<image>/`): its MANIFEST.yaml,
//! the `csis-mods` re-runner, one folder per modification with its files.

use std::path::{Path, PathBuf};

use super::instance::ensure_lines;
use super::shell::sq_always;
use super::types::{BundleMod, EmittedFile, ImageRecipe, Target};
use crate::{BakeRequest, BakeStep};
use csis_schema::tags;

/// A path relative to the tree root when it is under it, else its file name.
pub(super) fn rel_of(tree_root: &Path, p: &Path, dir: &str) -> String {
    match p.strip_prefix(tree_root) {
        Ok(r) => r.display().to_string(),
        Err(_) => format!(
            "{dir}/{}",
            p.file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default()
        ),
    }
}

/// A YAML scalar: plain when it reads back as the same string, else JSON-quoted.
pub(super) fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !matches!(
            s,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

const CSIS_MODS_SCRIPT: &str = r#"#!/bin/sh
# csis-mods: re-run the modifications baked into this image (cs-image-system).
# Usage: csis-mods list | csis-mods rerun [name]
set -eu
ROOT="${CSIS_MODS_ROOT:-/opt/csis/mods}"
cmd="${1:-list}"; want="${2:-}"
case "$cmd" in
  list)
    for d in "$ROOT"/[0-9][0-9]-*/; do [ -d "$d" ] || continue; printf '%s\n' "$(basename "$d")"; done ;;
  rerun)
    for d in "$ROOT"/[0-9][0-9]-*/; do
      [ -d "$d" ] || continue
      name="$(basename "$d")"
      case "$name" in *-"$want"|"$want") match=1 ;; *) match=0 ;; esac
      if [ -z "$want" ] || [ "$match" = 1 ]; then
        echo "== csis-mods: $name"
        ( cd "$d" && sh ./run.sh )
      fi
    done ;;
  *) echo "usage: csis-mods list | rerun [name]" >&2; exit 2 ;;
esac
"#;

/// The local modification bundle (`csis-mods/<image>/`, emission.md §2.6):
/// a MANIFEST.yaml, the `csis-mods` re-runner, one `NN-<mod>/` per
/// modification with its files, its own MANIFEST.yaml and `run.sh`. The
/// second list: the files that hold a secret (a mod's `inline.sh` whose
/// lines or `ensure:` hold one), relative to the bundle, which the caller
/// writes outside the emission.
pub(super) fn bundle_files(
    t: &Target,
    req: &BakeRequest,
    img: &ImageRecipe,
) -> std::io::Result<(Vec<EmittedFile>, Vec<EmittedFile>)> {
    let image = &req.series;
    let run = req.tags.get(tags::RUN).cloned().unwrap_or_default();
    let root = format!("csis-mods/{image}");
    let mut out = Emitted::default();
    let mut manifest = format!("image: {}\nmods:\n", yaml_scalar(image));
    for (i, step) in req.steps.iter().enumerate() {
        let (name, sources, inline, secret) = step_parts(t, step);
        let m = img
            .bundle
            .get(i)
            .cloned()
            .unwrap_or_else(|| unrecorded_mod(step, name));
        let dir = format!("{:02}-{}", i + 1, m.name);
        let mut names = Vec::new();
        for p in &sources {
            let f = p
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default();
            out.files.push(EmittedFile {
                rel: format!("{root}/{dir}/{f}"),
                content: read(p)?,
                mode: 0o644,
            });
            names.push(f);
        }
        let run_sh = run_script(step, &mut names, &inline, secret, (&root, &dir), &mut out);
        out.files.push(EmittedFile {
            rel: format!("{root}/{dir}/run.sh"),
            content: run_sh.into_bytes(),
            mode: 0o755,
        });
        let ty = if m.builder.is_empty() {
            m.operation.clone()
        } else {
            m.builder.clone()
        };
        manifest.push_str(&format!(
            "- content_hash: {}\n  dir: {}\n  idempotent: {}\n  name: {}\n  operation: {}\n  type: {}\n",
            yaml_scalar(&m.content_hash),
            yaml_scalar(&dir),
            yaml_scalar(&m.idempotent),
            yaml_scalar(&m.name),
            yaml_scalar(&m.operation),
            yaml_scalar(&ty),
        ));
        out.files.push(EmittedFile {
            rel: format!("{root}/{dir}/MANIFEST.yaml"),
            content: mod_manifest(&m, &names, image, &run, &ty).into_bytes(),
            mode: 0o644,
        });
    }
    if req.steps.is_empty() {
        manifest = format!("image: {}\nmods: []\n", yaml_scalar(image));
    }
    manifest.push_str(&format!("run: {}\n", yaml_scalar(&run)));
    out.files.push(EmittedFile {
        rel: format!("{root}/MANIFEST.yaml"),
        content: manifest.into_bytes(),
        mode: 0o644,
    });
    out.files.push(EmittedFile {
        rel: format!("{root}/csis-mods"),
        content: CSIS_MODS_SCRIPT.as_bytes().to_vec(),
        mode: 0o755,
    });
    Ok((out.files, out.private))
}

/// The files of a bundle: those the image carries, and those written
/// private (0600, outside the bundle: an inline script holding a secret).
#[derive(Default)]
struct Emitted {
    files: Vec<EmittedFile>,
    private: Vec<EmittedFile>,
}

/// A step's name, its files, its inline lines (a shell step's `ensure`
/// lines first) and whether they hold a secret.
fn step_parts<'s>(
    t: &Target,
    step: &'s BakeStep,
) -> (&'s str, Vec<&'s PathBuf>, Vec<String>, bool) {
    match step {
        BakeStep::Ansible {
            name, playbooks, ..
        } => (name, playbooks.iter().collect(), Vec::new(), false),
        BakeStep::Shell {
            name,
            scripts,
            ensure,
            inline,
            ..
        } => {
            let mut secret = false;
            let mut l = Vec::new();
            if let Some(e) = ensure {
                l.extend(ensure_lines(t, e));
                secret = super::ensure_has_secret(e);
            }
            l.extend(inline.iter().cloned());
            secret = secret || l.iter().any(|x| csis_schema::secret::contains(x));
            (name, scripts.iter().collect(), l, secret)
        }
    }
}

/// The bundle entry of a step the image's recipe does not record.
fn unrecorded_mod(step: &BakeStep, name: &str) -> BundleMod {
    BundleMod {
        name: name.to_string(),
        builder: String::new(),
        operation: step.kind().operation().into(),
        idempotent: "unknown".into(),
        content_hash: String::new(),
    }
}

/// A mod's `run.sh`: each of its files run as its step runs them; a shell
/// step's inline lines written as `inline.sh` (private when they hold a
/// secret) and run last.
fn run_script(
    step: &BakeStep,
    names: &mut Vec<String>,
    inline: &[String],
    secret: bool,
    (root, dir): (&str, &str),
    out: &mut Emitted,
) -> String {
    let mut run_sh = String::from("#!/bin/sh\nset -eu\ncd \"$(dirname \"$0\")\"\n");
    match step {
        BakeStep::Ansible { .. } => {
            run_sh.push_str("command -v ansible-playbook >/dev/null 2>&1 || { echo 'ansible-playbook not present on this image; cannot re-run' >&2; exit 3; }\n");
            for n in names.iter() {
                run_sh.push_str(&format!(
                    "ansible-playbook -i localhost, -c local {}\n",
                    sq_always(n)
                ));
            }
        }
        BakeStep::Shell { .. } => {
            for n in names.iter() {
                run_sh.push_str(&format!("sh {}\n", sq_always(n)));
            }
            if !inline.is_empty() {
                let mut s = String::from("#!/bin/sh\nset -eu\n");
                for l in inline {
                    s.push_str(l);
                    s.push('\n');
                }
                if secret {
                    out.private.push(EmittedFile {
                        rel: format!("{dir}/inline.sh"),
                        content: s.into_bytes(),
                        mode: 0o600,
                    });
                } else {
                    out.files.push(EmittedFile {
                        rel: format!("{root}/{dir}/inline.sh"),
                        content: s.into_bytes(),
                        mode: 0o644,
                    });
                }
                names.push("inline.sh".into());
                run_sh.push_str("sh ./inline.sh\n");
            }
        }
    }
    run_sh
}

/// A mod's own `MANIFEST.yaml`.
fn mod_manifest(m: &BundleMod, names: &[String], image: &str, run: &str, ty: &str) -> String {
    let mut own = format!("content_hash: {}\nfiles:\n", yaml_scalar(&m.content_hash));
    if names.is_empty() {
        own = format!(
            "content_hash: {}\nfiles: []\n",
            yaml_scalar(&m.content_hash)
        );
    }
    for n in names {
        own.push_str(&format!("- {}\n", yaml_scalar(n)));
    }
    own.push_str(&format!(
        "idempotent: {}\nimage: {}\nname: {}\noperation: {}\nrun: {}\ntype: {}\n",
        yaml_scalar(&m.idempotent),
        yaml_scalar(image),
        yaml_scalar(&m.name),
        yaml_scalar(&m.operation),
        yaml_scalar(run),
        yaml_scalar(ty),
    ));
    own
}

/// A file a step reads; the error names it.
pub(super) fn read(p: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
}
